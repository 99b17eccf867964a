//! The task-local "current call" context: which session and which turn the running brain code serves.
//!
//! It is set around every brain callback and turn task, so [`Session::current`](crate::Session::current),
//! `report_step` and the RTVI `turn_id` annotation work without passing ids around. Tasks the brain
//! spawns itself do not inherit it (tokio task-locals do not propagate); pass the `Session` along.

use std::future::Future;

use super::handle::Session;

#[derive(Clone)]
pub(crate) struct CallContext {
    pub(crate) session: Session,
    pub(crate) turn: Option<u64>,
}

tokio::task_local! {
    static CURRENT: CallContext;
}

pub(crate) fn scope<F: Future>(
    session: Session,
    turn: Option<u64>,
    fut: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(CallContext { session, turn }, fut)
}

pub(crate) fn current() -> Option<CallContext> {
    CURRENT.try_with(Clone::clone).ok()
}

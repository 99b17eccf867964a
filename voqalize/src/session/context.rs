//! The task-local "current call" context: which session and which turn the running brain code serves.
//!
//! It is set around every brain callback and turn task, so [`Session::current`](crate::Session::current),
//! `report_step` and the RTVI `turn_id` annotation work without passing ids around. Tasks the brain
//! spawns itself do not inherit it (tokio task-locals do not propagate); pass the `Session` along.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Session;

#[derive(Clone)]
pub(crate) struct CallContext {
    pub(crate) session: Session,
    pub(crate) turn: Option<u64>,
    /// The running turn's cancellation flag, set by a barge-in or teardown.
    cancelled: Option<Arc<AtomicBool>>,
    /// The tool call the running code serves, inside a tool the voice core runs.
    pub(crate) tool: Option<super::CurrentCall>,
}

impl CallContext {
    /// True when this code runs for a turn that a barge-in or teardown has cancelled: whatever it
    /// still tries to send is dropped.
    pub(crate) fn turn_cancelled(&self) -> bool {
        self.cancelled
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire))
    }
}

tokio::task_local! {
    static CURRENT: CallContext;
}

pub(crate) fn scope<F: Future>(
    session: Session,
    turn: Option<u64>,
    fut: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(
        CallContext {
            session,
            turn,
            cancelled: None,
            tool: None,
        },
        fut,
    )
}

/// Like [`scope`] for a turn's task, carrying the turn's cancellation flag.
pub(crate) fn scope_turn<F: Future>(
    session: Session,
    turn: u64,
    cancelled: Arc<AtomicBool>,
    fut: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(
        CallContext {
            session,
            turn: Some(turn),
            cancelled: Some(cancelled),
            tool: None,
        },
        fut,
    )
}

/// Runs `fut` (a tool's run) as the tool call `call` of `session`'s turn `call.turn_id()`.
/// `within_turn`: the run lives and dies with its turn, so it keeps the turn's cancellation flag
/// (what it sends after a barge-in is dropped); a run that may outlive its turn sends on.
#[cfg_attr(not(feature = "model"), allow(dead_code))]
pub(crate) fn scope_tool<F: Future>(
    session: Session,
    call: super::CurrentCall,
    within_turn: bool,
    fut: F,
) -> impl Future<Output = F::Output> {
    let cancelled = if within_turn {
        current().and_then(|c| c.cancelled)
    } else {
        None
    };
    CURRENT.scope(
        CallContext {
            session,
            turn: Some(call.turn_id()),
            cancelled,
            tool: Some(call),
        },
        fut,
    )
}

/// Runs `f` (the brain factory) with `session` current, so what it makes can attach to the call.
pub(crate) fn sync_scope<R>(session: Session, f: impl FnOnce() -> R) -> R {
    CURRENT.sync_scope(
        CallContext {
            session,
            turn: None,
            cancelled: None,
            tool: None,
        },
        f,
    )
}

pub(crate) fn current() -> Option<CallContext> {
    CURRENT.try_with(Clone::clone).ok()
}

/// True when the running code serves a turn that a barge-in or teardown has cancelled (read in
/// place: every frame a turn emits asks, and a copy of the context is two reference counts).
pub(crate) fn turn_cancelled() -> bool {
    CURRENT
        .try_with(CallContext::turn_cancelled)
        .unwrap_or(false)
}

//! The tool table `#[brain]` builds, and the helpers its dispatcher calls.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{OnceLock, PoisonError, RwLock};

use crate::session::Session;
use crate::tools::{ToolDecl, ToolError, ToolErrorKind};

pub use crate::tools::{ToolInfo, ToolRun};

/// The tool table of brain type `B`, built once per type (generic brains included) and kept.
pub fn tool_table<B: 'static>(build: fn() -> Vec<ToolDecl>) -> &'static [ToolDecl] {
    static TABLES: OnceLock<RwLock<HashMap<TypeId, &'static [ToolDecl]>>> = OnceLock::new();
    let tables = TABLES.get_or_init(Default::default);
    let key = TypeId::of::<B>();
    if let Some(table) = tables
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return table;
    }
    // Built outside the lock: building runs user code (JsonSchema impls). A poisoned lock (a panic
    // while inserting) still holds a consistent map, as with `crate::recover::lock`.
    let built = build();
    let mut tables = tables.write().unwrap_or_else(PoisonError::into_inner);
    tables
        .entry(key)
        .or_insert_with(|| Box::leak(built.into_boxed_slice()))
}

/// Declares a tool without an argument.
pub fn declare_without_args(info: ToolInfo) -> ToolDecl {
    ToolDecl::new(info, None, None)
}

/// The dispatcher's answer to an index it does not know (never reached through `call_tool`).
pub fn unknown_index<'a>(index: usize) -> ToolRun<'a> {
    Box::pin(std::future::ready(Err(ToolError::new(
        ToolErrorKind::Unknown,
        format!("there is no tool number {index}"),
    ))))
}

pub use crate::tools::SharedBrain;

/// `brain` as a shared [`Toolbox`], when it is `this` (the brain a turn's tools run on): a tool
/// run that outlives its turn holds the brain through it.
///
/// [`Toolbox`]: crate::tools::Toolbox
pub fn shared_toolbox<B: crate::tools::Toolbox>(
    this: &B,
    brain: SharedBrain,
) -> Option<std::sync::Arc<dyn crate::tools::Toolbox>> {
    let brain = brain.downcast::<B>().ok()?;
    let same = std::ptr::eq(std::sync::Arc::as_ptr(&brain), this);
    same.then_some(brain as std::sync::Arc<dyn crate::tools::Toolbox>)
}

/// The session serving the running brain code; `self.session()` in a `#[brain]` type.
///
/// # Panics
/// Outside a session task (a task the brain spawned itself, a plain test): clone the session into
/// such tasks instead.
#[track_caller]
pub fn current_session() -> Session {
    match Session::current() {
        Some(session) => session,
        None => panic!(
            "self.session() was called outside a session: it works in tools and brain callbacks, \
             not in tasks the brain spawned itself (clone the Session into those)"
        ),
    }
}

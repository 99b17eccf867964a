//! Tool guards: a brain's checks on every call before its tool runs and on every result before
//! the model reads it ([`Model::before_tool`](super::Model::before_tool),
//! [`Model::after_tool`](super::Model::after_tool)). They fail closed: a guard that fails or
//! panics refuses the call, or withholds the result.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::recover::panic_text;

/// A tool call as a guard sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct GuardedCall<'a> {
    /// The tool's name, as the model called it.
    pub name: &'a str,
    /// The arguments, as the tool will receive them (a JSON object).
    pub arguments: &'a Value,
    /// The turn the call is made in.
    pub turn_id: u64,
    /// The call's session.
    pub session_id: &'a str,
}

/// A guard's "no": what the model reads instead of the tool's result.
///
/// * [`Refusal::new`]: the guard decided, and says why (the model reads it and can tell the user:
///   "you need to confirm the amount first").
/// * [`Refusal::failed`]: the guard could not decide (its check failed). It fails closed: the call
///   is refused (or its result withheld) all the same; the error is logged, and the model reads
///   only that the check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    message: String,
    failure: Option<String>,
}

impl Refusal {
    /// A refusal the model reads as `message` (at most 4 KiB are kept).
    pub fn new(message: impl Into<String>) -> Self {
        let mut message = message.into();
        crate::wire::clip(&mut message, MAX_MESSAGE);
        Refusal {
            message,
            failure: None,
        }
    }

    /// The guard's own check failed with `error`: logged (clipped, escaped), never shown to the
    /// model.
    pub fn failed(error: impl fmt::Display) -> Self {
        let mut failure = error.to_string();
        crate::wire::clip(&mut failure, MAX_MESSAGE);
        Refusal {
            message: String::new(),
            failure: Some(failure),
        }
    }
}

/// The most bytes of a refusal's message or failure kept.
const MAX_MESSAGE: usize = 4096;

/// The check before a call runs.
pub(crate) type BeforeTool = dyn Fn(&GuardedCall<'_>) -> Result<(), Refusal> + Send + Sync;
/// The check of a result, which it may rewrite, before the model reads it.
pub(crate) type AfterTool =
    dyn Fn(&GuardedCall<'_>, &mut Value) -> Result<(), Refusal> + Send + Sync;

/// One tool call as an observer sees it once it is answered ([`Model::on_tool_run`](super::Model::on_tool_run)).
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolRun<'a> {
    /// The call's session.
    pub session_id: &'a str,
    /// The turn the call was made in.
    pub turn_id: u64,
    /// The tool's name, as the model called it.
    pub name: &'a str,
    /// The arguments (`null` when they were not JSON).
    pub arguments: &'a Value,
    /// What the model reads: `{"result": ...}` or `{"error": "..."}`, after the guards.
    pub response: &'a Value,
    /// How long the tool ran (zero when it did not).
    pub duration: std::time::Duration,
    /// Whether the tool ran (false: refused by a guard, or tools were off for the request).
    pub ran: bool,
    /// How it ended, as the metrics' `outcome` label says it: `ok`, or the error's kind
    /// (`failed`, `cancelled`, `timed_out`, `refused`...).
    pub outcome: &'a str,
    /// When it was answered, against its turn: in it, after a barge-in, or in the background.
    pub end: crate::tools::RunEnd,
}

/// Sees every answered call.
pub(crate) type OnToolRun = dyn Fn(&ToolRun<'_>) + Send + Sync;

/// A model's guards (none by default), and its observer of tool runs.
#[derive(Clone, Default)]
pub(crate) struct Guards {
    pub(crate) before: Option<Arc<BeforeTool>>,
    pub(crate) after: Option<Arc<AfterTool>>,
    pub(crate) observers: Vec<Arc<OnToolRun>>,
}

impl fmt::Debug for Guards {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guards")
            .field("before_tool", &self.before.is_some())
            .field("after_tool", &self.after.is_some())
            .field("on_tool_run", &self.observers.len())
            .finish()
    }
}

/// What a guard said.
pub(crate) enum Verdict {
    Allowed,
    /// Refused: the message the model reads.
    Refused(String),
    /// The guard failed or panicked: what to log, and the message the model reads.
    Failed {
        log: String,
        message: String,
    },
}

impl Verdict {
    /// The TurnStep count this verdict reports, when it is not an allowance.
    pub(crate) fn count(&self) -> Option<&'static str> {
        match self {
            Verdict::Allowed => None,
            Verdict::Refused(_) => Some("refused"),
            Verdict::Failed { .. } => Some("failed"),
        }
    }
}

impl Guards {
    /// Whether any guard (or an observer, which reads the arguments too) is set.
    pub(crate) fn any(&self) -> bool {
        self.before.is_some() || self.after.is_some() || !self.observers.is_empty()
    }

    /// Tells every observer of `run`, in the order they were added; a panic in one is logged and
    /// forgotten, and the others are told all the same.
    pub(crate) fn observe(&self, run: &ToolRun<'_>) {
        for observer in &self.observers {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| observer(run))) {
                tracing::warn!(
                    "on_tool_run panicked: {}",
                    crate::logline::outside(&panic_text(panic.as_ref()))
                );
            }
        }
    }

    /// Runs the check before `call`'s tool, catching a panic.
    pub(crate) fn before(&self, call: &GuardedCall<'_>) -> Verdict {
        let Some(guard) = &self.before else {
            return Verdict::Allowed;
        };
        let name = call.name;
        verdict(catch_unwind(AssertUnwindSafe(|| guard(call))), || {
            format!("the check before '{name}' failed, so it did not run")
        })
    }

    /// Runs the check of `call`'s `response` (`{"result": ...}` or `{"error": ...}`), which it may
    /// rewrite; a refusal or a failure replaces the response with an error the model reads.
    pub(crate) fn after(&self, call: &GuardedCall<'_>, response: &mut Value) -> Verdict {
        let Some(guard) = &self.after else {
            return Verdict::Allowed;
        };
        let name = call.name;
        let verdict = verdict(
            catch_unwind(AssertUnwindSafe(|| guard(call, response))),
            || format!("the check of '{name}''s result failed, so its result was withheld"),
        );
        match &verdict {
            Verdict::Allowed => {}
            Verdict::Refused(message) | Verdict::Failed { message, .. } => {
                *response = json!({ "error": message });
            }
        }
        verdict
    }
}

fn verdict(
    ran: std::thread::Result<Result<(), Refusal>>,
    failed: impl FnOnce() -> String,
) -> Verdict {
    match ran {
        Ok(Ok(())) => Verdict::Allowed,
        Ok(Err(Refusal {
            message,
            failure: None,
        })) => Verdict::Refused(message),
        Ok(Err(Refusal {
            failure: Some(log), ..
        })) => Verdict::Failed {
            log,
            message: failed(),
        },
        Err(panic) => Verdict::Failed {
            log: format!("it panicked: {}", panic_text(panic.as_ref())),
            message: failed(),
        },
    }
}

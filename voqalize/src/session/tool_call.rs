//! The tool call a running tool serves: its identity (for idempotent side effects) and its
//! progress lines (spoken while it works). The voice core sets it around every tool run it
//! starts; a tool reads it through its session ([`Session::tool_call`],
//! [`Session::say_progress`]).

use std::sync::Arc;

use super::{CurrentCall, Session, SessionError, context};

/// The most bytes of one progress line: longer ones are cut at a character boundary (a tool's
/// own text, but it may quote a backend's or a model's words).
pub const MAX_PROGRESS_BYTES: usize = 500;

/// How many progress lines may wait to be spoken: a tool that reports faster than speech goes
/// out loses the newest (and is told so by `say_progress` returning `false`).
#[cfg_attr(not(feature = "model"), allow(dead_code))]
pub(crate) const PROGRESS_QUEUE: usize = 4;

/// One answered tool call, as a watcher of the session sees it (the testing kit's driver lists
/// them in each turn's record, through `__kit::watch_tools`).
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    pub(crate) turn_id: u64,
    pub(crate) name: String,
    pub(crate) arguments: serde_json::Value,
    pub(crate) outcome: String,
    /// `in_turn`, `after_barge_in` or `background` (`tools::RunEnd::name`).
    pub(crate) end: &'static str,
}

/// Told every answered tool call of a session.
#[derive(Clone)]
pub(crate) struct ToolWatch(pub(crate) Arc<dyn Fn(Answered) + Send + Sync>);

/// Told the id of every turn of a session whose task ran to its end (not one cut by a barge-in
/// or the call's end), with how many frames the session had queued by then: the testing kit's
/// driver knows a turn is over, and has all its frames, without a quiet window.
#[derive(Clone)]
pub(crate) struct TurnWatch(pub(crate) Arc<dyn Fn(u64, u64) + Send + Sync>);

impl std::fmt::Debug for TurnWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnWatch")
    }
}

impl std::fmt::Debug for ToolWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolWatch")
    }
}

impl Session {
    /// How many frames this session has queued to send, ever (what a [`TurnWatch`] is told).
    pub(crate) fn frames_queued(&self) -> u64 {
        self.shared.out.queued()
    }

    /// Whether a watcher is told this session's answered tool calls.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn watches_tools(&self) -> bool {
        self.shared.tool_watch.is_some()
    }

    /// Tells the session's watcher, if any, of an answered tool call.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn tool_answered(&self, answered: impl FnOnce() -> Answered) {
        if let Some(watch) = &self.shared.tool_watch {
            (watch.0)(answered());
        }
    }

    /// The tool call the running code serves, when it runs inside a tool the voice core started
    /// for this session: its id (stable across a replay of the recording), name and turn. `None`
    /// elsewhere: in a brain callback, or in a task the tool spawned itself.
    pub fn tool_call(&self) -> Option<CurrentCall> {
        let current = context::current()?;
        if !Arc::ptr_eq(&current.session.shared, &self.shared) {
            return None;
        }
        current.tool
    }

    /// Speaks `line` to the caller while the running tool works ("Found three flights; checking
    /// the prices..."), as the model's own words in the turn's speech: the model reads it in its
    /// history, cut to what the user heard like any of its words. A line over
    /// [`MAX_PROGRESS_BYTES`] is cut; a line that would take the response's words past the
    /// model's `max_response_bytes` is not spoken (a tool that reports in a loop).
    ///
    /// Returns `Ok(true)` when the line was queued to be spoken, and `Ok(false)` when it will not
    /// be: the user barged in and the turn ended (the tool runs on), the tool runs in the
    /// background (no turn waits for it), or four lines already wait.
    /// A progress line never fails the tool: ignore the `bool` unless it matters.
    ///
    /// # Errors
    /// [`SessionError::NotInTool`] when called outside a tool the voice core runs (a brain
    /// callback, a task of the brain's own): nothing is spoken.
    pub fn say_progress(&self, line: &str) -> Result<bool, SessionError> {
        let Some(call) = self.tool_call() else {
            return Err(SessionError::NotInTool);
        };
        let Some(progress) = &call.progress else {
            return Ok(false);
        };
        if line.trim().is_empty() {
            return Ok(false);
        }
        let line = &line[..line.floor_char_boundary(MAX_PROGRESS_BYTES)];
        Ok(progress.try_send(line.to_owned()).is_ok())
    }
}

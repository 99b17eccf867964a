//! The identity of the tool call a running tool serves ([`CurrentCall`]): what the call's context
//! carries (`context`), and what a tool reads through its session (`tool_call`).

use std::sync::Arc;

use tokio::sync::mpsc;

/// The tool call a running tool serves, from `self.session().tool_call()` inside the tool.
///
/// Its [`id`](Self::id) names this call and no other, and it is the same when a recording of the
/// call is replayed: a tool that writes to a system of its own can pass it as an idempotency key,
/// so a model that makes the same call again (or a retry of the whole call) books once.
#[derive(Debug, Clone)]
pub struct CurrentCall {
    id: Arc<str>,
    name: Arc<str>,
    turn_id: u64,
    /// Where progress lines go: the turn that runs the call, while it runs.
    pub(super) progress: Option<mpsc::Sender<String>>,
}

impl CurrentCall {
    /// The call of the `ordinal`-th tool (from 0) that turn `turn_id` of session `session_id`
    /// ran, over all its requests: `"{session_id}/{turn_id}/{ordinal}"`.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn new(
        session_id: &str,
        turn_id: u64,
        ordinal: usize,
        name: &str,
        progress: Option<mpsc::Sender<String>>,
    ) -> Self {
        CurrentCall {
            id: format!("{session_id}/{turn_id}/{ordinal}").into(),
            name: name.into(),
            turn_id,
            progress,
        }
    }

    /// The call's id: `"{session_id}/{turn_id}/{n}"`, `n` counting the tools the turn ran, from
    /// 0, over every `respond` of the turn. Unique within a session (two turns running at once
    /// number their calls each on its own), and the same in a replay of its recording.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool's name, as the model called it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the call's progress lines go, while a turn waits for it.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn progress_lane(&self) -> Option<mpsc::Sender<String>> {
        self.progress.clone()
    }

    /// The turn the call was made in.
    pub fn turn_id(&self) -> u64 {
        self.turn_id
    }
}

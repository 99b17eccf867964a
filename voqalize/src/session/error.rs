//! What a [`Session`](crate::Session) call can fail with.

use std::time::Duration;

use crate::wire::{Capability, ErrorCode, RtviType};

/// An error from a [`Session`](crate::Session) method. Every variant is raised before anything is
/// sent, except `Rejected`, `Timeout` and `Closed`, which report the runtime's answer (or its absence).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The runtime did not advertise the capability this call needs (wire `SessionStart.capabilities`);
    /// nothing was sent.
    #[error("{op} needs the runtime's {capability} capability, which this session does not have")]
    Unsupported {
        /// The call: `configure`, `cancel_speech` or `report_step`.
        op: &'static str,
        /// The missing capability.
        capability: Capability,
    },
    /// The runtime answered the request with `STATUS_REJECTED` (or `STATUS_UNSPECIFIED`).
    #[error("{op} rejected: {detail}")]
    Rejected {
        /// The call: `configure`.
        op: &'static str,
        /// The runtime's reason (`Response.detail`).
        detail: String,
        /// `Response.code`: `None` when the runtime did not state one.
        code: Option<ErrorCode>,
    },
    /// No answer within the request timeout (10 s by default, docs/protocol.md §4.9 / §4.8).
    #[error("{op}: Voqalize did not answer within {after:?}, so whether it applied is unknown")]
    Timeout {
        /// The call: `configure` or `cancel_speech`.
        op: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// The session ended while the call waited for its answer.
    #[error("{op}: the session ended before Voqalize answered")]
    Closed {
        /// The call.
        op: &'static str,
    },
    /// Nothing was sent: the brain already sent `End`, or the call came from a turn that a barge-in
    /// cancelled.
    #[error("{op} was not sent: the session already sent End, or this turn was cancelled")]
    NotSent {
        /// The call: `configure` or `cancel_speech`.
        op: &'static str,
    },
    /// `cancel_speech` named a unit this session never opened.
    #[error("speech {0} was never opened by this session")]
    NeverOpened(u64),
    /// `cancel_speech` named a unit finalized too long ago to remember (the newest 64 are kept).
    #[error(
        "speech {0} was finalized more than 64 units ago; its Finalize is no longer remembered"
    )]
    Forgotten(u64),
    /// `say_progress` outside a tool the voice core runs (a brain callback, a task the brain
    /// spawned): there is no tool call whose progress it could be.
    #[error(
        "say_progress was called outside a tool: it reports a running tool's progress, from \
         inside the tool (tasks the tool spawns are outside it)"
    )]
    NotInTool,
    /// `report_step` outside a turn and without an explicit turn id.
    #[error("report_step was called outside a turn; pass the turn id explicitly")]
    NoTurn,
    /// `report_step` without `start_ms` for a turn whose start is no longer remembered (the newest
    /// 32 are kept).
    #[error("turn {0} began too long ago to remember when; give the step's start_ms")]
    TurnForgotten(u64),
    /// `send_rtvi` with a type only the app may send.
    #[error(
        "a brain may not send RTVI {0}: allowed are server-message, server-response, \
         error-response, ui-command and ui-job-group"
    )]
    RtviNotAllowed(RtviType),
    /// The frame would be over the socket's message limit (`HostBuilder::max_message_bytes`,
    /// 1 MiB by default), so the peer could never take it; nothing was sent.
    #[error("{op}: the frame would be over the socket's limit of {limit} bytes; nothing was sent")]
    TooLarge {
        /// The call: `send_rtvi` (or `dispatch`).
        op: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The payload could not be serialised to JSON.
    #[error("payload is not serialisable to JSON")]
    Json(#[from] serde_json::Error),
}

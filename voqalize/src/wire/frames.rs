//! The frames of wire v3 as Rust values (docs/protocol.md §1.3). Each body of the protobuf `Envelope` is one
//! variant of [`Frame`]; the codec in [`super::codec`] maps them to and from bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::config::Config;

// `number`, `from_number`, `name` and `ALL` of Capability, ErrorCode and RtviType, generated from
// frames.proto (committed; `tests/wire_gen.rs` checks them).
include!("generated/wire_enums.rs");

/// A capability the runtime advertises in `SessionStart.capabilities` (wire enum `Capability`).
///
/// Capabilities are fixed for a session's life. Unknown numbers (a newer runtime) are dropped on
/// decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// `SpeechCancel` frames are understood (wire value 1).
    SpeechCancel,
    /// String voices and languages in `Request.configure` are understood (wire value 2).
    StringConfig,
    /// `TurnStep` frames are understood (wire value 3).
    TurnSteps,
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of capabilities of one session, encoded sorted ascending.
pub type Capabilities = BTreeSet<Capability>;

/// An error code (wire enum `ErrorCode`), plus [`ErrorCode::Unknown`] for 0 and numbers this build
/// does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 0 on the wire, or a number this build does not know. Never read as `Internal`.
    Unknown,
    /// 1: the peer broke the protocol.
    Protocol,
    /// 2: the two sides speak different wire versions.
    WireVersion,
    /// 3: refused.
    Rejected,
    /// 4: a queue overflowed (the local congestion signal uses it too).
    Overload,
    /// 5: a failure inside the sender.
    Internal,
    /// 6: the voice asked for is not available.
    UnsupportedVoice,
    /// 7: the language asked for is not available.
    UnsupportedLanguage,
    /// 8: the request is malformed.
    InvalidRequest,
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of an RTVI message (wire enum `RTVIType`), named as in RTVI (`ui-command`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RtviType {
    /// 1, `server-message` (brain → app).
    ServerMessage,
    /// 2, `server-response` (brain → app).
    ServerResponse,
    /// 3, `error-response` (brain → app).
    ErrorResponse,
    /// 4, `ui-command` (brain → app); what [`Session::dispatch`](crate::Session::dispatch) sends.
    UiCommand,
    /// 5, `ui-job-group` (brain → app).
    UiJobGroup,
    /// 6, `client-message` (app → brain); the deprecated app-event form.
    ClientMessage,
    /// 7, `send-text` (app → brain).
    SendText,
    /// 8, `ui-event` (app → brain); the app-event form.
    UiEvent,
    /// 9, `ui-snapshot` (app → brain).
    UiSnapshot,
    /// 10, `ui-cancel-job-group` (app → brain).
    UiCancelJobGroup,
}

impl RtviType {
    /// True for the five types a brain may send (1–5); the others originate in the app.
    pub const fn brain_may_send(self) -> bool {
        self.number() <= 5
    }
}

impl std::fmt::Display for RtviType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `SessionStart`: the call begins. It is also turn `turn_id`, which the greeting answers.
///
/// `#[non_exhaustive]`: only the runtime sends it, and wire v3 may grow it (a field under a new
/// capability, docs/protocol.md §1.4) in a minor release. Read its fields; build one (a test) with
/// `new`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionStart {
    /// The runtime's session id (a UUID string in production).
    pub session_id: String,
    /// The turn the greeting answers (1 with the reference runtime).
    pub turn_id: u64,
    /// Opaque customer data: the JSON object carried as text in `init` (empty text = `{}`).
    pub init: Map<String, Value>,
    /// Must equal [`WIRE_VERSION`](super::WIRE_VERSION); 0 when absent.
    pub wire_version: u32,
    /// What the runtime understands.
    pub capabilities: Capabilities,
}

/// `UserMessage`: the user's finalized text for a turn.
///
/// `#[non_exhaustive]`: only the runtime sends it, and wire v3 may grow it (a field under a new
/// capability, docs/protocol.md §1.4) in a minor release. Read its fields; build one (a test) with
/// `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserMessage {
    /// The turn this text opens.
    pub turn_id: u64,
    /// What the user said.
    pub text: String,
}

/// `UserIdle`: the user has been silent.
///
/// `#[non_exhaustive]`: only the runtime sends it, and wire v3 may grow it (a field under a new
/// capability, docs/protocol.md §1.4) in a minor release. Read its fields; build one (a test) with
/// `new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserIdle {
    /// The turn this nudge opens.
    pub turn_id: u64,
    /// 1 for the first nudge, counting consecutive escalations.
    pub level: u32,
    /// Silence elapsed when it fired, in ms.
    pub idle_ms: u32,
}

/// `RTVIFrame`: an RTVI message in either direction.
///
/// Not `#[non_exhaustive]`: a brain builds it to send, so its fields are its constructor. A field
/// wire v3 adds to it is a new major release of this SDK.
#[derive(Debug, Clone, PartialEq)]
pub struct Rtvi {
    /// The RTVI type.
    pub kind: RtviType,
    /// The JSON payload; `None` is sent as `null` and read back from `""` or `null`.
    pub data: Option<Value>,
    /// RTVI correlation id; pass it back when answering.
    pub id: Option<String>,
    /// Trace annotation (brain → runtime only): the turn that sent it.
    pub turn_id: Option<u64>,
}

/// `TurnStep`: one timed piece of work inside a turn, reported for cost and latency accounting.
///
/// Not `#[non_exhaustive]`: a brain builds it to send, so its fields are its constructor. A field
/// wire v3 adds to it is a new major release of this SDK.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TurnStep {
    /// The turn the step belongs to.
    pub turn_id: u64,
    /// Open vocabulary: `model`, `tool`, `database`, `http`, `mcp`, ...
    pub kind: String,
    /// What ran, such as a model or tool name.
    pub name: String,
    /// Who served it; empty for the brain's own work.
    pub provider: String,
    /// ms after the turn's stimulus arrived.
    pub start_ms: u32,
    /// How long it took, in ms.
    pub duration_ms: u32,
    /// ms from the step's start to its first output; `Some(0)` is kept distinct from `None`.
    pub first_output_ms: Option<u32>,
    /// Counts such as `input_tokens`; a count that was not reported is absent, never 0.
    pub counts: BTreeMap<String, u64>,
}

/// `Response`: the runtime's answer to a [`Frame::Request`].
///
/// `#[non_exhaustive]`: only the runtime sends it, and wire v3 may grow it (a field under a new
/// capability, docs/protocol.md §1.4) in a minor release. Read its fields; build one (a test) with
/// `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Response {
    /// The request answered.
    pub request_id: u64,
    /// `status == STATUS_ACCEPTED`. `STATUS_UNSPECIFIED` reads as rejected (safe default, docs/protocol.md §7 D12).
    pub accepted: bool,
    /// Why it was rejected; empty on acceptance.
    pub detail: String,
    /// `None` when the wire carried 0 (acceptance, or an older runtime).
    pub code: Option<ErrorCode>,
}

/// `Error`: a failure report in either direction.
///
/// Not `#[non_exhaustive]`: a brain builds it to send, so its fields are its constructor. A field
/// wire v3 adds to it is a new major release of this SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFrame {
    /// What kind of failure.
    pub code: ErrorCode,
    /// Human-readable text.
    pub message: String,
    /// Whether the sender considers the session over.
    pub fatal: bool,
}

impl SessionStart {
    /// A `SessionStart` for `session_id` on turn `turn_id` as the runtime sends it: wire v3, every
    /// capability this SDK knows, no `init` data.
    pub fn new(session_id: impl Into<String>, turn_id: u64) -> Self {
        SessionStart {
            session_id: session_id.into(),
            turn_id,
            init: Map::new(),
            wire_version: super::WIRE_VERSION,
            capabilities: Capability::ALL.iter().copied().collect(),
        }
    }

    /// With this customer data.
    #[must_use]
    pub fn with_init(mut self, init: Map<String, Value>) -> Self {
        self.init = init;
        self
    }

    /// Announcing this wire version.
    #[must_use]
    pub fn with_wire_version(mut self, version: u32) -> Self {
        self.wire_version = version;
        self
    }

    /// With these capabilities.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }
}

impl UserMessage {
    /// The user's `text`, opening turn `turn_id`.
    pub fn new(turn_id: u64, text: impl Into<String>) -> Self {
        UserMessage {
            turn_id,
            text: text.into(),
        }
    }
}

impl UserIdle {
    /// The `level`-th nudge (from 1) after `idle_ms` of silence, opening turn `turn_id`.
    pub fn new(turn_id: u64, level: u32, idle_ms: u32) -> Self {
        UserIdle {
            turn_id,
            level,
            idle_ms,
        }
    }
}

impl Response {
    /// The runtime's answer to request `request_id`: `accepted`, or not with `detail` and `code`.
    pub fn new(
        request_id: u64,
        accepted: bool,
        detail: impl Into<String>,
        code: Option<ErrorCode>,
    ) -> Self {
        Response {
            request_id,
            accepted,
            detail: detail.into(),
            code,
        }
    }
}

/// One wire-v3 frame: the body of one `Envelope`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Frame {
    /// Envelope field 1, runtime → brain.
    SessionStart(SessionStart),
    /// Envelope field 2, runtime → brain.
    UserMessage(UserMessage),
    /// Envelope field 3, runtime → brain.
    UserIdle(UserIdle),
    /// Envelope field 4, runtime → brain: every turn ≤ `through_turn` is dead.
    Interruption {
        /// The watermark.
        through_turn: u64,
    },
    /// Envelope field 5, runtime → brain: what the user heard of a speech unit.
    Finalize {
        /// The unit.
        speech_id: u64,
        /// A verbatim prefix of what the unit generated.
        heard_text: String,
    },
    /// Envelope field 6, runtime → brain.
    Response(Response),
    /// Envelope field 7, brain → runtime: a speech unit opens.
    SpeechStart {
        /// Minted by the brain, session-monotonic from 1.
        speech_id: u64,
        /// The turn this unit answers.
        turn_id: u64,
    },
    /// Envelope field 8, brain → runtime: text of an open unit.
    SpeechChunk {
        /// The unit.
        speech_id: u64,
        /// The text.
        text: String,
    },
    /// Envelope field 9, brain → runtime: a unit closes.
    SpeechEnd {
        /// The unit.
        speech_id: u64,
    },
    /// Envelope field 10, brain → runtime: `configure`, the only op of v3.
    Request {
        /// Session-monotonic from 1.
        request_id: u64,
        /// The change asked for.
        configure: Config,
    },
    /// Envelope field 11, both directions.
    Rtvi(Rtvi),
    /// Envelope field 12, both directions: the session is over.
    End,
    /// Envelope field 13, runtime → brain: stop now, dropping queued data.
    Cancel {
        /// `None` when the wire carried an empty string.
        reason: Option<String>,
    },
    /// Envelope field 14, both directions.
    Error(ErrorFrame),
    /// Envelope field 15, brain → runtime: stop playing a unit and finalize it.
    SpeechCancel {
        /// The unit.
        speech_id: u64,
    },
    /// Envelope field 16, brain → runtime.
    TurnStep(TurnStep),
}

impl Frame {
    /// The frame's type name for logs, such as `UserMessage`.
    pub fn name(&self) -> &'static str {
        match self {
            Frame::SessionStart(_) => "SessionStart",
            Frame::UserMessage(_) => "UserMessage",
            Frame::UserIdle(_) => "UserIdle",
            Frame::Interruption { .. } => "Interruption",
            Frame::Finalize { .. } => "Finalize",
            Frame::Response(_) => "Response",
            Frame::SpeechStart { .. } => "SpeechStart",
            Frame::SpeechChunk { .. } => "SpeechChunk",
            Frame::SpeechEnd { .. } => "SpeechEnd",
            Frame::Request { .. } => "Request",
            Frame::Rtvi(_) => "RTVIFrame",
            Frame::End => "End",
            Frame::Cancel { .. } => "Cancel",
            Frame::Error(_) => "Error",
            Frame::SpeechCancel { .. } => "SpeechCancel",
            Frame::TurnStep(_) => "TurnStep",
        }
    }

    /// True for the frames a congested bulk lane may shed: `SpeechChunk` and `RTVIFrame` (docs/protocol.md §3).
    pub fn droppable(&self) -> bool {
        matches!(self, Frame::SpeechChunk { .. } | Frame::Rtvi(_))
    }

    /// About how many bytes this frame holds: its text and JSON payloads as their JSON text would
    /// take, plus [`FRAME_WEIGHT`] for the rest. What a lane counts against its byte bound
    /// (docs/protocol.md §3.3): cheap for the frames of a turn (a chunk is its text's length), a
    /// walk of the JSON for RTVI data and `init`.
    pub(crate) fn weight(&self) -> usize {
        let payload = match self {
            Frame::SessionStart(s) => s.session_id.len() + json_object_weight(&s.init),
            Frame::UserMessage(m) => m.text.len(),
            Frame::Finalize { heard_text, .. } => heard_text.len(),
            Frame::Response(r) => r.detail.len(),
            Frame::SpeechChunk { text, .. } => text.len(),
            Frame::Rtvi(r) => return r.weight(),
            Frame::Cancel { reason } => reason.as_ref().map_or(0, String::len),
            Frame::Error(e) => e.message.len(),
            Frame::TurnStep(t) => {
                t.kind.len()
                    + t.name.len()
                    + t.provider.len()
                    + t.counts.keys().map(|k| k.len() + 8).sum::<usize>()
            }
            // A `configure` is a handful of short fields.
            Frame::Request { .. } => FRAME_WEIGHT,
            Frame::UserIdle(_)
            | Frame::Interruption { .. }
            | Frame::SpeechStart { .. }
            | Frame::SpeechEnd { .. }
            | Frame::End
            | Frame::SpeechCancel { .. } => 0,
        };
        FRAME_WEIGHT + payload
    }
}

impl Rtvi {
    /// About how many bytes this message holds, as [`Frame::weight`] counts it.
    pub(crate) fn weight(&self) -> usize {
        FRAME_WEIGHT
            + self.data.as_ref().map_or(0, json_weight)
            + self.id.as_ref().map_or(0, String::len)
    }
}

/// What [`Frame::weight`] counts for a frame besides its payloads: its fields and its place in a
/// queue (32 bytes).
pub(crate) const FRAME_WEIGHT: usize = 32;

/// About the length of `value`'s JSON text: strings and keys by their length (plus quotes),
/// numbers and literals as 8, a comma or colon per member.
fn json_weight(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_weight(v) + 1).sum::<usize>(),
        Value::Object(members) => json_object_weight(members),
    }
}

fn json_object_weight(members: &Map<String, Value>) -> usize {
    2 + members
        .iter()
        .map(|(k, v)| k.len() + 4 + json_weight(v))
        .sum::<usize>()
}

/// Cuts `text` to at most `max_bytes` bytes, at a character boundary, and gives back the memory
/// past the cut: how a string the brain did not choose (a tool name a model invented, an error's
/// text) is kept inside a frame's bounds before the frame is queued.
pub(crate) fn clip(text: &mut String, max_bytes: usize) {
    if text.len() > max_bytes {
        let end = text.floor_char_boundary(max_bytes);
        text.truncate(end);
        text.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_cuts_at_a_character_boundary_and_frees_the_rest() {
        let mut text = "é".repeat(1000);
        clip(&mut text, 5);
        assert_eq!(text, "éé");
        assert!(text.capacity() < 16);
        let mut short = "short".to_owned();
        clip(&mut short, 5);
        assert_eq!(short, "short");
    }
}

//! The lines of a recording file, as serde reads and writes them (the format is documented on
//! [`super`]). One type per line kind; the writer and the reader share them, so the two cannot
//! drift apart.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The format version this SDK writes, and the newest it reads.
pub(crate) const VERSION: u32 = 1;

/// One line. Externally tagged: `{"frame": {...}}`, `{"model": {...}}`, ...
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Line {
    /// The first line, and only there.
    VoqalizeRecording(Header),
    Frame(FrameLine),
    Model(ModelLine),
    Tool(ToolLine),
    /// An MCP toolset's tools as a turn of the call declared them (written when they change).
    McpTools(McpToolsLine),
    /// The call moved to another stage of its workflow.
    Stage(StageLine),
    /// The recording reached its byte bound here: nothing after it was kept.
    Truncated(TruncatedLine),
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) version: u32,
    /// The SDK version that wrote the file.
    pub(crate) sdk: String,
    /// When the call started, in ms since the Unix epoch.
    pub(crate) started_unix_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct FrameLine {
    pub(crate) at_ms: u64,
    /// `in` (Voqalize → brain) or `out` (brain → Voqalize).
    pub(crate) dir: Dir,
    /// The frame's name (`UserMessage`, `SpeechChunk`, ...), for a reader of the file; the replay
    /// reads only `pb`.
    pub(crate) kind: String,
    /// The serialized `Envelope`, base64 (standard alphabet, padded).
    pub(crate) pb: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Dir {
    In,
    Out,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ModelLine {
    /// When the request was sent.
    pub(crate) at_ms: u64,
    pub(crate) provider: String,
    pub(crate) model: String,
    /// The request's path, without scheme, host or query (a key in a query is never written).
    pub(crate) path: String,
    /// The request body: JSON when it parses, else its text. Headers are never written.
    pub(crate) request: Value,
    /// The HTTP status, `null` when no response came (a connect error, a timeout).
    pub(crate) status: Option<u16>,
    /// The response body as read (UTF-8, invalid bytes replaced): the SSE stream up to where the
    /// turn stopped reading it, or an error body.
    pub(crate) response: String,
    /// Why there was no response, when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ToolLine {
    /// When the call was answered.
    pub(crate) at_ms: u64,
    pub(crate) turn_id: u64,
    /// The name the model called (a name the brain does not declare included).
    pub(crate) name: String,
    /// The arguments as the model wrote them: JSON when they parse, else their text.
    pub(crate) arguments: Value,
    /// `ok`, or the error's kind (`refused`, `failed`, `cancelled`, `timed_out`, ...).
    pub(crate) outcome: String,
    /// When it was answered against its turn: `after_barge_in` or `background` (absent: in its
    /// turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) end: Option<String>,
    /// For a tool of an MCP server: which, and what the model read of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mcp: Option<McpCallLine>,
}

/// The MCP part of a tool line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct McpCallLine {
    /// The toolset's name.
    pub(crate) toolset: String,
    /// The tool's name at the server (without the toolset's prefix).
    pub(crate) tool: String,
    /// What the model read: `{"result": ..}` or `{"error": ".."}` (bounded as it was).
    pub(crate) response: Value,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StageLine {
    pub(crate) at_ms: u64,
    /// The turn whose transition moved the call (0: brain code, outside a turn).
    pub(crate) turn_id: u64,
    pub(crate) from: String,
    pub(crate) to: String,
    /// `keep`, `fresh` or `summary`.
    pub(crate) context: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct McpToolsLine {
    pub(crate) at_ms: u64,
    pub(crate) toolset: String,
    pub(crate) tools: Vec<McpToolLine>,
}

/// One MCP tool as the model was declared it, with the settings its calls ran with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct McpToolLine {
    /// The name the model read (the toolset's prefix included).
    pub(crate) name: String,
    /// The name at the server.
    pub(crate) tool: String,
    pub(crate) description: String,
    pub(crate) schema: Value,
    /// `finish`, `cancel` or `background`.
    pub(crate) policy: String,
    pub(crate) timeout_ms: u64,
    pub(crate) needs_result_now: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) filler: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TruncatedLine {
    pub(crate) at_ms: u64,
    /// The bound, in bytes.
    pub(crate) limit: usize,
}

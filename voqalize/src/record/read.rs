//! [`Recording`]: a recording file read back, each line checked, every frame decoded.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::format::{Dir, Line, VERSION};
use crate::logline::outside;
use crate::wire::{self, Frame};

/// The largest file [`Recording::open`] reads: 256 MiB.
pub const MAX_RECORDING_FILE_BYTES: u64 = 256 << 20;

/// Why a recording could not be read. Every variant about the file's content names its line
/// (1-based).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file could not be read.
    #[error("could not read the recording {path}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is empty: not even its header.
    #[error("the recording is empty (no header line)")]
    Empty,
    /// A newer SDK wrote the file, in a format version this one does not read.
    #[error(
        "line 1: the recording is format version {found}; this SDK reads version {VERSION} and \
         earlier (upgrade voqalize to replay it)"
    )]
    Version {
        /// The file's version.
        found: u64,
    },
    /// The file is larger than [`Recording::open`] reads ([`MAX_RECORDING_FILE_BYTES`]): its
    /// size said so before anything was read (`size`), or it gave more bytes than the bound as
    /// it was read (a pipe, or a file that grew; `size` is `None`).
    #[error(
        "the recording {path} is {}, over the {limit} bytes Recording::open reads; read it with \
         Recording::parse",
        size.map_or_else(|| "longer as it was read".to_owned(), |s| format!("{s} bytes"))
    )]
    #[non_exhaustive]
    TooLarge {
        /// The file.
        path: String,
        /// The bound, in bytes.
        limit: u64,
        /// The file's size in bytes, as its metadata gave it; `None` when the read passed the
        /// bound.
        size: Option<u64>,
    },
    /// A line is not what the format says (a file cut mid-line, edited by hand, or not a
    /// recording at all).
    #[error("line {line}: {why}")]
    Line {
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

/// Which way a recorded frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Voqalize → brain.
    In,
    /// Brain → Voqalize.
    Out,
}

/// One frame of a recording.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedFrame {
    /// ms after the call's upgrade.
    pub at_ms: u64,
    /// Which way it went.
    pub direction: Direction,
    /// The frame.
    pub frame: Frame,
}

/// One model request of a recording and what came back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Exchange {
    /// When it was sent, in ms after the call's upgrade.
    pub at_ms: u64,
    /// The layer's provider (`google`, `openai`, ...).
    pub provider: String,
    /// The model as configured.
    pub model: String,
    /// The request's path (no host, no query).
    pub path: String,
    /// The request body: JSON, or a string holding its text.
    pub request: Value,
    /// The HTTP status; `None` when no response came.
    pub status: Option<u16>,
    /// The response body as it was read.
    pub response: String,
    /// Why no response came, when none did.
    pub error: Option<String>,
}

/// One tool call of a recording.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolRun {
    /// When it was answered, in ms after the call's upgrade.
    pub at_ms: u64,
    /// The turn it ran in.
    pub turn_id: u64,
    /// The name the model called.
    pub name: String,
    /// The arguments the model wrote: JSON, or a string holding their text.
    pub arguments: Value,
    /// `ok`, or the error's kind.
    pub outcome: String,
    /// When it was answered against its turn: `in_turn`, `after_barge_in` (it ran on after the
    /// user cut in, or a barge-in cancelled it), or `background`.
    pub end: String,
    /// For a tool of an MCP server: which, and what the model read (what a replay of the call
    /// answers with, without the server: `McpToolset::replay`).
    pub mcp: Option<McpRun>,
}

/// The MCP part of a recorded tool call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpRun {
    /// The toolset's name.
    pub toolset: String,
    /// The tool's name at the server (without the toolset's prefix).
    pub tool: String,
    /// What the model read: `{"result": ..}` or `{"error": ".."}`, bounded as it was.
    pub response: Value,
}

/// An MCP toolset's tools as a turn of the recorded call declared them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpToolsListed {
    /// When the turn declared them, in ms after the call's upgrade.
    pub at_ms: u64,
    /// The toolset's name.
    pub toolset: String,
    /// Its tools.
    pub tools: Vec<McpToolListed>,
}

/// The call moved from one stage of its workflow to another (a transition, or brain code).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StageMoved {
    /// When, in ms after the call's upgrade.
    pub at_ms: u64,
    /// The turn whose transition moved it; 0 for brain code outside a turn.
    pub turn_id: u64,
    /// The stage it left.
    pub from: String,
    /// The stage it entered.
    pub to: String,
    /// What crossed: `keep`, `fresh` or `summary`.
    pub context: String,
}

/// One recorded MCP tool: its declaration and the settings its calls ran with.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpToolListed {
    /// The name the model read (the toolset's prefix included).
    pub name: String,
    /// The name at the server.
    pub tool: String,
    /// The description the model read.
    pub description: String,
    /// The input schema.
    pub schema: Value,
    /// What a barge-in did to its calls: `finish`, `cancel` or `background`.
    pub policy: String,
    /// How long one call could run, in ms.
    pub timeout_ms: u64,
    /// Whether the model read each result before it went on.
    pub needs_result_now: bool,
    /// Its filler line, if it had its own.
    pub filler: Option<String>,
}

/// A recorded call, read back from the JSON lines a [`Recorder`](super::Recorder) wrote (the
/// format is on [`voqalize::record`](super)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Recording {
    /// The SDK version that wrote it.
    pub sdk: String,
    /// When the call started, in ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// Every frame, in the order recorded.
    pub frames: Vec<RecordedFrame>,
    /// Every model request, in the order sent.
    pub exchanges: Vec<Exchange>,
    /// Every tool call, in the order answered.
    pub tool_runs: Vec<ToolRun>,
    /// The MCP toolsets' tools, each time a turn declared a list that changed.
    pub mcp_tools: Vec<McpToolsListed>,
    /// Every move of the call from one stage of its workflow to another, in order.
    pub stages: Vec<StageMoved>,
    /// The recording reached its byte bound: the call went on past its end.
    pub truncated: bool,
}

impl Recording {
    /// Reads a recording file of at most [`MAX_RECORDING_FILE_BYTES`] (a recorder's files are
    /// far smaller: see [`Recorder::max_bytes`](super::Recorder::max_bytes)). A file whose size
    /// is past the bound is refused before a byte of it is read; a pipe, or a file that grows
    /// while it is read, is read for at most the bound and one byte more.
    ///
    /// # Errors
    /// [`RecordError::Io`] when the file cannot be read, [`RecordError::TooLarge`] past the
    /// bound; otherwise as [`parse_bytes`](Self::parse_bytes).
    pub fn open(path: impl AsRef<Path>) -> Result<Recording, RecordError> {
        Self::parse_bytes(&read_within(path.as_ref(), MAX_RECORDING_FILE_BYTES)?)
    }

    /// Reads a recording from its bytes: as [`parse`](Self::parse), and a line that is not
    /// UTF-8 is an error naming it.
    ///
    /// # Errors
    /// As [`parse`](Self::parse), and [`RecordError::Line`] for a line that is not UTF-8.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Recording, RecordError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Self::parse(text),
            Err(e) => {
                let line = 1 + bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count();
                Err(RecordError::Line {
                    line,
                    why: format!("not UTF-8 ({e})"),
                })
            }
        }
    }

    /// Reads a recording from its text.
    ///
    /// # Errors
    /// [`RecordError::Empty`] for no header, [`RecordError::Version`] for a later format
    /// version, [`RecordError::Line`] naming the first line that is not JSON, not one of the
    /// format's kinds, a second header, a frame that does not decode, or a line after a
    /// `truncated` one.
    pub fn parse(text: &str) -> Result<Recording, RecordError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let Some((_, first)) = lines.next() else {
            return Err(RecordError::Empty);
        };
        let header = header(first)?;
        let mut recording = Recording {
            sdk: header.sdk,
            started_unix_ms: header.started_unix_ms,
            frames: Vec::new(),
            exchanges: Vec::new(),
            tool_runs: Vec::new(),
            mcp_tools: Vec::new(),
            stages: Vec::new(),
            truncated: false,
        };
        for (line, text) in lines {
            if text.trim().is_empty() {
                continue;
            }
            let bad = |why: String| RecordError::Line {
                line,
                why: shown(&why),
            };
            if recording.truncated {
                return Err(bad("a line after the `truncated` line".to_owned()));
            }
            let parsed: Line = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
            match parsed {
                Line::VoqalizeRecording(_) => return Err(bad("a second header".to_owned())),
                Line::Frame(f) => {
                    let bytes = STANDARD
                        .decode(f.pb.as_bytes())
                        .map_err(|e| bad(format!("`pb` is not base64: {e}")))?;
                    let frame = wire::decode(&bytes)
                        .map_err(|e| bad(format!("`pb` is not a frame: {e}")))?
                        .ok_or_else(|| bad("`pb` holds no frame this SDK knows".to_owned()))?;
                    recording.frames.push(RecordedFrame {
                        at_ms: f.at_ms,
                        direction: match f.dir {
                            Dir::In => Direction::In,
                            Dir::Out => Direction::Out,
                        },
                        frame,
                    });
                }
                Line::Model(m) => recording.exchanges.push(Exchange {
                    at_ms: m.at_ms,
                    provider: m.provider,
                    model: m.model,
                    path: m.path,
                    request: m.request,
                    status: m.status,
                    response: m.response,
                    error: m.error,
                }),
                Line::Tool(t) => recording.tool_runs.push(tool_run(t)),
                Line::McpTools(l) => recording.mcp_tools.push(mcp_tools(l)),
                Line::Stage(l) => recording.stages.push(StageMoved {
                    at_ms: l.at_ms,
                    turn_id: l.turn_id,
                    from: l.from,
                    to: l.to,
                    context: l.context,
                }),
                Line::Truncated(_) => recording.truncated = true,
            }
        }
        Ok(recording)
    }

    /// The session id of the recorded call's `SessionStart`, if it was recorded.
    pub fn session_id(&self) -> Option<&str> {
        self.frames.iter().find_map(|f| match &f.frame {
            Frame::SessionStart(s) if f.direction == Direction::In => Some(s.session_id.as_str()),
            _ => None,
        })
    }
}

/// A tool line, read back.
fn tool_run(t: super::format::ToolLine) -> ToolRun {
    ToolRun {
        at_ms: t.at_ms,
        turn_id: t.turn_id,
        name: t.name,
        arguments: t.arguments,
        outcome: t.outcome,
        end: t.end.unwrap_or_else(|| super::tape::IN_TURN.to_owned()),
        mcp: t.mcp.map(|m| McpRun {
            toolset: m.toolset,
            tool: m.tool,
            response: m.response,
        }),
    }
}

/// An `mcp_tools` line, read back.
fn mcp_tools(l: super::format::McpToolsLine) -> McpToolsListed {
    McpToolsListed {
        at_ms: l.at_ms,
        toolset: l.toolset,
        tools: l
            .tools
            .into_iter()
            .map(|t| McpToolListed {
                name: t.name,
                tool: t.tool,
                description: t.description,
                schema: t.schema,
                policy: t.policy,
                timeout_ms: t.timeout_ms,
                needs_result_now: t.needs_result_now,
                filler: t.filler,
            })
            .collect(),
    }
}

/// The bytes of the file at `path`, at most `limit` of them: its size is checked first (a file
/// past the bound is refused unread), and the read is bounded too (a pipe has no size, and a file
/// can grow after its size was read).
pub(super) fn read_within(path: &Path, limit: u64) -> Result<Vec<u8>, RecordError> {
    use std::io::Read as _;
    let io = |source| RecordError::Io {
        path: path.display().to_string(),
        source,
    };
    let too_large = |size| RecordError::TooLarge {
        path: path.display().to_string(),
        limit,
        size,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(too_large(Some(size)));
    }
    // The size as read, and one byte to see the end: no doubling past the file (a pipe says 0).
    let mut bytes = Vec::with_capacity(usize::try_from(size.saturating_add(1)).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(None));
    }
    Ok(bytes)
}

/// What is wrong with a line, as an error shows it: a file's text can be anything, so it is
/// clipped and its control characters escaped, as a log line would show it.
fn shown(why: &str) -> String {
    outside(why).to_string()
}

/// Line 1: checks the version before anything else is read, so a later format fails as such
/// rather than on a line kind this SDK does not know.
fn header(text: &str) -> Result<super::format::Header, RecordError> {
    let bad = |why: String| RecordError::Line {
        line: 1,
        why: shown(&why),
    };
    let value: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let Some(header) = value.get("voqalize_recording") else {
        return Err(bad(
            "not a recording: the first line is not `{\"voqalize_recording\": ..}`".to_owned(),
        ));
    };
    let found = header.get("version").and_then(Value::as_u64).unwrap_or(0);
    if found > u64::from(VERSION) {
        return Err(RecordError::Version { found });
    }
    match serde_json::from_value::<Line>(value) {
        Ok(Line::VoqalizeRecording(h)) => Ok(h),
        Ok(_) => Err(bad("not a header".to_owned())),
        Err(e) => Err(bad(e.to_string())),
    }
}

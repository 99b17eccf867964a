//! [`Tape`]: one call's recording as it is made, in memory within its byte bound, handed to the
//! recorder's sink when the call ends.

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::format::{
    Dir, FrameLine, Header, Line, McpCallLine, McpToolLine, McpToolsLine, ModelLine, StageLine,
    ToolLine, TruncatedLine, VERSION,
};
use super::{Recorder, Sink};
use crate::recover::lock;
use crate::wire::Frame;

/// What a tool call's `end` is when it was answered in its turn: its line then has none.
pub(crate) const IN_TURN: &str = "in_turn";

/// One call's recording. Shared by the session's reader and writer and by the voice core; every
/// write takes its lock for the time of one `serde_json` write into a buffer.
#[derive(Debug)]
pub(crate) struct Tape {
    started: Instant,
    sink: Sink,
    inner: Mutex<Buffer>,
}

#[derive(Debug)]
struct Buffer {
    /// The JSON lines written so far.
    text: Vec<u8>,
    /// The bound on `text`, in bytes.
    max: usize,
    /// The bound was reached: the `truncated` line is written, nothing more is.
    full: bool,
    /// The session id of the call's `SessionStart`, for the file's name.
    session_id: Option<String>,
}

impl Tape {
    /// A tape for a call; `session_id` names its file when the host knows it before the call's
    /// `SessionStart` (the direct leg's verified id), else the first `SessionStart` names it.
    pub(super) fn new(recorder: &Recorder, session_id: Option<&str>) -> Self {
        let started_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut text = Vec::new();
        let header = Line::VoqalizeRecording(Header {
            version: VERSION,
            sdk: env!("CARGO_PKG_VERSION").to_owned(),
            started_unix_ms,
        });
        write_line(&mut text, &header);
        Tape {
            started: Instant::now(),
            sink: recorder.sink.clone(),
            inner: Mutex::new(Buffer {
                text,
                max: recorder.max_bytes,
                full: false,
                session_id: session_id.map(str::to_owned),
            }),
        }
    }

    fn at_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A frame read from the peer (its bytes as they came, and what they decoded to).
    pub(crate) fn frame_in(&self, bytes: &[u8], frame: &Frame) {
        if let Frame::SessionStart(start) = frame {
            let mut inner = lock(&self.inner);
            if inner.session_id.is_none() {
                inner.session_id = Some(start.session_id.clone());
            }
        }
        self.frame(Dir::In, bytes, frame.name());
    }

    /// A frame handed to the transport.
    pub(crate) fn frame_out(&self, bytes: &[u8], kind: &'static str) {
        self.frame(Dir::Out, bytes, kind);
    }

    fn frame(&self, dir: Dir, bytes: &[u8], kind: &str) {
        // A full tape builds no more lines (base64 of a frame it would not keep).
        if self.room() == 0 {
            return;
        }
        let line = Line::Frame(FrameLine {
            at_ms: self.at_ms(),
            dir,
            kind: kind.to_owned(),
            pb: STANDARD.encode(bytes),
        });
        self.push(&line);
    }

    /// One model request and what came back. `url` loses its scheme, host and query; the
    /// headers are never passed here (they carry the API key).
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn model(&self, exchange: Exchanged<'_>) {
        if self.room() == 0 {
            return;
        }
        let line = Line::Model(ModelLine {
            at_ms: exchange.sent_ms,
            provider: exchange.provider.to_owned(),
            model: exchange.model.to_owned(),
            path: path_of(exchange.url).to_owned(),
            request: json_or_text(exchange.request),
            status: exchange.status,
            response: String::from_utf8_lossy(exchange.response).into_owned(),
            error: exchange.error,
        });
        self.push(&line);
    }

    /// ms since the call started: when a model request goes out.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn now_ms(&self) -> u64 {
        self.at_ms()
    }

    /// One tool call answered.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn tool(
        &self,
        turn_id: u64,
        name: &str,
        arguments: Value,
        outcome: &str,
        end: &str,
        mcp: Option<McpCallLine>,
    ) {
        let line = Line::Tool(ToolLine {
            at_ms: self.at_ms(),
            turn_id,
            name: name.to_owned(),
            arguments: shallow(arguments),
            outcome: outcome.to_owned(),
            end: (end != IN_TURN).then(|| end.to_owned()),
            mcp: mcp.map(|mut m| {
                m.response = shallow(m.response);
                m
            }),
        });
        self.push(&line);
    }

    /// The call moved from stage `from` to `to` in turn `turn_id`.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn stage(&self, turn_id: u64, from: &str, to: &str, context: &str) {
        let line = Line::Stage(StageLine {
            at_ms: self.at_ms(),
            turn_id,
            from: from.to_owned(),
            to: to.to_owned(),
            context: context.to_owned(),
        });
        self.push(&line);
    }

    /// An MCP toolset's tools, as a turn declared them.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn mcp_tools(&self, toolset: &str, tools: Vec<McpToolLine>) {
        let line = Line::McpTools(McpToolsLine {
            at_ms: self.at_ms(),
            toolset: toolset.to_owned(),
            tools: tools
                .into_iter()
                .map(|mut t| {
                    t.schema = shallow(t.schema);
                    t
                })
                .collect(),
        });
        self.push(&line);
    }

    /// The bytes the buffer holds (its capacity), for the tests of its bound.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        lock(&self.inner).text.capacity()
    }

    /// How many bytes the recording can still take (0 once full): the voice core keeps no more
    /// of a response body than this.
    pub(crate) fn room(&self) -> usize {
        let inner = lock(&self.inner);
        if inner.full {
            0
        } else {
            inner.max.saturating_sub(inner.text.len())
        }
    }

    /// Appends `line` when it fits under the bound; else ends the tape with the `truncated`
    /// line. The line is written aside first, so a line past the bound never grows the buffer,
    /// and the buffer grows at most to the bound (plus the `truncated` line).
    fn push(&self, line: &Line) {
        let at_ms = self.at_ms();
        let mut scratch = Vec::new();
        write_line(&mut scratch, line);
        let mut inner = lock(&self.inner);
        if inner.full {
            return;
        }
        if inner.text.len() + scratch.len() > inner.max {
            inner.full = true;
            let limit = inner.max;
            scratch.clear();
            write_line(
                &mut scratch,
                &Line::Truncated(TruncatedLine { at_ms, limit }),
            );
            inner.text.extend_from_slice(&scratch);
            return;
        }
        let Buffer { text, max, .. } = &mut *inner;
        crate::buffer::reserve_within(text, scratch.len(), *max);
        text.extend_from_slice(&scratch);
    }

    /// The call ended: the recording goes to the sink (a file is written on a blocking thread,
    /// and awaited, so it is on disk when the session's run returns).
    pub(crate) async fn finish(&self) {
        let (text, session_id) = {
            let mut inner = lock(&self.inner);
            (std::mem::take(&mut inner.text), inner.session_id.take())
        };
        let Ok(text) = String::from_utf8(text) else {
            // Every line is serde_json's output: UTF-8 by construction.
            return;
        };
        match &self.sink {
            Sink::Memory(kept) => lock(kept).push(text),
            Sink::Dir(folder) => {
                let (folder, name) = (folder.clone(), super::file_name(session_id.as_deref()));
                let written =
                    tokio::task::spawn_blocking(move || folder.write_new(&name, &text)).await;
                match written {
                    Ok(Ok(path)) => tracing::debug!("record: wrote {}", path.display()),
                    Ok(Err(e)) => tracing::warn!("record: could not write the recording: {e}"),
                    Err(e) => tracing::warn!("record: the writing task failed: {e}"),
                }
            }
        }
    }
}

/// One model request as [`Tape::model`] writes it.
#[cfg_attr(not(feature = "model"), allow(dead_code))]
pub(crate) struct Exchanged<'a> {
    pub(crate) sent_ms: u64,
    pub(crate) provider: &'a str,
    pub(crate) model: &'a str,
    pub(crate) url: &'a str,
    pub(crate) request: &'a [u8],
    pub(crate) status: Option<u16>,
    pub(crate) response: &'a [u8],
    pub(crate) error: Option<String>,
}

fn write_line(text: &mut Vec<u8>, line: &Line) {
    // Writing our own types into a Vec cannot fail (no maps with non-string keys, no I/O).
    if serde_json::to_writer(&mut *text, line).is_ok() {
        text.push(b'\n');
    }
}

/// `https://host:port/v1/x?key=..` → `/v1/x` (the query and fragment are cut first, so a `/`
/// inside them is never taken for the path).
fn path_of(url: &str) -> &str {
    let url = url.split(['?', '#']).next().unwrap_or("");
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.find('/').map_or("/", |i| &rest[i..])
}

/// How deep a JSON value in a recording may nest: a line wraps it in two or three objects more,
/// and the reader (`serde_json`) stops at 128.
const MAX_DEPTH: usize = 100;

/// A body or arguments as a recording keeps them: JSON when it parses and nests at most
/// [`MAX_DEPTH`] deep, else its text. The replay's stand-in reads requests the same way, so a
/// request matches its recording either way.
pub(crate) fn json_or_text(bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if depth(&v) <= MAX_DEPTH => v,
        _ => Value::String(String::from_utf8_lossy(bytes).into_owned()),
    }
}

/// `v`, or its JSON text when it nests deeper than [`MAX_DEPTH`].
fn shallow(v: Value) -> Value {
    if depth(&v) <= MAX_DEPTH {
        v
    } else {
        Value::String(v.to_string())
    }
}

/// How deep `v` nests (a scalar is 0), without recursion.
fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::{depth, json_or_text, path_of};

    #[test]
    fn a_value_too_deep_to_read_back_is_kept_as_its_text() {
        let deep = format!("{}{}", "[".repeat(126), "]".repeat(126));
        assert_eq!(
            json_or_text(deep.as_bytes()),
            serde_json::Value::String(deep.clone())
        );
        assert_eq!(depth(&serde_json::json!({"a": [1, {"b": 2}]})), 3);
        assert_eq!(json_or_text(b"{\"a\":1}"), serde_json::json!({"a": 1}));
    }

    #[test]
    fn a_path_keeps_no_host_nor_query() {
        assert_eq!(
            path_of("https://api.x.com:443/v1beta/models/m:stream?alt=sse&key=SECRET"),
            "/v1beta/models/m:stream"
        );
        assert_eq!(path_of("http://127.0.0.1:9"), "/");
        assert_eq!(path_of("/v1/chat#frag"), "/v1/chat");
        assert_eq!(path_of("https://h?sig=ab/SECRET"), "/");
    }
}

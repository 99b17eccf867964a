//! Recording calls: every frame in and out, every model request and its response, every tool
//! call, one JSON line each, so a call can be read back or replayed against another build of the
//! brain (`voqalize_testing::Replay`, in the `voqalize-testing` crate).
//!
//! Turn it on with [`HostBuilder::record`](crate::host::HostBuilder::record) and a [`Recorder`]; it
//! works on both legs. A recording holds everything the call said — the user's words, the model's
//! answers, tool arguments and results — so keep the files as you keep transcripts. It never
//! holds an HTTP header (where API keys travel) nor a URL's host or query.
//!
//! ```no_run
//! use voqalize::prelude::*;
//! use voqalize::record::Recorder;
//! # struct Echo;
//! # impl Brain for Echo {
//! #     async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
//! #         turn.say(&m.text);
//! #         Ok(())
//! #     }
//! # }
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // One call in 20 is written to calls/<unix ms>-<session id>.jsonl when it ends.
//! let options = HostOptions::builder().record(Recorder::to_dir("calls").every(20)).build()?;
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:8787").await?;
//! voqalize::host::serve(listener, || Echo, options).await?;
//! # Ok(()) }
//! ```
//!
//! # The file (format version 1)
//!
//! UTF-8 JSON lines. The first line is the header; every other line is one object with one key,
//! its kind. `at_ms` is ms since the call's upgrade.
//!
//! | line | fields |
//! |---|---|
//! | `{"voqalize_recording": {..}}` | `version` (1), `sdk` (the SDK version that wrote it), `started_unix_ms` |
//! | `{"frame": {..}}` | `at_ms`, `dir` (`in`: Voqalize → brain, `out`: brain → Voqalize), `kind` (the frame's name, for people; not read back), `pb` (the serialized `Envelope`, base64 with padding) |
//! | `{"model": {..}}` | `at_ms` (sent), `provider`, `model`, `path` (no host, no query), `request` (the body: JSON, or its text), `status` (`null` when no response came), `response` (the body as read: the event stream up to where the turn stopped reading it, or the error body), `error` (only when the response was not read to its end: why no response came, why the stream stopped, or `cancelled: ..` when the turn ended first, as a barge-in ends it) |
//! | `{"tool": {..}}` | `at_ms` (answered), `turn_id`, `name` (as the model called it), `arguments` (JSON, or their text), `outcome` (`ok`, the error's kind — `refused`, `failed`, `timeout`, ... — or `cancelled` when the turn ended while it ran), `end` (`after_barge_in` or `background`; absent: in its turn), and for an MCP tool `mcp`: `toolset`, `tool` (at the server), `response` (what the model read: `{"result": ..}` or `{"error": ".."}`) |
//! | `{"mcp_tools": {..}}` | `at_ms`, `toolset`, `tools`: each `name` (as the model read it), `tool` (at the server), `description`, `schema`, `policy`, `timeout_ms`, `needs_result_now`, `filler` (when set): an MCP toolset's tools, written when a turn declares a list that differs from the last one written |
//! | `{"truncated": {..}}` | `at_ms`, `limit`: the recording reached its byte bound here, and the call went on unrecorded |
//!
//! Frames are recorded as they are read (inbound frames that do not decode are not) and as they
//! are handed to the transport. A JSON value that nests deeper than 100 levels (a model's
//! arguments, say) is kept as its text, so every line reads back. A reader of version 1 refuses a
//! file of a later version, and names the line of anything it cannot read.
//!
//! Files are written when the call ends, readable by their owner only (`0600` on unix), and
//! never over another file (a name taken gets `-1`, `-2`...). A folder the recorder makes is its
//! owner's only too (`0700`: the names hold session ids); an existing folder keeps its mode, and
//! one warning says so when other users can list it. On the direct leg the file is named for the session
//! id the call's token was verified for; on the relay leg for its first `SessionStart`.
//!
//! # Bounds
//!
//! A call's recording is kept in memory until the call ends, within
//! [`Recorder::max_bytes`] (default [`DEFAULT_MAX_RECORDING_BYTES`], 4 MiB); past it, a
//! `truncated` line ends it. While a model response is read, a copy of it is kept too, within
//! what is left of the bound: a recorded call holds at most twice its bound (beside the one line
//! being written). [`Recorder::every`]
//! records one call in `n`, so a busy server keeps its memory and disk: 100 calls recorded at
//! once hold at most 800 MiB by default.

mod folder;
mod format;
mod read;
mod tape;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[cfg(feature = "model")]
pub(crate) use format::McpCallLine;
#[cfg(feature = "mcp")]
pub(crate) use format::McpToolLine;
pub use read::{
    Direction, Exchange, MAX_RECORDING_FILE_BYTES, McpRun, McpToolListed, McpToolsListed,
    RecordError, RecordedFrame, Recording, StageMoved, ToolRun,
};
#[cfg(feature = "model")]
pub(crate) use tape::Exchanged;
pub(crate) use tape::Tape;
pub(crate) use tape::json_or_text;

use crate::recover::lock;

/// The default bound on one call's recording: 4 MiB.
pub const DEFAULT_MAX_RECORDING_BYTES: usize = 4 << 20;

/// Where recordings go and which calls are recorded. Give it to
/// [`HostBuilder::record`](crate::host::HostBuilder::record). Cheap to clone: clones share the sink and
/// the sampling count.
#[derive(Debug, Clone)]
pub struct Recorder {
    sink: Sink,
    max_bytes: usize,
    every: u64,
    calls: Arc<AtomicU64>,
}

#[derive(Debug, Clone)]
enum Sink {
    Dir(Arc<folder::Folder>),
    Memory(Arc<Mutex<Vec<String>>>),
}

impl Recorder {
    /// Writes each recorded call to `dir/<unix ms>-<session id>.jsonl` when it ends (the session
    /// id with every character but ASCII letters, digits, `-` and `_` replaced by `_`, at most 64
    /// of them). A missing folder is made, with any missing parent, readable and listable by its
    /// owner only (`0700` on unix), as the files are `0600`: their names hold session ids. An
    /// existing folder keeps its mode; when other users can list it, the first file written
    /// logs one warning (per recorder). A file that cannot be written is logged as a warning;
    /// the call is not affected.
    pub fn to_dir(dir: impl AsRef<Path>) -> Self {
        Self::with_sink(Sink::Dir(Arc::new(folder::Folder::new(
            dir.as_ref().to_owned(),
        ))))
    }

    /// Keeps each recorded call in memory, for [`take`](Self::take): for tests. Every call's
    /// recording is kept until taken.
    pub fn in_memory() -> Self {
        Self::with_sink(Sink::Memory(Arc::default()))
    }

    fn with_sink(sink: Sink) -> Self {
        Recorder {
            sink,
            max_bytes: DEFAULT_MAX_RECORDING_BYTES,
            every: 1,
            calls: Arc::default(),
        }
    }

    /// The most bytes one call's recording holds (default [`DEFAULT_MAX_RECORDING_BYTES`]); a
    /// `truncated` line ends a recording that reaches it. At least 4 KiB.
    #[must_use]
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes.max(4 << 10);
        self
    }

    /// Records one call in `n` (the first, then every `n`th; default 1, every call; 0 reads as 1).
    #[must_use]
    pub fn every(mut self, n: u64) -> Self {
        self.every = n.max(1);
        self
    }

    /// The recordings an [`in_memory`](Self::in_memory) recorder kept, oldest first, and forgets
    /// them; empty for a recorder that writes files.
    ///
    /// # Errors
    /// [`RecordError`] if a kept recording does not read back (the SDK wrote it, so this is a
    /// bug); then nothing is forgotten.
    pub fn take(&self) -> Result<Vec<Recording>, RecordError> {
        let Sink::Memory(kept) = &self.sink else {
            return Ok(Vec::new());
        };
        let mut kept = lock(kept);
        let recordings = kept
            .iter()
            .map(|text| Recording::parse(text))
            .collect::<Result<Vec<_>, _>>()?;
        kept.clear();
        Ok(recordings)
    }

    /// A tape for a call that starts now, if this call is one to record; `session_id` is the
    /// call's when the host knows it (the direct leg: the id its token was verified for).
    pub(crate) fn tape(&self, session_id: Option<&str>) -> Option<Arc<Tape>> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        n.is_multiple_of(self.every)
            .then(|| Arc::new(Tape::new(self, session_id)))
    }
}

/// `<unix ms>-<session id>.jsonl`, the session id (a peer's string) kept to a safe file name.
fn file_name(session_id: Option<&str>) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let id: String = session_id
        .unwrap_or("no-session")
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{ms}-{id}.jsonl")
}

#[cfg(test)]
mod tests;

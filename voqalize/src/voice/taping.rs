//! A recorded call's lines for the voice core's work: each model request and each tool call is
//! written however it ends — answered, failed, or dropped with its turn (a barge-in aborts the
//! turn's task, the call can end mid-turn) — so a replay finds every request the brain made.

use std::sync::Arc;

use serde_json::Value;

use crate::model::ModelError;
use crate::model::http::EventStream;
use crate::model::layer::{HttpRequest, Layer};
use crate::record::{Exchanged, McpCallLine, Tape};
use crate::tools::Arguments;

/// Why a line says the response was not read to its end when its turn dropped it.
const CANCELLED: &str = "cancelled: the turn ended before the response did";

/// One model request of a recorded call, from the moment it is sent; writes its line when it
/// ends, or when it is dropped. Without a tape it holds the stream and does nothing else.
pub(super) struct Taping {
    pending: Option<Pending>,
    stream: Option<EventStream>,
}

/// What the request's line needs, copied when it is sent (only on a recorded call).
struct Pending {
    tape: Arc<Tape>,
    sent_ms: u64,
    provider: String,
    model: String,
    url: String,
    request: Vec<u8>,
}

impl Taping {
    /// A request going out now, on a call recorded on `tape` (if any).
    pub(super) fn sent(tape: Option<&Arc<Tape>>, layer: &dyn Layer, request: &HttpRequest) -> Self {
        Taping {
            pending: tape.map(|tape| Pending {
                tape: tape.clone(),
                sent_ms: tape.now_ms(),
                provider: layer.provider().to_owned(),
                model: layer.model().to_owned(),
                url: request.url().to_owned(),
                request: request.body().to_vec(),
            }),
            stream: None,
        }
    }

    /// No stream came: the status and error body of an answer that was not a 2xx, or why no
    /// answer came.
    pub(super) fn unanswered(&mut self, e: &ModelError) {
        let Some(p) = self.pending.take() else {
            return;
        };
        match e {
            ModelError::Status { status, body, .. } => {
                p.write(Some(*status), body.as_bytes(), None)
            }
            // The error's own words, not its chain: a transport's source names the URL, and a
            // layer of your own may carry a key in one.
            other => p.write(None, &[], Some(other.to_string())),
        }
    }

    /// The turn's deadline passed before an answer came.
    pub(super) fn unsent(&mut self, why: &dyn std::fmt::Display) {
        if let Some(p) = self.pending.take() {
            p.write(None, &[], Some(why.to_string()));
        }
    }

    /// The response's stream, kept here so that its line is written with what was read of it
    /// however the turn ends.
    pub(super) fn read(&mut self, mut stream: EventStream) -> &mut EventStream {
        if let Some(p) = &self.pending {
            stream.keep_body(p.tape.room());
        }
        self.stream.insert(stream)
    }

    /// The stream was read to its end, or stopped with `error`: its line is written and the
    /// stream dropped (its connection closed).
    pub(super) fn ended(&mut self, error: Option<String>) {
        self.write(error);
    }

    /// The response's stream, once [`read`](Self::read) holds it (and until its line is written).
    pub(super) fn stream(&mut self) -> Option<&mut EventStream> {
        self.stream.as_mut()
    }

    fn write(&mut self, error: Option<String>) {
        let stream = self.stream.take();
        let Some(p) = self.pending.take() else {
            return;
        };
        match stream {
            Some(mut stream) => {
                let body = stream.take_body();
                p.write(Some(stream.status()), &body, error);
            }
            None => p.write(None, &[], error),
        }
    }
}

impl Drop for Taping {
    fn drop(&mut self) {
        if self.pending.is_some() {
            self.write(Some(CANCELLED.to_owned()));
        }
    }
}

impl Pending {
    fn write(self, status: Option<u16>, response: &[u8], error: Option<String>) {
        self.tape.model(Exchanged {
            sent_ms: self.sent_ms,
            provider: &self.provider,
            model: &self.model,
            url: &self.url,
            request: &self.request,
            status,
            response,
            error,
        });
    }
}

/// One tool call of a recorded call, from its dispatch: its line is written when it is answered
/// ([`answered`](Self::answered)), or with the outcome `cancelled` when its turn drops it.
pub(super) struct ToolTaping {
    pending: Option<(Arc<Tape>, u64, String, Value)>,
}

impl ToolTaping {
    /// A call dispatched in `turn_id` with `arguments`, on a call recorded on `tape` (if any:
    /// off a recorded call nothing is copied).
    pub(super) fn dispatched(
        tape: Option<&Arc<Tape>>,
        turn_id: u64,
        name: &str,
        arguments: &Arguments,
    ) -> Self {
        ToolTaping {
            pending: tape.map(|tape| (tape.clone(), turn_id, name.to_owned(), kept(arguments))),
        }
    }

    /// The call was answered with `outcome` (`ok`, or the error's kind), at `end`; an MCP
    /// tool's line also says which tool of which toolset, and what the model read (`response`),
    /// which a replay answers with.
    pub(super) fn answered(
        &mut self,
        outcome: &str,
        end: crate::tools::RunEnd,
        decl: Option<&crate::tools::ToolDecl>,
        response: &Value,
    ) {
        if let Some((tape, turn_id, name, arguments)) = self.pending.take() {
            let mcp = decl
                .and_then(|d| d.added_origin())
                .map(|added| McpCallLine {
                    toolset: added.source.to_string(),
                    tool: added.remote.to_string(),
                    response: response.clone(),
                });
            tape.tool(turn_id, &name, arguments, outcome, end.name(), mcp);
        }
    }
}

/// A call's arguments as its recording keeps them: JSON, or the text that is not JSON (empty
/// text reads as `{}`, as the tool reads it).
pub(super) fn kept(arguments: &Arguments) -> Value {
    match arguments {
        Arguments::Json(v) => v.clone(),
        Arguments::Raw(text) if text.trim().is_empty() => Value::Object(serde_json::Map::new()),
        Arguments::Raw(text) => crate::record::json_or_text(text.as_bytes()),
    }
}

impl Drop for ToolTaping {
    fn drop(&mut self) {
        if let Some((tape, turn_id, name, arguments)) = self.pending.take() {
            tape.tool(
                turn_id,
                &name,
                arguments,
                "cancelled",
                crate::tools::RunEnd::InTurn.name(),
                None,
            );
        }
    }
}

//! Decoding an Anthropic Messages stream: text spoken as its deltas come; a `tool_use` block's
//! `input_json_delta` fragments and a thinking block's deltas and signature assembled until the
//! block stops; usage from `message_start`, updated by `message_delta`, with its stop reason (and
//! `stop_details`); `message_stop` ends it, and a `tool_use` block still open then was cut off.

use serde_json::{Map, Value, json};

use crate::logline::outside_n;
use crate::model::history::{Chunk, Part, Usage, label, label_of, stop_text};
use crate::model::layer::{DecodeLimits, Decoder, StreamError};
use crate::model::render::CallIds;
use crate::model::render::{
    assembled_call, bare_error, belongs_to_open, count, error_message, malformed_shape,
    provider_error, visible_output,
};
use crate::model::sse::SseItem;
use crate::model::within::parse_within;

use super::PROVIDER;

/// The content block being streamed.
#[derive(Debug)]
enum Block {
    /// Text: its deltas were handed on as they came.
    Text,
    /// A call: its id, name and argument text so far (`from_start`: the text is the block's
    /// own `input`, which the first `input_json_delta` replaces).
    ToolUse {
        id: String,
        name: String,
        arguments: String,
        from_start: bool,
    },
    /// Reasoning: its text and signature so far.
    Thinking { thinking: String, signature: String },
    /// A block this layer does not read (server tools, a new type): skipped to its stop.
    Skipped,
}

/// Decodes one Messages stream within its [`DecodeLimits`]: at most `max_calls + 1` calls (a
/// `tool_use` block past them is skipped: the core cuts the response at the call past its bound),
/// at most `max_argument_bytes + 1` bytes of one call's arguments, and a thinking block of at
/// most `max_kept_bytes` (past it, the response is cut there).
#[derive(Debug)]
pub(crate) struct AnthropicDecoder {
    limits: DecodeLimits,
    /// The open block and its `index`: a delta or a stop naming another index is not its own.
    block: Option<(Option<u64>, Block)>,
    calls: usize,
    ids: CallIds,
    usage: Usage,
    usage_seen: bool,
    /// The message's `id` and its `stop_reason`, for the request's span.
    response_id: Option<String>,
    stop_reason: Option<String>,
    /// The stop, when it was not a normal end: its reason and `stop_details`.
    abnormal_stop: Option<String>,
    done: bool,
}

impl AnthropicDecoder {
    pub(crate) fn new(limits: DecodeLimits) -> Self {
        AnthropicDecoder {
            limits,
            block: None,
            calls: 0,
            ids: CallIds::default(),
            usage: Usage::default(),
            usage_seen: false,
            response_id: None,
            stop_reason: None,
            abnormal_stop: None,
            done: false,
        }
    }

    fn event(&mut self, data: &str) -> Result<Vec<Chunk>, StreamError> {
        if self.done || data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let Some(event) = parse_within(PROVIDER, data, self.limits.max_kept_bytes)? else {
            return Ok(vec![Chunk::cut()]);
        };
        // Whether a delta or a stop names the open block.
        let own = belongs_to_open(self.block.as_ref().map(|(i, _)| *i), &event);
        let parts = match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.read_usage(&event["message"]["usage"]);
                self.response_id = label(&event["message"]["id"]);
                Vec::new()
            }
            Some("content_block_start") => self.start(
                event.get("index").and_then(Value::as_u64),
                &event["content_block"],
            ),
            Some("content_block_delta") if own => {
                return self.delta(&event["delta"]);
            }
            Some("content_block_stop") if own => self.stop(),
            // A delta or a stop for a block that is not the open one (never started, or
            // interleaved): never applied to another block's words or arguments.
            Some("content_block_delta" | "content_block_stop") if self.block.is_some() => {
                Vec::new()
            }
            Some("content_block_delta") => {
                return Err(malformed_shape(
                    PROVIDER,
                    "a content_block_delta outside any content block",
                ));
            }
            Some("content_block_stop") => Vec::new(),
            Some("message_delta") => {
                self.message_delta(&event);
                Vec::new()
            }
            Some("message_stop") => return Ok(vec![self.message_stop()]),
            Some("error") => {
                return Err(provider_error(PROVIDER, error_message(&event["error"])));
            }
            // `ping`, and event types added later.
            _ => Vec::new(),
        };
        Ok(if parts.is_empty() {
            Vec::new()
        } else {
            vec![Chunk::new(parts)]
        })
    }

    /// A `message_delta`: the usage so far, and why the message stopped.
    fn message_delta(&mut self, event: &Value) {
        self.read_usage(&event["usage"]);
        let delta = &event["delta"];
        if let Some(reason) = delta["stop_reason"].as_str() {
            self.stop_reason = Some(label_of(reason));
            self.abnormal_stop = (!NORMAL_STOPS.contains(&reason))
                .then(|| stop_text(reason, stop_details(&delta["stop_details"]).as_deref()))
                .flatten();
        }
    }

    /// `message_stop`: the finishing chunk.
    fn message_stop(&mut self) -> Chunk {
        self.done = true;
        // A `tool_use` block still open at the end was cut off (every recorded stream
        // stops each block before its `message_delta`; one that ran into `max_tokens`
        // never stops its call's block): its call never runs.
        let cut_call = match self.block.take() {
            Some((
                _,
                Block::ToolUse {
                    id,
                    name,
                    arguments,
                    ..
                },
            )) => Some(assembled_call(&mut self.ids, id, name, arguments)),
            other => {
                self.block = other;
                None
            }
        };
        let mut chunk = Chunk::new(self.stop()).ending(false);
        chunk.cut_call = cut_call;
        chunk.abnormal_stop = self.abnormal_stop.take();
        chunk.response_id = self.response_id.take();
        chunk.finish_reason = self.stop_reason.take();
        if self.usage_seen {
            chunk = chunk.with_usage(self.usage);
        }
        chunk
    }

    /// Usage fields present in `u` replace the ones read before (`message_delta` carries the
    /// final `output_tokens`, and on newer models the input counts again).
    fn read_usage(&mut self, u: &Value) {
        if !u.is_object() {
            return;
        }
        self.usage_seen = true;
        let fresh = count(u, &["input_tokens"]);
        let read = count(u, &["cache_read_input_tokens"]);
        let write = count(u, &["cache_creation_input_tokens"]);
        if fresh.is_some() || read.is_some() || write.is_some() {
            // The prompt's tokens, cached ones included (Anthropic's `input_tokens` leaves out
            // what was read from or written to the cache). A provider's count never overflows it.
            let sum = [fresh, read, write]
                .into_iter()
                .flatten()
                .fold(0u64, u64::saturating_add);
            self.usage.input = Some(sum);
            self.usage.cached_input = read.or(self.usage.cached_input);
            self.usage.cache_write = write.or(self.usage.cache_write);
        }
        if let Some(out) = count(u, &["output_tokens"]) {
            // Thinking is counted inside; newer models report it beside
            // (`output_tokens_details.thinking_tokens`), older ones not at all, when the count is
            // taken as sent (docs/protocol.md §6.15).
            let thinking = count(u, &["output_tokens_details", "thinking_tokens"]);
            self.usage.output = visible_output(Some(out), thinking, true);
            self.usage.reasoning = thinking.or(self.usage.reasoning);
        }
    }

    fn start(&mut self, index: Option<u64>, block: &Value) -> Vec<Part> {
        let mut parts = self.stop();
        let text = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
        let open = match text("type") {
            "text" => {
                if !text("text").is_empty() {
                    parts.push(Part::text(text("text")));
                }
                Block::Text
            }
            "tool_use" if self.calls <= self.limits.max_calls => {
                self.calls += 1;
                // A block that starts with its input whole (no deltas follow) keeps it.
                let arguments = match block.get("input") {
                    Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
                    _ => String::new(),
                };
                Block::ToolUse {
                    id: text("id").to_owned(),
                    name: text("name").to_owned(),
                    from_start: !arguments.is_empty(),
                    arguments,
                }
            }
            "thinking" => Block::Thinking {
                thinking: text("thinking").to_owned(),
                signature: text("signature").to_owned(),
            },
            "redacted_thinking" => {
                parts.push(Part::Thought { raw: block.clone() });
                Block::Skipped
            }
            other => {
                tracing::debug!(
                    "{PROVIDER}: a content block of type {} is not read",
                    outside_n(other, 40)
                );
                Block::Skipped
            }
        };
        self.block = Some((index, open));
        parts
    }

    fn delta(&mut self, delta: &Value) -> Result<Vec<Chunk>, StreamError> {
        let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default();
        let room = |held: usize, most: usize| most.saturating_add(1).saturating_sub(held);
        match (self.block.as_mut().map(|(_, b)| b), text("type")) {
            (Some(Block::Text), "text_delta") if !text("text").is_empty() => {
                return Ok(vec![Chunk::new(vec![Part::text(text("text"))])]);
            }
            (
                Some(Block::ToolUse {
                    arguments,
                    from_start,
                    ..
                }),
                "input_json_delta",
            ) => {
                if std::mem::take(from_start) {
                    // Streamed input replaces what the block started with: the two together
                    // would not be one JSON object.
                    arguments.clear();
                }
                let piece = text("partial_json");
                let mut end =
                    room(arguments.len(), self.limits.max_argument_bytes).min(piece.len());
                while !piece.is_char_boundary(end) {
                    end += 1;
                }
                arguments.push_str(&piece[..end]);
            }
            (
                Some(Block::Thinking {
                    thinking,
                    signature,
                }),
                kind,
            ) => {
                match kind {
                    "thinking_delta" => thinking.push_str(text("thinking")),
                    "signature_delta" => signature.push_str(text("signature")),
                    _ => {}
                }
                if thinking.len() + signature.len() > self.limits.max_kept_bytes {
                    if let Some((_, block)) = self.block.as_mut() {
                        *block = Block::Skipped;
                    }
                    return Ok(vec![Chunk::cut()]);
                }
            }
            (None, _) => {
                return Err(malformed_shape(
                    PROVIDER,
                    "a content_block_delta outside any content block",
                ));
            }
            _ => {}
        }
        Ok(Vec::new())
    }

    /// Closes the open block: a call or a thinking block is complete now.
    fn stop(&mut self) -> Vec<Part> {
        match self.block.take().map(|(_, b)| b) {
            Some(Block::ToolUse {
                id,
                name,
                arguments,
                ..
            }) => {
                vec![assembled_call(&mut self.ids, id, name, arguments)]
            }
            Some(Block::Thinking {
                thinking,
                signature,
            }) => {
                let mut raw = Map::new();
                raw.insert("type".into(), json!("thinking"));
                raw.insert("thinking".into(), Value::String(thinking));
                raw.insert("signature".into(), Value::String(signature));
                vec![Part::Thought {
                    raw: Value::Object(raw),
                }]
            }
            Some(Block::Text | Block::Skipped) | None => Vec::new(),
        }
    }
}

/// The stop reasons of a message that ended as it should: its turn said, a tool called, a stop
/// sequence met. Any other (`max_tokens`, `refusal`, `pause_turn`,
/// `model_context_window_exceeded`, one added later) is named on the `turn:` line.
const NORMAL_STOPS: &[&str] = &["end_turn", "tool_use", "stop_sequence"];

/// What `stop_details` says of a stop (a refusal's `category` and `explanation`), each kept to
/// [`LABEL_BYTES`](crate::model::history::LABEL_BYTES): `cyber: explanation`, or either alone.
fn stop_details(details: &Value) -> Option<String> {
    let field = |k: &str| details.get(k).and_then(Value::as_str).map(label_of);
    match (field("category"), field("explanation")) {
        (Some(category), Some(explanation)) => Some(format!("{category}: {explanation}")),
        (category, explanation) => category.or(explanation),
    }
}

impl Decoder for AnthropicDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.event(&event.data),
            SseItem::Bare(body) => Err(bare_error(PROVIDER, &body, self.limits.max_kept_bytes)),
        }
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(StreamError::truncated(PROVIDER, "message_stop"))
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

//! Decoding an Interactions stream: every step arrives bracketed (`step.start`, its
//! `step.delta`s, `step.stop`). A `model_output` step's text is spoken as each delta comes; a
//! `function_call` step's `arguments_delta` fragments and a `thought` step's summary and
//! signature are assembled until the step stops; `interaction.completed` carries the usage and
//! the status and ends the response (a `function_call` step still open then was cut off).

use serde_json::{Map, Value, json};

use crate::logline::outside_n;
use crate::model::history::{Chunk, Part, Usage, label, label_of, stop_text};
use crate::model::layer::{DecodeLimits, Decoder, StreamError};
use crate::model::render::CallIds;
use crate::model::render::{
    assembled_call, bare_error, belongs_to_open, count, error_message, malformed_shape,
    provider_error,
};
use crate::model::sse::SseItem;
use crate::model::within::parse_within;

use super::PROVIDER;

/// The step being streamed.
#[derive(Debug)]
enum Step {
    /// Words: each delta was handed on as it came. Nothing of it is held, so a barge-in between
    /// its start and its first delta leaves nothing behind.
    Output,
    /// A call: its id, name and argument text so far (`from_start`: the text is the step's own
    /// `arguments`, which the first `arguments_delta` replaces).
    Call {
        id: String,
        name: String,
        arguments: String,
        from_start: bool,
    },
    /// Reasoning: its summary text and signature so far.
    Thought { summary: String, signature: String },
    /// A step this layer does not read (a server tool's call or result, a new type).
    Skipped,
}

/// Decodes one Interactions stream within its [`DecodeLimits`]: at most `max_calls + 1` calls,
/// at most `max_argument_bytes + 1` bytes of one call's arguments, a thought of at most
/// `max_kept_bytes` (past it, the response is cut there).
#[derive(Debug)]
pub(crate) struct InteractionsDecoder {
    limits: DecodeLimits,
    /// The open step and its `index`: a delta or a stop naming another index is not its own.
    step: Option<(Option<u64>, Step)>,
    ids: CallIds,
    calls: usize,
    done: bool,
}

impl InteractionsDecoder {
    pub(crate) fn new(limits: DecodeLimits) -> Self {
        InteractionsDecoder {
            limits,
            step: None,
            calls: 0,
            ids: CallIds::default(),
            done: false,
        }
    }

    fn event(&mut self, data: &str) -> Result<Vec<Chunk>, StreamError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            // The server's last event, after `interaction.completed`: the end without a usage.
            self.done = true;
            return Ok(vec![self.end_chunk()]);
        }
        let Some(event) = parse_within(PROVIDER, data, self.limits.max_kept_bytes)? else {
            return Ok(vec![Chunk::cut()]);
        };
        // Whether a delta or a stop names the open step.
        let own = belongs_to_open(self.step.as_ref().map(|(i, _)| *i), &event);
        let parts = match event.get("event_type").and_then(Value::as_str) {
            Some("step.start") => {
                self.start(event.get("index").and_then(Value::as_u64), &event["step"])
            }
            Some("step.delta") if own => {
                return self.delta(&event["delta"]);
            }
            Some("step.stop") if own => self.stop(),
            // A delta or a stop for a step that is not the open one (never started, or
            // interleaved): never applied to another step's words or arguments.
            Some("step.delta" | "step.stop") if self.step.is_some() => Vec::new(),
            Some("step.delta") => {
                return Err(malformed_shape(PROVIDER, "a step.delta outside any step"));
            }
            Some("step.stop") => Vec::new(),
            Some("interaction.completed") => {
                self.done = true;
                let interaction = &event["interaction"];
                let mut chunk = self.end_chunk();
                chunk.response_id = label(&interaction["id"]);
                chunk.finish_reason = label(&interaction["status"]);
                // `completed`, or `requires_action` (calls to answer), is a normal end; any
                // other (`incomplete`, `cancelled`...) is not.
                chunk.abnormal_stop = match interaction["status"].as_str() {
                    Some("completed" | "requires_action") | None => None,
                    Some(status) => stop_text(&label_of(status), None),
                };
                if let Some(u) = interaction.get("usage").filter(|u| u.is_object()) {
                    chunk = chunk.with_usage(usage(u));
                }
                if interaction["status"] == "failed" {
                    return Err(provider_error(
                        PROVIDER,
                        "the interaction failed".to_owned(),
                    ));
                }
                return Ok(vec![chunk]);
            }
            Some("error") => {
                return Err(provider_error(PROVIDER, error_message(&event["error"])));
            }
            // `interaction.created`, `interaction.status_update`, and event types added later.
            _ => Vec::new(),
        };
        Ok(if parts.is_empty() {
            Vec::new()
        } else {
            vec![Chunk::new(parts)]
        })
    }

    fn start(&mut self, index: Option<u64>, step: &Value) -> Vec<Part> {
        let mut parts = self.stop();
        let text = |k: &str| step.get(k).and_then(Value::as_str).unwrap_or_default();
        let open = match text("type") {
            "model_output" => {
                // Only text items are words; anything else a step opens with is not spoken.
                for item in step["content"].as_array().into_iter().flatten() {
                    if item["type"] == "text"
                        && let Some(t) = item["text"].as_str().filter(|t| !t.is_empty())
                    {
                        parts.push(Part::text(t));
                    }
                }
                Step::Output
            }
            "function_call" if self.calls <= self.limits.max_calls => {
                self.calls += 1;
                let arguments = match step.get("arguments") {
                    Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
                    _ => String::new(),
                };
                Step::Call {
                    id: text("id").to_owned(),
                    name: text("name").to_owned(),
                    from_start: !arguments.is_empty(),
                    arguments,
                }
            }
            "thought" => Step::Thought {
                summary: step["summary"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["text"].as_str())
                    .collect(),
                signature: text("signature").to_owned(),
            },
            other => {
                tracing::debug!(
                    "{PROVIDER} interactions: a step of type {} is not read",
                    outside_n(other, 40)
                );
                Step::Skipped
            }
        };
        self.step = Some((index, open));
        parts
    }

    fn delta(&mut self, delta: &Value) -> Result<Vec<Chunk>, StreamError> {
        let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default();
        match (self.step.as_mut().map(|(_, s)| s), text("type")) {
            (Some(Step::Output), "text") if !text("text").is_empty() => {
                return Ok(vec![Chunk::new(vec![Part::text(text("text"))])]);
            }
            (
                Some(Step::Call {
                    arguments,
                    from_start,
                    ..
                }),
                "arguments_delta",
            ) => {
                if std::mem::take(from_start) {
                    // Streamed arguments replace what the step started with.
                    arguments.clear();
                }
                let piece = text("arguments");
                let room = self
                    .limits
                    .max_argument_bytes
                    .saturating_add(1)
                    .saturating_sub(arguments.len());
                let mut end = room.min(piece.len());
                while !piece.is_char_boundary(end) {
                    end += 1;
                }
                arguments.push_str(&piece[..end]);
            }
            (Some(Step::Thought { summary, signature }), kind) => {
                match kind {
                    "thought_summary" => {
                        summary.push_str(delta["content"]["text"].as_str().unwrap_or_default());
                    }
                    "thought_signature" => signature.push_str(text("signature")),
                    _ => {}
                }
                if summary.len() + signature.len() > self.limits.max_kept_bytes {
                    if let Some((_, step)) = self.step.as_mut() {
                        *step = Step::Skipped;
                    }
                    return Ok(vec![Chunk::cut()]);
                }
            }
            (None, _) => {
                return Err(malformed_shape(PROVIDER, "a step.delta outside any step"));
            }
            _ => {}
        }
        Ok(Vec::new())
    }

    /// The chunk that ends the interaction: the open step closed, but a `function_call` step
    /// still open was cut off (every recorded stream stops each step before its end), so its
    /// call never runs.
    fn end_chunk(&mut self) -> Chunk {
        let cut_call = match self.step.take() {
            Some((
                _,
                Step::Call {
                    id,
                    name,
                    arguments,
                    ..
                },
            )) => Some(assembled_call(&mut self.ids, id, name, arguments)),
            other => {
                self.step = other;
                None
            }
        };
        let mut chunk = Chunk::new(self.stop()).ending(false);
        chunk.cut_call = cut_call;
        chunk
    }

    /// Closes the open step: a call or a thought is complete now.
    fn stop(&mut self) -> Vec<Part> {
        match self.step.take().map(|(_, s)| s) {
            Some(Step::Call {
                id,
                name,
                arguments,
                ..
            }) => {
                vec![assembled_call(&mut self.ids, id, name, arguments)]
            }
            Some(Step::Thought { summary, signature }) => {
                let mut raw = Map::new();
                raw.insert("type".into(), json!("thought"));
                if !signature.is_empty() {
                    raw.insert("signature".into(), Value::String(signature));
                }
                if !summary.is_empty() {
                    raw.insert("summary".into(), json!([{"type": "text", "text": summary}]));
                }
                vec![Part::Thought {
                    raw: Value::Object(raw),
                }]
            }
            Some(Step::Output | Step::Skipped) | None => Vec::new(),
        }
    }
}

/// `interaction.usage` → [`Usage`]: `total_output_tokens` leaves thoughts out
/// (`total_thought_tokens`), so it is taken as sent (docs/protocol.md §6.15).
fn usage(u: &Value) -> Usage {
    Usage {
        input: count(u, &["total_input_tokens"]),
        cached_input: count(u, &["total_cached_tokens"]),
        cache_write: None,
        output: count(u, &["total_output_tokens"]),
        reasoning: count(u, &["total_thought_tokens"]),
    }
}

impl Decoder for InteractionsDecoder {
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
            Err(StreamError::truncated(PROVIDER, "interaction.completed"))
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

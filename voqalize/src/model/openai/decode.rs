//! Decoding a Responses stream: each event switched on its `type`.

use serde_json::Value;

use crate::model::history::{Call, Chunk, Part, Usage, label, label_of, stop_text};
use crate::model::layer::{Decoder, StreamError};
use crate::model::render::{
    bare_error, count, error_message, malformed_shape, provider_error, visible_output,
    without_nulls,
};
use crate::model::sse::SseItem;
use crate::model::within::parse_within;
use crate::tools::Arguments;

use super::PROVIDER;

/// Decodes a Responses stream, switching on each event's `type`. An event that would take more
/// than `max_kept_bytes` in memory is not read into it: the core cuts the response there.
#[derive(Debug)]
pub(crate) struct OpenAiDecoder {
    max_kept_bytes: usize,
    done: bool,
}

impl OpenAiDecoder {
    pub(crate) fn new(max_kept_bytes: usize) -> Self {
        OpenAiDecoder {
            max_kept_bytes,
            done: false,
        }
    }

    fn event(&mut self, name: Option<&str>, data: &str) -> Result<Vec<Chunk>, StreamError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Vec::new());
        }
        let Some(event) = parse_within(PROVIDER, data, self.max_kept_bytes)? else {
            return Ok(vec![Chunk {
                too_big: true,
                ..Chunk::default()
            }]);
        };
        let Some(obj) = event.as_object() else {
            return Err(malformed_shape(PROVIDER, "an event is not a JSON object"));
        };
        let kind = obj.get("type").and_then(Value::as_str).or(name);
        let text = |delta: Option<&Value>| match delta.and_then(Value::as_str) {
            Some(d) if !d.is_empty() => vec![Chunk {
                parts: vec![Part::text(d)],
                ..Chunk::default()
            }],
            _ => Vec::new(),
        };
        match kind {
            Some("response.output_text.delta" | "response.refusal.delta") => {
                Ok(text(obj.get("delta")))
            }
            Some("response.output_item.done") => item_done(obj.get("item").unwrap_or(&Value::Null)),
            Some("response.completed" | "response.incomplete") => {
                self.done = true;
                Ok(vec![completed(&event, kind)])
            }
            Some("response.failed") => {
                let error = event
                    .pointer("/response/error")
                    .filter(|e| !e.is_null())
                    .map_or_else(|| "no error given".to_owned(), error_message);
                Err(provider_error(
                    PROVIDER,
                    format!("response failed: {error}"),
                ))
            }
            Some("error") => {
                let error = match obj.get("error") {
                    Some(e) if e.is_object() => error_message(e),
                    _ => {
                        let mut e = obj.clone();
                        e.shift_remove("type");
                        e.shift_remove("sequence_number");
                        error_message(&Value::Object(e))
                    }
                };
                Err(provider_error(PROVIDER, format!("stream error: {error}")))
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// A `response.output_item.done` event's item: a call (cut when the output stopped in it), a
/// reasoning item, or the message whose text came as deltas.
fn item_done(item: &Value) -> Result<Vec<Chunk>, StreamError> {
    let part = match item.get("type").and_then(Value::as_str) {
        // An item the output stopped in is `incomplete` (a server that sends no
        // status sends whole calls): its call never runs.
        Some("function_call")
            if item
                .get("status")
                .and_then(Value::as_str)
                .is_some_and(|status| status != "completed") =>
        {
            return Ok(vec![Chunk {
                cut_call: Some(call_part(item)?),
                ..Chunk::default()
            }]);
        }
        Some("function_call") => call_part(item)?,
        Some("reasoning") => Part::Thought {
            raw: as_input_item(item),
        },
        // The message whose text came as deltas: kept (never spoken again) so that a
        // reasoning item before it can be replayed with it (`model_items`). Its
        // `status` stays: an output message given back as input requires one.
        Some("message") => Part::Other {
            raw: without_nulls(item),
        },
        _ => return Ok(Vec::new()),
    };
    Ok(vec![Chunk {
        parts: vec![part],
        ..Chunk::default()
    }])
}

/// The finishing chunk of a `response.completed` or `response.incomplete` event (`kind`): usage,
/// the response's id, why it stopped.
fn completed(event: &Value, kind: Option<&str>) -> Chunk {
    let usage = event
        .pointer("/response/usage")
        .filter(|u| u.is_object())
        .map(usage);
    let response = event.get("response").unwrap_or(&Value::Null);
    // `incomplete`'s reason (`max_output_tokens`...) says more than its status.
    let reason = response
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str);
    let finish_reason = reason.map(label_of).or_else(|| label(&response["status"]));
    let status = match response["status"].as_str() {
        Some(status) => status,
        None if kind == Some("response.incomplete") => "incomplete",
        None => "completed",
    };
    let abnormal_stop = if status == "completed" {
        None
    } else {
        stop_text(&label_of(status), reason)
    };
    Chunk {
        finished: true,
        usage,
        response_id: label(&response["id"]),
        finish_reason,
        abnormal_stop,
        ..Chunk::default()
    }
}

/// An output item as an input item: without its `status` and its `null` members.
fn as_input_item(item: &Value) -> Value {
    let mut raw = without_nulls(item);
    if let Some(m) = raw.as_object_mut() {
        m.shift_remove("status");
    }
    raw
}

/// A finished `function_call` output item → a call part, the item kept as `raw` (its `id` with
/// it), replayed verbatim after the reasoning item that led to it (`model_items`).
fn call_part(item: &Value) -> Result<Part, StreamError> {
    let field = |k: &str| item.get(k).and_then(Value::as_str);
    let (Some(call_id), Some(name)) = (field("call_id"), field("name")) else {
        return Err(malformed_shape(
            PROVIDER,
            "a function_call item lacks its call_id or name",
        ));
    };
    let arguments = field("arguments").unwrap_or_default().to_owned();
    Ok(Part::Call {
        call: Call {
            id: Some(call_id.to_owned()),
            name: name.to_owned(),
            arguments: Arguments::Raw(arguments),
        },
        raw: as_input_item(item),
    })
}

/// `response.usage` → [`Usage`]; `output_tokens` holds the reasoning tokens, which are taken off
/// ([`visible_output`]).
pub(super) fn usage(u: &Value) -> Usage {
    let reasoning = count(u, &["output_tokens_details", "reasoning_tokens"]);
    Usage {
        input: count(u, &["input_tokens"]),
        cached_input: count(u, &["input_tokens_details", "cached_tokens"]),
        cache_write: count(u, &["input_tokens_details", "cache_write_tokens"]),
        output: visible_output(count(u, &["output_tokens"]), reasoning, true),
        reasoning,
    }
}

impl Decoder for OpenAiDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.event(event.event.as_deref(), &event.data),
            SseItem::Bare(body) => Err(bare_error(PROVIDER, &body, self.max_kept_bytes)),
        }
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(StreamError::Truncated {
                provider: PROVIDER.into(),
                expected: "response.completed",
            })
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

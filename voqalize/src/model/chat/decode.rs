//! Decoding a chat-completions stream: text at once, calls assembled until the end (the one being
//! written when a `finish_reason` that is not a normal end came was cut off).

use serde_json::Value;

use crate::logline::{outside, outside_n};
use crate::model::history::{Call, Chunk, Part, Usage, label, stop_text};
use crate::model::layer::{DecodeLimits, Decoder, StreamError};
use crate::model::render::{
    bare_error, count, error_message, malformed_shape, provider_error, visible_output,
};
use crate::model::sse::SseItem;
use crate::model::within::parse_within;
use crate::tools::Arguments;

use super::error_name;

/// One tool call being assembled from fragments.
#[derive(Debug)]
struct Slot {
    index: u64,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl Slot {
    /// The assembled call, the `position`-th of the response (its id when the server sent none:
    /// by position, not index, so calls sharing an index never share an id). Everything a
    /// `tool_calls` entry carries is in the call: no raw to keep.
    fn into_part(self, position: usize) -> Part {
        let id = self.id.unwrap_or_else(|| format!("call_{position}"));
        let arguments = if self.arguments.trim().is_empty() {
            "{}".to_owned()
        } else {
            self.arguments
        };
        Part::Call {
            call: Call {
                id: Some(id),
                name: self.name,
                arguments: Arguments::Raw(arguments),
            },
            raw: Value::Null,
        }
    }

    /// A call that could stand on its own: named, with whole JSON arguments (or none yet).
    fn complete(&self) -> bool {
        !self.name.is_empty()
            && (self.arguments.trim().is_empty()
                || serde_json::from_str::<serde::de::IgnoredAny>(&self.arguments).is_ok())
    }
}

/// The `finish_reason`s of a reply that ended as it should: OpenAI's `stop`, `tool_calls` and
/// the older `function_call`, and what other servers send for the same (`eos`, `eos_token`,
/// `stop_sequence`, `end_turn`). Any other (`length`, `content_filter`,
/// `insufficient_system_resource`, `error`...) is named on the `turn:` line, and the call being
/// written when it came does not run.
const NORMAL_FINISHES: &[&str] = &[
    "stop",
    "tool_calls",
    "function_call",
    "eos",
    "eos_token",
    "stop_sequence",
    "end_turn",
];

/// Decodes a chat-completions stream: text at once, calls assembled until the end.
///
/// What it assembles is bounded by its [`DecodeLimits`]: at most `max_calls + 1` calls (fragments
/// of any call after those are dropped: the core cuts the response at the call past its bound
/// anyway), and at most `max_argument_bytes + 1` bytes of one call's arguments (the rest cannot
/// change the core's verdict on them).
#[derive(Debug)]
pub(crate) struct ChatDecoder {
    provider: String,
    /// The server's `completion_tokens` leaves reasoning out (xAI).
    reasoning_outside: bool,
    limits: DecodeLimits,
    slots: Vec<Slot>,
    /// The slot the last fragment went to: the call being written when the output stopped.
    last: Option<usize>,
    usage: Option<Usage>,
    finish_seen: bool,
    /// The completion's `id` and its `finish_reason`, for the request's span.
    response_id: Option<String>,
    finish_reason: Option<String>,
    done: bool,
}

impl ChatDecoder {
    pub(crate) fn new(provider: &str, limits: DecodeLimits) -> Self {
        ChatDecoder {
            provider: error_name(provider).to_owned(),
            reasoning_outside: provider == "xai",
            limits,
            slots: Vec::new(),
            last: None,
            usage: None,
            finish_seen: false,
            response_id: None,
            finish_reason: None,
            done: false,
        }
    }

    fn event(&mut self, data: &str) -> Result<Vec<Chunk>, StreamError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            return self.finish(true);
        }
        let Some(event) = parse_within(&self.provider, data, self.limits.max_kept_bytes)? else {
            return Ok(vec![Chunk {
                too_big: true,
                ..Chunk::default()
            }]);
        };
        let Some(obj) = event.as_object() else {
            return Err(malformed_shape(
                &self.provider,
                "a chunk is not a JSON object",
            ));
        };
        if let Some(error) = obj.get("error").filter(|e| !e.is_null()) {
            return Err(provider_error(&self.provider, error_message(error)));
        }
        if let Some(u) = obj.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(u, self.reasoning_outside));
        }
        if self.response_id.is_none() {
            self.response_id = obj.get("id").and_then(label);
        }
        let mut parts = Vec::new();
        let choices = match obj.get("choices") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(c)) => c.as_slice(),
            Some(_) => return Err(malformed_shape(&self.provider, "choices is not a list")),
        };
        for choice in choices {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            for key in ["content", "refusal"] {
                spoken(delta.get(key).unwrap_or(&Value::Null), &mut parts);
            }
            if let Some(Value::Array(fragments)) = delta.get("tool_calls") {
                for (position, fragment) in fragments.iter().enumerate() {
                    self.fragment(position, fragment);
                }
            }
            if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
                self.finish_seen = true;
                self.finish_reason = label(reason);
            }
        }
        if parts.is_empty() {
            Ok(Vec::new())
        } else {
            Ok(vec![Chunk {
                parts,
                ..Chunk::default()
            }])
        }
    }

    /// Adds one `tool_calls[]` fragment. Fragments group by `index` (its position in the list
    /// when a server leaves it out); a new `id` on an index whose call is already complete starts
    /// a new call, so two calls sent on one index are never glued together. The first non-empty
    /// id and name win; argument text is concatenated, an arguments object re-serialised.
    fn fragment(&mut self, position: usize, fragment: &Value) {
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let id = fragment
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = fragment.get("function").unwrap_or(&Value::Null);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let arguments: std::borrow::Cow<'_, str> = match function.get("arguments") {
            None | Some(Value::Null) => "".into(),
            Some(Value::String(s)) => s.as_str().into(),
            Some(other) => other.to_string().into(),
        };
        let current = self.slots.iter().rposition(|s| s.index == index);
        // Whether the fragment goes on the call its index holds. Two ids tell; without them, a
        // named fragment after whole arguments is the next call (some servers send every whole
        // call on index 0, without ids): gluing it on would concatenate two JSON objects. The
        // same name again with no arguments only repeats the call's header.
        let continues = |s: &Slot| match (s.id.as_deref(), id) {
            (Some(held), Some(new)) => held == new,
            _ => {
                name.is_none()
                    || s.arguments.trim().is_empty()
                    || (name == Some(s.name.as_str()) && arguments.trim().is_empty())
            }
        };
        let at = match current {
            Some(i) if continues(&self.slots[i]) || !self.slots[i].complete() => i,
            // A call past the bound: the core refuses the first one and reads nothing after it.
            _ if self.slots.len() > self.limits.max_calls => return,
            _ => {
                self.slots.push(Slot {
                    index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                self.slots.len() - 1
            }
        };
        self.last = Some(at);
        let slot = &mut self.slots[at];
        if slot.id.is_none() {
            slot.id = id.map(str::to_owned);
        }
        if slot.name.is_empty()
            && let Some(n) = name
        {
            slot.name = n.to_owned();
        }
        // Past the bound by one byte (or one character) is as far as it needs to grow.
        let room = self
            .limits
            .max_argument_bytes
            .saturating_add(1)
            .saturating_sub(slot.arguments.len());
        let mut end = room.min(arguments.len());
        while !arguments.is_char_boundary(end) {
            end += 1;
        }
        slot.arguments.push_str(&arguments[..end]);
    }

    /// The finished chunk: every call in index order (arrival order within an index), then the
    /// last usage seen. At the stream's end (`done_marker` false), refused when no choice ever
    /// finished: the stream was cut. `[DONE]` is an end of its own: some servers (Novita behind
    /// OpenRouter) never set a `finish_reason` (docs/protocol.md §6.15).
    fn finish(&mut self, done_marker: bool) -> Result<Vec<Chunk>, StreamError> {
        if !self.finish_seen && !done_marker {
            return Err(StreamError::Truncated {
                provider: self.provider.clone(),
                expected: "finish_reason",
            });
        }
        self.done = true;
        let mut slots = std::mem::take(&mut self.slots);
        let abnormal_stop = self
            .finish_reason
            .as_deref()
            .filter(|reason| !NORMAL_FINISHES.contains(reason))
            .and_then(|reason| stop_text(reason, None));
        // Under any other finish (`length`, `content_filter`...) the call being written when the
        // output stopped was cut off: the one the last fragment went to.
        let cut = match self.last {
            Some(i) if abnormal_stop.is_some() && i < slots.len() => Some(slots.remove(i)),
            _ => None,
        };
        slots.sort_by_key(|s| s.index);
        let count = slots.len();
        let parts = slots
            .into_iter()
            .enumerate()
            .map(|(position, s)| s.into_part(position))
            .collect();
        Ok(vec![Chunk {
            parts,
            finished: true,
            usage: self.usage,
            response_id: self.response_id.take(),
            finish_reason: self.finish_reason.take(),
            abnormal_stop,
            cut_call: cut.map(|s| s.into_part(count)),
            ..Chunk::default()
        }])
    }
}

/// What a delta's `content` (or `refusal`) says aloud. A string is spoken. A list of typed parts
/// (Mistral's reasoning models, some gateways) speaks its `text` parts and never its `thinking`
/// (or other reasoning) parts. Reasoning sent beside the content (`reasoning_content`,
/// `reasoning`, `reasoning_details`: DeepSeek, Groq, vLLM, Ollama, OpenRouter) is never read
/// here: it is not spoken, and chat messages have no slot to send it back. A shape the decoder
/// does not know is logged once per kind ([`unknown_content`], docs/protocol.md §6.15).
fn spoken(content: &Value, parts: &mut Vec<Part>) {
    match content {
        Value::Null => {}
        Value::String(t) => {
            if !t.is_empty() {
                parts.push(Part::text(t));
            }
        }
        Value::Array(items) => {
            for item in items {
                let kind = item.get("type").and_then(Value::as_str);
                match (kind, item.get("text")) {
                    (Some("text" | "output_text"), Some(Value::String(t))) => {
                        if !t.is_empty() {
                            parts.push(Part::text(t));
                        }
                    }
                    (Some("thinking" | "reasoning" | "redacted_thinking"), _) => {}
                    _ => unknown_content(item),
                }
            }
        }
        other => unknown_content(other),
    }
}

/// A `content` shape no chat server is known to send: said once per kind (its `type`, or its JSON
/// type), for the first [`UNKNOWN_KINDS`] kinds a process meets, so a new shape is seen and a
/// server sending it in every delta writes one line, not a line per delta.
fn unknown_content(value: &Value) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let kind = match value.get("type").and_then(Value::as_str) {
        Some(t) => outside_n(t, 40).to_string(),
        None => match value {
            Value::Object(_) => "an object without a type".to_owned(),
            Value::Array(_) => "a list".to_owned(),
            Value::Bool(_) => "a boolean".to_owned(),
            Value::Number(_) => "a number".to_owned(),
            Value::String(_) | Value::Null => "a string".to_owned(),
        },
    };
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.len() >= UNKNOWN_KINDS || seen.contains(&kind) {
        return;
    }
    seen.push(kind.clone());
    drop(seen);
    let text = value.to_string();
    tracing::warn!(
        "chat completions: a delta's content has a shape this SDK does not read ({kind}), so it \
         is not spoken: {} (later ones of this kind are not logged)",
        outside(&text)
    );
}

/// How many kinds of unknown `content` a process logs (one line each) before it logs no more.
const UNKNOWN_KINDS: usize = 8;

/// A chat `usage` object → [`Usage`]. `output` is the reply's tokens without reasoning: OpenAI's
/// `completion_tokens` (and DeepSeek's, and most servers') counts reasoning inside it, so reasoning
/// is taken off; xAI's does not (`reasoning_outside`), so it is taken as sent. A count is never
/// hidden by the subtraction ([`visible_output`]).
pub(super) fn usage(u: &Value, reasoning_outside: bool) -> Usage {
    let reasoning = count(u, &["completion_tokens_details", "reasoning_tokens"]);
    Usage {
        input: count(u, &["prompt_tokens"]),
        cached_input: count(u, &["prompt_tokens_details", "cached_tokens"]),
        cache_write: count(u, &["cache_creation_input_tokens"])
            .or_else(|| count(u, &["prompt_tokens_details", "cache_creation_tokens"])),
        output: visible_output(
            count(u, &["completion_tokens"]),
            reasoning,
            !reasoning_outside,
        ),
        reasoning,
    }
}

impl Decoder for ChatDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.event(&event.data),
            SseItem::Bare(body) => Err(bare_error(
                &self.provider,
                &body,
                self.limits.max_kept_bytes,
            )),
        }
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            self.finish(false)
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

//! The conversation as the voice core keeps it, and what a model layer hands back while streaming.
//!
//! History is a list of [`Entry`]s (user turns, model turns, results turns), each holding [`Part`]s.
//! Model parts carry the provider's own JSON (`raw`) so signatures and encrypted reasoning are
//! replayed byte for byte; the fields the SDK reads (text, call name and arguments) sit beside it.
//! Entries have stable ids: the core finds a model turn again by id (to file a result right after
//! it, to drop an unanswered call, to apply what the user heard), never by comparing values.

use serde_json::Value;

use crate::tools::Arguments;

/// A history entry's stable id, unique within one conversation.
pub(crate) type EntryId = u64;

/// Who an entry speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The user's words, or a note the brain added (`append_note`).
    User,
    /// One model response: text, thoughts, calls, as the provider sent them.
    Model,
    /// The results of the calls of the model turn just before it.
    Results,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub id: EntryId,
    pub role: Role,
    pub parts: Vec<Part>,
    /// What the parts hold, in bytes ([`Part::bytes`] summed): kept up to date by the
    /// conversation for its byte bound; layers never read it.
    pub bytes: usize,
}

impl Entry {
    /// An entry whose [`bytes`](Self::bytes) are counted from its parts.
    pub(crate) fn new(id: EntryId, role: Role, parts: Vec<Part>) -> Entry {
        let bytes = parts.iter().map(Part::bytes).sum();
        Entry {
            id,
            role,
            parts,
            bytes,
        }
    }
}

/// One piece of a turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    /// Spoken text. `raw` is the provider's part object when it carries more than the text
    /// (Gemini: `{"text": .., "thoughtSignature": ..}`), else `Value::Null`. A layer renders the
    /// part from `text` (which heard truth may have rewritten), keeping every other key of `raw`.
    /// `trimmed` is set when heard truth rewrote or dropped text of this response.
    Text {
        text: String,
        raw: Value,
        trimmed: bool,
    },
    /// Reasoning: a Gemini part with `thought: true`, an OpenAI reasoning item. Never spoken,
    /// never rewritten by heard truth; replayed verbatim (within each provider's rules).
    Thought { raw: Value },
    /// A function call the model made. The layer renders its id, name and arguments from `call`
    /// (so the core can refuse a call by rewriting them) and replays whatever else the provider
    /// sent with it from `raw`: Gemini's part without the `functionCall`'s `id`, `name` and
    /// `args` (its `thoughtSignature` kept byte for byte); `Value::Null` where the provider sends
    /// nothing else (Responses, chat completions).
    Call { call: Call, raw: Value },
    /// Anything else the provider sent in a response (a signature on an empty text part, an
    /// unknown part type): kept and replayed, never spoken.
    Other { raw: Value },
    /// A call's result (only in [`Role::Results`] entries).
    Result(ToolResult),
}

impl Part {
    /// A plain text part (user turns, notes, remembered lines).
    pub(crate) fn text(text: impl Into<String>) -> Part {
        Part::Text {
            text: text.into(),
            raw: Value::Null,
            trimmed: false,
        }
    }

    /// What the part holds, in bytes: its text, ids, names, arguments and provider JSON (at its
    /// serialised size, roughly). What the conversation's byte bound counts.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Part::Text { text, raw, .. } => text.len() + json_bytes(raw),
            Part::Thought { raw } | Part::Other { raw } => json_bytes(raw),
            Part::Call { call, raw } => call.bytes() + json_bytes(raw),
            Part::Result(r) => {
                r.call_id.as_ref().map_or(0, String::len) + r.name.len() + json_bytes(&r.response)
            }
        }
    }
}

/// About how many bytes `value` takes serialised (exact for what `serde_json` writes compactly,
/// but for escapes): a walk, no allocation.
pub(crate) fn json_bytes(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_bytes(v) + 1).sum::<usize>(),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| k.len() + 4 + json_bytes(v))
                .sum::<usize>()
        }
    }
}

/// The bytes of a call's arguments as sent: the text's length, or a JSON value's
/// [`json_bytes`].
pub(crate) fn arguments_bytes(arguments: &Arguments) -> usize {
    match arguments {
        Arguments::Raw(text) => text.len(),
        Arguments::Json(value) => json_bytes(value),
    }
}

/// A function call as the SDK reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// The provider's call id (`call_id` on OpenAI, `functionCall.id` on Gemini when sent, the
    /// `tool_calls[].id` on chat completions). Results echo it.
    pub id: Option<String>,
    /// The function the model called.
    pub name: String,
    /// Its arguments as sent.
    pub arguments: Arguments,
}

impl Call {
    /// Its id, name and arguments, in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.id.as_ref().map_or(0, String::len) + self.name.len() + arguments_bytes(&self.arguments)
    }
}

/// The answer filed for one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    /// The call's id, echoed.
    pub call_id: Option<String>,
    /// The function's name, echoed (Gemini needs it).
    pub name: String,
    /// `{"result": ..}` or `{"error": ".."}`.
    pub response: Value,
}

/// One step of a streamed response, as a layer decoded it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Chunk {
    /// Parts in stream order. A call part is complete (runnable) when it appears here.
    pub parts: Vec<Part>,
    /// The response ended at this chunk (Gemini `finishReason`, Responses `response.completed` /
    /// `response.incomplete`, chat: the assembled calls after the stream's end).
    pub finished: bool,
    /// It ended because the model's output did not parse (Gemini `MALFORMED_FUNCTION_CALL`,
    /// `MALFORMED_RESPONSE`).
    pub malformed: bool,
    /// The request's usage so far; a later chunk's usage replaces an earlier one's.
    pub usage: Option<Usage>,
}

/// Tokens one request (or, summed, one turn) used. `None` means the provider did not report it,
/// which is different from 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input: Option<u64>,
    /// Prompt tokens served from a cache.
    pub cached_input: Option<u64>,
    /// Prompt tokens written to a cache.
    pub cache_write: Option<u64>,
    /// Output tokens: text and tool calls, reasoning excluded.
    pub output: Option<u64>,
    /// Reasoning ("thinking") tokens.
    pub reasoning: Option<u64>,
}

impl Usage {
    /// Field-wise sum: a field stays `None` only when both sides are `None`.
    // A named method rather than `std::ops::Add`: the `None`-keeping sum is not plain addition.
    #[allow(clippy::should_implement_trait)]
    #[must_use]
    pub fn add(self, other: Usage) -> Usage {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            }
        }
        Usage {
            input: sum(self.input, other.input),
            cached_input: sum(self.cached_input, other.cached_input),
            cache_write: sum(self.cache_write, other.cache_write),
            output: sum(self.output, other.output),
            reasoning: sum(self.reasoning, other.reasoning),
        }
    }

    /// The reported fields under their TurnStep count names (`input_tokens`,
    /// `cached_input_tokens`, `cache_write_tokens`, `output_tokens`, `reasoning_tokens`), in that
    /// order; unreported fields are left out, never sent as 0.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        [
            ("input_tokens", self.input),
            ("cached_input_tokens", self.cached_input),
            ("cache_write_tokens", self.cache_write),
            ("output_tokens", self.output),
            ("reasoning_tokens", self.reasoning),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// Which tools the model may call in one request. Tools stay declared in every mode (so the model
/// keeps reading their descriptions); only the permission changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// No tool may be called in this reply: speak.
    None,
    /// The model must call exactly this tool.
    Only(String),
}

impl ToolChoice {
    /// The model must call `name`.
    pub fn only(name: impl Into<String>) -> ToolChoice {
        ToolChoice::Only(name.into())
    }
}

/// Everything one model request is built from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestSpec<'a> {
    /// The system instruction, if any (a blank one is left out).
    pub instruction: Option<&'a str>,
    /// The conversation so far, oldest first.
    pub history: &'a [Entry],
    /// A user note for this request only, after the history (the "you wrote a call as text" retry
    /// note); never stored.
    pub note: Option<&'a str>,
    /// The tools declared in this request (all of them, whatever `choice` says).
    pub tools: &'a crate::tools::ToolSet,
    /// The permission for this request, already resolved (the forced last request is `None`).
    pub choice: &'a ToolChoice,
}

//! The conversation as the voice core keeps it, and what a model layer hands back while streaming.
//!
//! History is a list of [`Entry`]s (user turns, model turns, results turns), each holding [`Part`]s.
//! Model parts carry the provider's own JSON (`raw`) so signatures and encrypted reasoning are
//! replayed byte for byte to the layer that wrote them (see `origin`); the fields the SDK reads
//! (text, call name and arguments) sit beside it.
//! Entries have stable ids: the core finds a model turn again by id (to file a result right after
//! it, to file a call's result, to apply what the user heard), never by comparing values.

use serde_json::Value;

pub use super::origin::Origin;
use crate::tools::Arguments;

/// A history entry's stable id, unique within one conversation.
pub type EntryId = u64;

/// Who an entry speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The user's words, or a note the brain added (`append_note`).
    User,
    /// One model response: text, thoughts, calls, as the provider sent them.
    Model,
    /// The results of the calls of the model turn just before it.
    Results,
}

/// One turn of the conversation: who speaks and what, under an id stable for the whole call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Entry {
    /// Unique within the conversation.
    pub id: EntryId,
    /// Who speaks.
    pub role: Role,
    /// What, in order.
    pub parts: Vec<Part>,
    /// Which layer wrote it (a model turn of a response; `None` for every other entry): its
    /// provider's JSON goes back only to that layer (see [`Origin`]).
    pub origin: Option<Origin>,
    /// What the parts hold, in bytes ([`Part::bytes`] summed): kept up to date by the
    /// conversation for its byte bound; layers never read it.
    pub(crate) bytes: usize,
}

impl Entry {
    /// An entry whose held bytes are counted from its parts, of no origin (rendered as it is by
    /// any layer: [`Entry::with_origin`] marks a model turn as a layer's).
    pub fn new(id: EntryId, role: Role, parts: Vec<Part>) -> Entry {
        let bytes = parts.iter().map(Part::bytes).sum();
        Entry {
            id,
            role,
            parts,
            origin: None,
            bytes,
        }
    }
}

/// One piece of a turn. A layer's decoder makes the model's parts (the constructors below, or
/// the variants directly); the voice core makes the user's and the results.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Part {
    /// Spoken text. `raw` is the provider's part object when it carries more than the text
    /// (Gemini: `{"text": "", "thoughtSignature": ..}`, its text moved out into `text` and the
    /// key left empty in its place), else `Value::Null`. A layer renders the part from `text`
    /// (which heard truth may have rewritten), keeping every other key of `raw`.
    /// `trimmed` is set when heard truth rewrote or dropped text of this response.
    Text {
        /// The words.
        text: String,
        /// The provider's part, or `Value::Null`.
        raw: Value,
        /// Heard truth rewrote or dropped text of this response (a decoder sets `false`).
        trimmed: bool,
    },
    /// Reasoning: a Gemini part with `thought: true`, an OpenAI reasoning item. Never spoken,
    /// never rewritten by heard truth; replayed verbatim (within each provider's rules).
    Thought {
        /// The provider's part or item, replayed as it came.
        raw: Value,
    },
    /// A function call the model made. The layer renders its id, name and arguments from `call`
    /// (so the core can refuse a call by rewriting them) and replays whatever else the provider
    /// sent with it from `raw`: Gemini's part without the `functionCall`'s `id`, `name` and
    /// `args` (its `thoughtSignature` kept byte for byte); Responses: the `function_call` item as
    /// received (replayed verbatim after the reasoning that led to it); `Value::Null` where the
    /// provider sends nothing else (chat completions).
    Call {
        /// What the SDK reads and may rewrite.
        call: Call,
        /// What else the provider sent with it, or `Value::Null`.
        raw: Value,
    },
    /// Anything else the provider sent in a response (a signature on an empty text part, an
    /// unknown part type, a Responses `message` item whose text came as deltas): kept and
    /// replayed as each layer's rules say, never spoken.
    Other {
        /// The provider's part or item, replayed as each layer's rules say.
        raw: Value,
    },
    /// A call's result (only in [`Role::Results`] entries).
    Result(ToolResult),
}

impl Part {
    /// A plain text part (user turns, notes, remembered lines).
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text {
            text: text.into(),
            raw: Value::Null,
            trimmed: false,
        }
    }

    /// Plain text: words and nothing else (no signature, not rewritten by heard truth). Plain
    /// text right after plain text joins it in the history: one part, however many deltas.
    pub fn is_plain_text(&self) -> bool {
        matches!(
            self,
            Part::Text {
                raw: Value::Null,
                trimmed: false,
                ..
            }
        )
    }

    /// What the part costs held in the history, in bytes: its text, ids, names and arguments at
    /// their length, JSON at what it takes in memory (about 200 bytes an object entry), and the
    /// size of a `Part` for the part itself. What the conversation's byte bound counts, and a
    /// response's kept bytes.
    pub fn bytes(&self) -> usize {
        PART_BYTES
            + match self {
                Part::Text { text, raw, .. } => text.len() + json_bytes(raw),
                Part::Thought { raw } | Part::Other { raw } => json_bytes(raw),
                Part::Call { call, raw } => call.bytes() + json_bytes(raw),
                Part::Result(r) => {
                    r.call_id.as_ref().map_or(0, String::len)
                        + r.name.len()
                        + json_bytes(&r.response)
                }
            }
    }
}

/// What one part costs in its entry's list before anything it points to (about 200 bytes): a
/// tiny part the provider sent in 8 bytes still costs this.
pub(crate) const PART_BYTES: usize = std::mem::size_of::<Part>();

/// The memory of a JSON object before its entries (`serde_json`'s ordered map: its index table
/// and its entry list), about.
pub(crate) const OBJECT_BYTES: usize = 160;
/// The memory of one entry of a JSON object beyond its key's text and its value's own heap: the
/// entry with its hash, its key and its value in place, and its slot in the index, about.
pub(crate) const ENTRY_BYTES: usize = 200;
/// The memory of a JSON list before its items: the slack a growing list keeps, about.
pub(crate) const LIST_BYTES: usize = 144;

/// About what `value` takes in memory beyond its own place, in bytes: strings at their length,
/// each object and list with its overhead, each item with its place (`{"a":0}`, 7 bytes
/// serialised, takes some 360). With the place the value sits in, never less than it takes
/// serialised (but for escapes). A walk, no allocation.
pub(crate) fn json_bytes(value: &Value) -> usize {
    const VALUE: usize = std::mem::size_of::<Value>();
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len(),
        Value::Array(items) => {
            LIST_BYTES + items.iter().map(|v| VALUE + json_bytes(v)).sum::<usize>()
        }
        Value::Object(m) => {
            OBJECT_BYTES
                + m.iter()
                    .map(|(k, v)| ENTRY_BYTES + k.len() + json_bytes(v))
                    .sum::<usize>()
        }
    }
}

/// About how many bytes `value` takes serialised (exact for what `serde_json` writes compactly,
/// but for escapes): a walk, no allocation.
pub(crate) fn json_text_bytes(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_text_bytes(v) + 1).sum::<usize>(),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| k.len() + 4 + json_text_bytes(v))
                .sum::<usize>()
        }
    }
}

/// The bytes of a call's arguments as sent: the text's length, or a JSON value's
/// [`json_text_bytes`] (what `max_argument_bytes` counts).
pub(crate) fn arguments_bytes(arguments: &Arguments) -> usize {
    match arguments {
        Arguments::Raw(text) => text.len(),
        Arguments::Json(value) => json_text_bytes(value),
    }
}

/// What one response keeps in the history so far, counted as the conversation counts it: its
/// parts (plain text right after plain text joins it, adding its bytes and no part) and their
/// [`Part::bytes`]. The voice core's bounds on a response read it; a decoder keeps its own to
/// stop decoding past them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    /// Parts kept.
    pub parts: usize,
    /// Their bytes.
    pub bytes: usize,
    /// The last part kept is plain text: plain text next joins it.
    after_plain_text: bool,
}

impl Kept {
    /// The tally once `part` is kept after the parts counted so far.
    #[must_use]
    pub fn with(self, part: &Part) -> Kept {
        let plain = part.is_plain_text();
        let (parts, bytes) = match part {
            Part::Text { text, .. } if plain && self.after_plain_text => (0, text.len()),
            _ => (1, part.bytes()),
        };
        Kept {
            parts: self.parts + parts,
            bytes: self.bytes + bytes,
            after_plain_text: plain,
        }
    }
}

/// A function call as the SDK reads it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Call {
    /// The provider's call id (`call_id` on OpenAI, `functionCall.id` on Gemini when sent, the
    /// `tool_calls[].id` on chat completions). Results echo it.
    pub id: Option<String>,
    /// The function the model called.
    pub name: String,
    /// Its arguments as sent.
    pub arguments: Arguments,
}

impl Call {
    /// A call named `name` with `arguments` as sent, under the provider's call id if it gave one.
    pub fn new(id: Option<String>, name: impl Into<String>, arguments: Arguments) -> Call {
        Call {
            id,
            name: name.into(),
            arguments,
        }
    }

    /// Its id, name and arguments as held, in bytes (JSON arguments at what they take in memory).
    pub fn bytes(&self) -> usize {
        let arguments = match &self.arguments {
            Arguments::Raw(text) => text.len(),
            Arguments::Json(value) => json_bytes(value),
        };
        self.id.as_ref().map_or(0, String::len) + self.name.len() + arguments
    }
}

/// The answer filed for one call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolResult {
    /// The call's id, echoed.
    pub call_id: Option<String>,
    /// The function's name, echoed (Gemini needs it).
    pub name: String,
    /// `{"result": ..}` or `{"error": ".."}`.
    pub response: Value,
}

/// One step of a streamed response, as a layer decoded it. Outside this crate, make one with
/// [`Chunk::new`] and the `with_`/`ending` methods, or `Chunk::default()` and its fields.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Chunk {
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
    /// The decoder left something unread after these parts because it would have taken the
    /// response past what it may keep (`max_kept_bytes` held: one part, or a whole event): the
    /// core cuts the response here.
    pub too_big: bool,
    /// The provider's id of this response, on the chunk that carries it (Gemini `responseId`,
    /// Responses `response.id`, chat completions' `id`, Anthropic's message `id`, the
    /// interaction's `id`): the request span's `gen_ai.response.id`. A later one replaces it.
    pub response_id: Option<String>,
    /// Why the response ended, as the provider says it (`STOP`, `stop`, `end_turn`,
    /// `completed`...): the request span's `gen_ai.response.finish_reasons`.
    pub finish_reason: Option<String>,
    /// Why the response stopped, when it was not a normal end, as the provider said it: its
    /// reason, then any detail it gave in brackets (`MAX_TOKENS`, `SAFETY`, `length`,
    /// `content_filter`, `max_tokens`, `refusal (cyber: ...)`, `incomplete (max_output_tokens)`,
    /// `prompt blocked: PROHIBITED_CONTENT`); the core keeps its first 256 bytes. On the chunk
    /// that says it; the turn's `turn:` line names it (`stop=`, escaped and cut). A layer of your
    /// own leaves it `None` for the provider's normal ends (a reply finished, a call made).
    pub abnormal_stop: Option<String>,
    /// A call the stop cut off before its arguments were complete (the one being written when
    /// the output ended: a `tool_use` block, a step or a streamed call still open at the end, a
    /// chat call under `length`, a Responses item `incomplete`), as a [`Part::Call`] (any other
    /// part is ignored). Its tool never runs: the core keeps the call in the history with no
    /// arguments (`{}`) and answers it with an error the model reads, after the chunk's parts.
    pub cut_call: Option<Part>,
}

/// How many bytes of a response's id, finish reason or stop a chunk keeps (256).
pub(crate) const LABEL_BYTES: usize = 256;

/// A response's id or finish reason as a provider wrote it, when it is a string: kept to
/// [`LABEL_BYTES`] (a hostile provider's megabyte of id is not kept).
pub(crate) fn label(value: &Value) -> Option<String> {
    value.as_str().map(label_of)
}

/// `text` kept to [`LABEL_BYTES`], cut at a character boundary.
pub(crate) fn label_of(text: &str) -> String {
    text[..text.floor_char_boundary(LABEL_BYTES)].to_owned()
}

/// A stop that was not a normal end, as [`Chunk::abnormal_stop`] holds it: `reason`, then
/// `(detail)` when the provider gave one; `None` when `reason` is empty. Kept to
/// [`LABEL_BYTES`]: a provider's megabyte of explanation is not copied whole.
pub(crate) fn stop_text(reason: &str, detail: Option<&str>) -> Option<String> {
    if reason.is_empty() {
        return None;
    }
    Some(match detail.map(str::trim).filter(|d| !d.is_empty()) {
        Some(detail) => {
            let detail = label_of(detail);
            label_of(&format!("{reason} ({detail})"))
        }
        None => label_of(reason),
    })
}

impl Chunk {
    /// A step carrying `parts`, in stream order.
    pub fn new(parts: Vec<Part>) -> Chunk {
        Chunk {
            parts,
            ..Chunk::default()
        }
    }

    /// A step where the decoder stopped because what followed would not fit what the response may
    /// keep ([`DecodeLimits::max_kept_bytes`](super::layer::DecodeLimits)): the core cuts there.
    pub fn cut() -> Chunk {
        Chunk {
            too_big: true,
            ..Chunk::default()
        }
    }

    /// The same step, ending the response (`malformed`: because the model's output did not parse).
    #[must_use]
    pub fn ending(mut self, malformed: bool) -> Chunk {
        self.finished = true;
        self.malformed = malformed;
        self
    }

    /// The same step, reporting the request's usage so far.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Chunk {
        self.usage = Some(usage);
        self
    }
}

/// Tokens one request (or, summed, one turn) used. `None` means the provider did not report it,
/// which is different from 0. Outside this crate, start from `Usage::default()` and set fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The largest token count one request may report in any field: 100,000,000, some fifty
    /// times the largest context window offered. A count above it is a provider's bug, not
    /// tokens used (a count near 2^64 once summed would wrap a metrics counter back to a few
    /// thousand, which Prometheus reads as a reset): the voice core leaves it out as if it was
    /// never reported (no TurnStep count, nothing on the `turn:` line or the request's span,
    /// nothing added to `voqalize_model_tokens_total`) and logs it, once per session and then a
    /// count.
    pub const MAX_COUNT: u64 = 100_000_000;

    /// The same usage with every count above [`MAX_COUNT`](Self::MAX_COUNT) left out, and the
    /// first such count: its TurnStep name and value.
    pub(crate) fn bounded(mut self) -> (Usage, Option<(&'static str, u64)>) {
        let mut over = None;
        for (name, field) in [
            ("input_tokens", &mut self.input),
            ("cached_input_tokens", &mut self.cached_input),
            ("cache_write_tokens", &mut self.cache_write),
            ("output_tokens", &mut self.output),
            ("reasoning_tokens", &mut self.reasoning),
        ] {
            if let Some(n) = *field
                && n > Self::MAX_COUNT
            {
                *field = None;
                over.get_or_insert((name, n));
            }
        }
        (self, over)
    }

    /// The output tokens as billed: the reply's and its reasoning, summed without overflow
    /// (`None` when the output was not reported).
    pub(crate) fn billed_output(&self) -> Option<u64> {
        self.output
            .map(|n| n.saturating_add(self.reasoning.unwrap_or(0)))
    }

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

/// Everything one model request is built from: what [`Layer::build`](super::layer::Layer::build)
/// renders in its provider's shape.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RequestSpec<'a> {
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
    /// The history as a layer last rendered it, kept between requests by the conversation
    /// (`model::rendered`); `None` renders every entry.
    pub(crate) rendered: Option<&'a super::rendered::Rendered>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plain_text_after_plain_text_joins_it_and_every_other_part_counts() {
        let signed = Part::Text {
            text: "B".into(),
            raw: json!({"text": "B", "thoughtSignature": "c2ln"}),
            trimmed: false,
        };
        let parts = [
            Part::text("Hel"),
            Part::text("lo"),
            signed.clone(),
            Part::text("C"),
            Part::Other {
                raw: json!({"a": 0}),
            },
            Part::text("D"),
        ];
        let kept = parts.iter().fold(Kept::default(), |kept, p| kept.with(p));
        assert_eq!(kept.parts, 5);
        let joined = Part::text("Hello").bytes() + signed.bytes() + Part::text("C").bytes();
        assert_eq!(
            kept.bytes,
            joined + parts[4].bytes() + parts[5].bytes(),
            "joined text adds its words only"
        );
    }

    #[test]
    fn json_counts_what_it_takes_held_and_never_less_than_its_text() {
        let tiny = json!({"a": 0});
        assert!(json_bytes(&tiny) > 300, "{}", json_bytes(&tiny));
        assert!(Part::Other { raw: tiny }.bytes() > 500);
        for value in [
            json!(null),
            json!("some words"),
            json!([1, 2.5, true, null]),
            json!({"x": [{"a": 0}, {"b": [{}]}], "y": "z"}),
        ] {
            let held = std::mem::size_of::<Value>() + json_bytes(&value);
            assert!(held >= value.to_string().len(), "{value}");
        }
    }
}

//! What a model layer is to the voice core, and what a layer of your own implements: [`Layer`]
//! builds one provider request from a [`RequestSpec`] and hands out a [`Decoder`] that turns that
//! provider's stream into [`Chunk`]s.
//!
//! The core is provider-neutral; everything that differs between providers (URLs, headers, JSON
//! shapes, event names, usage fields) lives behind this trait. What is the same for every
//! provider the core does around it, so a layer gets it for nothing: the pooled HTTP/1.1 client
//! with its connect, first-byte and gap timers ([`Timeouts`]) and its one retry before the first
//! byte, the byte bound on a response, our server-sent events parser (each event, or a bare JSON
//! body, reaches [`Decoder::item`] as an [`SseItem`]), the bounds on what one response may keep
//! ([`DecodeLimits`]), heard truth, the tool loop, TurnSteps and logs. Every built-in layer
//! (Gemini, Interactions, OpenAI Responses, Anthropic, chat completions) is built on exactly this
//! trait.
//!
//! What the core does to the history a layer renders: heard truth rewrites a model turn to what
//! the user heard, and puts the heard words in its first text part, so text the model said after
//! a call can come before that call in the next request (the call and its result stay paired and
//! in order). Render the parts in the order they are.
//!
//! What a layer must get right, and how to prove it: the layer conformance kit,
//! `voqalize_testing::LayerKit` (the `voqalize-testing` crate), runs the scripted cases the built-in
//! layers pass against any layer in one call.
//!
//! # Examples
//!
//! A layer for a provider that streams `data: {"text": ".."}` events and ends with
//! `data: {"done": true}` (calls and usage left out for brevity):
//!
//! ```
//! use serde_json::json;
//! use voqalize::model::layer::{
//!     Chunk, DecodeLimits, Decoder, HttpRequest, Layer, Part, RequestSpec, Role, SseItem,
//!     StreamError, parse_event,
//! };
//!
//! struct Tiny;
//!
//! impl Layer for Tiny {
//!     fn provider(&self) -> &str { "tiny" }
//!     fn model(&self) -> &str { "tiny-1" }
//!     fn base_url(&self) -> &str { "http://127.0.0.1:9" }
//!     fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError> {
//!         let mut said = Vec::new();
//!         for entry in spec.history {
//!             for part in &entry.parts {
//!                 if let Part::Text { text, .. } = part {
//!                     let role = if entry.role == Role::Model { "model" } else { "user" };
//!                     said.push(json!({"role": role, "text": text}));
//!                 }
//!             }
//!         }
//!         let body = json!({"system": spec.instruction, "messages": said});
//!         Ok(HttpRequest::json("http://127.0.0.1:9/stream", Vec::new(), &body))
//!     }
//!     fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
//!         Box::new(TinyDecoder { limits, done: false })
//!     }
//! }
//!
//! struct TinyDecoder { limits: DecodeLimits, done: bool }
//!
//! impl Decoder for TinyDecoder {
//!     fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
//!         let SseItem::Event(event) = item else { return Ok(Vec::new()) };
//!         // Read within what the response may keep: `None` means it would not fit.
//!         let Some(data) = parse_event("tiny", &event.data, self.limits.max_kept_bytes)? else {
//!             return Ok(vec![Chunk::cut()]);
//!         };
//!         if data["done"] == true {
//!             self.done = true;
//!             return Ok(vec![Chunk::new(Vec::new()).ending(false)]);
//!         }
//!         match data["text"].as_str() {
//!             Some(text) => Ok(vec![Chunk::new(vec![Part::text(text)])]),
//!             None => Ok(Vec::new()),
//!         }
//!     }
//!     fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
//!         if self.done { Ok(Vec::new()) } else { Err(StreamError::truncated("tiny", "done")) }
//!     }
//!     fn done(&self) -> bool { self.done }
//! }
//!
//! let model = voqalize::voice::Model::new(Tiny);
//! # let _ = model;
//! ```

pub use super::error::StreamError;
pub use super::history::{
    Call, Chunk, Entry, EntryId, Kept, Origin, Part, RequestSpec, Role, ToolChoice, ToolResult,
    Usage,
};
pub use super::http::{HttpRequest, Timeouts};
pub use super::http_options::HttpOptions;
pub use super::sse::{SseEvent, SseItem};
/// A call's arguments (for [`Call::new`]) and the schema dialects of tool declarations (for
/// `ToolDecl::parameters`), here for a layer's convenience.
pub use crate::tools::{Arguments, Dialect};

/// A provider: how one model request is built and how its stream is read.
///
/// Implement it for a provider the SDK does not ship, then `Model::new(your_layer)`: the voice
/// core drives it exactly as it drives the built-in layers. Every method is called from the
/// session's tasks, so a layer is shared (`Send + Sync`) and cheap to call; hold what the
/// builder checked (URL, headers, model) and render per request only what changes.
pub trait Layer: Send + Sync + 'static {
    /// Who serves the model, for TurnSteps and logs: `google`, `openai`, `anthropic`, or your
    /// company's name. Short, lowercase.
    fn provider(&self) -> &str;
    /// The model as configured (what TurnSteps and the `turn:` line name).
    fn model(&self) -> &str;
    /// The request format this layer writes and reads, for the history: a model turn keeps its
    /// provider's own JSON (signatures, encrypted reasoning, thinking blocks) and replays it only
    /// to a layer of the same format and the same [`model`](Self::model); any other layer is sent
    /// that turn neutrally (its words, its calls and their results), since no provider accepts
    /// another's signed reasoning. The built-in layers say `google.generateContent` (Gemini),
    /// `google.interactions` (Interactions), `openai.responses` (OpenAI), `anthropic.messages`
    /// (Anthropic) and `chat.completions` (Chat, whatever its provider).
    ///
    /// Default: [`provider`](Self::provider), which never equals a built-in format. Override it
    /// when two of your layers for one provider write different JSON, or when your layer writes
    /// and reads a built-in format's parts as they are.
    fn format(&self) -> &str {
        self.provider()
    }
    /// The base URL, warmed (one `HEAD`, so the TLS handshake is done) when a session starts.
    fn base_url(&self) -> &str;
    /// Connect, first-byte and between-event timeouts. Default: [`Timeouts::default`].
    fn timeouts(&self) -> Timeouts {
        Timeouts::default()
    }
    /// Builds the HTTP request for one model request: the instruction, the history (heard truth
    /// already applied: render text from [`Part::Text::text`], replay `raw` as your provider's
    /// rules say), the tools and the tool choice of `spec`. A model turn another layer wrote
    /// ([`Entry::foreign_to`]) reaches it already without that layer's JSON: its text and calls
    /// with `raw` null, ids every provider takes, no thoughts.
    ///
    /// # Errors
    /// A history or a tool choice the provider cannot express ([`StreamError::unbuildable`]);
    /// the turn then fails as any failed request does.
    fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError>;
    /// A fresh decoder for one response stream, holding no more than `limits` lets through.
    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder>;
    /// The HTTP options (a proxy, extra root certificates) the transport uses for this layer's
    /// requests and its warm-up; default: none. Their extra headers are the layer's to send.
    fn http(&self) -> Option<&HttpOptions> {
        None
    }
    /// Whether this provider's declarations carry every enum as strings (Gemini), so the core
    /// turns the model's strings back into the neutral schema's values before a tool reads them
    /// (docs/protocol.md §6.15). Default: false.
    fn enums_as_strings(&self) -> bool {
        false
    }
}

/// What a decoder may hold of one response, set by the voice core from its bounds
/// (docs/protocol.md §6.14). The core decides what a call past a bound gets and where a response
/// is cut; a decoder only keeps its memory within the same numbers, so it hands the core enough
/// to see a bound trip and no more: at most `max_calls + 1` calls, each with at most
/// `max_argument_bytes + 1` bytes of arguments assembled from fragments, and no part after the
/// one that took the response past `max_parts` parts or `max_kept_bytes` bytes (counted as the
/// history keeps them, [`Kept`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeLimits {
    /// The most calls the core runs from one response.
    pub max_calls: usize,
    /// The most bytes of one call's arguments the core takes.
    pub max_argument_bytes: usize,
    /// The most parts the core keeps of one response.
    pub max_parts: usize,
    /// The most bytes the core keeps of one response, as the history counts them.
    pub max_kept_bytes: usize,
}

impl DecodeLimits {
    /// Limits of these sizes: what a decoder is handed by the core (for a test of your own
    /// decoder; the core sets them from the `Model`'s bounds).
    pub fn new(
        max_calls: usize,
        max_argument_bytes: usize,
        max_parts: usize,
        max_kept_bytes: usize,
    ) -> DecodeLimits {
        DecodeLimits {
            max_calls,
            max_argument_bytes,
            max_parts,
            max_kept_bytes,
        }
    }

    /// No bound a test or a benchmark would reach.
    pub(crate) const UNBOUNDED: DecodeLimits = DecodeLimits {
        max_calls: usize::MAX - 1,
        max_argument_bytes: usize::MAX - 1,
        max_parts: usize::MAX - 1,
        max_kept_bytes: usize::MAX - 1,
    };

    /// Whether a response that kept `kept` is past a bound: nothing after it need be decoded.
    pub fn passed(&self, kept: Kept) -> bool {
        kept.parts > self.max_parts || kept.bytes > self.max_kept_bytes
    }
}

/// Decodes one provider response stream, item by item. The core calls [`item`](Self::item) for
/// each event until [`done`](Self::done) says the terminal event was seen or the stream ends,
/// then [`end`](Self::end) once.
pub trait Decoder: Send {
    /// One SSE item (an event, or a bare JSON body) → zero or more chunks.
    ///
    /// # Errors
    /// A provider error event or body, an event that is not the JSON the provider documents.
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError>;
    /// The stream ended: what is still pending (chat completions' assembled calls).
    ///
    /// # Errors
    /// [`StreamError::Truncated`] when the provider's terminal event never came.
    fn end(&mut self) -> Result<Vec<Chunk>, StreamError>;
    /// True once the terminal event was seen (`[DONE]`, `response.completed`...): the core stops
    /// reading.
    fn done(&self) -> bool;
}

/// One event's JSON, read within `budget` bytes of memory (as the history counts them): `None`
/// when it would take more; it is then read through, never held. A decoder reads each event
/// with `limits.max_kept_bytes` as its budget and answers a `None` with [`Chunk::cut`], so a
/// provider can never make it hold more than a response may keep.
///
/// # Errors
/// JSON that does not parse ([`StreamError::Malformed`], naming `provider`).
pub fn parse_event(
    provider: &str,
    data: &str,
    budget: usize,
) -> Result<Option<serde_json::Value>, StreamError> {
    super::within::parse_within(provider, data, budget)
}

/// A provider's error object (`{"message", "type"|"status", "code"}`) as one line,
/// `message (type, code)`, for [`StreamError::provider`].
pub fn error_message(error: &serde_json::Value) -> String {
    super::error::error_message(error)
}

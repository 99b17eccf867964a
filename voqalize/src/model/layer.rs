//! What a model layer is to the voice core: it builds one provider request from a
//! [`RequestSpec`] and decodes that provider's stream into [`Chunk`]s.
//!
//! The core is provider-neutral; everything that differs between Gemini, OpenAI Responses and chat
//! completions (URLs, headers, JSON shapes, event names, usage fields) lives behind this trait.

use super::history::{Chunk, RequestSpec};
use super::http::{HttpRequest, Timeouts};
use super::sse::SseItem;

/// A provider: Gemini, OpenAI Responses, or an OpenAI-compatible chat-completions endpoint.
pub(crate) trait Layer: Send + Sync + 'static {
    /// Who serves the model, for TurnSteps: `google`, `openai`, or the company of a chat route.
    fn provider(&self) -> &str;
    /// The model as configured (what TurnSteps and the `turn:` line name).
    fn model(&self) -> &str;
    /// The base URL, warmed when a session starts.
    fn base_url(&self) -> &str;
    /// Connect, first-byte and between-event timeouts.
    fn timeouts(&self) -> Timeouts;
    /// Builds the HTTP request for one model request.
    ///
    /// # Errors
    /// A history the provider cannot express (never expected from the core's own history).
    fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError>;
    /// A fresh decoder for one response stream, holding no more than `limits` lets through.
    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder>;
    /// Whether this provider's declarations carry every enum as strings (Gemini), so the core
    /// turns the model's strings back into the neutral schema's values before a tool reads them
    /// (docs/protocol.md §6.15).
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
/// history keeps them, [`Kept`](super::history::Kept)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeLimits {
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
    /// No bound a test or a benchmark would reach.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) const UNBOUNDED: DecodeLimits = DecodeLimits {
        max_calls: usize::MAX - 1,
        max_argument_bytes: usize::MAX - 1,
        max_parts: usize::MAX - 1,
        max_kept_bytes: usize::MAX - 1,
    };

    /// Whether a response that kept `kept` is past a bound: nothing after it need be decoded.
    pub(crate) fn passed(&self, kept: super::history::Kept) -> bool {
        kept.parts > self.max_parts || kept.bytes > self.max_kept_bytes
    }
}

/// Decodes one provider response stream, item by item.
pub(crate) trait Decoder: Send {
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

/// What went wrong inside a provider's stream (HTTP-level failures are `ModelError`s of the
/// transport).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The provider reported an error inside the stream (an `error` event, `response.failed`, a
    /// Gemini `{"error": ..}` chunk or bare body).
    #[error("{provider} reported an error: {message}")]
    Provider {
        /// `google`, `openai`, or the chat route's company.
        provider: String,
        /// The provider's message (status and code included when given), at most 1 KiB of it.
        message: String,
    },
    /// An event that is not the JSON the provider documents.
    #[error("malformed {provider} event")]
    Malformed {
        /// The provider.
        provider: String,
        /// Why it did not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The stream ended before the provider's terminal event.
    #[error("the {provider} stream ended before its {expected}")]
    Truncated {
        /// The provider.
        provider: String,
        /// The event that never came, such as `finishReason` or `[DONE]`.
        expected: &'static str,
    },
    /// The request could not be built (the history or the tool choice is one the provider
    /// cannot express).
    #[error("could not build the {provider} request: {why}")]
    Unbuildable {
        /// The provider.
        provider: String,
        /// Why.
        why: String,
    },
}

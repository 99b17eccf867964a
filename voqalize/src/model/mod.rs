//! Model layers: the providers a model-backed brain talks to, and the transport beneath them.
//!
//! [`Gemini`] (and its [`Interactions`] API), [`OpenAi`] (Responses API), [`Anthropic`] (Messages
//! API) and [`Chat`] (any OpenAI-compatible `/chat/completions` endpoint) each build one provider
//! request from the conversation and decode that provider's stream; the voice core drives them the
//! same way, and a [`layer::Layer`] of your own too. Each provider is a folder of three jobs: the
//! layer and its builder (`mod.rs`), the request (`request.rs`), the stream decoder (`decode.rs`).
//!
//! * `history`: the conversation as provider-native parts, and what a layer decodes from a stream;
//! * `origin`: which layer wrote each model turn, and the history as another layer may be sent it;
//! * [`layer`]: what a provider layer is to the voice core, and what a layer of your own implements;
//! * `render`: the JSON helpers and construction checks the layers share;
//! * `body`: a request body as a tree borrowing from the history, serialised straight to bytes;
//! * `sse`: our Server-Sent Events parser (sans IO), tolerant of what model APIs really send;
//! * `error`: what goes wrong inside a provider's stream, and its constructors (the bottom file);
//! * `within`: reading a provider's JSON within a budget of memory;
//! * `endpoint`: where a layer's requests go: the URL, the headers, a bearer token asked for per
//!   request;
//! * `http_options`: [`HttpOptions`] (a proxy, extra root certificates, extra headers);
//! * `http`: the one pooled HTTP/1.1 client per process, the connect / first-byte / gap timers,
//!   the byte bound per response, and the single retry before the first byte.
//!
//! Built with the `model` cargo feature (on by default), which brings in reqwest and rustls.
#![cfg(feature = "model")]

pub(crate) mod anthropic;
pub(crate) mod body;
pub(crate) mod chat;
pub(crate) mod endpoint;
pub(crate) mod error;
pub(crate) mod gemini;
pub(crate) mod history;
pub(crate) mod http;
pub(crate) mod http_options;
pub(crate) mod interactions;
pub mod layer;
pub(crate) mod openai;
pub(crate) mod origin;
pub(crate) mod partial_args;
pub(crate) mod render;
pub(crate) mod rendered;
pub(crate) mod sse;
pub(crate) mod within;

pub use anthropic::{Anthropic, AnthropicBuilder};
pub use chat::{Chat, ChatBuilder};
pub use gemini::{Gemini, GeminiBuilder};
pub use history::ToolChoice;
pub(crate) use http::ModelError;
pub use http::Timeouts;
pub use http_options::HttpOptions;
pub use interactions::{Interactions, InteractionsBuilder};
pub use openai::{OpenAi, OpenAiBuilder};
pub use render::LayerError;

#[cfg(test)]
#[path = "tests/support.rs"]
// Shared by the three layers' tests; each uses a different subset.
#[allow(dead_code)]
mod test_support;

#[cfg(test)]
#[path = "tests/stops.rs"]
mod stops_tests;

#[cfg(test)]
#[path = "tests/crossing.rs"]
mod crossing_tests;

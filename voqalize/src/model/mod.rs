//! Model layers: the providers a model-backed brain talks to, over HTTP and Server-Sent Events.
//!
//! [`Gemini`], [`OpenAi`] (Responses API) and [`Chat`] (any OpenAI-compatible
//! `/chat/completions` endpoint) each build one provider request from the conversation and
//! decode that provider's stream; the voice core drives them the same way.

// The voice core that drives these modules is written separately and lands later.
#[allow(dead_code)]
pub(crate) mod chat;
#[allow(dead_code)]
pub(crate) mod gemini;
#[allow(dead_code)]
pub(crate) mod history;
#[allow(dead_code)]
pub(crate) mod http;
#[allow(dead_code)]
pub(crate) mod layer;
#[allow(dead_code)]
pub(crate) mod openai;
#[allow(dead_code)]
pub(crate) mod render;
#[allow(dead_code)]
pub(crate) mod sse;

pub use chat::{Chat, ChatBuilder};
pub use gemini::{Gemini, GeminiBuilder};
pub use history::{ToolChoice, Usage};
pub use http::Timeouts;
pub use layer::StreamError;
pub use openai::{OpenAi, OpenAiBuilder};
pub use render::LayerError;

#[cfg(test)]
#[path = "tests/support.rs"]
// Shared by the three layers' tests; each uses a different subset.
#[allow(dead_code)]
mod test_support;

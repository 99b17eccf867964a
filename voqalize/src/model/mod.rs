//! Model layers: the providers a model-backed brain talks to, over HTTP and Server-Sent Events.

pub(crate) mod history;
pub(crate) mod http;
pub(crate) mod layer;
pub(crate) mod sse;

pub use history::{ToolChoice, Usage};
pub use http::Timeouts;
pub use layer::StreamError;

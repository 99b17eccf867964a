//! Model-backed brains: the provider layers and the transport beneath them.
//!
//! * `sse`: our Server-Sent Events parser (sans IO), tolerant of what model APIs really send.
//! * `http`: the one pooled HTTP/1.1 client per process, the connect / first-byte / gap timers,
//!   and the single retry before the first byte.
//!
//! Built with the `model` cargo feature (on by default), which brings in reqwest and rustls.
#![cfg(feature = "model")]
// The provider layers that call this transport are written beside it; until they land, only the
// tests use it.
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod http;
pub(crate) mod sse;

pub use http::{ModelError, Timeouts};
pub use sse::SseError;

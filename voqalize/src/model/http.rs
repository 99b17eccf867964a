//! STUB for the layers worktree: the real transport is written in another worktree and replaces
//! this file at merge. Only the two types the layers need are here, with their final shapes.

use std::time::Duration;

/// One model request, ready to send.
#[derive(Debug, Clone)]
pub(crate) struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
}

/// The three timers of a model request.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TCP + TLS connect (default 10 s).
    pub connect: Duration,
    /// From sending to the response head (default 10 s).
    pub first_byte: Duration,
    /// Between two events of a stream (default 30 s).
    pub gap: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(10),
            gap: Duration::from_secs(30),
        }
    }
}

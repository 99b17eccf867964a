//! [`Channel`]: the small transport trait a session runs over. One binary message carries one
//! `Envelope`; a text message is ignored. Implement it to host a brain on any WebSocket library, or
//! use the ready adapters (`host::axum`, `host::tungstenite`, behind their features) or the in-memory pair in
//! the `voqalize-testing` crate.

use std::future::Future;

/// A transport failure, wrapping the transport's own error.
#[derive(Debug, thiserror::Error)]
#[error("the transport failed")]
pub struct ChannelError {
    #[source]
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
    close_code: Option<u16>,
    /// Why the call ends, when the transport knows better than "it failed" (the relay leg).
    ending: Option<crate::session::EndReason>,
}

impl ChannelError {
    /// Wraps any error.
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ChannelError {
            source: Box::new(e),
            close_code: None,
            ending: None,
        }
    }

    /// The transport ends the call for `reason` (shutdown, or the relay's connection lost).
    pub(crate) fn ending(reason: crate::session::EndReason) -> Self {
        ChannelError {
            source: reason.to_string().into(),
            close_code: None,
            ending: Some(reason),
        }
    }

    /// Why the call ends, when the transport said.
    pub(crate) fn end_reason(&self) -> Option<&crate::session::EndReason> {
        self.ending.as_ref()
    }

    /// A received message was bigger than the limit: the session ends and the connection is
    /// closed with 1009 ("message too big").
    pub fn too_big(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ChannelError {
            source: Box::new(e),
            close_code: Some(CLOSE_TOO_BIG),
            ending: None,
        }
    }

    /// The WebSocket close code this failure calls for, when it calls for one.
    pub fn close_code(&self) -> Option<u16> {
        self.close_code
    }
}

/// Close code after a call ended normally.
pub const CLOSE_NORMAL: u16 = 1000;

/// Close code for an inbound message over the size limit.
pub const CLOSE_TOO_BIG: u16 = 1009;

/// Close code after the brain ended the call because it could not send a frame it built (one over
/// the socket's message limit): it sent `Error{INTERNAL, fatal}` and `End` in its place.
pub const CLOSE_INTERNAL: u16 = 1011;

/// One inbound WebSocket message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A binary message: one serialized `Envelope`.
    Binary(bytes::Bytes),
    /// A text message (logged and ignored by the session).
    Text(String),
    /// A Pong: the peer is alive (answers to [`ChannelSender::ping`] keep an idle call open).
    Pong,
}

/// A bidirectional message channel that splits into a sending and a receiving half, so the session
/// can read and write concurrently.
pub trait Channel: Send + 'static {
    /// The sending half.
    type Sender: ChannelSender;
    /// The receiving half.
    type Receiver: ChannelReceiver;
    /// Splits the channel.
    fn split(self) -> (Self::Sender, Self::Receiver);
}

/// The sending half of a [`Channel`].
pub trait ChannelSender: Send + 'static {
    /// Sends one binary message.
    fn send(&mut self, frame: Vec<u8>) -> impl Future<Output = Result<(), ChannelError>> + Send;

    /// Queues one binary message to go out with the next [`ChannelSender::flush`]. The session
    /// feeds every frame that is ready, then flushes once, so that a transport that can batch
    /// writes sends a turn's frames in one system call. The default sends at once.
    fn feed(&mut self, frame: Vec<u8>) -> impl Future<Output = Result<(), ChannelError>> + Send {
        self.send(frame)
    }

    /// Sends what [`ChannelSender::feed`] queued. The default has nothing to send.
    fn flush(&mut self) -> impl Future<Output = Result<(), ChannelError>> + Send {
        async { Ok(()) }
    }
    /// Sends a WebSocket Ping; the peer's Pong arrives as [`Incoming::Pong`]. The session pings an
    /// idle peer so that a half-open connection ends. The default does nothing (a transport
    /// without pings, such as an in-process pipe).
    fn ping(&mut self) -> impl Future<Output = Result<(), ChannelError>> + Send {
        async { Ok(()) }
    }

    /// Closes the channel with a WebSocket close code and reason; errors are ignored (the peer
    /// may be gone).
    fn close(&mut self, code: u16, reason: &str) -> impl Future<Output = ()> + Send;
}

/// The receiving half of a [`Channel`].
pub trait ChannelReceiver: Send + 'static {
    /// The next message; `None` or an error ends the session.
    fn recv(&mut self) -> impl Future<Output = Option<Result<Incoming, ChannelError>>> + Send;
}

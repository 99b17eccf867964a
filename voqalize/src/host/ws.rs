//! [`Channel`] over a tokio-tungstenite `WebSocketStream`: what [`serve`](super::serve) runs each
//! call over, and, with the feature `tungstenite`, public as
//! [`host::tungstenite::TungsteniteChannel`](super::tungstenite) for a server of your own.
#![cfg_attr(
    not(feature = "tungstenite"),
    allow(
        dead_code,
        unreachable_pub,
        reason = "public through host::tungstenite, with its feature"
    )
)]

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::coalesce::Coalesced;
#[cfg(doc)]
use super::run_session;
use super::{Channel, ChannelError, ChannelReceiver, ChannelSender, Incoming};

/// [`Channel`] over a tokio-tungstenite [`WebSocketStream`], for running a call with
/// [`run_session`] over a socket you accepted yourself (configure it with
/// `websocket_config`). The adapter names tokio-tungstenite's types by design: it follows that
/// crate's major version.
pub struct TungsteniteChannel<S>(WebSocketStream<S>);

impl<S> TungsteniteChannel<S> {
    /// The channel over an accepted socket.
    pub fn new(socket: WebSocketStream<S>) -> Self {
        TungsteniteChannel(socket)
    }

    /// The socket back.
    pub fn into_inner(self) -> WebSocketStream<S> {
        self.0
    }
}

impl TungsteniteChannel<Coalesced<TcpStream>> {
    /// The channel of an accepted call, whose writes from now on wait for the writer's flush.
    pub(crate) fn batched(mut ws: WebSocketStream<Coalesced<TcpStream>>) -> Self {
        ws.get_mut().batch();
        TungsteniteChannel(ws)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Channel for TungsteniteChannel<S> {
    type Sender = TungsteniteSender<S>;
    type Receiver = TungsteniteReceiver<S>;
    fn split(self) -> (Self::Sender, Self::Receiver) {
        let (tx, rx) = self.0.split();
        (TungsteniteSender(tx), TungsteniteReceiver(rx))
    }
}

/// The sending half of a [`TungsteniteChannel`].
pub struct TungsteniteSender<S>(SplitSink<WebSocketStream<S>, Message>);
/// The receiving half of a [`TungsteniteChannel`].
pub struct TungsteniteReceiver<S>(SplitStream<WebSocketStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> ChannelSender for TungsteniteSender<S> {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.0
            .send(Message::Binary(frame.into()))
            .await
            .map_err(ChannelError::new)
    }

    async fn feed(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.0
            .feed(Message::Binary(frame.into()))
            .await
            .map_err(ChannelError::new)
    }

    async fn flush(&mut self) -> Result<(), ChannelError> {
        SinkExt::flush(&mut self.0).await.map_err(ChannelError::new)
    }

    async fn ping(&mut self) -> Result<(), ChannelError> {
        self.0
            .send(Message::Ping(Default::default()))
            .await
            .map_err(ChannelError::new)
    }

    async fn close(&mut self, code: u16, reason: &str) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: reason.into(),
        };
        let _ = self.0.send(Message::Close(Some(frame))).await;
        let _ = self.0.close().await;
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> ChannelReceiver
    for TungsteniteReceiver<S>
{
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        loop {
            return match self.0.next().await? {
                Ok(Message::Binary(b)) => Some(Ok(Incoming::Binary(b))),
                Ok(Message::Text(t)) => Some(Ok(Incoming::Text(t.as_str().to_owned()))),
                Ok(Message::Close(_)) => None,
                Ok(Message::Pong(_)) => Some(Ok(Incoming::Pong)),
                Ok(_) => continue,
                Err(e) => Some(Err(channel_error(e))),
            };
        }
    }
}

/// A read failure as the session sees it: a message over the size limit calls for close 1009.
pub(crate) fn channel_error(e: tokio_tungstenite::tungstenite::Error) -> ChannelError {
    match e {
        tokio_tungstenite::tungstenite::Error::Capacity(_) => ChannelError::too_big(e),
        e => ChannelError::new(e),
    }
}

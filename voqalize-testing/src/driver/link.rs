//! The driver's end of the connection: an in-memory pipe to a brain in this process, or a real
//! WebSocket to a brain on a socket.

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::DriverError;
use crate::memory::Msg;

pub(super) enum Link {
    Memory {
        tx: tokio::sync::mpsc::UnboundedSender<Msg>,
        rx: tokio::sync::mpsc::UnboundedReceiver<Msg>,
    },
    Socket(Box<WebSocketStream<TcpStream>>),
}

pub(super) enum Event {
    Bytes(bytes::Bytes),
    Closed(Option<u16>, String),
}

impl Link {
    pub(super) async fn send(&mut self, bytes: Vec<u8>) -> Result<(), DriverError> {
        let closed = |reason: String| DriverError::Closed { code: None, reason };
        match self {
            Link::Memory { tx, .. } => tx
                .send(Msg::Binary(bytes.into()))
                .map_err(|_| closed("in-memory channel gone".into())),
            Link::Socket(ws) => ws
                .send(Message::Binary(bytes.into()))
                .await
                .map_err(|e| closed(e.to_string())),
        }
    }

    pub(super) async fn send_text(&mut self, text: &str) -> Result<(), DriverError> {
        let closed = |reason: String| DriverError::Closed { code: None, reason };
        match self {
            Link::Memory { tx, .. } => tx
                .send(Msg::Text(text.to_owned()))
                .map_err(|_| closed("in-memory channel gone".into())),
            Link::Socket(ws) => ws
                .send(Message::Text(text.into()))
                .await
                .map_err(|e| closed(e.to_string())),
        }
    }

    pub(super) async fn recv(&mut self) -> Event {
        match self {
            Link::Memory { rx, .. } => match rx.recv().await {
                Some(Msg::Binary(b)) => Event::Bytes(b),
                Some(Msg::Close(code, reason)) => Event::Closed(Some(code), reason),
                Some(Msg::Text(_)) => Event::Bytes(bytes::Bytes::new()),
                None => Event::Closed(None, "in-memory channel gone".into()),
            },
            Link::Socket(ws) => loop {
                match ws.next().await {
                    Some(Ok(Message::Binary(b))) => return Event::Bytes(b),
                    Some(Ok(Message::Close(frame))) => {
                        return match frame {
                            Some(f) => Event::Closed(Some(f.code.into()), f.reason.to_string()),
                            None => Event::Closed(None, String::new()),
                        };
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Event::Closed(None, e.to_string()),
                    None => return Event::Closed(None, "connection ended".into()),
                }
            },
        }
    }

    pub(super) async fn close(&mut self) {
        match self {
            Link::Memory { tx, .. } => {
                let _ = tx.send(Msg::Close(1000, String::new()));
            }
            Link::Socket(ws) => {
                let _ = WebSocketStream::close(ws, None).await;
            }
        }
    }
}

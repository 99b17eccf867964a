//! The Cortex relay stand-in: one connection from the agent carrying every session.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use voqalize::wire::Frame;

use crate::client::Leg;

/// Route table of the relay link: each session's prefix to its frames.
pub type Routes = std::sync::Mutex<HashMap<[u8; 16], tokio::sync::mpsc::UnboundedSender<Frame>>>;

/// The relay's side of one connection carrying every call: frames out through one writer, frames
/// in routed to each call by its 16-byte prefix.
pub struct RelayLink {
    /// Bytes to write.
    pub out: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    /// Where each session's frames go.
    pub routes: Arc<Routes>,
}

impl RelayLink {
    /// Waits for the agent on `addr` and starts the reader and the writer.
    pub async fn accept(addr: &str, quiet: bool) -> Result<Arc<Self>, Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        if quiet {
            eprintln!("relay stand-in on ws://{}/agent", listener.local_addr()?);
        } else {
            println!("relay stand-in on ws://{}/agent", listener.local_addr()?);
        }
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let ws = tokio_tungstenite::accept_async(stream).await?;
        let (mut sink, mut stream) = ws.split();
        let (out, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if sink.send(Message::Binary(bytes.into())).await.is_err() {
                    break;
                }
            }
        });
        let link = Arc::new(RelayLink {
            out,
            routes: Default::default(),
        });
        let routes = link.routes.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Binary(bytes) = message else {
                    continue;
                };
                let Some((prefix, envelope)) = bytes.split_first_chunk::<16>() else {
                    continue;
                };
                let Ok(Some(frame)) = voqalize::wire::decode(envelope) else {
                    continue;
                };
                let route = routes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(prefix)
                    .cloned();
                if let Some(route) = route {
                    let _ = route.send(frame);
                }
            }
            // The agent is gone: every session's channel closes.
            routes.lock().unwrap_or_else(|p| p.into_inner()).clear();
        });
        Ok(link)
    }

    /// Sends one frame of session `prefix`.
    pub fn send(&self, prefix: [u8; 16], frame: &Frame) {
        let mut bytes = prefix.to_vec();
        bytes.extend(voqalize::wire::encode(frame));
        let _ = self.out.send(bytes);
    }

    /// A leg for session number `id`.
    pub fn leg(self: &Arc<Self>, id: usize) -> Leg {
        let mut prefix = [0u8; 16];
        prefix[..8].copy_from_slice(&(id as u64).to_be_bytes());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(prefix, tx);
        Leg::Relay {
            link: self.clone(),
            prefix,
            rx,
        }
    }
}

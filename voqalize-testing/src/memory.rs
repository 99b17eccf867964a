//! An in-memory [`Channel`]: the brain's end of a pipe whose other end the driver holds. No socket,
//! same frames, same session runtime.

use tokio::sync::mpsc;

use voqalize::channel::{Channel, ChannelError, ChannelReceiver, ChannelSender, Incoming};

/// One message on the pipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Binary(bytes::Bytes),
    Text(String),
    Close(u16, String),
}

/// The brain's end of an in-memory pipe (see `pipe`).
pub(crate) struct MemoryChannel {
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
}

/// The driver's end of an in-memory pipe.
pub(crate) struct MemoryPeer {
    pub(crate) tx: mpsc::UnboundedSender<Msg>,
    pub(crate) rx: mpsc::UnboundedReceiver<Msg>,
}

/// Makes a connected pair: the brain's [`MemoryChannel`] and the driver's end.
pub(crate) fn pipe() -> (MemoryChannel, MemoryPeer) {
    let (to_brain, brain_rx) = mpsc::unbounded_channel();
    let (to_peer, peer_rx) = mpsc::unbounded_channel();
    (
        MemoryChannel {
            tx: to_peer,
            rx: brain_rx,
        },
        MemoryPeer {
            tx: to_brain,
            rx: peer_rx,
        },
    )
}

#[derive(Debug, thiserror::Error)]
#[error("the other end of the in-memory channel is gone")]
struct Gone;

/// The sending half of a [`MemoryChannel`].
pub(crate) struct MemorySender(mpsc::UnboundedSender<Msg>);
/// The receiving half of a [`MemoryChannel`].
pub(crate) struct MemoryReceiver(mpsc::UnboundedReceiver<Msg>);

impl Channel for MemoryChannel {
    type Sender = MemorySender;
    type Receiver = MemoryReceiver;
    fn split(self) -> (MemorySender, MemoryReceiver) {
        (MemorySender(self.tx), MemoryReceiver(self.rx))
    }
}

impl ChannelSender for MemorySender {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.0
            .send(Msg::Binary(frame.into()))
            .map_err(|_| ChannelError::new(Gone))
    }

    async fn close(&mut self, code: u16, reason: &str) {
        let _ = self.0.send(Msg::Close(code, reason.to_owned()));
    }
}

impl ChannelReceiver for MemoryReceiver {
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        match self.0.recv().await? {
            Msg::Binary(b) => Some(Ok(Incoming::Binary(b))),
            Msg::Text(t) => Some(Ok(Incoming::Text(t))),
            Msg::Close(..) => None,
        }
    }
}

//! A relay session's inbox: the frames the mux routed to it, waiting for its reader, bounded in
//! frames and in bytes: a refusing [`Lane`] (a frame that does not fit is refused and the mux ends
//! the session). A lane under a lock with one [`Notify`], not a channel: a tokio `mpsc` allocates
//! its first block of slots (about 1.3 kB) when it is made, and a relay connection carries
//! thousands of mostly quiet sessions.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::queue::{Lane, wait_for};
use crate::recover::lock;
use crate::session::EndReason;

/// How many inbound frames may wait for one session's reader before the next is dropped. Their
/// bytes are bounded too (one frame always fits).
pub(super) const SESSION_INBOX: usize = 256;

/// What became of a frame offered to an [`Inbox`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Offered {
    Taken,
    /// The session's reader is behind: the frame is dropped.
    Deaf,
    /// The session has ended (its task is not reaped yet).
    Gone,
}

/// The room a drained inbox keeps: a session that takes its frames one at a time does not
/// allocate for each, and a burst's room is given back (a quiet session holds no more).
const KEPT: usize = 8;

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the reader: a frame came, or the mux let go of the inbox.
    ready: Notify,
}

#[derive(Debug)]
struct State {
    /// Each weighs its length.
    frames: Lane<Bytes>,
    /// The mux let go of the inbox: once drained, the reader sees its end.
    closed: bool,
    /// Why the mux ended the session, when it did (a message over its limit).
    ended: Option<EndReason>,
    /// The reader is gone: nothing more is taken.
    gone: bool,
}

/// The mux's end: where it offers the session's frames. Dropping it ends the session's input.
#[derive(Debug)]
pub(super) struct Inbox {
    shared: Arc<Shared>,
}

/// The session's end: its frames in order, then `None` once the mux let go.
#[derive(Debug)]
pub(super) struct Reader {
    shared: Arc<Shared>,
}

/// A new inbox whose frames may hold `bound` bytes (one frame always fits, however big).
pub(super) fn inbox(bound: usize) -> (Inbox, Reader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            frames: Lane::new(SESSION_INBOX, bound).keeping(KEPT),
            closed: false,
            ended: None,
            gone: false,
        }),
        ready: Notify::new(),
    });
    (
        Inbox {
            shared: shared.clone(),
        },
        Reader { shared },
    )
}

impl Inbox {
    pub(super) fn offer(&self, frame: Bytes) -> Offered {
        let mut state = lock(&self.shared.state);
        if state.gone {
            return Offered::Gone;
        }
        let weight = frame.len();
        if state.frames.offer(frame, weight).is_err() {
            return Offered::Deaf;
        }
        drop(state);
        self.shared.ready.notify_one();
        Offered::Taken
    }
}

impl Inbox {
    /// Lets go of the inbox because the mux ends the session for `reason`: its reader takes the
    /// frames that came before, sees the end, and [`Reader::ended`] tells it why (as the direct
    /// leg's reader reads up to the message over the limit).
    pub(super) fn end(self, reason: EndReason) {
        lock(&self.shared.state).ended = Some(reason);
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.ready.notify_one();
    }
}

impl Reader {
    /// The next frame; `None` once the inbox is drained and the mux let go of it. Cancel-safe:
    /// a frame is taken only by the call that returns it.
    pub(super) async fn recv(&mut self) -> Option<Bytes> {
        wait_for(&self.shared.ready, || {
            let mut state = lock(&self.shared.state);
            match state.frames.pop() {
                Some(frame) => Some(Some(frame)),
                None if state.closed => Some(None),
                None => None,
            }
        })
        .await
    }
}

impl Reader {
    /// Why the mux ended the session, once [`recv`](Self::recv) has seen the end; `None` when it
    /// only let go (the connection ends every session, or the session's own end).
    pub(super) fn ended(&self) -> Option<EndReason> {
        lock(&self.shared.state).ended.clone()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.gone = true;
        state.frames.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_inbox_is_bounded_in_frames_and_bytes_and_ends_when_let_go() {
        let (inbox, mut reader) = inbox(1000);
        let frame = |n: usize| Bytes::from(vec![0u8; n]);
        // One frame always fits, however big; then the bytes are bounded.
        assert_eq!(inbox.offer(frame(1500)), Offered::Taken);
        assert_eq!(inbox.offer(frame(1)), Offered::Deaf);
        assert_eq!(reader.recv().await.map(|f| f.len()), Some(1500));
        for _ in 0..SESSION_INBOX {
            assert_eq!(inbox.offer(frame(1)), Offered::Taken);
        }
        assert_eq!(
            inbox.offer(frame(1)),
            Offered::Deaf,
            "and so are the frames"
        );
        for _ in 0..SESSION_INBOX {
            assert!(reader.recv().await.is_some());
        }
        // A frame offered while the reader waits wakes it.
        let waiting = tokio::spawn(async move {
            let got = reader.recv().await;
            (got, reader)
        });
        tokio::task::yield_now().await;
        assert_eq!(inbox.offer(frame(7)), Offered::Taken);
        let (got, mut reader) = waiting.await.unwrap();
        assert_eq!(got.map(|f| f.len()), Some(7));
        // Let go, the reader drains what is left, then sees the end.
        assert_eq!(inbox.offer(frame(3)), Offered::Taken);
        drop(inbox);
        assert_eq!(reader.recv().await.map(|f| f.len()), Some(3));
        assert_eq!(reader.recv().await, None);
    }

    #[test]
    fn a_gone_reader_takes_nothing() {
        let (inbox, reader) = inbox(1000);
        drop(reader);
        assert_eq!(inbox.offer(Bytes::from_static(b"x")), Offered::Gone);
    }
}

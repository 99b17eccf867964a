//! What the sessions of one relay connection send: the [`Backlog`] every session queues its
//! prefixed frames on (a [`Lane`] a session, with back-pressure), bounded per session in frames
//! and bytes and for the connection in bytes, and the socket
//! [writer](write_loop) that takes them round-robin in batches, pings the relay, and gives up on a
//! relay that takes no bytes (docs/protocol.md §2.2).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use futures_util::SinkExt;
use futures_util::stream::SplitSink;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::Prefix;
use crate::queue::{Lane, wait_for};
use crate::recover::lock;

/// The relay connection (dialled by `connect`), whose sending half this module writes.
pub(super) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How many frames one session may have waiting for the socket, whatever their size.
pub(super) const SESSION_FRAMES: usize = 64;

/// How many refusals (the `End` answering a `SessionStart` the connection will not serve) may
/// wait for the socket at once; past it a refusal is dropped (a relay that floods starts and does
/// not read is redialled anyway).
const REFUSALS_WAITING: usize = 1024;

/// The most frames one batch takes: one flush, one `write` on the socket.
const BATCH_FRAMES: usize = 64;

/// The bytes after which a batch takes no further frame (it may pass this by one frame). Also the
/// socket's write buffer: the WebSocket keeps a batch's bytes until the flush.
pub(super) const BATCH_BYTES: usize = 64 * 1024;

/// The byte bounds of a [`Backlog`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// Bytes one session may have waiting (`HostBuilder::max_write_backlog_bytes`); a bigger
    /// frame is refused.
    pub(super) session_bytes: usize,
    /// Bytes every session together may have waiting (`RelayBuilder::max_backlog_bytes`); at
    /// least `session_bytes`.
    pub(super) total_bytes: usize,
}

/// Why a frame was not queued.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    /// The connection is gone (or going): nothing more is sent on it.
    #[error("the relay connection is gone")]
    Gone,
    /// The frame can never fit in the session's backlog.
    #[error("a frame of {bytes} bytes is over the relay backlog of {bound} bytes per session")]
    TooBig {
        /// The frame's size with its prefix.
        bytes: usize,
        /// `Bounds::session_bytes`.
        bound: usize,
    },
}

/// Every frame the sessions of one connection have waiting for the socket, queued per session.
pub(super) struct Backlog {
    bounds: Bounds,
    state: Mutex<State>,
    /// A frame was queued (one reader: the writer).
    work: Notify,
    /// Frames were taken: sessions waiting for room may go on.
    room: Notify,
}

#[derive(Default)]
struct State {
    queues: HashMap<Prefix, Queue>,
    /// The sessions with frames waiting, in the order they are served.
    ready: VecDeque<Prefix>,
    /// Bytes waiting across every queue.
    total: usize,
    /// Queues holding a refusal.
    refusals: usize,
    /// No frame is taken any more.
    closed: bool,
}

struct Queue {
    /// Bounded at [`SESSION_FRAMES`] and `Bounds::session_bytes`; each frame weighs its length.
    frames: Lane<Vec<u8>>,
    /// It holds a refusal, counted in `State::refusals` until the queue is drained.
    refusal: bool,
}

impl State {
    /// Queues `frame` on `prefix`'s lane (made bounded at `session_bytes`), past its bounds: the
    /// caller has checked them, or the frame is exempt.
    fn enqueue(&mut self, prefix: Prefix, frame: Vec<u8>, session_bytes: usize) {
        let queue = self.queues.entry(prefix).or_insert_with(|| Queue {
            frames: Lane::new(SESSION_FRAMES, session_bytes),
            refusal: false,
        });
        if queue.frames.is_empty() {
            self.ready.push_back(prefix);
        }
        self.total += frame.len();
        let weight = frame.len();
        queue.frames.push(frame, weight);
    }

    /// Takes the next batch (see [`Backlog::pop_batch`]); empty when nothing waits.
    fn batch(&mut self) -> Vec<Vec<u8>> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while batch.len() < BATCH_FRAMES && bytes < BATCH_BYTES {
            let Some(prefix) = self.ready.pop_front() else {
                break;
            };
            let Some(queue) = self.queues.get_mut(&prefix) else {
                continue;
            };
            let Some(frame) = queue.frames.pop() else {
                continue;
            };
            self.total -= frame.len();
            if queue.frames.is_empty() {
                if self.queues.remove(&prefix).is_some_and(|q| q.refusal) {
                    self.refusals -= 1;
                }
            } else {
                self.ready.push_back(prefix);
            }
            bytes += frame.len();
            batch.push(frame);
        }
        batch
    }
}

impl Backlog {
    pub(super) fn new(bounds: Bounds) -> Self {
        Backlog {
            bounds: Bounds {
                total_bytes: bounds.total_bytes.max(bounds.session_bytes),
                ..bounds
            },
            state: Mutex::new(State::default()),
            work: Notify::new(),
            room: Notify::new(),
        }
    }

    /// Queues one frame of session `prefix` (its prefix included), waiting while the session has
    /// [`SESSION_FRAMES`] frames or too many bytes waiting, or the connection does.
    ///
    /// # Errors
    /// [`Refused::TooBig`] at once for a frame bigger than a session's whole backlog;
    /// [`Refused::Gone`] once the connection closed.
    pub(super) async fn push(&self, prefix: Prefix, frame: Vec<u8>) -> Result<(), Refused> {
        let (bytes, bound) = (frame.len(), self.bounds.session_bytes);
        if bytes > bound {
            return Err(Refused::TooBig { bytes, bound });
        }
        let mut frame = Some(frame);
        wait_for(&self.room, || {
            let mut s = lock(&self.state);
            if s.closed {
                return Some(Err(Refused::Gone));
            }
            // A session with no lane yet has room for any frame within its bound.
            let fits = s
                .queues
                .get(&prefix)
                .is_none_or(|q| q.frames.has_room(bytes));
            if !fits || s.total + bytes > self.bounds.total_bytes {
                return None;
            }
            s.enqueue(prefix, frame.take()?, bound);
            drop(s);
            self.work.notify_one();
            Some(Ok(()))
        })
        .await
    }

    /// Queues session `prefix`'s `End` (a few bytes, once a session) past every bound, without
    /// waiting: a session the brain ends is always told to the relay. Dropped once the connection
    /// closed.
    pub(super) fn push_end(&self, prefix: Prefix, frame: Vec<u8>) {
        let mut s = lock(&self.state);
        if !s.closed {
            s.enqueue(prefix, frame, self.bounds.session_bytes);
            drop(s);
            self.work.notify_one();
        }
    }

    /// Queues the `End` that refuses a `SessionStart` on `prefix` (a prefix with no session), unless
    /// [`REFUSALS_WAITING`] refusals already wait or `prefix` has frames waiting. False when it was
    /// not queued.
    pub(super) fn push_refusal(&self, prefix: Prefix, frame: Vec<u8>) -> bool {
        let mut s = lock(&self.state);
        if s.closed || s.refusals >= REFUSALS_WAITING || s.queues.contains_key(&prefix) {
            return false;
        }
        s.enqueue(prefix, frame, self.bounds.session_bytes);
        if let Some(queue) = s.queues.get_mut(&prefix) {
            queue.refusal = true;
        }
        s.refusals += 1;
        drop(s);
        self.work.notify_one();
        true
    }

    /// The next batch: one frame of each waiting session in turn (a session with more goes to the
    /// back of the line), up to [`BATCH_FRAMES`] frames and about [`BATCH_BYTES`] bytes. Waits
    /// for the first; `None` once the backlog is closed and empty.
    pub(super) async fn pop_batch(&self) -> Option<Vec<Vec<u8>>> {
        wait_for(&self.work, || {
            let mut s = lock(&self.state);
            let batch = s.batch();
            if !batch.is_empty() {
                drop(s);
                self.room.notify_waiters();
                return Some(Some(batch));
            }
            s.closed.then_some(None)
        })
        .await
    }

    /// Takes no more frames; what is queued is still handed to the writer (shutdown: the last
    /// `End`s reach the relay before the close).
    pub(super) fn close(&self) {
        lock(&self.state).closed = true;
        self.work.notify_one();
        self.room.notify_waiters();
    }

    /// Takes no more frames and drops what is queued: the connection is lost, and nothing queued
    /// for it is ever sent on another (docs/protocol.md §7 D11).
    pub(super) fn abandon(&self) {
        {
            let mut s = lock(&self.state);
            s.closed = true;
            s.queues.clear();
            s.ready.clear();
            s.total = 0;
            s.refusals = 0;
        }
        self.work.notify_one();
        self.room.notify_waiters();
    }

    #[cfg(test)]
    fn total(&self) -> usize {
        lock(&self.state).total
    }
}

/// Why the writer stopped before the backlog closed: the relay is not taking bytes, or the
/// socket failed. The connection is then lost (and redialled).
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteFailed {
    #[error("the relay took no bytes for {0:?}")]
    Stalled(Duration),
    #[error("sending failed")]
    Socket(#[source] tokio_tungstenite::tungstenite::Error),
}

/// The relay socket's sending half.
pub(super) type Sink = SplitSink<Socket, Message>;

/// Sends the backlog's batches on `sink`: each frame of a batch fed to the WebSocket, then one
/// flush. Pings the relay every `ping_interval`, so a live relay is heard from even when no call
/// speaks. Each batch and each Ping must be taken within `deadline`. Returns the sink once the
/// backlog is closed and drained.
pub(super) async fn write_loop(
    mut sink: Sink,
    backlog: std::sync::Arc<Backlog>,
    ping_interval: Duration,
    deadline: Duration,
) -> Result<Sink, WriteFailed> {
    let mut ping =
        tokio::time::interval_at(tokio::time::Instant::now() + ping_interval, ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let sent = tokio::select! {
            batch = backlog.pop_batch() => {
                let Some(batch) = batch else {
                    return Ok(sink);
                };
                let write = async {
                    for frame in batch {
                        sink.feed(Message::Binary(frame.into())).await?;
                    }
                    sink.flush().await
                };
                tokio::time::timeout(deadline, write).await
            }
            _ = ping.tick() => {
                tokio::time::timeout(deadline, sink.send(Message::Ping(Default::default()))).await
            }
        };
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(WriteFailed::Socket(e)),
            Err(_) => return Err(WriteFailed::Stalled(deadline)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const A: Prefix = [1; 16];
    const B: Prefix = [2; 16];

    fn backlog(session_bytes: usize, total_bytes: usize) -> Arc<Backlog> {
        Arc::new(Backlog::new(Bounds {
            session_bytes,
            total_bytes,
        }))
    }

    /// A push of `frame` for `prefix` that is still waiting after the others had their turn.
    async fn waiting(
        backlog: &Arc<Backlog>,
        prefix: Prefix,
        frame: Vec<u8>,
    ) -> tokio::task::JoinHandle<Result<(), Refused>> {
        let b = backlog.clone();
        let push = tokio::spawn(async move { b.push(prefix, frame).await });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!push.is_finished(), "the push waits for room");
        push
    }

    #[tokio::test]
    async fn a_batch_takes_one_frame_per_session_in_turn() {
        let backlog = backlog(1 << 20, 1 << 20);
        for i in 0..3u8 {
            backlog.push(A, vec![i]).await.unwrap();
        }
        for i in 0..3u8 {
            backlog.push(B, vec![10 + i]).await.unwrap();
        }
        let batch = backlog.pop_batch().await.unwrap();
        let order: Vec<u8> = batch.iter().map(|f| f[0]).collect();
        assert_eq!(
            order,
            [0, 10, 1, 11, 2, 12],
            "every ready frame, round-robin"
        );
        assert_eq!(backlog.total(), 0);
    }

    #[tokio::test]
    async fn a_batch_is_bounded_in_bytes_and_the_rest_waits_for_the_next() {
        let backlog = backlog(1 << 20, 1 << 20);
        for _ in 0..3 {
            backlog.push(A, vec![0; BATCH_BYTES / 2]).await.unwrap();
        }
        backlog.push(B, vec![1]).await.unwrap();
        let first = backlog.pop_batch().await.unwrap();
        assert_eq!(first.len(), 3, "A, B, A: the batch is full after 64 KiB");
        assert_eq!(first[1], [1], "B is served second, not after all of A");
        assert_eq!(backlog.pop_batch().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_session_backlog_is_bounded_in_bytes_and_frames() {
        let backlog = backlog(1000, 1 << 20);
        backlog.push(A, vec![0; 600]).await.unwrap();
        // 1,200 bytes would be over A's 1,000.
        let second = waiting(&backlog, A, vec![0; 600]).await;
        // Another session is not held up by A's backlog.
        backlog.push(B, vec![0; 600]).await.unwrap();
        // A frame bigger than a whole session backlog is refused at once.
        assert!(matches!(
            backlog.push(B, vec![0; 1001]).await,
            Err(Refused::TooBig { bytes: 1001, .. })
        ));
        // Past SESSION_FRAMES tiny frames, the next waits too.
        for _ in 0..SESSION_FRAMES {
            backlog.push([3; 16], vec![0]).await.unwrap();
        }
        let tiny = waiting(&backlog, [3; 16], vec![0]).await;
        // Taking a batch makes room for both.
        backlog.pop_batch().await.unwrap();
        second.await.unwrap().unwrap();
        tiny.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn the_connection_backlog_is_bounded_in_bytes_across_sessions() {
        let backlog = backlog(1000, 2500);
        for p in 0..2u8 {
            backlog.push([p; 16], vec![0; 1000]).await.unwrap();
        }
        backlog.push([2; 16], vec![0; 500]).await.unwrap();
        assert_eq!(backlog.total(), 2500);
        // A fresh session waits once the connection holds its bound...
        let fresh = waiting(&backlog, [9; 16], vec![0; 10]).await;
        // ...but an End still goes in, past every bound.
        backlog.push_end([8; 16], vec![0; 18]);
        assert_eq!(backlog.total(), 2518);
        backlog.pop_batch().await.unwrap();
        fresh.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn close_drains_what_is_queued_and_abandon_drops_it() {
        let backlog = backlog(1000, 1000);
        backlog.push(A, vec![7]).await.unwrap();
        backlog.close();
        assert!(matches!(backlog.push(A, vec![8]).await, Err(Refused::Gone)));
        assert_eq!(backlog.pop_batch().await.unwrap(), [vec![7]]);
        assert!(backlog.pop_batch().await.is_none());

        let lost = self::backlog(1000, 1000);
        lost.push(A, vec![7]).await.unwrap();
        lost.abandon();
        lost.push_end(A, vec![0]);
        assert!(lost.pop_batch().await.is_none(), "nothing queued is sent");
    }
}

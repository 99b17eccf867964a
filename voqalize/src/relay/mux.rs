//! One relay connection: sessions by their 16-byte prefix, each running the same session runtime as
//! the direct leg, and a fair writer that sends one frame per session in turn.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::Instrument;

use super::Relay;
use super::connect::{RelayError, Socket, connect};
use crate::brain::MakeBrain;
use crate::channel::{Channel, ChannelError, ChannelReceiver, ChannelSender, Incoming};
use crate::logline::Repeated;
use crate::recover::lock;
use crate::runtime;
use crate::wire::{self, Frame};

/// A session's id on the relay: 16 raw bytes, echoed byte for byte.
type Prefix = [u8; 16];

/// One binary message from the relay as the mux reads it before routing: the session's 16-byte
/// prefix and the envelope behind it. Every byte comes from the relay; `examples/fuzz.rs` (target
/// `relay`) feeds it random and mutated messages.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayInbound<'a> {
    /// The session prefix.
    pub prefix: [u8; 16],
    /// The envelope, for the session's runtime.
    pub envelope: &'a [u8],
}

impl<'a> RelayInbound<'a> {
    /// Splits `message`; `None` when it is shorter than its prefix.
    pub fn parse(message: &'a [u8]) -> Option<Self> {
        let (prefix, envelope) = message.split_first_chunk::<16>()?;
        Some(RelayInbound {
            prefix: *prefix,
            envelope,
        })
    }

    /// Whether the envelope is a `SessionStart` (decoded within `max_json`), which opens a session
    /// on a free prefix. Decoded only for a prefix with no running session.
    pub fn opens_session(&self, max_json: usize) -> bool {
        matches!(
            wire::decode_limited(self.envelope, max_json),
            Ok(Some(Frame::SessionStart(_)))
        )
    }
}

/// How many frames one session may have waiting for the relay socket. Past it the session's own
/// writer waits, its outbound lane fills, and the session ends at that lane's hard bound: a stalled
/// session cannot grow the connection's memory.
const SESSION_BACKLOG: usize = 64;

/// How many inbound frames may wait for one session's reader before the next is dropped.
const SESSION_INBOX: usize = 256;

/// The prefix as a hyphenated UUID, for logs.
fn uuid(p: &Prefix) -> String {
    let hex: String = p.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Why a connection's run ended.
enum Ended {
    /// The caller asked for shutdown and the running calls were drained.
    Shutdown,
    /// Close 4000: the relay does not accept this agent.
    NoAgent,
    /// Anything else: reconnect.
    Lost(String),
}

pub(super) async fn serve<M: MakeBrain>(
    relay: &Relay,
    factory: Arc<M>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RelayError> {
    let mut shutdown: Pin<Box<dyn Future<Output = ()> + Send + '_>> = Box::pin(shutdown);
    let mut reconnect = false;
    loop {
        let socket = tokio::select! {
            socket = connect(relay) => socket?,
            () = &mut shutdown => return Ok(()),
        };
        if reconnect {
            tracing::info!("relay: reconnected");
        }
        reconnect = true;
        match run_connection(relay, &factory, *socket, &mut shutdown).await {
            Ended::Shutdown => return Ok(()),
            Ended::NoAgent => return Err(RelayError::NoAgent),
            Ended::Lost(why) => tracing::warn!("relay: connection lost ({why}); reconnecting"),
        }
    }
}

/// The outbound side shared by every session of one connection.
struct Fair {
    state: Mutex<FairState>,
    /// A frame was queued.
    work: Notify,
    /// A frame was sent: a session waiting for room may go on.
    room: Notify,
}

#[derive(Default)]
struct FairState {
    queues: HashMap<Prefix, VecDeque<Vec<u8>>>,
    ready: VecDeque<Prefix>,
    closed: bool,
}

impl Fair {
    fn new() -> Self {
        Fair {
            state: Mutex::new(FairState::default()),
            work: Notify::new(),
            room: Notify::new(),
        }
    }

    /// Queues one frame of session `prefix`, waiting while its backlog is full.
    async fn push(&self, prefix: Prefix, frame: Vec<u8>) -> Result<(), ()> {
        loop {
            let room = self.room.notified();
            {
                let mut s = lock(&self.state);
                if s.closed {
                    return Err(());
                }
                let queue = s.queues.entry(prefix).or_default();
                if queue.len() < SESSION_BACKLOG {
                    let was_empty = queue.is_empty();
                    queue.push_back(frame);
                    if was_empty {
                        s.ready.push_back(prefix);
                    }
                    drop(s);
                    self.work.notify_one();
                    return Ok(());
                }
            }
            room.await;
        }
    }

    /// The next frame to send: one of the session at the head of the line, which then goes to the
    /// back if it has more.
    async fn pop(&self) -> Option<(Prefix, Vec<u8>)> {
        loop {
            let work = self.work.notified();
            {
                let mut s = lock(&self.state);
                if s.closed {
                    return None;
                }
                if let Some(prefix) = s.ready.pop_front() {
                    let (frame, more) = match s.queues.get_mut(&prefix) {
                        Some(q) => (q.pop_front(), !q.is_empty()),
                        None => (None, false),
                    };
                    if more {
                        s.ready.push_back(prefix);
                    } else {
                        s.queues.remove(&prefix);
                    }
                    drop(s);
                    self.room.notify_waiters();
                    if let Some(frame) = frame {
                        return Some((prefix, frame));
                    }
                    continue;
                }
            }
            work.await;
        }
    }

    fn close(&self) {
        lock(&self.state).closed = true;
        self.work.notify_waiters();
        self.room.notify_waiters();
    }
}

/// One session's [`Channel`] over the shared connection.
struct RelayChannel {
    prefix: Prefix,
    fair: Arc<Fair>,
    inbox: mpsc::Receiver<Incoming>,
}

struct RelaySender {
    prefix: Prefix,
    fair: Arc<Fair>,
}

struct RelayReceiver(mpsc::Receiver<Incoming>);

#[derive(Debug, thiserror::Error)]
#[error("the relay connection is gone")]
struct Gone;

impl Channel for RelayChannel {
    type Sender = RelaySender;
    type Receiver = RelayReceiver;
    fn split(self) -> (RelaySender, RelayReceiver) {
        (
            RelaySender {
                prefix: self.prefix,
                fair: self.fair,
            },
            RelayReceiver(self.inbox),
        )
    }
}

impl ChannelSender for RelaySender {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.fair
            .push(self.prefix, frame)
            .await
            .map_err(|()| ChannelError::new(Gone))
    }

    async fn close(&mut self, _code: u16, _reason: &str) {
        // A session on the relay ends with its End frame; the connection stays.
    }
}

impl ChannelReceiver for RelayReceiver {
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        self.0.recv().await.map(Ok)
    }
}

/// A running session: where its inbound frames go, and which run it is (a prefix freed by an
/// ended session may start a new one before the old task is reaped).
struct Running {
    inbox: mpsc::Sender<Incoming>,
    run: u64,
}

async fn run_connection<M: MakeBrain>(
    relay: &Relay,
    factory: &Arc<M>,
    socket: Socket,
    shutdown: &mut Pin<Box<dyn Future<Output = ()> + Send + '_>>,
) -> Ended {
    let (mut sink, mut stream) = socket.split();
    let fair = Arc::new(Fair::new());
    let writer_fair = fair.clone();
    let writer = tokio::spawn(
        async move {
            while let Some((prefix, frame)) = writer_fair.pop().await {
                let mut bytes = Vec::with_capacity(16 + frame.len());
                bytes.extend_from_slice(&prefix);
                bytes.extend_from_slice(&frame);
                if let Err(e) = sink.send(Message::Binary(bytes.into())).await {
                    tracing::warn!("relay: send failed: {e}");
                    break;
                }
            }
            sink
        }
        .in_current_span(),
    );
    let mut sessions: HashMap<Prefix, Running> = HashMap::new();
    let mut tasks: JoinSet<(Prefix, u64)> = JoinSet::new();
    let mut runs = 0u64;
    let mut junk = Repeated::new("text, short or malformed relay frames");
    let mut strays = Repeated::new("frames for sessions that are not running");
    let mut draining: Option<tokio::time::Instant> = None;
    let limits = relay.options.limits();
    let ended = loop {
        let drain_deadline = draining.unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            () = &mut *shutdown, if draining.is_none() => {
                tracing::info!("relay: shutting down; {} calls running", sessions.len());
                if sessions.is_empty() {
                    break Ended::Shutdown;
                }
                draining = Some(tokio::time::Instant::now() + relay.drain);
            }
            () = tokio::time::sleep_until(drain_deadline), if draining.is_some() => {
                tracing::warn!("relay: {} calls still running at the drain deadline; ending them", sessions.len());
                break Ended::Shutdown;
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok((prefix, run)) = done {
                    if sessions.get(&prefix).is_some_and(|r| r.run == run) {
                        sessions.remove(&prefix);
                    }
                    tracing::info!("relay: closed session {}", uuid(&prefix));
                }
                if draining.is_some() && sessions.is_empty() {
                    break Ended::Shutdown;
                }
            }
            message = stream.next() => {
                let bytes = match message {
                    None => break Ended::Lost("the relay closed the connection".into()),
                    Some(Err(e)) => break Ended::Lost(e.to_string()),
                    Some(Ok(Message::Close(frame))) => {
                        if frame.as_ref().is_some_and(|f| u16::from(f.code) == 4000) {
                            break Ended::NoAgent;
                        }
                        break Ended::Lost(format!("closed with {:?}", frame.map(|f| u16::from(f.code))));
                    }
                    Some(Ok(Message::Binary(bytes))) => bytes,
                    Some(Ok(Message::Text(_))) => {
                        if junk.allow() {
                            tracing::warn!("relay: a text frame; skipping");
                        }
                        continue;
                    }
                    Some(Ok(_)) => continue,
                };
                let Some(inbound) = RelayInbound::parse(&bytes) else {
                    if junk.allow() {
                        tracing::warn!("relay: a frame of {} bytes, shorter than its 16-byte session prefix; skipping", bytes.len());
                    }
                    continue;
                };
                let prefix = inbound.prefix;
                if let Some(running) = sessions.get(&prefix) {
                    match running.inbox.try_send(Incoming::Binary(bytes.slice(16..))) {
                        Ok(()) => continue,
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            tracing::warn!("relay: session {} is not reading; dropping a frame", uuid(&prefix));
                            continue;
                        }
                        // The session ended and its task has not been reaped yet: the prefix is
                        // free, and a SessionStart on it opens a new session below.
                        Err(mpsc::error::TrySendError::Closed(_)) => {
                            sessions.remove(&prefix);
                        }
                    }
                }
                if !inbound.opens_session(limits.max_json) || draining.is_some() {
                    if strays.allow() {
                        tracing::warn!("relay: dropping a frame for session {}, which is not running", uuid(&prefix));
                    }
                    continue;
                }
                // The relay's sessions count against `HostOptions::max_sessions` like the direct
                // leg's calls: a relay cannot open more than the process takes.
                let Some(admitted) = relay.options.admit() else {
                    if strays.allow() {
                        tracing::warn!("relay: refusing session {}: at max_sessions", uuid(&prefix));
                    }
                    continue;
                };
                let (inbox, rx) = mpsc::channel(SESSION_INBOX);
                let channel = RelayChannel { prefix, fair: fair.clone(), inbox: rx };
                let factory = factory.clone();
                runs += 1;
                let run = runs;
                let span = tracing::info_span!("session", service = "brain", session_id = %uuid(&prefix));
                tasks.spawn(
                    async move {
                        tracing::info!("relay: opened session {}", uuid(&prefix));
                        let (sender, receiver) = channel.split();
                        let _ = runtime::run(sender, receiver, factory, &limits, None).await;
                        drop(admitted);
                        (prefix, run)
                    }
                    .instrument(span),
                );
                let _ = inbox.try_send(Incoming::Binary(bytes.slice(16..)));
                sessions.insert(prefix, Running { inbox, run });
            }
        }
    };
    // Every session ends: their inboxes close, so each runtime stops and runs on_session_end.
    let n = sessions.len();
    if n > 0 {
        tracing::info!("relay: ending {n} sessions");
    }
    sessions.clear();
    let bound = limits.request_timeout + std::time::Duration::from_secs(1);
    let _ = tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
    fair.close();
    if let Ok(mut sink) = writer.await
        && matches!(ended, Ended::Shutdown)
    {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(frame))).await;
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_writer_sends_one_frame_per_session_in_turn() {
        let fair = Fair::new();
        let (a, b) = ([1u8; 16], [2u8; 16]);
        for i in 0..3u8 {
            fair.push(a, vec![i]).await.unwrap();
        }
        for i in 0..3u8 {
            fair.push(b, vec![10 + i]).await.unwrap();
        }
        let mut order = Vec::new();
        for _ in 0..6 {
            let (p, f) = fair.pop().await.unwrap();
            order.push((p[0], f[0]));
        }
        assert_eq!(order, [(1, 0), (2, 10), (1, 1), (2, 11), (1, 2), (2, 12)]);
    }

    #[tokio::test]
    async fn a_session_backlog_is_bounded() {
        let fair = Arc::new(Fair::new());
        for i in 0..SESSION_BACKLOG {
            fair.push([1; 16], vec![i as u8]).await.unwrap();
        }
        let waiting = tokio::spawn({
            let fair = fair.clone();
            async move { fair.push([1; 16], vec![0xff]).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the 65th frame waits for room");
        fair.pop().await.unwrap();
        assert!(waiting.await.unwrap().is_ok());
    }

    #[test]
    fn prefixes_read_as_uuids() {
        let p: Prefix = [
            0x3f, 0x1c, 0x2a, 0x90, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb,
        ];
        assert_eq!(uuid(&p), "3f1c2a90-0001-0203-0405-060708090a0b");
    }
}

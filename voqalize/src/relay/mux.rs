//! One relay connection: sessions by their 16-byte prefix, each running the same session runtime as
//! the direct leg; the connection's liveness (a read deadline here, Pings and a write deadline in
//! the [writer](super::outbound::write_loop)); and what the brain owes the relay when it ends a
//! session (docs/protocol.md §2.2).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt, future};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::Instrument;

use super::connect::{Backoff, RelayError, connect};
use super::inbox::{self, Inbox, Offered};
use super::outbound::{Backlog, Bounds, Sink, Socket, WriteFailed, write_loop};
use super::{PREFIX, Prefix, Relay};
use crate::brain::MakeBrain;
use crate::channel::{ChannelError, ChannelReceiver, ChannelSender, Incoming};
use crate::host::{Admitted, DrainReport, Hosted, Refused, Shutdown};
use crate::logline::{Repeated, count, outside};
use crate::recover::panic_text;
use crate::runtime::{self, Limits, Outcome};
use crate::session::{BoundExceeded, EndReason, TransportLoss};
use crate::wire::{self, Frame};

/// One binary message from the relay as the mux reads it before routing: the session's 16-byte
/// prefix and the envelope behind it. Every byte comes from the relay; the fuzz loop
/// (`tools/src/bin/fuzz.rs`, target `relay`) feeds it random and mutated messages.
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
    /// on a free prefix. Decoded only for a prefix with no running session. One whose `init` is
    /// not a JSON object (or is over `max_json`) opens one too: the session refuses it with a fatal
    /// `PROTOCOL` error and `End`, as on the direct leg, instead of leaving the relay unanswered.
    pub fn opens_session(&self, max_json: usize) -> bool {
        matches!(
            wire::decode_limited(self.envelope, max_json),
            Ok(Some(Frame::SessionStart(_))) | Err(wire::WireError::BadInit { .. })
        )
    }
}

/// The bytes of an `End` envelope (the encoding is deterministic).
static END: LazyLock<Vec<u8>> = LazyLock::new(|| wire::encode(&Frame::End));

/// The prefix as a hyphenated UUID, for logs (every session's span and lines carry it: written
/// digit by digit, not through `fmt`, which took sixteen `format!`s a call).
fn uuid(p: &Prefix) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, b) in p.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// `envelope` as a relay message of session `prefix`.
fn prefixed(prefix: &Prefix, envelope: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(PREFIX + envelope.len());
    bytes.extend_from_slice(prefix);
    bytes.extend_from_slice(envelope);
    bytes
}

/// Why a connection's run ended.
enum Ended {
    /// The caller asked for shutdown and the running calls were drained.
    Shutdown,
    /// Close 4000: the relay does not accept this agent.
    NoAgent,
    /// Anything else: reconnect, after the backoff.
    Lost(String),
}

/// Serves until the shutdown the relay's host options follow (or one of its own, with
/// `drain_timeout`) has drained: `asked` completing starts its drain.
pub(super) async fn serve<M: MakeBrain>(
    relay: &Relay,
    factory: Arc<M>,
    asked: impl Future<Output = ()> + Send,
) -> Result<DrainReport, RelayError> {
    let shutdown = match relay.options.shutting() {
        Some(shutdown) => shutdown.clone(),
        None => Shutdown::new(relay.drain),
    };
    let follow = async {
        asked.await;
        shutdown.start_drain();
        std::future::pending::<()>().await;
    };
    // The connection runs in a task of its own, on a worker: awaited where `serve` is (often
    // `#[tokio::main]`'s own future, on the main thread), every frame between it and its
    // sessions' tasks would cross threads, a wake-up through the kernel each way. Dropping
    // `serve` stops it.
    let (relay, ending) = (relay.clone(), shutdown.clone());
    let serving = Aborting(tokio::spawn(
        async move { serve_until(&relay, factory, &ending).await }.in_current_span(),
    ));
    tokio::select! {
        served = serving => match served {
            Ok(served) => served.map(|()| shutdown.report()),
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // The runtime is shutting down: nothing is served any more.
                Err(_) => Ok(shutdown.report()),
            },
        },
        () = follow => unreachable!("it never completes"),
    }
}

/// A task that is aborted when this is dropped.
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Future for Aborting<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn serve_until<M: MakeBrain>(
    relay: &Relay,
    factory: Arc<M>,
    shutdown: &Shutdown,
) -> Result<(), RelayError> {
    let mut backoff = Backoff::new(&relay.settings);
    let mut reconnect = false;
    loop {
        let socket = tokio::select! {
            socket = connect(relay, &mut backoff) => socket?,
            () = shutdown.triggered() => return Ok(()),
        };
        if reconnect {
            tracing::info!("relay: reconnected");
        } else {
            tracing::info!("relay: connected to {}", outside(relay.url.as_str()));
        }
        reconnect = true;
        let opened = Instant::now();
        relay.set_connected(true);
        let ended = run_connection(relay, &factory, *socket, shutdown).await;
        relay.set_connected(false);
        match ended {
            Ended::Shutdown => return Ok(()),
            Ended::NoAgent => return Err(RelayError::NoAgent),
            Ended::Lost(why) => {
                // However the connection ended, the next dial waits: a relay that accepts and
                // closes at once is backed off like one that refuses.
                backoff.connection_ended(opened.elapsed());
                tracing::warn!(
                    "relay: connection lost ({}); reconnecting in {:?}",
                    outside(&why),
                    backoff.delay()
                );
            }
        }
        tokio::select! {
            () = backoff.wait() => {}
            () = shutdown.triggered() => return Ok(()),
        }
    }
}

/// One session's sending half: its frames, prefixed, onto the connection's [`Backlog`].
struct RelaySender {
    prefix: Prefix,
    backlog: Arc<Backlog>,
    /// Set once the session's own `End` is queued.
    end_sent: Arc<AtomicBool>,
}

impl ChannelSender for RelaySender {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        let is_end = frame == *END;
        let bytes = prefixed(&self.prefix, &frame);
        drop(frame);
        self.backlog
            .push(self.prefix, bytes)
            .await
            .map_err(ChannelError::new)?;
        if is_end {
            self.end_sent.store(true, Ordering::Release);
        }
        Ok(())
    }

    async fn close(&mut self, _code: u16, _reason: &str) {
        // A session on the relay ends with its End frame; the connection stays.
    }
}

/// One session's receiving half: the frames the mux routed to it.
struct RelayReceiver {
    inbox: inbox::Reader,
    /// Why the connection is ending all its sessions, once it is.
    ending: Arc<Ending>,
}

/// Why a relay connection ends every session it carries: told each session when its inbox
/// closes, so `on_session_end` learns shutdown from a lost relay.
#[derive(Default)]
struct Ending(std::sync::OnceLock<EndReason>);

impl ChannelReceiver for RelayReceiver {
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        let Some(frame) = self.inbox.recv().await else {
            // The mux ended this session (a message over its limit), or the connection ends them all.
            return self
                .inbox
                .ended()
                .or_else(|| self.ending.0.get().cloned())
                .map(|r| Err(ChannelError::ending(r)));
        };
        Some(Ok(Incoming::Binary(frame)))
    }
}

/// A running session, and which run it is (a prefix freed by an ended session may start a new one
/// before the old task is reaped).
struct Running {
    /// `None` once the brain is ending the session (a frame over its limit): nothing more reaches
    /// it, and its prefix stays taken until its task is reaped.
    inbox: Option<Inbox>,
    run: u64,
}

/// Runs one session until it ends. Then, unless the relay ended it (`End`, `Cancel`) or its own
/// `End` already went out, queues its `End`: a session the brain ends for its own reasons (a bound,
/// an error, a panic, shutdown) is never a silent drop for the relay.
///
/// Its future holds the running session and what its end needs, made here and chained: an async
/// function would hold its arguments beside the session for the call's whole life.
fn session<M: MakeBrain>(
    sender: RelaySender,
    receiver: RelayReceiver,
    factory: Arc<M>,
    limits: Limits,
    tape: Option<Arc<crate::record::Tape>>,
    place: (Admitted, Hosted),
) -> impl Future<Output = ()> + Send {
    let (prefix, backlog, end_sent) = (
        sender.prefix,
        sender.backlog.clone(),
        sender.end_sent.clone(),
    );
    let call = runtime::Call {
        connection: None,
        tape,
        tool_watch: None,
        turn_watch: None,
    };
    let opened = future::lazy(move |_| tracing::info!("relay: opened session {}", uuid(&prefix)));
    let run =
        AssertUnwindSafe(runtime::run(sender, receiver, factory, limits, call)).catch_unwind();
    opened.then(move |()| run).map(move |ran| {
        let by_peer = match ran {
            Ok((Outcome::Ended { by_peer, .. }, _)) => by_peer,
            Ok((Outcome::SendFailed(_), _)) => false,
            Err(panic) => {
                tracing::error!(
                    "relay: session failed: {}",
                    crate::logline::outside(&panic_text(&*panic))
                );
                false
            }
        };
        if !by_peer && !end_sent.load(Ordering::Acquire) {
            backlog.push_end(prefix, prefixed(&prefix, &END));
        }
        drop(place);
    })
}

/// The sessions of one connection and the mux's state.
struct Connection<'r, M> {
    relay: &'r Relay,
    factory: &'r Arc<M>,
    /// The shutdown this connection's calls follow (and are counted in).
    shutdown: &'r Shutdown,
    /// What every session runs with: the host options' limits, without a Ping deadline of its own.
    limits: Limits,
    max_message: usize,
    backlog: Arc<Backlog>,
    sessions: HashMap<Prefix, Running>,
    ending: Arc<Ending>,
    tasks: JoinSet<(Prefix, u64)>,
    runs: u64,
    junk: Repeated,
    strays: Repeated,
    oversized: Repeated,
    deaf: Repeated,
}

async fn run_connection<M: MakeBrain>(
    relay: &Relay,
    factory: &Arc<M>,
    socket: Socket,
    shutdown: &Shutdown,
) -> Ended {
    let (sink, mut stream) = socket.split();
    let settings = relay.settings;
    let mut c = Connection::new(relay, factory, shutdown);
    // Aborted when the connection's future is dropped (`serve` dropped): it holds the socket's
    // sending half, and the connection must close with it.
    let mut writer = Aborting(tokio::spawn(
        write_loop(
            sink,
            c.backlog.clone(),
            settings.ping_interval,
            settings.pong_timeout,
        )
        .in_current_span(),
    ));
    // Anything from the relay, a Pong to our Ping included, shows it alive.
    let silence = settings.ping_interval + settings.pong_timeout;
    let quiet = tokio::time::sleep(silence);
    tokio::pin!(quiet);
    // The drain's deadline is the shutdown's: its phase moves to ending then (or at a second
    // trigger), and every call still running ends.
    let mut phase = shutdown.ending();
    let mut draining = false;
    let ended = loop {
        tokio::select! {
            Ok(()) = phase.changed() => {
                if shutdown.is_ending() {
                    tracing::warn!(
                        "relay: the drain is over; ending the {} still running",
                        count(c.sessions.len(), "call")
                    );
                    break Ended::Shutdown;
                }
                if !std::mem::replace(&mut draining, true) {
                    tracing::info!(
                        "relay: shutting down; {} running",
                        count(c.sessions.len(), "call")
                    );
                }
                if c.sessions.is_empty() {
                    break Ended::Shutdown;
                }
            }
            Some(done) = c.tasks.join_next(), if !c.tasks.is_empty() => {
                c.reap(done);
                if draining && c.sessions.is_empty() {
                    break Ended::Shutdown;
                }
            }
            written = &mut writer => {
                break Ended::Lost(match written {
                    Ok(Err(e)) => crate::logline::chain(&e),
                    Ok(Ok(_)) => "the writer stopped".to_owned(),
                    Err(e) => format!("the writer failed: {}", crate::logline::chain(&e)),
                });
            }
            () = &mut quiet => {
                break Ended::Lost(format!("nothing from the relay for {silence:?}, not even a Pong"));
            }
            message = stream.next() => {
                quiet.as_mut().reset(Instant::now() + silence);
                if let Some(ended) = c.received(message, draining || shutdown.is_draining()) {
                    break ended;
                }
            }
        }
    };
    c.end(ended, writer).await
}

impl<'r, M: MakeBrain> Connection<'r, M> {
    fn new(relay: &'r Relay, factory: &'r Arc<M>, shutdown: &'r Shutdown) -> Self {
        let options = &relay.options;
        Connection {
            relay,
            factory,
            shutdown,
            limits: Limits {
                session_keepalive: false,
                ..options.limits()
            },
            max_message: options.max_message(),
            backlog: Arc::new(Backlog::new(Bounds {
                session_bytes: relay.session_backlog(),
                total_bytes: relay.settings.max_backlog,
            })),
            sessions: HashMap::new(),
            ending: Arc::default(),
            tasks: JoinSet::new(),
            runs: 0,
            junk: Repeated::new("text, short or malformed relay frames"),
            strays: Repeated::new("frames for sessions that are not running"),
            oversized: Repeated::new("relay frames over a session's message limit"),
            deaf: Repeated::new("frames for sessions that are not reading"),
        }
    }

    /// Routes one binary message from the relay to its session, or opens one.
    fn route(&mut self, bytes: Bytes, draining: bool) {
        let Some(inbound) = RelayInbound::parse(&bytes) else {
            if self.junk.allow() {
                tracing::warn!(
                    "relay: a frame of {}, shorter than its 16-byte session prefix; skipping",
                    count(bytes.len(), "byte")
                );
            }
            return;
        };
        let prefix = inbound.prefix;
        let envelope = bytes.slice(PREFIX..);
        // A session's own limit, applied after the demux: one message too big ends its session,
        // never the connection (the direct leg closes that call with 1009).
        let too_big = envelope.len() > self.max_message;
        if self.offer_running(prefix, &envelope, too_big) {
            return;
        }
        if too_big {
            if self.oversized.allow() {
                tracing::warn!(
                    "relay: dropping a frame of {} bytes for session {}, which is not running (over the limit of {} bytes)",
                    envelope.len(),
                    uuid(&prefix),
                    self.max_message
                );
            }
            return;
        }
        if !inbound.opens_session(self.limits.max_json) {
            if self.strays.allow() {
                tracing::warn!(
                    "relay: dropping a frame for session {}, which is not running",
                    uuid(&prefix)
                );
            }
            return;
        }
        if draining {
            return self.refuse(prefix, Refused::Draining, "the agent is shutting down");
        }
        self.open(prefix, envelope);
    }

    /// One message from the relay (`None`: its stream ended); the connection's end when it
    /// closed, failed or ended.
    fn received(
        &mut self,
        message: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
        draining: bool,
    ) -> Option<Ended> {
        match message {
            None => Some(Ended::Lost("the relay closed the connection".into())),
            Some(Err(e)) => Some(Ended::Lost(e.to_string())),
            Some(Ok(Message::Close(frame))) => {
                if frame.as_ref().is_some_and(|f| u16::from(f.code) == 4000) {
                    return Some(Ended::NoAgent);
                }
                Some(Ended::Lost(format!(
                    "closed with {:?}",
                    frame.map(|f| u16::from(f.code))
                )))
            }
            Some(Ok(Message::Binary(bytes))) => {
                self.route(bytes, draining);
                None
            }
            Some(Ok(Message::Text(_))) => {
                if self.junk.allow() {
                    tracing::warn!("relay: a text frame; skipping");
                }
                None
            }
            // A Ping or a Pong: the relay is alive (tungstenite answers Pings itself).
            Some(Ok(_)) => None,
        }
    }

    /// Offers a frame to the session running under `prefix`; a frame `too_big` ends that
    /// session, as does one it cannot take. False when no session runs there (or its task
    /// ended and is not reaped yet: the prefix is free then): the frame may open one.
    fn offer_running(&mut self, prefix: Prefix, envelope: &Bytes, too_big: bool) -> bool {
        let Some(running) = self.sessions.get_mut(&prefix) else {
            return false;
        };
        let Some(inbox) = &running.inbox else {
            if self.strays.allow() {
                tracing::warn!(
                    "relay: dropping a frame for session {}, which is ending",
                    uuid(&prefix)
                );
            }
            return true;
        };
        if too_big {
            if self.oversized.allow() {
                tracing::warn!(
                    "relay: a frame of {} bytes for session {}, over its limit of {} bytes; ending that session",
                    envelope.len(),
                    uuid(&prefix),
                    self.max_message
                );
            }
            // Its reader sees the end of its inbox after the frames before; the session ends,
            // told the bound it passed, and sends its End.
            if let Some(inbox) = running.inbox.take() {
                inbox.end(EndReason::BoundExceeded(BoundExceeded::InboundMessage));
            }
            return true;
        }
        match inbox.offer(envelope.clone()) {
            Offered::Taken => true,
            // Dropping the frame could lose an `End` or a `Finalize` the session must see;
            // a session whose reader is this far behind ends instead, and sends its End.
            Offered::Deaf => {
                if self.deaf.allow() {
                    tracing::warn!(
                        "relay: session {} is not reading its frames; ending that session",
                        uuid(&prefix)
                    );
                }
                running.inbox = None;
                true
            }
            // The session ended and its task has not been reaped yet: the prefix is free,
            // and a SessionStart on it opens a new session below.
            Offered::Gone => {
                self.sessions.remove(&prefix);
                false
            }
        }
    }

    /// Answers a `SessionStart` this connection will not serve with the session's `End`, so the
    /// relay never believes a refused call is up (the direct leg answers HTTP 503).
    fn refuse(&mut self, prefix: Prefix, reason: Refused, why: &str) {
        crate::metrics::call_refused(reason.label());
        let answered = self.backlog.push_refusal(prefix, prefixed(&prefix, &END));
        if self.strays.allow() {
            let end = if answered {
                "answered with its End"
            } else {
                "too many refusals wait to be sent; dropped"
            };
            tracing::warn!("relay: refusing session {} ({why}): {end}", uuid(&prefix));
        }
    }

    /// Opens a session on `prefix` with its `SessionStart`.
    fn open(&mut self, prefix: Prefix, start: Bytes) {
        // The relay's sessions count against `max_sessions` like the direct leg's
        // calls: a relay cannot open more than the process takes.
        let Some(admitted) = self.relay.admission.admit() else {
            return self.refuse(prefix, Refused::AtCapacity, "at max_sessions");
        };
        let (inbox, reader) = inbox::inbox(self.max_message);
        let sender = RelaySender {
            prefix,
            backlog: self.backlog.clone(),
            end_sent: Arc::default(),
        };
        let receiver = RelayReceiver {
            inbox: reader,
            ending: self.ending.clone(),
        };
        self.runs += 1;
        let run = self.runs;
        let span = tracing::info_span!("session", service = "brain", session_id = %uuid(&prefix));
        let task = session(
            sender,
            receiver,
            self.factory.clone(),
            self.limits,
            self.relay.options.tape(None),
            (admitted, self.shutdown.hosting()),
        );
        // Chained, not awaited in an async block, which would hold the session's future twice.
        self.tasks
            .spawn(task.map(move |()| (prefix, run)).instrument(span));
        let _ = inbox.offer(start);
        self.sessions.insert(
            prefix,
            Running {
                inbox: Some(inbox),
                run,
            },
        );
    }

    /// A session task returned.
    fn reap(&mut self, done: Result<(Prefix, u64), JoinError>) {
        match done {
            Ok((prefix, run)) => {
                if self.sessions.get(&prefix).is_some_and(|r| r.run == run) {
                    self.sessions.remove(&prefix);
                }
                tracing::info!("relay: closed session {}", uuid(&prefix));
            }
            // Panics are caught inside the task; this is an abort at teardown.
            Err(e) => tracing::error!("relay: a session task failed: {e}"),
        }
    }

    /// Ends every session of the connection. On shutdown the relay gets each running session's
    /// `End`, then a close with 1000; on a lost connection nothing more is sent on it.
    async fn end(mut self, ended: Ended, mut writer: Aborting<Result<Sink, WriteFailed>>) -> Ended {
        let n = self.sessions.len();
        if n > 0 {
            tracing::info!("relay: ending {}", count(n, "session"));
        }
        let lost = !matches!(ended, Ended::Shutdown);
        if lost {
            self.backlog.abandon();
            writer.0.abort();
        }
        // Every inbox closes: each runtime stops and runs on_session_end, told why.
        let _ = self.ending.0.set(if lost {
            EndReason::TransportLost(TransportLoss::RelayLost)
        } else {
            EndReason::Shutdown
        });
        self.sessions.clear();
        let bound = self.limits.request_timeout + std::time::Duration::from_secs(1);
        let tasks = &mut self.tasks;
        let _ =
            tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await;
        self.tasks.abort_all();
        self.backlog.close();
        if !lost {
            // The writer sends what is queued (the last Ends), then the close.
            let deadline = self.relay.settings.pong_timeout;
            match tokio::time::timeout(deadline, &mut writer).await {
                Ok(Ok(Ok(mut sink))) => {
                    let frame = CloseFrame {
                        code: CloseCode::Normal,
                        reason: "".into(),
                    };
                    let close = sink.send(Message::Close(Some(frame)));
                    let _ = tokio::time::timeout(deadline, close).await;
                }
                _ => writer.0.abort(),
            }
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_read_as_uuids() {
        let p: Prefix = [
            0x3f, 0x1c, 0x2a, 0x90, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb,
        ];
        assert_eq!(uuid(&p), "3f1c2a90-0001-0203-0405-060708090a0b");
    }

    #[test]
    fn an_end_is_recognised_by_its_bytes() {
        assert_eq!(wire::decode_strict(&END), Ok(Frame::End));
    }
}

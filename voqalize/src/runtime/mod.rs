//! One session's runtime: the reader, the feeder and the writer (docs/protocol.md §4).
//!
//! * The **reader** (this future) decodes inbound frames. It settles `Response`s and applies
//!   `Interruption`s itself, at once, so neither waits behind a slow callback (docs/protocol.md §7 D14), and
//!   queues the rest on the [`Lanes`].
//! * The **feeder** (a future beside the reader, in this task) handles queued frames one at a
//!   time, awaiting `on_session_start`, `greet`, `on_finalize` and `on_error`, and spawning a task
//!   per turn and per `on_rtvi`.
//! * The **writer** (a future beside the reader, in this task) sends the outbound lane FIFO,
//!   every frame that is ready in one batch.
//! * The **alert pump**, inside the feeder's future, delivers local congestion errors to
//!   `on_error` beside a busy feeder.
//!
//! An idle call is one task (this one) and the shared state: it is kept small
//! (callbacks and once-a-call steps are boxed, signals are inline flags rather than channels),
//! because a process hosts thousands of calls. For the same reason the futures that live as long
//! as a call (the session, the reader, the writer, the feeder) are functions that return an
//! `async move` block rather than `async fn`s: an `async fn` keeps each argument twice for its
//! whole life (as passed, and as moved into its body), a block keeps what it captured once. A
//! future made outside a block is chained onto (`then`, `map`), not awaited inside one, which
//! would hold it twice too.

mod feeder;
mod inbound;
mod reader;
mod turns;
mod writer;

/// Awaits `step` from the heap. A call's tasks live as long as the call and mostly wait; a step
/// they take rarely (a brain callback, the session's start and teardown, a write batch, a close)
/// would, awaited inline, size the task's future for its largest step's state for the whole call.
/// Every such step goes through here, so the reason is written once.
pub(crate) fn out_of_line<F: Future>(step: F) -> std::pin::Pin<Box<F>> {
    Box::pin(step)
}

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::FusedFuture;

use crate::brain::{BrainResult, MakeBrain};
use crate::channel::{CLOSE_INTERNAL, CLOSE_NORMAL, ChannelError, ChannelReceiver, ChannelSender};
use crate::queue::Alerts;
use crate::record::Tape;
use crate::recover::{lock, panic_text};
use crate::session::outbound::Outbound;
use feeder::Feeder;
use inbound::{Lanes, Stop};
use turns::Control;

/// Tunables of one session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_lane_frames: usize,
    /// The byte bound of each bulk lane (frames' [`weight`](crate::wire::Frame::weight)).
    pub(crate) max_lane_bytes: usize,
    /// How many turns may run at once; a stimulus past it waits for one to end.
    pub(crate) max_turns: usize,
    pub(crate) request_timeout: Duration,
    /// How long after the upgrade the peer has to send `SessionStart`.
    pub(crate) start_timeout: Duration,
    /// The largest JSON text field (`init`, RTVI `data`) parsed, in bytes.
    pub(crate) max_json: usize,
    /// How often an idle peer is pinged.
    pub(crate) ping_interval: Duration,
    /// How long the session waits for any sign of life after a ping before it ends.
    pub(crate) pong_timeout: Duration,
    /// The largest frame handed to the transport, in bytes (the socket's message limit); a bigger
    /// one ends the call (docs/protocol.md §3.2).
    pub(crate) max_frame: usize,
    /// The most bytes of text one `SpeechChunk` carries; a longer write is split (docs/protocol.md §4.5).
    pub(crate) chunk_bytes: usize,
    /// Whether the session pings its peer and ends when it hears nothing for `ping_interval +
    /// pong_timeout`. Off on the relay leg, where the relay connection owns liveness
    /// (docs/protocol.md §2.2) and a silent caller is no sign of a dead peer.
    pub(crate) session_keepalive: bool,
}

/// How a session's run ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The session ended; the connection closes with `close`. `by_peer`: the peer ended it (`End`
    /// or `Cancel`), so it is owed no `End` back (the relay leg sends one otherwise).
    Ended {
        close: u16,
        #[cfg_attr(not(feature = "relay"), allow(dead_code))]
        by_peer: bool,
    },
    /// Sending failed: the transport's error.
    SendFailed(ChannelError),
}

/// What the host knows of a call before its `SessionStart`.
#[derive(Debug, Default)]
pub(crate) struct Call {
    /// The session id the connection was opened (and its token verified) for: a
    /// `SessionStart` naming another session is refused, so the brain never acts for a session
    /// the peer was not authorised for. The relay leg has none: its sessions are named by the
    /// relay.
    pub(crate) connection: Option<Arc<str>>,
    /// The call's recording, when it is recorded.
    pub(crate) tape: Option<Arc<Tape>>,
    /// Told every answered tool call, when watched (the testing kit's driver).
    pub(crate) tool_watch: Option<crate::session::ToolWatch>,
    /// Told every turn that ran to its end, when watched (the testing kit's driver).
    pub(crate) turn_watch: Option<crate::session::TurnWatch>,
}

/// Runs one session over a split channel until it ends; see [`crate::host::run_session`].
/// Returns the sender back when the writer drained in time, so the host can close it.
#[allow(
    clippy::manual_async_fn,
    reason = "an async block holds its arguments once (see the module note)"
)]
pub(crate) fn run<M: MakeBrain, S: ChannelSender>(
    mut sender: S,
    mut receiver: impl ChannelReceiver,
    factory: Arc<M>,
    limits: Limits,
    call: Call,
) -> impl Future<Output = (Outcome, Option<S>)> {
    async move {
        let limits = &limits;
        let tape = call.tape.clone();
        let alerts = Arc::new(Alerts::default());
        let (lanes, out) = queues(limits, &alerts);
        let shared = Shared {
            lanes,
            out,
            control: Arc::new(Control::default()),
        };
        let (sent, stop, close) = drive(
            (factory, call, alerts),
            (&mut sender, &mut receiver),
            &shared,
            limits,
            tape.as_deref(),
        )
        .await;
        if let Some(tape) = &tape {
            out_of_line(tape.finish()).await;
        }
        outcome(sent, &stop, close, sender)
    }
}

/// What the reader, the feeder and the writer share.
struct Shared {
    lanes: Arc<Lanes>,
    out: Arc<Outbound>,
    control: Arc<Control>,
}

/// How the writer ended (its result, or the drain's timeout).
type Sent = Result<Result<(), ChannelError>, tokio::time::error::Elapsed>;

/// Runs the reader, the feeder and the writer beside each other in this task until the feeder
/// stops, then lets the writer drain briefly: how the writer ended, why the session stopped, and
/// the close code.
///
/// The feeder runs here too rather than in a task of its own, which would cost an idle call
/// about 1 kB (its cell, its span). A panic in it (not in the brain's callbacks, which are caught
/// where they run) ends the session, not the task. The writer borrows the sender, so the call's
/// future holds it once.
#[allow(
    clippy::manual_async_fn,
    reason = "an async block holds its arguments once (see the module note)"
)]
fn drive<'a, M: MakeBrain, S: ChannelSender>(
    (factory, call, alerts): (Arc<M>, Call, Arc<Alerts>),
    (sender, receiver): (&'a mut S, &'a mut impl ChannelReceiver),
    shared: &'a Shared,
    limits: &'a Limits,
    tape: Option<&'a Tape>,
) -> impl Future<Output = (Sent, Stop, u16)> + 'a {
    async move {
        let Shared {
            lanes,
            out,
            control,
        } = shared;
        // Made here, not passed in: an argument is kept for the whole call beside what it became.
        let feeder = Feeder::new(
            factory,
            limits,
            call,
            lanes.clone(),
            out.clone(),
            control.clone(),
            alerts,
        );
        let mut feeder = pin!(AssertUnwindSafe(feeder.run()).catch_unwind().fuse());
        let pings = limits.session_keepalive.then_some(limits.ping_interval);
        let writer = writer::write_loop(sender, out, lanes, pings, limits.max_frame, tape);
        let mut writer = pin!(writer.fuse());
        let mut written = None;
        let mut reader =
            pin!(reader::read_loop(receiver, lanes, out, control, limits, tape).fuse());
        let mut close = CLOSE_NORMAL;
        let mut overflowed = false;
        let stop = loop {
            tokio::select! {
                // The reader last: the three share the task's budget of operations a poll
                // (tokio's cooperative scheduling), and a reader polled first under a flood of
                // frames would spend it all, leaving the feeder none to drain the lane with until
                // the lane overflowed. Polled last, it reads what the budget leaves, and the frames
                // it queues are taken in the next pass.
                biased;
                stop = &mut feeder => break stop,
                sent = &mut writer, if written.is_none() => written = Some(sent),
                code = &mut reader, if !reader.is_terminated() => {
                    close = code.unwrap_or(CLOSE_NORMAL);
                }
                () = out.overflowed(), if !overflowed => {
                    overflowed = true;
                    lanes.stop(Stop::Overloaded);
                }
            }
        };
        let stop = stopped(stop, &mut close);

        if let Some(timer) = lock(&control.end_timer).take() {
            timer.abort();
        }
        // A call the server's shutdown ended is owed its End (the brain's, when it sent one first).
        if stop == Stop::Closed(crate::session::EndReason::Shutdown) {
            out.push(crate::wire::Frame::End);
        }
        // Let the writer drain what the brain emitted before teardown, briefly.
        out.close();
        let sent = match written {
            Some(sent) => Ok(sent),
            None => tokio::time::timeout(Duration::from_secs(1), &mut writer).await,
        };
        (sent, stop, close)
    }
}

/// The session's inbound lanes and its outbound lane, each bounded by `limits`.
fn queues(limits: &Limits, alerts: &Arc<Alerts>) -> (Arc<Lanes>, Arc<Outbound>) {
    let lanes = Arc::new(Lanes::new(
        limits.max_lane_frames,
        limits.max_lane_bytes,
        alerts.clone(),
    ));
    let out = Arc::new(Outbound::new(
        limits.max_lane_frames,
        limits.max_lane_bytes,
        alerts.clone(),
    ));
    (lanes, out)
}

/// How the feeder stopped the session (a feeder that panicked: as a lost transport); a frame
/// too big sets the close code to `CLOSE_INTERNAL`.
fn stopped(ran: Result<Stop, Box<dyn std::any::Any + Send>>, close: &mut u16) -> Stop {
    let stop = ran.unwrap_or_else(|panic| {
        tracing::error!(
            "session: the feeder failed: {}",
            crate::logline::outside(&panic_text(&*panic))
        );
        Stop::Closed(crate::session::EndReason::TransportLost(
            crate::session::TransportLoss::Closed,
        ))
    });
    if stop == Stop::FrameTooBig {
        *close = CLOSE_INTERNAL;
    }
    stop
}

/// The session's outcome from how the writer ended (`sent`: its result, or the drain's timeout),
/// with the sender back when it drained in time.
fn outcome<S>(sent: Sent, stop: &Stop, close: u16, sender: S) -> (Outcome, Option<S>) {
    let by_peer = matches!(stop, Stop::End | Stop::Cancel);
    match sent {
        Ok(Ok(())) => (Outcome::Ended { close, by_peer }, Some(sender)),
        Ok(Err(cause)) => (Outcome::SendFailed(cause), None),
        Err(_) => {
            tracing::warn!(
                "session: the peer did not take the last frames within 1s; dropping them"
            );
            debug_assert!(
                !matches!(stop, Stop::SendFailed),
                "a failed writer has returned"
            );
            (Outcome::Ended { close, by_peer }, None)
        }
    }
}

/// Runs a brain callback, turning an error or a panic into the text to log. A combinator, not an
/// `async fn`: an `async fn` holds its argument twice (as passed, and as awaited), and a model
/// brain's callback is its whole turn, kilobytes that every turn would copy twice over.
pub(crate) fn guarded<T>(
    fut: impl Future<Output = BrainResult<T>>,
) -> impl Future<Output = Result<T, String>> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .map(|caught| match caught {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(panic) => Err(panic_text(&*panic)),
        })
}

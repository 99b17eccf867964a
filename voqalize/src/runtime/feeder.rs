//! The feeder (a future in the call's task): takes inbound frames one at a time and runs the
//! brain's callbacks for them (docs/protocol.md §4): the start hooks, `on_finalize` and `on_error`
//! in order; a task per turn; one RTVI task per session; the alert pump; teardown.

use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::Fuse;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::inbound::{Inbound, Lanes, Next, Stop};
use super::turns::{Control, RunningTurn};
use super::{Limits, guarded, out_of_line};
use crate::brain::{Brain, MakeBrain};
use crate::logline::{Repeated, outside, outside_n};
use crate::queue::Alerts;
use crate::record::Tape;
use crate::recover::{lock, panic_text};
use crate::session::outbound::Outbound;
use crate::session::{
    BoundExceeded, EndReason, Session, SessionLimits, TransportLoss, Turn, context,
};
use crate::wire::{self, ErrorCode, ErrorFrame, Frame, SessionStart, WIRE_VERSION, clip};

/// The most bytes of text an `Error` frame the brain sends carries: its message quotes the brain's
/// own error, which may hold a provider's or a model's words of any length.
const ERROR_MESSAGE_BYTES: usize = 1024;

/// How many bytes of a session id a log line keeps (the id comes from the peer).
const ID_CHARS: usize = 64;

pub(super) struct Feeder<M: MakeBrain> {
    factory: Arc<M>,
    /// How many app messages may wait for `on_rtvi`.
    max_lane_frames: usize,
    /// How many bytes of app messages may wait for `on_rtvi`.
    max_lane_bytes: usize,
    /// How many turns may run at once.
    max_turns: usize,
    /// Turns that waited for a place under `max_turns`.
    waiting_turns: Repeated,
    /// The bound on `on_session_end`, and each request's timeout.
    request_timeout: Duration,
    /// The frame bounds a session speaks within.
    session_limits: SessionLimits,
    /// The session id the connection was opened and verified for.
    connection: Option<Arc<str>>,
    lanes: Arc<Lanes>,
    out: Arc<Outbound>,
    control: Arc<Control>,
    /// Set once, at `SessionStart`; shared with the alert pump.
    brain: Arc<OnceLock<Arc<M::Brain>>>,
    alerts: Arc<Alerts>,
    rtvi_tx: Option<mpsc::Sender<wire::Rtvi>>,
    /// The weight of the app messages waiting for `on_rtvi` (shared with the RTVI task).
    rtvi_bytes: Option<Arc<AtomicUsize>>,
    rtvi_worker: Option<JoinHandle<()>>,
    rtvi_congested: bool,
    /// Frames the peer should not send: SessionStarts after the first (the first of them is
    /// answered with an error) and RTVI types only the brain sends.
    unwanted: Repeated,
    answered_second_start: bool,
    /// The call's recording, when it is recorded (the session hands it to the voice core).
    tape: Option<Arc<Tape>>,
    /// Told every answered tool call, when watched.
    tool_watch: Option<crate::session::ToolWatch>,
    /// Told every turn that ran to its end, when watched.
    turn_watch: Option<crate::session::TurnWatch>,
}

enum Stimulus {
    Greeting(String),
    Message(wire::UserMessage),
    Idle(wire::UserIdle),
}

impl<M: MakeBrain> Feeder<M> {
    pub(super) fn new(
        factory: Arc<M>,
        limits: &Limits,
        call: super::Call,
        lanes: Arc<Lanes>,
        out: Arc<Outbound>,
        control: Arc<Control>,
        alerts: Arc<Alerts>,
    ) -> Self {
        Feeder {
            factory,
            max_lane_frames: limits.max_lane_frames,
            max_lane_bytes: limits.max_lane_bytes,
            request_timeout: limits.request_timeout,
            session_limits: SessionLimits {
                request_timeout: limits.request_timeout,
                chunk_bytes: limits.chunk_bytes,
                max_frame: limits.max_frame,
            },
            connection: call.connection,
            lanes,
            out,
            control,
            brain: Arc::default(),
            alerts,
            rtvi_tx: None,
            rtvi_bytes: None,
            rtvi_worker: None,
            rtvi_congested: false,
            unwanted: Repeated::new("second SessionStarts and brain-only RTVI frames"),
            max_turns: limits.max_turns,
            waiting_turns: Repeated::new("turns that waited for another to end"),
            answered_second_start: false,
            tape: call.tape,
            tool_watch: call.tool_watch,
            turn_watch: call.turn_watch,
        }
    }

    #[allow(
        clippy::manual_async_fn,
        reason = "an async block holds its arguments once (see the module note)"
    )]
    pub(super) fn run(mut self) -> impl Future<Output = Stop> {
        async move {
            // Congestion errors reach `on_error` beside the feeder's own callbacks (a busy feeder is
            // why they happen, even inside `on_session_start`): the pump never completes, and is
            // polled beside whatever the feeder awaits.
            let pump = pump_alerts(
                self.alerts.clone(),
                self.control.clone(),
                self.brain.clone(),
            );
            let mut pump = pin!(pump.fuse());
            let stop = loop {
                // In a block of its own, so the taken item's place is not kept while it is handled.
                let item = {
                    let next = tokio::select! {
                        biased;
                        next = self.lanes.next() => next,
                        () = &mut pump => continue,
                    };
                    match next {
                        Next::Stop(stop) => break stop,
                        Next::Item(item) => item,
                    }
                };
                // Cancel, a closed channel, a failed send or a late End abandon a stuck callback.
                let lanes = self.lanes.clone();
                tokio::select! {
                    biased;
                    () = out_of_line(self.handle(item)) => {}
                    () = lanes.halted() => {
                        tracing::warn!("session: abandoning a callback that had not returned");
                    }
                    () = &mut pump => {}
                }
            };
            // No congestion error reaches the brain once teardown begins.
            pump.set(Fuse::terminated());
            if stop == Stop::Overloaded {
                // Tell the peer why the call ends (it is dropped if the peer does not read).
                self.out.push(Frame::Error(ErrorFrame {
                    code: ErrorCode::Overload,
                    message: super::inbound::INBOUND_OVERFLOW.to_owned(),
                    fatal: true,
                }));
                self.out.push(Frame::End);
            }
            out_of_line(self.teardown(&stop)).await;
            stop
        }
    }

    fn session(&self) -> Option<(Session, Arc<M::Brain>)> {
        Some((
            self.control.session.get()?.clone(),
            self.brain.get()?.clone(),
        ))
    }

    fn dead(&self) -> bool {
        self.control.dead.load(Ordering::Acquire)
    }

    /// Sends a fatal `Error` then `End`, and runs no further callbacks. The message is cut to
    /// [`ERROR_MESSAGE_BYTES`].
    fn refuse(&self, code: ErrorCode, mut message: String, reason: &str) {
        clip(&mut message, ERROR_MESSAGE_BYTES);
        self.control.dead.store(true, Ordering::Release);
        self.out.push(Frame::Error(ErrorFrame {
            code,
            message,
            fatal: true,
        }));
        match self.control.session.get() {
            Some(s) => s.end(reason),
            None => {
                self.out.push(Frame::End);
            }
        }
    }

    async fn handle(&mut self, item: Inbound) {
        let frame = match item {
            Inbound::BadStart(session_id) => {
                if self.control.session.get().is_none() && !self.dead() {
                    tracing::error!(
                        "brain: refusing session {}: SessionStart.init is not a JSON object",
                        outside_n(&session_id, ID_CHARS)
                    );
                    self.refuse(
                        ErrorCode::Protocol,
                        "SessionStart.init must be a JSON object".to_owned(),
                        "bad_init",
                    );
                }
                return;
            }
            Inbound::Finalize {
                speech_id,
                heard,
                seen,
            } => return out_of_line(self.finalize(speech_id, heard, seen)).await,
            Inbound::Frame(frame) => frame,
        };
        if let Frame::SessionStart(start) = frame {
            return out_of_line(self.start(start)).await;
        }
        let Some((session, brain)) = self.session() else {
            tracing::debug!("dropping {} that arrived before SessionStart", frame.name());
            return;
        };
        if self.dead() {
            tracing::debug!("session is refused; dropping {}", frame.name());
            return;
        }
        match frame {
            Frame::UserMessage(m) => self.spawn_turn(m.turn_id, Stimulus::Message(m)).await,
            Frame::UserIdle(i) => self.spawn_turn(i.turn_id, Stimulus::Idle(i)).await,
            Frame::Rtvi(mut rtvi) => {
                if rtvi.kind.brain_may_send() {
                    if self.unwanted.allow() {
                        tracing::warn!(
                            "dropping inbound RTVI {}: only the brain sends it",
                            rtvi.kind
                        );
                    }
                    return;
                }
                rtvi.turn_id = None;
                self.deliver_rtvi(&session, &brain, rtvi);
            }
            Frame::Error(e) => {
                let fut = context::scope(session.clone(), None, brain.on_error(&session, e));
                if let Err(e) = out_of_line(guarded(fut)).await
                    && lock(&self.control.failures).allow()
                {
                    tracing::error!("brain: on_error failed: {}", outside(&e));
                }
            }
            other => tracing::debug!("ignoring inbound {}", other.name()),
        }
    }

    /// Applies a `Finalize` read when `seen` outbound frames had been handed over, then runs
    /// `on_finalize`; a Finalize for no unit this session has on the wire is dropped by the
    /// session, and `on_finalize` does not run for it (docs/protocol.md §4.7).
    async fn finalize(&mut self, speech_id: u64, heard: String, seen: u64) {
        let Some((session, brain)) = self.session() else {
            tracing::debug!("dropping a Finalize that arrived before SessionStart");
            return;
        };
        if self.dead() {
            return;
        }
        let Some(fin) = session.settle_unit(speech_id, heard, seen) else {
            return;
        };
        let fut = context::scope(session.clone(), None, brain.on_finalize(&session, fin));
        if let Err(e) = out_of_line(guarded(fut)).await
            && lock(&self.control.failures).allow()
        {
            tracing::error!("brain: on_finalize failed: {}", outside(&e));
        }
    }

    /// A `SessionStart` on a live session. A peer may send these without end (and without
    /// reading): one line and one answer a session, the rest counted.
    fn second_start(&mut self) {
        if self.unwanted.allow() {
            tracing::warn!("ignoring a second SessionStart on a live session");
        }
        if !std::mem::replace(&mut self.answered_second_start, true) {
            self.out.push(Frame::Error(ErrorFrame {
                code: ErrorCode::Protocol,
                message: "a second SessionStart on a live session is ignored".to_owned(),
                fatal: false,
            }));
        }
    }

    /// Makes the call's brain, with `session` current so what the factory makes (a voice core)
    /// can follow the call from its first frame. A factory that fails or panics refuses the call.
    fn make_brain(&mut self, session: &Session) -> Option<Arc<M::Brain>> {
        let factory = self.factory.clone();
        let made = std::panic::catch_unwind(AssertUnwindSafe(|| {
            context::sync_scope(session.clone(), || factory.make())
        }))
        .unwrap_or_else(|panic| Err(panic_text(&*panic).into()));
        match made {
            Ok(brain) => Some(Arc::new(brain)),
            Err(why) => {
                tracing::error!(
                    "brain: the brain factory failed for session {}: {}",
                    outside_n(session.id(), ID_CHARS),
                    outside(&why.to_string())
                );
                self.refuse(
                    ErrorCode::Internal,
                    format!("brain factory failed: {why}"),
                    "factory_failed",
                );
                None
            }
        }
    }

    /// Refuses a `SessionStart` for another session than the connection was opened for (the
    /// direct leg's token names one); true when it did.
    fn other_session(&mut self, sid: &str) -> bool {
        let Some(connection) = self.connection.as_deref() else {
            return false;
        };
        if sid == connection {
            return false;
        }
        tracing::error!(
            "brain: refusing a SessionStart for session {} on a connection opened for {}",
            outside_n(sid, ID_CHARS),
            outside_n(connection, ID_CHARS),
        );
        self.refuse(
            ErrorCode::Protocol,
            "SessionStart names another session than the one this connection was opened for"
                .to_owned(),
            "session_id_mismatch",
        );
        true
    }

    /// Refuses a session that speaks another wire version `v` than this SDK; true when it did.
    fn other_wire(&mut self, v: u32, sid: &str) -> bool {
        if v == WIRE_VERSION {
            return false;
        }
        tracing::error!(
            "brain: refusing session {} — Voqalize speaks wire {v}, this SDK speaks {WIRE_VERSION}",
            outside_n(sid, ID_CHARS)
        );
        self.refuse(
            ErrorCode::WireVersion,
            format!("wire version mismatch: Voqalize speaks {v}, this SDK speaks {WIRE_VERSION}"),
            "wire_version_mismatch",
        );
        true
    }

    async fn start(&mut self, start: SessionStart) {
        if self.control.session.get().is_some() || self.dead() {
            self.second_start();
            return;
        }
        let sid = start.session_id.clone();
        if self.other_session(&sid) {
            return;
        }
        let session = Session::new(
            start.session_id,
            start.init,
            start.capabilities,
            self.out.clone(),
            self.session_limits,
            (self.tape.clone(), self.tool_watch.clone()),
        );
        let Some(brain) = self.make_brain(&session) else {
            return;
        };
        session.turn_began(start.turn_id);
        let shared: Arc<dyn std::any::Any + Send + Sync> = brain.clone();
        session.set_brain(Arc::downgrade(&shared));
        let _ = self.control.session.set(session.clone());
        let _ = self.brain.set(brain.clone());
        crate::metrics::call_started(crate::metrics::leg(self.connection.is_some()));

        if self.other_wire(start.wire_version, &sid) {
            return;
        }
        let fut = context::scope(session.clone(), None, brain.on_session_start(&session));
        if let Err(e) = guarded(fut).await {
            tracing::error!(
                "brain: on_session_start failed for session {}: {}",
                outside_n(&sid, ID_CHARS),
                outside(&e)
            );
            self.refuse(
                ErrorCode::Internal,
                format!("on_session_start failed: {e}"),
                "on_session_start_failed",
            );
            return;
        }
        let fut = context::scope(session.clone(), None, brain.greet(&session));
        match guarded(fut).await {
            Err(e) => {
                tracing::error!(
                    "brain: greet failed for session {}: {}",
                    outside_n(&sid, ID_CHARS),
                    outside(&e)
                );
                self.refuse(
                    ErrorCode::Internal,
                    format!("greet failed: {e}"),
                    "greet_failed",
                );
            }
            Ok(Some(text)) if !text.is_empty() => {
                self.spawn_turn(start.turn_id, Stimulus::Greeting(text))
                    .await;
            }
            Ok(_) => {}
        }
    }

    /// Hands an app message to the session's RTVI task, which runs `on_rtvi` for each message in
    /// arrival order, beside the feeder and the turns and untouched by barge-in. When `max_lane_frames`
    /// messages or `max_lane_bytes` bytes of them already wait, the new one is shed (one
    /// `OVERLOAD` per episode).
    fn deliver_rtvi(&mut self, session: &Session, brain: &Arc<M::Brain>, rtvi: wire::Rtvi) {
        if self.rtvi_tx.is_none() {
            let (tx, mut rx) = mpsc::channel::<wire::Rtvi>(self.max_lane_frames.max(1));
            let bytes = Arc::new(AtomicUsize::new(0));
            let (s, b, control) = (session.clone(), brain.clone(), self.control.clone());
            let taken = bytes.clone();
            let worker = async move {
                while let Some(message) = rx.recv().await {
                    taken.fetch_sub(message.weight(), Ordering::AcqRel);
                    let kind = message.kind;
                    if let Err(e) = guarded(b.on_rtvi(&s, message)).await
                        && lock(&control.failures).allow()
                    {
                        tracing::error!("brain: on_rtvi failed for {kind}: {}", outside(&e));
                    }
                }
            };
            self.rtvi_worker = Some(tokio::spawn(
                context::scope(session.clone(), None, worker).in_current_span(),
            ));
            self.rtvi_tx = Some(tx);
            self.rtvi_bytes = Some(bytes);
        }
        let (Some(tx), Some(bytes)) = (&self.rtvi_tx, &self.rtvi_bytes) else {
            return;
        };
        // Counted before it is handed over, so the task never takes back more than was added.
        let weight = rtvi.weight();
        let queued = bytes.fetch_add(weight, Ordering::AcqRel);
        // Past either bound the message is shed: the RTVI task is behind.
        let sent = queued < self.max_lane_bytes && tx.try_send(rtvi).is_ok();
        if sent {
            self.rtvi_congested = false;
        } else {
            bytes.fetch_sub(weight, Ordering::AcqRel);
            tracing::debug!("on_rtvi is behind; dropping an app message");
            crate::metrics::shed("rtvi");
            if !std::mem::replace(&mut self.rtvi_congested, true) {
                self.lanes.signal_congestion();
            }
        }
    }

    /// Starts a turn in a task of its own, once fewer than `max_turns` run: a peer that sends a
    /// hundred messages at once must not run a hundred turns (each a model request) at once. The
    /// feeder waits for a place, so the frames behind the message wait too, on the inbound lane and
    /// its bounds; a barge-in frees places at once (docs/protocol.md §4.4).
    /// Waits until fewer than `max_turns` turns run; false when turn `turn_id` fell to the
    /// watermark meanwhile (a barge-in dropped it: it does not start).
    async fn room_for(&mut self, turn_id: u64) -> bool {
        let control = self.control.clone();
        loop {
            let ended = control.turn_ended.notified();
            let room = {
                let turns = lock(&control.turns);
                if turn_id <= turns.watermark {
                    tracing::debug!("turn {turn_id} is at or below the watermark; not starting it");
                    return false;
                }
                turns.running.len() < self.max_turns
            };
            if room {
                return true;
            }
            if self.waiting_turns.allow() {
                tracing::warn!(
                    "session: {} running; turn {turn_id} waits for one to end",
                    crate::logline::count(self.max_turns, "turn")
                );
            }
            ended.await;
        }
    }

    async fn spawn_turn(&mut self, turn_id: u64, stimulus: Stimulus) {
        let Some((session, brain)) = self.session() else {
            return;
        };
        // When the user's message was read: its turn's first chunk is timed from here.
        let read = std::time::Instant::now();
        let control = self.control.clone();
        if !self.room_for(turn_id).await {
            return;
        }
        // The feeder is the only one that adds turns: the place found above is still free. A
        // barge-in may have come in between.
        let mut turns = lock(&control.turns);
        if turn_id <= turns.watermark {
            tracing::debug!("turn {turn_id} is at or below the watermark; not starting it");
            return;
        }
        if !matches!(stimulus, Stimulus::Greeting(_)) {
            session.turn_began(turn_id);
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        turns.next_key += 1;
        let key = turns.next_key;
        let ended = control.clone();
        let (s, flag, watch) = (session.clone(), cancelled.clone(), self.turn_watch.clone());
        let task = async move {
            let mut turn = Turn::new(s, turn_id, flag);
            if let Stimulus::Message(m) = &stimulus {
                crate::metrics::turn();
                turn.session().user_said(&m.text);
                turn = turn.answering(m.text.clone(), read);
            }
            // The brain's future from the heap: a model-backed turn's state runs to kilobytes, and
            // inline it would size the task, which the runtime copies as it spawns and ends it.
            let result = match stimulus {
                Stimulus::Greeting(text) => {
                    turn.say(&text);
                    Ok(())
                }
                Stimulus::Message(m) => {
                    out_of_line(guarded(brain.on_user_message(&mut turn, m))).await
                }
                Stimulus::Idle(i) => out_of_line(guarded(brain.on_user_idle(&mut turn, i))).await,
            };
            if let Err(e) = result
                && lock(&ended.failures).allow()
            {
                tracing::error!(
                    "brain: turn failed (session {}, turn {turn_id}): {}",
                    outside_n(turn.session().id(), ID_CHARS),
                    outside(&e)
                );
            }
            let watched = watch.map(|w| (w, turn.session().clone()));
            drop(turn);
            let mut turns = lock(&ended.turns);
            if let Some(at) = turns.running.iter().position(|(k, _)| *k == key) {
                turns.running.swap_remove(at);
            }
            drop(turns);
            ended.turn_ended.notify_waiters();
            if let Some((watch, session)) = watched {
                (watch.0)(turn_id, session.frames_queued());
            }
        };
        let handle = tokio::spawn(
            context::scope_turn(session, turn_id, cancelled.clone(), task).in_current_span(),
        );
        turns.running.push((
            key,
            RunningTurn {
                turn_id,
                cancelled,
                handle,
            },
        ));
    }

    async fn teardown(&mut self, stop: &Stop) {
        // After End, app messages queued before it still reach on_rtvi (briefly); otherwise they
        // are dropped with the rest.
        if let (Stop::End, Some(tx)) = (stop, self.rtvi_tx.take()) {
            drop(tx);
            if let Some(worker) = self.rtvi_worker.take() {
                let drained = tokio::time::timeout(Duration::from_secs(1), worker).await;
                if drained.is_err() {
                    tracing::warn!("on_rtvi did not finish within 1s after End; stopping it");
                }
            }
        }
        let running: Vec<RunningTurn> = lock(&self.control.turns)
            .running
            .drain(..)
            .map(|(_, t)| t)
            .collect();
        for t in &running {
            t.cancelled.store(true, Ordering::Release);
            t.handle.abort();
        }
        self.rtvi_tx = None;
        let rtvi_worker = self.rtvi_worker.take();
        if let Some(h) = &rtvi_worker {
            h.abort();
        }
        for t in running {
            let _ = t.handle.await;
        }
        if let Some(h) = rtvi_worker {
            let _ = h.await;
        }
        if let Some((session, brain)) = self.session() {
            session.abandon_waiters();
            let reason = end_reason(stop, session.ended_by_brain());
            tracing::info!("session: ended: {reason}");
            if let EndReason::BoundExceeded(bound) = &reason {
                crate::metrics::bound_tripped(bound.label());
            }
            crate::metrics::call_ended(
                crate::metrics::leg(self.connection.is_some()),
                reason.label(),
            );
            let fut = context::scope(session.clone(), None, async {
                brain.on_session_end(&session, reason).await;
                Ok(())
            });
            match tokio::time::timeout(self.request_timeout, guarded(fut)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!("brain: on_session_end failed: {}", outside(&e)),
                Err(_) => tracing::error!(
                    "brain: on_session_end did not return within {:?}; abandoning it",
                    self.request_timeout
                ),
            }
        }
    }
}

/// Why the session ended, as the brain is told: the brain's own `End` (with its reason) before
/// what followed it (Voqalize's answering End, the connection closing), else what stopped it.
fn end_reason(stop: &Stop, ended_by_brain: Option<String>) -> EndReason {
    let reason = match stop {
        Stop::End => EndReason::Ended,
        Stop::Cancel => EndReason::Cancelled,
        Stop::Closed(reason) => reason.clone(),
        Stop::SendFailed => EndReason::TransportLost(TransportLoss::SendFailed),
        Stop::Overloaded => EndReason::BoundExceeded(BoundExceeded::Lane),
        Stop::FrameTooBig => EndReason::BoundExceeded(BoundExceeded::OutboundFrame),
    };
    match (ended_by_brain, reason) {
        (
            Some(reason),
            EndReason::Ended
            | EndReason::Cancelled
            | EndReason::TransportLost(TransportLoss::Closed),
        ) => EndReason::ByBrain { reason },
        (_, reason) => reason,
    }
}

/// Delivers the session's congestion errors to `on_error`, one at a time, until dropped. Nothing is
/// delivered before `SessionStart` made the brain, nor after a refusal (docs/protocol.md §7 D1).
async fn pump_alerts<B: Brain>(
    alerts: Arc<Alerts>,
    control: Arc<Control>,
    brain: Arc<OnceLock<Arc<B>>>,
) {
    loop {
        let error = alerts.next().await;
        let (Some(session), Some(brain)) = (control.session.get(), brain.get()) else {
            continue;
        };
        if control.dead.load(Ordering::Acquire) {
            continue;
        }
        let fut = context::scope(session.clone(), None, brain.on_error(session, error));
        if let Err(e) = out_of_line(guarded(fut)).await
            && lock(&control.failures).allow()
        {
            tracing::error!(
                "session: delivering congestion Error failed: {}",
                outside(&e)
            );
        }
    }
}

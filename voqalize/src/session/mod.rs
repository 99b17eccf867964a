//! The session: the brain's handles on one call. [`Session`] reads the call and sends everything
//! but speech; [`Turn`] and [`SpeechUnit`] speak. The state behind the handles (the unit book, the
//! pending requests, the outbound lane) lives here too, so every path of a frame the brain emits
//! starts in this module; the runtime that drives a brain sits above it in `crate::runtime`.

pub(crate) mod context;
mod current_call;
mod ending;
mod error;
mod heard;
mod heard_history;
pub(crate) mod outbound;
mod step;
mod tool_call;
mod turn;
mod units;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

pub use current_call::CurrentCall;
pub use ending::{BoundExceeded, EndReason, TransportLoss};
pub use error::SessionError;
pub use heard::HeardLines;
pub use heard_history::{AnswerPart, HeardHistory};
pub use step::Step;
pub(crate) use tool_call::Answered;
pub use tool_call::MAX_PROGRESS_BYTES;
#[cfg(feature = "model")]
pub(crate) use tool_call::PROGRESS_QUEUE;
pub(crate) use tool_call::{ToolWatch, TurnWatch};
pub use turn::{SpeechPiece, SpeechUnit, Turn};
pub use units::Finalized;
pub(crate) use units::shared_prefix;

use crate::actions::{Action, ui_command_data};
use crate::logline::{Repeated, outside, outside_n};
use crate::recover::lock;
use crate::wire::{Capabilities, Capability, Config, Frame, Response, Rtvi, RtviType, TurnStep};
use outbound::{Outbound, Pushed};
use units::{CancelStart, UnitBook};

/// How many turn start times a session remembers for `report_step` (docs/protocol.md §4.10).
const TURNS_KEPT: usize = 32;

struct Requests {
    seq: u64,
    waiting: HashMap<u64, oneshot::Sender<Response>>,
    /// Responses for no waiting request: a peer may send them at line rate.
    strays: Repeated,
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            seq: 0,
            waiting: HashMap::new(),
            strays: Repeated::new("Responses with nobody waiting"),
        }
    }
}

/// The bounds a session sends within, from the host's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionLimits {
    /// How long `configure` and `cancel_speech` wait for their answer.
    pub(crate) request_timeout: Duration,
    /// The most bytes of text one `SpeechChunk` carries (docs/protocol.md §4.5).
    pub(crate) chunk_bytes: usize,
    /// The largest frame the socket takes, in bytes.
    pub(crate) max_frame: usize,
}

/// What a frame carries besides its text fields, in bytes, at most: ids, tags and lengths. A
/// chunk of text is kept this far under the frame limit.
const FRAME_OVERHEAD: usize = 64;

/// How many bytes of the session id a log line keeps (the id comes from the peer).
const ID_CHARS: usize = 64;

struct Shared {
    id: String,
    init: Map<String, Value>,
    capabilities: Capabilities,
    out: Arc<Outbound>,
    units: Mutex<UnitBook>,
    requests: Mutex<Requests>,
    turn_starts: Mutex<VecDeque<(u64, Instant)>>,
    request_timeout: Duration,
    /// The most bytes of text in one `SpeechChunk`, kept under the frame limit.
    chunk_bytes: usize,
    /// The largest frame the socket takes, in bytes.
    max_frame: usize,
    /// What is told the user's words and heard truth as they happen (a voice core).
    listeners: Mutex<Vec<Weak<dyn Listener>>>,
    /// The reason the brain gave [`Session::end`], once its End was queued.
    ended_by_brain: Mutex<Option<String>>,
    /// The call's recording, when it is recorded: the voice core adds its model requests and
    /// tool calls.
    tape: Option<Arc<crate::record::Tape>>,
    /// Told every answered tool call (the testing kit's driver).
    tool_watch: Option<ToolWatch>,
    /// The call's brain, once made (weak: the runtime owns it): a tool run that outlives its
    /// turn holds it through this.
    brain: std::sync::OnceLock<Weak<dyn std::any::Any + Send + Sync>>,
}

/// Something kept up to date with the call as it happens: the user's words as each turn answering
/// them starts, and what the user heard of each unit as it is finalized. The voice core's `Model`
/// is one, attached to the session of the factory that made it, so a brain holding a `Model`
/// writes no code to feed it (docs/protocol.md §6.10).
pub(crate) trait Listener: Send + Sync {
    /// A turn answering the user's `text` starts.
    fn user_said(&self, text: &str);
    /// A unit was finalized: what was heard of it.
    fn heard(&self, finalized: &Finalized);
}

/// The most bytes of the brain's reason for ending that the session keeps for `on_session_end`.
const MAX_END_REASON: usize = 1024;

/// How many listeners one session keeps (a `Model` per call; a brain may hold a few).
#[cfg(feature = "model")]
const MAX_LISTENERS: usize = 16;

/// The brain's handle on one call: a cheap `Clone` passed to every callback.
///
/// Created when `SessionStart` is handled; it reads the call's id, `init` data and capabilities,
/// and sends everything the brain says besides speech: UI commands ([`dispatch`](Self::dispatch)),
/// RTVI messages, configuration requests, speech cancels, turn steps and the end of the call.
/// Speech itself goes through a [`Turn`].
#[derive(Clone)]
pub struct Session {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("capabilities", &self.shared.capabilities)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        id: String,
        init: Map<String, Value>,
        capabilities: Capabilities,
        out: Arc<Outbound>,
        limits: SessionLimits,
        (tape, tool_watch): (Option<Arc<crate::record::Tape>>, Option<ToolWatch>),
    ) -> Self {
        let room = limits.max_frame.saturating_sub(FRAME_OVERHEAD);
        Session {
            shared: Arc::new(Shared {
                id,
                init,
                capabilities,
                out,
                units: Mutex::new(UnitBook::default()),
                requests: Mutex::new(Requests::default()),
                turn_starts: Mutex::new(VecDeque::new()),
                request_timeout: limits.request_timeout,
                // At least one character of any width (4 bytes), whatever was configured.
                chunk_bytes: limits.chunk_bytes.min(room).max(4),
                max_frame: limits.max_frame,
                listeners: Mutex::new(Vec::new()),
                ended_by_brain: Mutex::new(None),
                tape,
                tool_watch,
                brain: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The session serving the running brain code, when called from inside a brain callback, a
    /// turn, or a tool. `None` elsewhere (including tasks the brain spawned itself).
    pub fn current() -> Option<Session> {
        context::current().map(|c| c.session)
    }

    /// The runtime's session id (`SessionStart.session_id`).
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Remembers the call's brain (the runtime's, once made).
    pub(crate) fn set_brain(&self, brain: Weak<dyn std::any::Any + Send + Sync>) {
        let _ = self.shared.brain.set(brain);
    }

    /// The call's brain, while the runtime holds it.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn brain(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        self.shared.brain.get().and_then(Weak::upgrade)
    }

    /// The call's recording, when it is recorded.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn tape(&self) -> Option<&Arc<crate::record::Tape>> {
        self.shared.tape.as_ref()
    }

    /// The customer data the call was started with (`SessionStart.init`, a JSON object).
    pub fn init(&self) -> &Map<String, Value> {
        &self.shared.init
    }

    /// What the runtime understands; fixed for the session's life.
    pub fn capabilities(&self) -> &Capabilities {
        &self.shared.capabilities
    }

    /// Whether the runtime advertised `capability`.
    pub fn can(&self, capability: Capability) -> bool {
        self.shared.capabilities.contains(&capability)
    }

    fn require(&self, op: &'static str, capability: Capability) -> Result<(), SessionError> {
        if self.can(capability) {
            Ok(())
        } else {
            Err(SessionError::Unsupported { op, capability })
        }
    }

    /// Queues a frame on the outbound lane, unless the code emitting it runs for a turn that was
    /// cancelled (a barge-in stops everything the turn sends, not only its speech).
    pub(crate) fn emit(&self, frame: Frame) -> Pushed {
        self.emit_numbered(frame).0
    }

    /// [`emit`](Self::emit), and the frame's number in the outbound lane's order when it was
    /// queued (0 when it was not): see [`Outbound::push_numbered`].
    fn emit_numbered(&self, frame: Frame) -> (Pushed, u64) {
        if context::turn_cancelled() {
            tracing::debug!("dropping {} from a cancelled turn", frame.name());
            return (Pushed::TurnCancelled, 0);
        }
        self.shared.out.push_numbered(frame)
    }

    /// The most bytes of text one `SpeechChunk` carries.
    fn chunk_bytes(&self) -> usize {
        self.shared.chunk_bytes
    }

    /// Sends a UI command to the app: an RTVI `ui-command` with data
    /// `{"command": A::NAME, "payload": <every field, null included>}`. Never blocks; it lands on
    /// the wire exactly where it was called relative to speech.
    ///
    /// # Errors
    /// [`SessionError::Json`] when the action cannot be serialised; [`SessionError::TooLarge`]
    /// when the command would be over the socket's message limit. Nothing is sent in either case.
    pub fn dispatch<A: Action + ?Sized>(&self, action: &A) -> Result<(), SessionError> {
        let data = ui_command_data(action)?;
        self.send_rtvi_value(RtviType::UiCommand, Some(data), None)
    }

    /// Sends an RTVI message to the app. `data` is serialised to JSON now (`None` is sent as
    /// `null`); pass the `id` of the message you answer. Inside a turn the frame carries the turn id
    /// as a trace annotation.
    ///
    /// # Errors
    /// [`SessionError::RtviNotAllowed`] for a type only the app may send (client-message, send-text,
    /// ui-event, ui-snapshot, ui-cancel-job-group); [`SessionError::Json`] when `data` cannot be
    /// serialised; [`SessionError::TooLarge`] when the frame would be over the socket's message
    /// limit (`HostBuilder::max_message_bytes`, 1 MiB by default). Nothing is sent in any case.
    pub fn send_rtvi<T: Serialize + ?Sized>(
        &self,
        kind: RtviType,
        data: Option<&T>,
        id: Option<String>,
    ) -> Result<(), SessionError> {
        let data = data.map(serde_json::to_value).transpose()?;
        self.send_rtvi_value(kind, data, id)
    }

    fn send_rtvi_value(
        &self,
        kind: RtviType,
        data: Option<Value>,
        id: Option<String>,
    ) -> Result<(), SessionError> {
        if !kind.brain_may_send() {
            return Err(SessionError::RtviNotAllowed(kind));
        }
        let limit = self.shared.max_frame;
        let room = limit.saturating_sub(FRAME_OVERHEAD + id.as_ref().map_or(0, String::len));
        if data.as_ref().is_some_and(|d| !json_fits(d, room)) {
            return Err(SessionError::TooLarge {
                op: "send_rtvi",
                limit,
            });
        }
        let turn_id = context::current().and_then(|c| c.turn);
        self.emit(Frame::Rtvi(Rtvi {
            kind,
            data: data.filter(|d| !d.is_null()),
            id,
            turn_id,
        }));
        Ok(())
    }

    /// The reason given to [`end`](Self::end), once this brain's End was queued.
    pub(crate) fn ended_by_brain(&self) -> Option<String> {
        lock(&self.shared.ended_by_brain).clone()
    }

    /// Ends the call: sends `End` after everything already emitted, so a goodbye spoken first is
    /// heard. Idempotent; `reason` is logged, never sent. Called from a turn that a barge-in
    /// cancelled, it does nothing. `End` is the last frame this brain sends:
    /// anything emitted after it is dropped. The session keeps handling inbound frames until
    /// Voqalize ends or closes it.
    pub fn end(&self, reason: &str) {
        if self.shared.out.ended() {
            return;
        }
        if self.emit(Frame::End) == Pushed::Queued {
            let mut kept = reason.to_owned();
            crate::wire::clip(&mut kept, MAX_END_REASON);
            *lock(&self.shared.ended_by_brain) = Some(kept);
            tracing::info!(
                "session {}: ending (reason={})",
                outside_n(&self.shared.id, ID_CHARS),
                outside(reason)
            );
        }
    }

    /// Asks Voqalize to change voice, languages, patience or idle detection, and waits for its
    /// answer (10 s at most). The request lands on the wire where it was called.
    ///
    /// # Errors
    /// * [`SessionError::Unsupported`] before sending, when the config names a voice or language as
    ///   a string and the runtime did not advertise `string_config` (no request id is used up);
    /// * [`SessionError::Rejected`] with Voqalize's detail and code;
    /// * [`SessionError::Timeout`] after 10 s without an answer;
    /// * [`SessionError::Closed`] when the session ended first.
    pub async fn configure(&self, config: Config) -> Result<(), SessionError> {
        const OP: &str = "configure";
        if config.needs_string_config() {
            self.require(OP, Capability::StringConfig)?;
        }
        let (tx, rx) = oneshot::channel();
        let request_id = {
            let mut r = lock(&self.shared.requests);
            r.seq += 1;
            let id = r.seq;
            r.waiting.insert(id, tx);
            id
        };
        let pushed = self.emit(Frame::Request {
            request_id,
            configure: config,
        });
        if pushed != Pushed::Queued {
            lock(&self.shared.requests).waiting.remove(&request_id);
            return Err(SessionError::NotSent { op: OP });
        }
        let after = self.shared.request_timeout;
        let answer = tokio::time::timeout(after, rx).await;
        lock(&self.shared.requests).waiting.remove(&request_id);
        match answer {
            Err(_) => Err(SessionError::Timeout { op: OP, after }),
            Ok(Err(_)) => Err(SessionError::Closed { op: OP }),
            Ok(Ok(r)) if r.accepted => Ok(()),
            Ok(Ok(r)) => Err(SessionError::Rejected {
                op: OP,
                detail: r.detail,
                code: r.code,
            }),
        }
    }

    /// Hands a `Response` to whoever waits for it (called by the reader, never through the lanes).
    /// One for no waiting request is logged once, then counted (docs/protocol.md §4.9).
    pub(crate) fn settle_response(&self, response: Response) {
        let mut requests = lock(&self.shared.requests);
        match requests.waiting.remove(&response.request_id) {
            Some(tx) => {
                drop(requests);
                let _ = tx.send(response);
            }
            None => {
                if requests.strays.allow() {
                    tracing::warn!(
                        "session {}: answer to request {} arrived with nobody waiting",
                        outside_n(&self.shared.id, ID_CHARS),
                        response.request_id
                    );
                }
            }
        }
    }

    /// Stops a speech unit mid-playout and returns what the user heard of it (wire `SpeechCancel`,
    /// answered by a `Finalize`; 10 s at most). After it returns, the unit is closed: later writes
    /// to it are dropped, and the turn may open a new unit. `on_finalize` also fires for the unit.
    /// A unit already finalized (the newest 64 are remembered) answers at once and sends nothing;
    /// concurrent cancels of one unit send one frame and all receive the Finalize.
    ///
    /// Do not await this from `on_finalize` or `on_error` for another unit: they run in order with
    /// inbound frames, so the Finalize would queue behind the call.
    ///
    /// # Errors
    /// [`SessionError::Unsupported`] without `speech_cancel`; [`SessionError::NeverOpened`] /
    /// [`SessionError::Forgotten`] for ids this session cannot cancel; [`SessionError::Timeout`]
    /// (the unit counts as open again, and a SpeechEnd held back for it is sent);
    /// [`SessionError::Closed`] when the session ended first.
    pub async fn cancel_speech(&self, speech_id: u64) -> Result<Finalized, SessionError> {
        const OP: &str = "cancel_speech";
        self.require(OP, Capability::SpeechCancel)?;
        let rx = {
            let mut book = lock(&self.shared.units);
            match book.begin_cancel(speech_id)? {
                CancelStart::Settled(f) => return Ok(f),
                CancelStart::Wait { finalized, send } => {
                    // Sent under the lock so that a concurrent cancel cannot send a second frame.
                    if send && self.emit(Frame::SpeechCancel { speech_id }) != Pushed::Queued {
                        book.cancel_not_sent(speech_id);
                        return Err(SessionError::NotSent { op: OP });
                    }
                    finalized
                }
            }
        };
        let after = self.shared.request_timeout;
        match tokio::time::timeout(after, rx).await {
            Ok(Ok(f)) => Ok(f),
            Ok(Err(_)) => Err(SessionError::Closed { op: OP }),
            Err(_) => {
                let mut book = lock(&self.shared.units);
                if book.cancel_timed_out(speech_id) {
                    self.emit(Frame::SpeechEnd { speech_id });
                }
                Err(SessionError::Timeout { op: OP, after })
            }
        }
    }

    /// Applies a `Finalize` read when `seen` outbound frames had been handed to the transport:
    /// settles the unit and tells every listener what was heard, before `on_finalize` runs, or
    /// gives `None` when it names no unit this session has on the wire (docs/protocol.md §4.7).
    pub(crate) fn settle_unit(
        &self,
        speech_id: u64,
        heard: String,
        seen: u64,
    ) -> Option<Finalized> {
        let settled = lock(&self.shared.units).settle(speech_id, heard, seen)?;
        // Told after the book is released: a listener locks its own state, and a turn writing
        // a unit holds that state while it locks the book.
        self.tell(|listener| listener.heard(&settled));
        Some(settled)
    }

    /// Reports a step of a turn's work (wire `TurnStep`), sent at once and never answered.
    /// `turn_id` defaults to the turn running this code.
    ///
    /// # Errors
    /// [`SessionError::Unsupported`] without `turn_steps`; [`SessionError::NoTurn`] outside a turn
    /// without `turn_id`; [`SessionError::TurnForgotten`] without `start_ms` for a turn older than
    /// the newest 32.
    pub fn report_step(&self, step: Step, turn_id: Option<u64>) -> Result<(), SessionError> {
        self.require("report_step", Capability::TurnSteps)?;
        let turn_id = turn_id
            .or_else(|| context::current().and_then(|c| c.turn))
            .ok_or(SessionError::NoTurn)?;
        let frame = self.turn_step(step, turn_id)?;
        self.emit(frame);
        Ok(())
    }

    /// [`report_step`](Self::report_step) for an explicit turn, sent even from a turn a barge-in
    /// cancelled: the voice core reports a model request it paid for, however the turn ended.
    #[cfg(feature = "model")]
    pub(crate) fn report_step_always(&self, step: Step, turn_id: u64) -> Result<(), SessionError> {
        let frame = self.turn_step(step, turn_id)?;
        self.shared.out.push(frame);
        Ok(())
    }

    fn turn_step(&self, step: Step, turn_id: u64) -> Result<Frame, SessionError> {
        self.require("report_step", Capability::TurnSteps)?;
        let start_ms = match step.start_ms {
            Some(ms) => ms,
            None => {
                let began = lock(&self.shared.turn_starts)
                    .iter()
                    .rev()
                    .find(|(t, _)| *t == turn_id)
                    .map(|(_, at)| *at)
                    .ok_or(SessionError::TurnForgotten(turn_id))?;
                let elapsed = u32::try_from(began.elapsed().as_millis()).unwrap_or(u32::MAX);
                elapsed.saturating_sub(step.duration_ms)
            }
        };
        Ok(Frame::TurnStep(TurnStep {
            turn_id,
            kind: step.kind,
            name: step.name,
            provider: step.provider,
            start_ms,
            duration_ms: step.duration_ms,
            first_output_ms: step.first_output_ms,
            counts: step.counts,
        }))
    }

    /// Waits until every frame emitted so far has been written to the socket, or `within` has
    /// passed (a peer that does not read must not hold a turn forever), or the session ended. The
    /// voice core awaits it before running a tool, so the speech before a call is on the wire
    /// first.
    #[cfg(feature = "model")]
    pub(crate) async fn flushed(&self, within: Duration) {
        let _ = tokio::time::timeout(within, self.shared.out.flushed()).await;
    }

    pub(crate) fn turn_began(&self, turn_id: u64) {
        let mut starts = lock(&self.shared.turn_starts);
        if starts.len() == TURNS_KEPT {
            starts.pop_front();
        }
        starts.push_back((turn_id, Instant::now()));
    }

    /// Drops every pending request and cancel waiter (teardown).
    pub(crate) fn abandon_waiters(&self) {
        lock(&self.shared.requests).waiting.clear();
        lock(&self.shared.units).abandon_waiters();
    }

    /// What speech unit `speech_id` said: its text on the wire while open, what was heard of it
    /// once finalized (see `UnitBook::said`).
    #[cfg(feature = "model")]
    pub(crate) fn said(&self, speech_id: u64) -> String {
        self.units().said(speech_id)
    }

    /// Keeps `listener` up to date with this call from now on, for as long as it lives. At most
    /// [`MAX_LISTENERS`] live at once; past that the newest is not attached (and says so).
    #[cfg(feature = "model")]
    pub(crate) fn listen(&self, listener: Weak<dyn Listener>) {
        let mut listeners = lock(&self.shared.listeners);
        listeners.retain(|l| l.strong_count() > 0);
        if listeners.len() >= MAX_LISTENERS {
            tracing::warn!(
                "session: {MAX_LISTENERS} voice cores already follow this call; not attaching another"
            );
            return;
        }
        listeners.push(listener);
    }

    /// Runs `tell` on every listener alive, under the listeners' lock (no allocation per frame).
    /// A listener locks only its own state, and nothing that holds that state locks this list.
    fn tell(&self, tell: impl Fn(&dyn Listener)) {
        for listener in lock(&self.shared.listeners).iter() {
            if let Some(listener) = listener.upgrade() {
                tell(&*listener);
            }
        }
    }

    /// A turn answering the user's `text` starts: every listener is told, before the brain's
    /// callback runs.
    pub(crate) fn user_said(&self, text: &str) {
        self.tell(|listener| listener.user_said(text));
    }

    /// The unit book, locked. Speaking holds it across the push of a frame and the bookkeeping
    /// that depends on it.
    fn units(&self) -> std::sync::MutexGuard<'_, UnitBook> {
        lock(&self.shared.units)
    }
}

/// Whether `value` serialises to at most `max` bytes of JSON. It stops counting at the limit, so a
/// huge value costs no more than the limit to refuse.
fn json_fits(value: &Value, max: usize) -> bool {
    struct Budget(usize);
    impl std::io::Write for Budget {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self
                .0
                .checked_sub(buf.len())
                .ok_or(std::io::ErrorKind::WriteZero)?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Budget(max), value).is_ok()
}

//! [`Session`]: the brain's handle on one call.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::context;
use super::error::SessionError;
use super::outbound::{Outbound, Pushed};
use crate::actions::{Action, ui_command_data};
use crate::wire::{Capabilities, Capability, Config, Frame, Response, Rtvi, RtviType, TurnStep};

/// How many settled Finalizes a session remembers for late `cancel_speech` calls (wire.md §2.7).
const SETTLED_KEPT: usize = 64;
/// How many turn start times a session remembers for `report_step` (wire.md §2.10).
const TURNS_KEPT: usize = 32;

/// What the user heard of one speech unit: the runtime's `Finalize`, with the text this brain
/// generated for the unit beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finalized {
    /// The unit.
    pub speech_id: u64,
    /// What was played to the user: a verbatim prefix of `generated` (`Finalize.heard_text`).
    pub heard: String,
    /// What this brain put on the wire for the unit; empty for a unit it never opened.
    pub generated: String,
}

impl Finalized {
    /// True when the user heard less than was generated (a barge-in or a cancel cut the unit).
    pub fn interrupted(&self) -> bool {
        self.heard != self.generated
    }
}

/// One step of a turn's work to report with [`Session::report_step`]: a model request, a tool, a
/// database query... Sent as a `TurnStep` frame; Voqalize shows it in the call's trace and bills by
/// its counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    kind: String,
    name: String,
    provider: String,
    duration_ms: u32,
    start_ms: Option<u32>,
    first_output_ms: Option<u32>,
    counts: BTreeMap<String, u64>,
}

impl Step {
    /// A step of `kind` (open vocabulary: `model`, `tool`, `database`, `http`, `mcp`, ...) named `name`.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Step {
            kind: kind.into(),
            name: name.into(),
            ..Step::default()
        }
    }

    /// Who served it (empty, the default, for the brain's own work).
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    /// How long it took, in ms.
    pub fn duration_ms(mut self, ms: u32) -> Self {
        self.duration_ms = ms;
        self
    }

    /// When it started, in ms after the turn's stimulus arrived. Unset, it is computed as
    /// `now − turn start − duration` (at least 0).
    pub fn start_ms(mut self, ms: u32) -> Self {
        self.start_ms = Some(ms);
        self
    }

    /// ms from the step's start to its first output. `0` is sent as 0, distinct from unset.
    pub fn first_output_ms(mut self, ms: u32) -> Self {
        self.first_output_ms = Some(ms);
        self
    }

    /// Adds a count such as `input_tokens`. Counts that were not measured should be left out, never
    /// sent as 0.
    pub fn count(mut self, key: impl Into<String>, value: u64) -> Self {
        self.counts.insert(key.into(), value);
        self
    }
}

#[derive(Default)]
pub(crate) struct UnitBook {
    pub(crate) speech_seq: u64,
    /// Opened and not yet finalized.
    pub(crate) open: HashSet<u64>,
    /// Cancelled by this brain, not yet finalized.
    pub(crate) cancelled: HashSet<u64>,
    /// Cancelled units whose SpeechEnd the brain wrote after the cancel and which was held back.
    pub(crate) withheld_end: HashSet<u64>,
    /// Text put on the wire per unit, until its Finalize.
    pub(crate) generated: HashMap<u64, String>,
    settled: VecDeque<Finalized>,
    cancel_waiters: HashMap<u64, Vec<oneshot::Sender<Finalized>>>,
}

impl UnitBook {
    /// Closed = cancelled by this brain or finalized by Voqalize.
    pub(crate) fn is_closed(&self, id: u64) -> bool {
        !self.open.contains(&id) || self.cancelled.contains(&id)
    }
}

#[derive(Default)]
struct Requests {
    seq: u64,
    waiting: HashMap<u64, oneshot::Sender<Response>>,
}

pub(crate) struct Shared {
    pub(crate) id: String,
    pub(crate) init: Map<String, Value>,
    pub(crate) capabilities: Capabilities,
    pub(crate) out: Arc<Outbound>,
    pub(crate) units: Mutex<UnitBook>,
    requests: Mutex<Requests>,
    turn_starts: Mutex<VecDeque<(u64, Instant)>>,
    request_timeout: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section here is a few map operations that cannot leave state half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The brain's handle on one call: a cheap `Clone` passed to every callback.
///
/// Created when `SessionStart` is handled; it reads the call's id, `init` data and capabilities,
/// and sends everything the brain says besides speech: UI commands ([`dispatch`](Self::dispatch)),
/// RTVI messages, configuration requests, speech cancels, turn steps and the end of the call.
/// Speech itself goes through a [`Turn`](crate::Turn).
#[derive(Clone)]
pub struct Session {
    pub(crate) shared: Arc<Shared>,
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
        request_timeout: Duration,
    ) -> Self {
        Session {
            shared: Arc::new(Shared {
                id,
                init,
                capabilities,
                out,
                units: Mutex::new(UnitBook::default()),
                requests: Mutex::new(Requests::default()),
                turn_starts: Mutex::new(VecDeque::new()),
                request_timeout,
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
        if context::current().is_some_and(|c| c.turn_cancelled()) {
            tracing::debug!("dropping {} from a cancelled turn", frame.name());
            return Pushed::TurnCancelled;
        }
        self.shared.out.push(frame)
    }

    /// Sends a UI command to the app: an RTVI `ui-command` with data
    /// `{"command": A::NAME, "payload": <every field, null included>}`. Never blocks; it lands on
    /// the wire exactly where it was called relative to speech.
    ///
    /// # Errors
    /// [`SessionError::Json`] when the action cannot be serialised.
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
    /// serialised. Nothing is sent in either case.
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
        let turn_id = context::current().and_then(|c| c.turn);
        self.emit(Frame::Rtvi(Rtvi {
            kind,
            data: data.filter(|d| !d.is_null()),
            id,
            turn_id,
        }));
        Ok(())
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
            tracing::info!("session {}: ending (reason={reason})", self.shared.id);
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
    pub(crate) fn settle_response(&self, response: Response) {
        let waiter = lock(&self.shared.requests)
            .waiting
            .remove(&response.request_id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(response);
            }
            None => tracing::warn!(
                "session {}: answer to request {} arrived with nobody waiting",
                self.shared.id,
                response.request_id
            ),
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
            if let Some(f) = book.settled.iter().find(|f| f.speech_id == speech_id) {
                return Ok(f.clone());
            }
            if !book.open.contains(&speech_id) {
                return Err(if speech_id >= 1 && speech_id <= book.speech_seq {
                    SessionError::Forgotten(speech_id)
                } else {
                    SessionError::NeverOpened(speech_id)
                });
            }
            let (tx, rx) = oneshot::channel();
            book.cancel_waiters.entry(speech_id).or_default().push(tx);
            if book.cancelled.insert(speech_id) {
                // Sent under the lock so that a concurrent cancel cannot send a second frame.
                if self.emit(Frame::SpeechCancel { speech_id }) != Pushed::Queued {
                    book.cancelled.remove(&speech_id);
                    book.cancel_waiters.remove(&speech_id);
                    return Err(SessionError::NotSent { op: OP });
                }
            }
            rx
        };
        let after = self.shared.request_timeout;
        match tokio::time::timeout(after, rx).await {
            Ok(Ok(f)) => Ok(f),
            Ok(Err(_)) => Err(SessionError::Closed { op: OP }),
            Err(_) => {
                let mut book = lock(&self.shared.units);
                if book.open.contains(&speech_id) {
                    book.cancelled.remove(&speech_id);
                    if book.withheld_end.remove(&speech_id) {
                        self.emit(Frame::SpeechEnd { speech_id });
                    }
                }
                Err(SessionError::Timeout { op: OP, after })
            }
        }
    }

    /// Applies a `Finalize`: settles the unit before `on_finalize` runs (wire.md §2.7).
    pub(crate) fn settle_unit(&self, speech_id: u64, heard: String) -> Finalized {
        let mut book = lock(&self.shared.units);
        let generated = book.generated.remove(&speech_id).unwrap_or_default();
        let fin = Finalized {
            speech_id,
            heard,
            generated,
        };
        book.open.remove(&speech_id);
        book.cancelled.remove(&speech_id);
        book.withheld_end.remove(&speech_id);
        book.settled.retain(|f| f.speech_id != speech_id);
        if book.settled.len() == SETTLED_KEPT {
            book.settled.pop_front();
        }
        book.settled.push_back(fin.clone());
        for tx in book.cancel_waiters.remove(&speech_id).unwrap_or_default() {
            let _ = tx.send(fin.clone());
        }
        fin
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
        self.emit(Frame::TurnStep(TurnStep {
            turn_id,
            kind: step.kind,
            name: step.name,
            provider: step.provider,
            start_ms,
            duration_ms: step.duration_ms,
            first_output_ms: step.first_output_ms,
            counts: step.counts,
        }));
        Ok(())
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
        lock(&self.shared.units).cancel_waiters.clear();
    }

    pub(crate) fn units(&self) -> std::sync::MutexGuard<'_, UnitBook> {
        lock(&self.shared.units)
    }
}

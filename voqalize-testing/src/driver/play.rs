//! Playing Voqalize's side of the call: the session start, the user's turns, barge-in, app
//! events, Finalizes, and the end.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, timeout_at};

use super::observed::{TurnRecord, UnitRecord};
use voqalize::host::HostError;
use voqalize::wire::{self, Frame, Rtvi, RtviType, SessionStart, UserIdle, UserMessage};

use super::{BargeAt, BargeIn, DriverError, Start, Voqalize};

impl Voqalize {
    /// Sends the default `SessionStart` (turn 1, wire 3, all capabilities, init `{}`) and plays out
    /// the greeting: waits up to 3 s for a unit of turn 1 to end, then until the turn is over
    /// (as [`user_says`](Self::user_says) says), then finalizes it. A brain that does not greet
    /// gives an empty record.
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn start(&mut self) -> Result<TurnRecord, DriverError> {
        self.start_with(Start::default()).await
    }

    /// Sends the default `SessionStart` without waiting for a greeting (for brains that do not
    /// greet; waiting would take the whole 3 s greeting window).
    ///
    /// # Errors
    /// The link failed.
    pub async fn start_silent(&mut self) -> Result<(), DriverError> {
        self.start_with(Start {
            expect_greeting: false,
            ..Start::default()
        })
        .await
        .map(drop)
    }

    /// Sends a `SessionStart` built from `start`, then plays out the greeting as [`start`](Self::start)
    /// (the wait also ends when the brain sends `End`, as it does when it refuses the session).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with(&mut self, start: Start) -> Result<TurnRecord, DriverError> {
        self.seen.opened_turns.push(1);
        let session_id = start.session_id.unwrap_or_else(|| self.session_id.clone());
        self.send(Frame::SessionStart(
            SessionStart::new(session_id, 1)
                .with_init(start.init)
                .with_wire_version(start.wire_version)
                .with_capabilities(start.capabilities),
        ))
        .await?;
        if !start.expect_greeting {
            return Ok(self.turn(1));
        }
        let greeting = Duration::from_secs(3);
        let ended = self
            .wait_until(greeting, |s| {
                s.end || s.units.values().any(|u| u.turn_id == 1 && u.ended)
            })
            .await?;
        if ended {
            self.quiesce_turn(1).await?;
            self.finalize_turn(1).await?;
        }
        Ok(self.turn(1))
    }

    /// Mints the next turn id.
    pub fn next_turn_id(&mut self) -> u64 {
        let t = self.next_turn;
        self.next_turn += 1;
        self.seen.opened_turns.push(t);
        t
    }

    /// Sends a `UserMessage` with `text` on the next turn id and returns that id, without waiting
    /// for an answer (for tests that watch the brain themselves).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_user_message(&mut self, text: &str) -> Result<u64, DriverError> {
        let turn_id = self.next_turn_id();
        self.send(Frame::UserMessage(UserMessage::new(turn_id, text)))
            .await?;
        Ok(turn_id)
    }

    /// The user says `text` (a `UserMessage` on the next turn); plays the turn out and finalizes
    /// each ended unit with all of its text.
    ///
    /// A turn completes once it has opened a speech unit and every unit it opened has ended, so a
    /// turn that speaks nothing (a brain that only calls a tool, a model request that failed with
    /// no fallback line) never completes: play such a turn with
    /// [`user_says_within`](Self::user_says_within).
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when the turn does not complete within [`timeout`](Self::timeout);
    /// its text says what the driver saw of the turn (no unit opened, or units still open).
    pub async fn user_says(&mut self, text: &str) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        self.play_out(turn_id).await
    }

    /// Like [`user_says`](Self::user_says), but a turn that never completes is not an error: the
    /// record shows what arrived (for faults, where sending nothing is fine).
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn user_says_within(
        &mut self,
        text: &str,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        self.settle(turn_id, within).await
    }

    /// The user is silent: a `UserIdle{level, idle_ms}` on the next turn, played out.
    ///
    /// # Errors
    /// As [`user_says`](Self::user_says).
    pub async fn user_idle(&mut self, level: u32, idle_ms: u32) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_idle(level, idle_ms).await?;
        self.play_out(turn_id).await
    }

    /// Like [`user_idle`](Self::user_idle), but a turn that never completes is not an error (as
    /// [`user_says_within`](Self::user_says_within)).
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn user_idle_within(
        &mut self,
        level: u32,
        idle_ms: u32,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_idle(level, idle_ms).await?;
        self.settle(turn_id, within).await
    }

    /// Sends a `UserIdle{level, idle_ms}` on the next turn id and returns that id.
    pub(super) async fn send_idle(&mut self, level: u32, idle_ms: u32) -> Result<u64, DriverError> {
        let turn_id = self.next_turn_id();
        self.send(Frame::UserIdle(UserIdle::new(turn_id, level, idle_ms)))
            .await?;
        Ok(turn_id)
    }

    /// Waits up to `within` for `turn_id` to complete, then for the turn to be over (see
    /// [`quiesce_turn`](Self::quiesce_turn)), and finalizes it.
    async fn settle(&mut self, turn_id: u64, within: Duration) -> Result<TurnRecord, DriverError> {
        self.wait_until(within, move |s| s.turn_completed(turn_id))
            .await?;
        self.quiesce_turn(turn_id).await?;
        self.finalize_turn(turn_id).await?;
        Ok(self.turn(turn_id))
    }

    async fn play_out(&mut self, turn_id: u64) -> Result<TurnRecord, DriverError> {
        let timeout = self.timeout;
        if !self
            .wait_until(timeout, move |s| s.turn_completed(turn_id))
            .await?
        {
            return Err(DriverError::Timeout {
                what: format!("turn {turn_id} to complete ({})", self.why_open(turn_id)),
                after: timeout,
            });
        }
        self.quiesce_turn(turn_id).await?;
        self.finalize_turn(turn_id).await?;
        Ok(self.turn(turn_id))
    }

    /// Waits for the end of `turn_id` once its speech has ended: for a brain this driver runs,
    /// until its task ended and every frame it queued arrived, or the quiet window passed with
    /// no frame (a turn still running after it spoke); for one it dialed, the quiet window. A
    /// turn known to be over needs no quiet window: each turn of a test would otherwise wait it.
    pub(super) async fn quiesce_turn(&mut self, turn_id: u64) -> Result<(), DriverError> {
        if !self.watches_turns {
            return self.quiesce(self.quiet, self.timeout).await;
        }
        let ended = self.turns_ended.clone();
        let cap = Instant::now() + self.timeout;
        loop {
            if self.turn_over(turn_id) {
                return Ok(());
            }
            // False once the quiet window passed with no frame (or the link closed); true on a
            // frame or on a turn's end.
            let deadline = (Instant::now() + self.quiet).min(cap);
            if !self.pump_waking(deadline, Some(&ended.wake)).await? || Instant::now() >= cap {
                return Ok(());
            }
        }
    }

    /// Whether `turn_id` of a brain this driver runs is over: its task ended and every frame
    /// it queued by then arrived. Always false for a brain the driver dialed (it cannot know).
    pub(super) fn turn_over(&self, turn_id: u64) -> bool {
        self.watches_turns && self.turns_ended.over(turn_id, self.seen.frames)
    }

    /// Why `turn_id` has not completed, as far as the driver saw: what a timeout says, so that a
    /// turn with no speech (only tool calls, or a failed model request) names its way out. The
    /// TurnStep kinds the brain sent for it are named once each, at most four, clipped.
    fn why_open(&self, turn_id: u64) -> String {
        let units: Vec<&UnitRecord> = self.seen.units_of(turn_id).collect();
        if !units.is_empty() {
            let open = units.iter().filter(|u| !u.ended).count();
            return format!(
                "{open} of the {} speech units it opened have not ended",
                units.len()
            );
        }
        let mut kinds: Vec<&str> = Vec::new();
        for step in self.seen.steps.iter().filter(|s| s.turn_id == turn_id) {
            if !kinds.contains(&step.kind.as_str()) {
                kinds.push(&step.kind);
            }
        }
        let work = match kinds.len() {
            0 => "and sent no TurnStep for it".to_owned(),
            n => {
                let named: Vec<String> = kinds
                    .iter()
                    .take(4)
                    .map(|k| voqalize::__kit::outside_n(k, 32).to_string())
                    .collect();
                let more = if n > 4 { ", ..." } else { "" };
                format!(
                    "though it sent TurnSteps for it ({}{more})",
                    named.join(", ")
                )
            }
        };
        format!(
            "the brain opened no speech unit on it, {work}; a turn completes when every unit it \
             opens has ended, so a turn that says nothing never does: play it with \
             `user_says_within`, and see the brain's log for a failed model request"
        )
    }

    /// The user says `text` and barges in on the brain's answer: sends `Interruption{turn}` as
    /// `barge.at` says, waits the quiet window, finalizes the cut unit with `barge.heard_prefix` (or
    /// all its text), then lingers, recording a violation for any speech of the turn that follows.
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn barge_in(
        &mut self,
        text: &str,
        barge: BargeIn,
    ) -> Result<TurnRecord, DriverError> {
        let BargeIn { at, heard_prefix } = barge;
        self.barge_in_hearing(text, at, None, move |all| {
            heard_prefix.unwrap_or_else(|| all.to_owned())
        })
        .await
    }

    /// [`barge_in`](Self::barge_in) on the turn's unit `unit` (from 0; `None`: the one open at
    /// the barge-in, as `barge_in`), with `BargeAt::FirstText` waiting for that unit's text, and
    /// the cut unit's heard text made by `hearing` from all the text that reached the driver for
    /// it (a replay hears as many characters as the recorded call did).
    pub(crate) async fn barge_in_hearing(
        &mut self,
        text: &str,
        at: BargeAt,
        unit: Option<usize>,
        hearing: impl FnOnce(&str) -> String,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        self.barge_on(turn_id, at, unit, hearing).await
    }

    /// The barge-in of [`barge_in_hearing`](Self::barge_in_hearing) on `turn_id`, a turn already
    /// started: the user's, or the greeting (turn 1).
    pub(crate) async fn barge_on(
        &mut self,
        turn_id: u64,
        at: BargeAt,
        unit: Option<usize>,
        hearing: impl FnOnce(&str) -> String,
    ) -> Result<TurnRecord, DriverError> {
        match at {
            BargeAt::FirstText => {
                let with_text = unit.unwrap_or(0) + 1;
                self.wait_until(self.timeout, move |s| {
                    s.units_of(turn_id).filter(|u| !u.chunks.is_empty()).count() >= with_text
                })
                .await?;
                self.quiesce(Duration::from_millis(150), Duration::from_millis(300))
                    .await?;
            }
            BargeAt::After(d) => {
                self.wait_until(d, |_| false).await?;
            }
        }
        let units: Vec<&UnitRecord> = self.seen.units_of(turn_id).collect();
        let cut = match unit {
            Some(k) => units.get(k).or(units.last()),
            None => units.iter().rev().find(|u| !u.ended).or(units.last()),
        }
        .map(|u| u.speech_id);
        self.send(Frame::Interruption {
            through_turn: turn_id,
        })
        .await?;
        self.quiesce(self.quiet, self.timeout).await?;
        let mut heard = None;
        if let Some(id) = cut {
            let all = self
                .seen
                .units
                .get(&id)
                .map(UnitRecord::text)
                .unwrap_or_default();
            let text = hearing(&all);
            self.finalize(id, &text).await?;
            heard = Some(text);
        }
        let watched: Vec<(u64, usize, bool)> = self
            .seen
            .units_of(turn_id)
            .map(|u| (u.speech_id, u.chunks.len(), u.ended))
            .collect();
        let frames_before = self.seen.received.len();
        self.wait_until(self.linger, |_| false).await?;
        let late: Vec<String> = self.seen.received[frames_before..]
            .iter()
            .filter(|f| match f {
                Frame::Rtvi(r) => r.turn_id == Some(turn_id),
                Frame::TurnStep(t) => t.turn_id == turn_id,
                _ => false,
            })
            .map(|f| format!("{} from turn {turn_id} after the barge-in", f.name()))
            .collect();
        self.seen.violations.extend(late);
        for u in self.seen.units_of(turn_id).cloned().collect::<Vec<_>>() {
            match watched.iter().find(|(id, ..)| *id == u.speech_id) {
                None => self.seen.violations.push(format!(
                    "speech {} opened for turn {turn_id} after the barge-in",
                    u.speech_id
                )),
                Some((_, chunks, _)) if u.chunks.len() > *chunks => self.seen.violations.push(
                    format!("speech {} kept streaming after the barge-in", u.speech_id),
                ),
                _ => {}
            }
        }
        let mut record = self.turn(turn_id);
        record.interrupted = true;
        record.heard = heard;
        Ok(record)
    }

    /// Sends an app event as the app does: RTVI `ui-event` with `{"event": name, "payload": payload}`.
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_ui_event(&mut self, name: &str, payload: Value) -> Result<(), DriverError> {
        self.send_rtvi(
            RtviType::UiEvent,
            json!({ "event": name, "payload": payload }),
        )
        .await
    }

    /// Sends a deprecated-form app message: RTVI `client-message` with `{"t": name, "d": data}`.
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_client_message(
        &mut self,
        name: &str,
        data: Value,
    ) -> Result<(), DriverError> {
        self.send_rtvi(RtviType::ClientMessage, json!({ "t": name, "d": data }))
            .await
    }

    /// Sends an RTVI message of any type with `data`.
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_rtvi(&mut self, kind: RtviType, data: Value) -> Result<(), DriverError> {
        self.send(Frame::Rtvi(Rtvi {
            kind,
            data: Some(data),
            id: None,
            turn_id: None,
        }))
        .await
    }

    /// Waits up to `within` for at least one more ui-command than already seen, then for the quiet
    /// window, and returns every ui-command body (JSON object) received so far, in arrival order.
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn collect_ui_commands(
        &mut self,
        within: Duration,
    ) -> Result<Vec<Value>, DriverError> {
        let before = self.seen.ui_commands.len();
        if self
            .wait_until(within, move |s| s.ui_commands.len() > before)
            .await?
        {
            self.quiesce(self.quiet, self.timeout).await?;
        }
        Ok(self.seen.ui_commands.clone())
    }

    /// Waits until `predicate` holds over what was seen, or `within` passes; true if it held.
    ///
    /// # Errors
    /// The brain sent an undecodable frame.
    pub async fn wait_for(
        &mut self,
        within: Duration,
        predicate: impl Fn(&Voqalize) -> bool,
    ) -> Result<bool, DriverError> {
        let deadline = Instant::now() + within;
        loop {
            if predicate(self) {
                return Ok(true);
            }
            if !self.pump_once(deadline).await? {
                return Ok(predicate(self));
            }
        }
    }

    /// Keeps handling the brain's frames (recording them, answering requests and cancels) while
    /// awaiting `event`, for at most `within`. `None` when the time ran out first.
    ///
    /// Use it to wait for something the brain does outside the wire, such as a callback's side
    /// effect signalled through a channel.
    ///
    /// # Errors
    /// The brain sent an undecodable frame.
    pub async fn run_until<T>(
        &mut self,
        within: Duration,
        event: impl std::future::Future<Output = T>,
    ) -> Result<Option<T>, DriverError> {
        let deadline = Instant::now() + within;
        tokio::pin!(event);
        loop {
            if self.seen.closed.is_some() {
                return Ok(timeout_at(deadline, &mut event).await.ok());
            }
            tokio::select! {
                biased;
                out = &mut event => return Ok(Some(out)),
                more = self.pump_once(deadline) => {
                    if !more? && self.seen.closed.is_none() {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Sends any frame as the runtime (for cases the helpers above do not cover).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send(&mut self, frame: Frame) -> Result<(), DriverError> {
        self.send_bytes(wire::encode(&frame)).await
    }

    /// Sends raw bytes as one binary message (malformed input tests).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_bytes(&mut self, bytes: Vec<u8>) -> Result<(), DriverError> {
        let after = self.timeout;
        tokio::time::timeout(after, self.link.send(bytes))
            .await
            .map_err(|_| DriverError::Timeout {
                what: "the brain to take a frame".into(),
                after,
            })?
    }

    /// Sends a WebSocket text message (which a brain must ignore).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_text(&mut self, text: &str) -> Result<(), DriverError> {
        let after = self.timeout;
        tokio::time::timeout(after, self.link.send_text(text))
            .await
            .map_err(|_| DriverError::Timeout {
                what: "the brain to take a text message".into(),
                after,
            })?
    }

    /// Finalizes a unit with `heard` (a `Finalize` frame) and records it.
    ///
    /// # Errors
    /// The link failed.
    pub async fn finalize(&mut self, speech_id: u64, heard: &str) -> Result<(), DriverError> {
        if let Some(u) = self.seen.units.get_mut(&speech_id) {
            u.heard = Some(heard.to_owned());
        }
        self.send(Frame::Finalize {
            speech_id,
            heard_text: heard.to_owned(),
        })
        .await
    }

    pub(super) async fn finalize_turn(&mut self, turn_id: u64) -> Result<(), DriverError> {
        let due: Vec<(u64, String)> = self
            .seen
            .units_of(turn_id)
            .filter(|u| u.ended && u.heard.is_none())
            .map(|u| (u.speech_id, u.text()))
            .collect();
        for (id, text) in due {
            self.finalize(id, &text).await?;
        }
        Ok(())
    }

    /// Waits the quiet window: until no frame has arrived for `quiet`, or `cap` passed.
    ///
    /// # Errors
    /// The brain sent an undecodable frame.
    pub async fn quiesce(&mut self, quiet: Duration, cap: Duration) -> Result<(), DriverError> {
        let cap = Instant::now() + cap;
        loop {
            let deadline = (Instant::now() + quiet).min(cap);
            let before = self.seen.frames;
            let open = self.pump_once(deadline).await?;
            if !open || self.seen.frames == before || Instant::now() >= cap {
                return Ok(());
            }
        }
    }

    /// Ends the call as Voqalize does (`End`), then waits for the brain to close the connection.
    /// Returns the close code.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when the brain does not close within the timeout.
    pub async fn end(&mut self) -> Result<Option<u16>, DriverError> {
        self.send(Frame::End).await?;
        self.wait_closed().await
    }

    /// Cancels the call (`Cancel`), then waits for the brain to close the connection.
    ///
    /// # Errors
    /// As [`end`](Self::end).
    pub async fn cancel(&mut self, reason: &str) -> Result<Option<u16>, DriverError> {
        self.send(Frame::Cancel {
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
        })
        .await?;
        self.wait_closed().await
    }

    /// Waits for the brain to close the connection and returns the close code it sent.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when it does not close within the timeout.
    pub async fn wait_closed(&mut self) -> Result<Option<u16>, DriverError> {
        let timeout = self.timeout;
        self.wait_until(timeout, |s| s.closed.is_some()).await?;
        match &self.seen.closed {
            Some((code, _)) => Ok(*code),
            None => Err(DriverError::Timeout {
                what: "the brain to close the connection".into(),
                after: timeout,
            }),
        }
    }

    /// Closes the connection from the runtime's side, as a hang-up would.
    pub async fn hang_up(&mut self) {
        self.link.close().await;
    }

    /// For an in-process brain: waits for `run_session` to return and gives its result.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when it does not return within the timeout.
    pub async fn brain_result(&mut self) -> Result<Result<(), HostError>, DriverError> {
        let timeout = self.timeout;
        let Some(handle) = self.brain.as_mut() else {
            return Err(DriverError::NoBrainTask);
        };
        match tokio::time::timeout(timeout, handle).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(DriverError::BrainTask(e)),
            Err(_) => Err(DriverError::Timeout {
                what: "run_session to return".into(),
                after: timeout,
            }),
        }
    }
}

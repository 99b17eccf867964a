//! Reading the brain's frames: waiting for a condition, observing each frame, and answering
//! what Voqalize answers (a `SpeechCancel` with its Finalizes).

use std::time::Duration;

use tokio::time::{Instant, timeout_at};

use super::link::Event;
use super::observed::{Observed, Owed, UnitRecord};
use voqalize::wire::{self, ErrorCode, ErrorFrame, Frame, Response};

use super::{CancelHeard, DriverError, Voqalize};

impl Voqalize {
    pub(super) async fn wait_until(
        &mut self,
        within: Duration,
        predicate: impl Fn(&Observed) -> bool,
    ) -> Result<bool, DriverError> {
        let deadline = Instant::now() + within;
        loop {
            if predicate(&self.seen) {
                return Ok(true);
            }
            if !self.pump_once(deadline).await? {
                return Ok(predicate(&self.seen));
            }
        }
    }

    /// Receives and handles one frame; false at the deadline or once the link is closed.
    pub(super) async fn pump_once(&mut self, deadline: Instant) -> Result<bool, DriverError> {
        self.pump_waking(deadline, None).await
    }

    /// [`pump_once`](Self::pump_once), returning true early (with no frame) when `wake` is
    /// notified: a frame is only ever received whole, never cut by the wake-up.
    pub(super) async fn pump_waking(
        &mut self,
        deadline: Instant,
        wake: Option<&tokio::sync::Notify>,
    ) -> Result<bool, DriverError> {
        if self.seen.closed.is_some() {
            return Ok(false);
        }
        let event = match wake {
            None => match timeout_at(deadline, self.link.recv()).await {
                Err(_) => return Ok(false),
                Ok(e) => e,
            },
            Some(wake) => tokio::select! {
                biased;
                e = self.link.recv() => e,
                () = wake.notified() => return Ok(true),
                () = tokio::time::sleep_until(deadline) => return Ok(false),
            },
        };
        match event {
            Event::Closed(code, reason) => {
                self.seen.closed = Some((code, reason));
                Ok(false)
            }
            Event::Bytes(b) if b.is_empty() => Ok(true),
            Event::Bytes(b) => {
                match wire::decode(&b)? {
                    Some(frame) => {
                        self.seen.frames += 1;
                        self.seen.received.push(frame.clone());
                        self.observe(frame).await?;
                    }
                    None => self
                        .seen
                        .violations
                        .push("an envelope with no known body".into()),
                }
                Ok(true)
            }
        }
    }

    /// Records one frame the brain sent and gives the answers the runtime owes for it.
    async fn observe(&mut self, frame: Frame) -> Result<(), DriverError> {
        match self.seen.record(frame) {
            Owed::Nothing => Ok(()),
            Owed::CancelAnswer(speech_id) if self.auto_answer => {
                self.answer_cancel(speech_id).await
            }
            Owed::ConfigureAnswer(request_id) if self.auto_answer => {
                self.send(Frame::Response(Response::new(request_id, true, "", None)))
                    .await
            }
            Owed::CancelAnswer(_) | Owed::ConfigureAnswer(_) => Ok(()),
        }
    }

    /// The reference runtime's answer to a SpeechCancel (docs/protocol.md §4.16).
    async fn answer_cancel(&mut self, speech_id: u64) -> Result<(), DriverError> {
        let Some(unit) = self.seen.units.get(&speech_id).cloned() else {
            return self
                .send(Frame::Error(ErrorFrame {
                    code: ErrorCode::Protocol,
                    message: format!(
                        "SpeechCancel names speech {speech_id}, which this session never opened"
                    ),
                    fatal: false,
                }))
                .await;
        };
        if unit.cancelled || unit.heard.is_some() {
            return Ok(());
        }
        let heard_on_cancel = |u: &UnitRecord, policy: CancelHeard| match policy {
            CancelHeard::All => u.text(),
            CancelHeard::FirstChunk => u.chunks.first().cloned().unwrap_or_default(),
        };
        let policy = self.cancel_heard;
        let earlier: Vec<(u64, String)> = self
            .seen
            .units_of(unit.turn_id)
            .filter(|u| u.speech_id < speech_id && u.ended && u.heard.is_none() && !u.cancelled)
            .map(|u| (u.speech_id, u.text()))
            .collect();
        let later: Vec<u64> = self
            .seen
            .units_of(unit.turn_id)
            .filter(|u| u.speech_id > speech_id && u.heard.is_none())
            .map(|u| u.speech_id)
            .collect();
        if let Some(u) = self.seen.units.get_mut(&speech_id) {
            u.cancelled = true;
            u.ended = true;
        }
        for (id, text) in earlier {
            self.finalize(id, &text).await?;
        }
        let heard = heard_on_cancel(&unit, policy);
        self.finalize(speech_id, &heard).await?;
        for id in later {
            if let Some(u) = self.seen.units.get_mut(&id) {
                u.cancelled = true;
                u.ended = true;
            }
            self.finalize(id, "").await?;
        }
        Ok(())
    }
}

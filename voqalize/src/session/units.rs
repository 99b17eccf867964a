//! The session's book of speech units: which are open, which this brain cancelled, what each one
//! generated, and the Finalizes remembered for late `cancel_speech` calls (docs/protocol.md §4.5,
//! §4.7, §4.8). Only this file touches its fields; the handles call its methods under the book's
//! lock, so a `Finalize` never settles a unit between a check and the write that depends on it.

use std::collections::{HashMap, HashSet, VecDeque};

use tokio::sync::oneshot;

use super::error::SessionError;

/// How many settled Finalizes a session remembers for late `cancel_speech` calls.
pub(crate) const SETTLED_KEPT: usize = 64;

/// How many units may wait for their Finalize at once. The runtime finalizes every unit, and a
/// call has a handful open; past this bound the oldest open unit is forgotten (a Finalize for it
/// then reports no generated text), so a runtime that never finalizes cannot grow the book.
pub(crate) const OPEN_KEPT: usize = 1024;

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

/// What closing a unit should do on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndAction {
    /// Send `SpeechEnd`.
    Send,
    /// Nothing: the unit was finalized already, or this brain cancelled it (the end is held back
    /// and sent only if the cancel times out).
    Skip,
}

/// How a `cancel_speech` call begins.
pub(crate) enum CancelStart {
    /// The unit was finalized already: this is what the user heard.
    Settled(Finalized),
    /// Wait for the unit's Finalize; `send` is true for the first canceller, which sends the one
    /// `SpeechCancel` frame.
    Wait {
        finalized: oneshot::Receiver<Finalized>,
        send: bool,
    },
}

#[derive(Default)]
pub(crate) struct UnitBook {
    speech_seq: u64,
    /// Opened and not yet finalized.
    open: HashSet<u64>,
    /// Cancelled by this brain, not yet finalized.
    cancelled: HashSet<u64>,
    /// Cancelled units whose SpeechEnd the brain wrote after the cancel and which was held back.
    withheld_end: HashSet<u64>,
    /// Units whose SpeechEnd went out, not yet finalized: later writes are dropped.
    ended: HashSet<u64>,
    /// Text put on the wire per unit, until its Finalize.
    generated: HashMap<u64, String>,
    settled: VecDeque<Finalized>,
    cancel_waiters: HashMap<u64, Vec<oneshot::Sender<Finalized>>>,
}

impl UnitBook {
    /// Mints the next session-wide speech id (1, 2, 3, ...) and records the unit as open.
    pub(crate) fn open(&mut self) -> u64 {
        if self.open.len() >= OPEN_KEPT
            && let Some(&oldest) = self.open.iter().min()
        {
            tracing::warn!("speech {oldest} was never finalized; forgetting it");
            self.forget(oldest);
        }
        self.speech_seq += 1;
        let id = self.speech_seq;
        self.open.insert(id);
        self.generated.insert(id, String::new());
        id
    }

    /// Closed = cancelled by this brain or finalized by Voqalize: writes are dropped.
    pub(crate) fn is_closed(&self, id: u64) -> bool {
        !self.open.contains(&id) || self.cancelled.contains(&id) || self.ended.contains(&id)
    }

    /// Records text that reached the outbound lane for unit `id`.
    pub(crate) fn generated(&mut self, id: u64, text: &str) {
        if let Some(g) = self.generated.get_mut(&id) {
            g.push_str(text);
        }
    }

    /// The brain closes unit `id`: whether its `SpeechEnd` goes out now.
    pub(crate) fn end(&mut self, id: u64) -> EndAction {
        if !self.open.contains(&id) || self.ended.contains(&id) {
            return EndAction::Skip; // finalized or ended already
        }
        if self.cancelled.contains(&id) {
            // Held back; sent if the cancel times out.
            self.withheld_end.insert(id);
            return EndAction::Skip;
        }
        self.ended.insert(id);
        EndAction::Send
    }

    /// Starts cancelling unit `id`.
    ///
    /// # Errors
    /// [`SessionError::Forgotten`] for an id finalized too long ago, [`SessionError::NeverOpened`]
    /// for an id this session never minted.
    pub(crate) fn begin_cancel(&mut self, id: u64) -> Result<CancelStart, SessionError> {
        if let Some(f) = self.settled.iter().find(|f| f.speech_id == id) {
            return Ok(CancelStart::Settled(f.clone()));
        }
        if !self.open.contains(&id) {
            return Err(if id >= 1 && id <= self.speech_seq {
                SessionError::Forgotten(id)
            } else {
                SessionError::NeverOpened(id)
            });
        }
        let (tx, finalized) = oneshot::channel();
        self.cancel_waiters.entry(id).or_default().push(tx);
        let send = self.cancelled.insert(id);
        Ok(CancelStart::Wait { finalized, send })
    }

    /// The `SpeechCancel` frame could not be sent: the unit counts as open again.
    pub(crate) fn cancel_not_sent(&mut self, id: u64) {
        self.cancelled.remove(&id);
        self.cancel_waiters.remove(&id);
    }

    /// No Finalize came in time: the unit counts as open again. True when its `SpeechEnd` was held
    /// back and must be sent now.
    pub(crate) fn cancel_timed_out(&mut self, id: u64) -> bool {
        if !self.open.contains(&id) {
            return false;
        }
        self.cancelled.remove(&id);
        self.withheld_end.remove(&id)
    }

    /// Applies a `Finalize`: the unit is settled (closed, remembered, its cancellers answered)
    /// before `on_finalize` runs.
    pub(crate) fn settle(&mut self, speech_id: u64, heard: String) -> Finalized {
        let generated = self.generated.remove(&speech_id).unwrap_or_default();
        let fin = Finalized {
            speech_id,
            heard,
            generated,
        };
        self.open.remove(&speech_id);
        self.cancelled.remove(&speech_id);
        self.withheld_end.remove(&speech_id);
        self.ended.remove(&speech_id);
        self.settled.retain(|f| f.speech_id != speech_id);
        if self.settled.len() == SETTLED_KEPT {
            self.settled.pop_front();
        }
        self.settled.push_back(fin.clone());
        for tx in self.cancel_waiters.remove(&speech_id).unwrap_or_default() {
            let _ = tx.send(fin.clone());
        }
        fin
    }

    fn forget(&mut self, id: u64) {
        self.open.remove(&id);
        self.cancelled.remove(&id);
        self.withheld_end.remove(&id);
        self.ended.remove(&id);
        self.generated.remove(&id);
        self.cancel_waiters.remove(&id);
    }

    /// Drops every cancel waiter (teardown).
    pub(crate) fn abandon_waiters(&mut self) {
        self.cancel_waiters.clear();
    }
}

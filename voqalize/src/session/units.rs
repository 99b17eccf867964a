//! The session's book of speech units: which are open, which this brain cancelled, what each one
//! generated, and the Finalizes remembered for late `cancel_speech` calls (docs/protocol.md §4.5,
//! §4.7, §4.8). Only this file touches its fields; the handles call its methods under the book's
//! lock, so a `Finalize` never settles a unit between a check and the write that depends on it.
//!
//! Heard truth is checked here, since the peer reports it: a `Finalize` counts only for a unit
//! that is open and whose `SpeechStart` had gone out when the Finalize was read, and its heard
//! text is cut to the longest prefix it shares with what the unit generated. A forged or stray
//! Finalize is ignored, so it can neither put words the brain never said into a history nor answer
//! a later `cancel_speech`.

use std::collections::{HashMap, HashSet, VecDeque};

use tokio::sync::oneshot;

use super::error::SessionError;
use crate::logline::Repeated;

/// How many settled Finalizes a session remembers for late `cancel_speech` calls.
pub(crate) const SETTLED_KEPT: usize = 64;

/// How many bytes of text (heard and generated) the remembered Finalizes may hold together (1
/// MiB): past it the oldest are forgotten, though the newest is always kept. A count alone is no
/// bound when one unit can be a megabyte.
pub(crate) const SETTLED_TEXT_BYTES: usize = 1024 * 1024;

/// How many units may wait for their Finalize at once. The runtime finalizes every unit, and a
/// call has a handful open; past this bound the oldest open unit is forgotten (a Finalize for it
/// is then ignored), so a runtime that never finalizes cannot grow the book.
pub(crate) const OPEN_KEPT: usize = 1024;

/// How many bytes of generated text the units waiting for their Finalize may hold together (4
/// MiB): past it the oldest open units are forgotten as past [`OPEN_KEPT`], and one unit alone
/// keeps at most this much of its text (its heard text is then cut to it).
pub(crate) const OPEN_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// What the user heard of one speech unit: the runtime's `Finalize`, with the text this brain
/// generated for the unit beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finalized {
    /// The unit.
    pub speech_id: u64,
    /// What was played to the user (`Finalize.heard_text`): always a prefix of `generated`, since
    /// a heard text that is not is cut to the longest prefix the two share.
    pub heard: String,
    /// What this brain put on the wire for the unit.
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
    /// What each unit put on the wire, until its Finalize.
    spoken: HashMap<u64, Spoken>,
    /// The bytes of text in `spoken`.
    spoken_bytes: usize,
    settled: VecDeque<Finalized>,
    /// The bytes of text in `settled`.
    settled_bytes: usize,
    cancel_waiters: HashMap<u64, Vec<oneshot::Sender<Finalized>>>,
    /// Finalizes ignored (for no unit this session has on the wire), and heard texts cut to what
    /// their unit generated.
    untrue: Repeated,
    /// Open units forgotten past [`OPEN_KEPT`] or [`OPEN_TEXT_BYTES`].
    forgotten: Repeated,
}

/// What one unit put on the wire.
#[derive(Default)]
struct Spoken {
    /// Its text.
    text: String,
    /// Where its `SpeechStart` stands in the outbound lane's order (see
    /// `Outbound::push_numbered`); `None` while (or if ever) it has not reached the lane.
    start: Option<u64>,
}

impl Default for UnitBook {
    fn default() -> Self {
        UnitBook {
            speech_seq: 0,
            open: HashSet::new(),
            cancelled: HashSet::new(),
            withheld_end: HashSet::new(),
            ended: HashSet::new(),
            spoken: HashMap::new(),
            spoken_bytes: 0,
            settled: VecDeque::new(),
            settled_bytes: 0,
            cancel_waiters: HashMap::new(),
            untrue: Repeated::new("Finalizes ignored or cut to what their unit said"),
            forgotten: Repeated::new("speech units forgotten without a Finalize"),
        }
    }
}

impl UnitBook {
    /// Mints the next session-wide speech id (1, 2, 3, ...) and records the unit as open.
    pub(crate) fn open(&mut self) -> u64 {
        if self.open.len() >= OPEN_KEPT
            && let Some(&oldest) = self.open.iter().min()
        {
            if self.forgotten.allow() {
                tracing::warn!("speech {oldest} was never finalized; forgetting it");
            }
            self.forget(oldest);
        }
        self.speech_seq += 1;
        let id = self.speech_seq;
        self.open.insert(id);
        self.spoken.insert(id, Spoken::default());
        id
    }

    /// Unit `id`'s `SpeechStart` was queued as frame number `at` of the outbound lane.
    pub(crate) fn started(&mut self, id: u64, at: u64) {
        if let Some(s) = self.spoken.get_mut(&id) {
            s.start = Some(at);
        }
    }

    /// Closed = cancelled by this brain or finalized by Voqalize: writes are dropped.
    pub(crate) fn is_closed(&self, id: u64) -> bool {
        !self.open.contains(&id) || self.cancelled.contains(&id) || self.ended.contains(&id)
    }

    /// Records text that reached the outbound lane for unit `id`. Past [`OPEN_TEXT_BYTES`] of
    /// open units' text the oldest other open units are forgotten, and the unit keeps no more than
    /// that much of its own.
    pub(crate) fn generated(&mut self, id: u64, text: &str) {
        let Some(s) = self.spoken.get_mut(&id) else {
            return;
        };
        let room = OPEN_TEXT_BYTES.saturating_sub(s.text.len());
        let kept = &text[..text.floor_char_boundary(room)];
        s.text.push_str(kept);
        self.spoken_bytes += kept.len();
        while self.spoken_bytes > OPEN_TEXT_BYTES {
            let Some(&oldest) = self.open.iter().filter(|&&u| u != id).min() else {
                break;
            };
            if self.forgotten.allow() {
                tracing::warn!(
                    "speech {oldest} was never finalized and open units hold over {OPEN_TEXT_BYTES} bytes of text; forgetting it"
                );
            }
            self.forget(oldest);
        }
    }

    /// What unit `id` said, as far as the book knows: the text it put on the wire while it is
    /// open, what the user heard of it once it was finalized; empty for a unit the book no longer
    /// remembers. The voice core reads it to keep a response's history to what was said
    /// (docs/protocol.md §6.7).
    #[cfg(feature = "model")]
    pub(crate) fn said(&self, id: u64) -> String {
        if let Some(s) = self.spoken.get(&id) {
            return s.text.clone();
        }
        self.settled
            .iter()
            .rev()
            .find(|f| f.speech_id == id)
            .map(|f| f.heard.clone())
            .unwrap_or_default()
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

    /// Applies a `Finalize` read when `seen` outbound frames had been handed to the transport: the
    /// unit is settled (closed, remembered, its cancellers answered) before `on_finalize` runs.
    ///
    /// `None`, and nothing changes, when the Finalize names no unit on the wire: one this session
    /// never opened, one not open any more (finalized already, or forgotten), or one whose
    /// `SpeechStart` had not gone out when the Finalize was read. Heard text that is not a prefix
    /// of what the unit generated is cut to the longest prefix the two share.
    pub(crate) fn settle(&mut self, speech_id: u64, heard: String, seen: u64) -> Option<Finalized> {
        let refused = if !self.open.contains(&speech_id) {
            Some(if speech_id == 0 || speech_id > self.speech_seq {
                "this session never opened it"
            } else {
                "it is not open (finalized already, or forgotten)"
            })
        } else if self
            .spoken
            .get(&speech_id)
            .and_then(|s| s.start)
            .is_none_or(|at| at > seen)
        {
            Some("its SpeechStart had not gone out")
        } else {
            None
        };
        if let Some(why) = refused {
            if self.untrue.allow() {
                tracing::warn!("session: ignoring a Finalize for speech {speech_id}: {why}");
            }
            return None;
        }
        let generated = self
            .take_spoken(speech_id)
            .map(|s| s.text)
            .unwrap_or_default();
        let shared = shared_prefix(&heard, &generated);
        let heard = if shared < heard.len() {
            if self.untrue.allow() {
                tracing::warn!(
                    "session: the heard text of speech {speech_id} ({} bytes) is not a prefix of \
                     what it said; keeping the {shared} bytes they share",
                    heard.len()
                );
            }
            // A fresh string: the rest of a long forged text is not kept.
            generated[..shared].to_owned()
        } else {
            heard
        };
        let fin = Finalized {
            speech_id,
            heard,
            generated,
        };
        self.open.remove(&speech_id);
        self.cancelled.remove(&speech_id);
        self.withheld_end.remove(&speech_id);
        self.ended.remove(&speech_id);
        self.settled_bytes += fin.heard.len() + fin.generated.len();
        self.settled.push_back(fin.clone());
        while self.settled.len() > SETTLED_KEPT
            || (self.settled_bytes > SETTLED_TEXT_BYTES && self.settled.len() > 1)
        {
            if let Some(old) = self.settled.pop_front() {
                self.settled_bytes -= old.heard.len() + old.generated.len();
            }
        }
        for tx in self.cancel_waiters.remove(&speech_id).unwrap_or_default() {
            let _ = tx.send(fin.clone());
        }
        Some(fin)
    }

    fn forget(&mut self, id: u64) {
        self.open.remove(&id);
        self.cancelled.remove(&id);
        self.withheld_end.remove(&id);
        self.ended.remove(&id);
        self.take_spoken(id);
        self.cancel_waiters.remove(&id);
    }

    /// Removes what unit `id` put on the wire from the book, keeping its byte count.
    fn take_spoken(&mut self, id: u64) -> Option<Spoken> {
        let spoken = self.spoken.remove(&id)?;
        self.spoken_bytes -= spoken.text.len();
        Some(spoken)
    }

    /// Drops every cancel waiter (teardown).
    pub(crate) fn abandon_waiters(&mut self) {
        self.cancel_waiters.clear();
    }
}

/// The length in bytes of the longest prefix `heard` and `generated` share, at a character boundary.
pub(crate) fn shared_prefix(heard: &str, generated: &str) -> usize {
    heard
        .char_indices()
        .zip(generated.chars())
        .find(|((_, h), g)| h != g)
        .map_or(heard.len().min(generated.len()), |((at, _), _)| at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A book with unit 1 open and its SpeechStart queued as frame 1, having generated `text`.
    fn one_unit(text: &str) -> UnitBook {
        let mut book = UnitBook::default();
        let id = book.open();
        book.started(id, 1);
        book.generated(id, text);
        book
    }

    #[test]
    fn the_shared_prefix_ends_at_a_character_boundary() {
        assert_eq!(shared_prefix("hello there", "hello world"), 6);
        assert_eq!(shared_prefix("hel", "hello"), 3);
        assert_eq!(shared_prefix("hello, and more", "hello"), 5);
        // é and è share their first byte: the cut is before them, not inside.
        assert_eq!(shared_prefix("aè", "aé"), 1);
        assert_eq!(shared_prefix("", "x"), 0);
    }

    #[test]
    fn heard_text_is_cut_to_what_the_unit_said() {
        let mut book = one_unit("hello world");
        let fin = book.settle(1, format!("hello {}", "x".repeat(1 << 20)), 1);
        let fin = fin.expect("a unit on the wire");
        assert_eq!(fin.heard, "hello ");
        assert!(fin.heard.capacity() < 64, "the forged rest is not kept");
        assert!(fin.interrupted());
    }

    #[test]
    fn a_finalize_for_no_unit_on_the_wire_is_ignored() {
        let mut book = one_unit("hi");
        assert!(book.settle(0, "x".into(), 9).is_none(), "never minted");
        assert!(book.settle(2, "x".into(), 9).is_none(), "never minted");
        assert!(
            book.settle(1, "hi".into(), 0).is_none(),
            "its SpeechStart had not gone out"
        );
        // The unit is untouched: a cancel still waits for the real Finalize.
        assert!(matches!(
            book.begin_cancel(1),
            Ok(CancelStart::Wait { send: true, .. })
        ));
        assert_eq!(
            book.settle(1, "hi".into(), 1).map(|f| f.heard),
            Some("hi".into())
        );
        assert!(
            book.settle(1, "hi".into(), 9).is_none(),
            "finalized already"
        );
        let unstarted = book.open();
        assert!(
            book.settle(unstarted, String::new(), 9).is_none(),
            "its SpeechStart never reached the lane"
        );
    }
}

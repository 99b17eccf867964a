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

use std::collections::VecDeque;

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
    /// The units opened and not yet finalized, in the order they were opened (so by id): a call
    /// has a handful, found by a binary search, with no hashing and no table per kind of state.
    open: Vec<Open>,
    /// The bytes of text the open units generated.
    spoken_bytes: usize,
    settled: VecDeque<Finalized>,
    /// The bytes of text in `settled`.
    settled_bytes: usize,
    /// Finalizes ignored (for no unit this session has on the wire), and heard texts cut to what
    /// their unit generated.
    untrue: Repeated,
    /// Open units forgotten past [`OPEN_KEPT`] or [`OPEN_TEXT_BYTES`].
    forgotten: Repeated,
}

/// One unit opened and not yet finalized.
struct Open {
    id: u64,
    /// What it put on the wire.
    spoken: Spoken,
    /// Cancelled by this brain.
    cancelled: bool,
    /// Cancelled, and its SpeechEnd, written after the cancel, was held back.
    withheld_end: bool,
    /// Its SpeechEnd went out: later writes are dropped.
    ended: bool,
    /// Those waiting in `cancel_speech` for its Finalize.
    cancel_waiters: Vec<oneshot::Sender<Finalized>>,
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
            open: Vec::new(),
            spoken_bytes: 0,
            settled: VecDeque::new(),
            settled_bytes: 0,
            untrue: Repeated::new("Finalizes ignored or cut to what their unit said"),
            forgotten: Repeated::new("speech units forgotten without a Finalize"),
        }
    }
}

impl UnitBook {
    /// Where open unit `id` is in `open`.
    fn find(&self, id: u64) -> Option<usize> {
        self.open.binary_search_by_key(&id, |u| u.id).ok()
    }

    fn unit(&self, id: u64) -> Option<&Open> {
        self.find(id).map(|i| &self.open[i])
    }

    fn unit_mut(&mut self, id: u64) -> Option<&mut Open> {
        self.find(id).map(|i| &mut self.open[i])
    }

    /// Mints the next session-wide speech id (1, 2, 3, ...) and records the unit as open.
    pub(crate) fn open(&mut self) -> u64 {
        if self.open.len() >= OPEN_KEPT
            && let Some(oldest) = self.open.first().map(|u| u.id)
        {
            if self.forgotten.allow() {
                tracing::warn!("speech {oldest} was never finalized; forgetting it");
            }
            self.forget(oldest);
        }
        self.speech_seq += 1;
        let id = self.speech_seq;
        // Ids only grow: pushed at the end, the list stays sorted.
        self.open.push(Open {
            id,
            spoken: Spoken::default(),
            cancelled: false,
            withheld_end: false,
            ended: false,
            cancel_waiters: Vec::new(),
        });
        id
    }

    /// Unit `id`'s `SpeechStart` was queued as frame number `at` of the outbound lane.
    pub(crate) fn started(&mut self, id: u64, at: u64) {
        if let Some(u) = self.unit_mut(id) {
            u.spoken.start = Some(at);
        }
    }

    /// Closed = cancelled by this brain or finalized by Voqalize: writes are dropped.
    pub(crate) fn is_closed(&self, id: u64) -> bool {
        self.unit(id).is_none_or(|u| u.cancelled || u.ended)
    }

    /// Records text that reached the outbound lane for unit `id`. Past [`OPEN_TEXT_BYTES`] of
    /// open units' text the oldest other open units are forgotten, and the unit keeps no more than
    /// that much of its own.
    pub(crate) fn generated(&mut self, id: u64, text: &str) {
        let Some(u) = self.unit_mut(id) else {
            return;
        };
        let s = &mut u.spoken.text;
        let room = OPEN_TEXT_BYTES.saturating_sub(s.len());
        let kept = &text[..text.floor_char_boundary(room)];
        if s.capacity() == 0 {
            // A unit's text comes in pieces: room for a sentence or two up front, not a regrowth
            // per piece.
            s.reserve(kept.len().max(UNIT_TEXT_START).min(room));
        }
        s.push_str(kept);
        self.spoken_bytes += kept.len();
        while self.spoken_bytes > OPEN_TEXT_BYTES {
            let Some(oldest) = self.open.iter().map(|u| u.id).find(|&u| u != id) else {
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
        if let Some(u) = self.unit(id) {
            return u.spoken.text.clone();
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
        let Some(u) = self.unit_mut(id) else {
            return EndAction::Skip; // finalized already
        };
        if u.ended {
            return EndAction::Skip; // ended already
        }
        if u.cancelled {
            // Held back; sent if the cancel times out.
            u.withheld_end = true;
            return EndAction::Skip;
        }
        u.ended = true;
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
        let seq = self.speech_seq;
        let Some(u) = self.unit_mut(id) else {
            return Err(if id >= 1 && id <= seq {
                SessionError::Forgotten(id)
            } else {
                SessionError::NeverOpened(id)
            });
        };
        let (tx, finalized) = oneshot::channel();
        u.cancel_waiters.push(tx);
        let send = !std::mem::replace(&mut u.cancelled, true);
        Ok(CancelStart::Wait { finalized, send })
    }

    /// The `SpeechCancel` frame could not be sent: the unit counts as open again.
    pub(crate) fn cancel_not_sent(&mut self, id: u64) {
        if let Some(u) = self.unit_mut(id) {
            u.cancelled = false;
            u.cancel_waiters.clear();
        }
    }

    /// No Finalize came in time: the unit counts as open again. True when its `SpeechEnd` was held
    /// back and must be sent now.
    pub(crate) fn cancel_timed_out(&mut self, id: u64) -> bool {
        let Some(u) = self.unit_mut(id) else {
            return false;
        };
        u.cancelled = false;
        std::mem::replace(&mut u.withheld_end, false)
    }

    /// Applies a `Finalize` read when `seen` outbound frames had been handed to the transport: the
    /// unit is settled (closed, remembered, its cancellers answered) before `on_finalize` runs.
    ///
    /// `None`, and nothing changes, when the Finalize names no unit on the wire: one this session
    /// never opened, one not open any more (finalized already, or forgotten), or one whose
    /// `SpeechStart` had not gone out when the Finalize was read. Heard text that is not a prefix
    /// of what the unit generated is cut to the longest prefix the two share.
    pub(crate) fn settle(&mut self, speech_id: u64, heard: String, seen: u64) -> Option<Finalized> {
        let refused = match self.unit(speech_id) {
            None if speech_id == 0 || speech_id > self.speech_seq => {
                Some("this session never opened it")
            }
            None => Some("it is not open (finalized already, or forgotten)"),
            Some(u) if u.spoken.start.is_none_or(|at| at > seen) => {
                Some("its SpeechStart had not gone out")
            }
            Some(_) => None,
        };
        if let Some(why) = refused {
            if self.untrue.allow() {
                tracing::warn!("session: ignoring a Finalize for speech {speech_id}: {why}");
            }
            return None;
        }
        let unit = self.remove(speech_id)?;
        let generated = unit.spoken.text;
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
        self.settled_bytes += fin.heard.len() + fin.generated.len();
        self.settled.push_back(fin.clone());
        while self.settled.len() > SETTLED_KEPT
            || (self.settled_bytes > SETTLED_TEXT_BYTES && self.settled.len() > 1)
        {
            if let Some(old) = self.settled.pop_front() {
                self.settled_bytes -= old.heard.len() + old.generated.len();
            }
        }
        for tx in unit.cancel_waiters {
            let _ = tx.send(fin.clone());
        }
        Some(fin)
    }

    /// Forgets open unit `id` (its cancellers are dropped, and wake to no answer).
    fn forget(&mut self, id: u64) {
        self.remove(id);
    }

    /// Takes open unit `id` out of the book, keeping the byte count.
    fn remove(&mut self, id: u64) -> Option<Open> {
        let unit = self.open.remove(self.find(id)?);
        self.spoken_bytes -= unit.spoken.text.len();
        if self.open.is_empty() {
            // A quiet call keeps no room for units.
            self.open = Vec::new();
        }
        Some(unit)
    }

    /// Drops every cancel waiter (teardown).
    pub(crate) fn abandon_waiters(&mut self) {
        for u in &mut self.open {
            u.cancel_waiters.clear();
        }
    }
}

/// The room a unit's text starts with, in bytes: a spoken sentence or two.
const UNIT_TEXT_START: usize = 256;

/// The length in bytes of the longest prefix `heard` and `generated` share, at a character boundary.
///
/// Compared as bytes (a heard text is most often all of what was generated, so this is a
/// `memcmp`), then backed off to a character boundary: the bytes before the first difference are
/// the same in both, so a boundary there is a boundary in both.
pub(crate) fn shared_prefix(heard: &str, generated: &str) -> usize {
    let (h, g) = (heard.as_bytes(), generated.as_bytes());
    let n = h.len().min(g.len());
    if h[..n] == g[..n] {
        return n;
    }
    let first_difference = h.iter().zip(g).take_while(|(a, b)| a == b).count();
    heard.floor_char_boundary(first_difference)
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
        // Byte-equal up to a multi-byte character that differs in its last byte.
        assert_eq!(shared_prefix("nă€x", "nă€y"), "nă€".len());
        assert_eq!(shared_prefix("日本語", "日本人"), "日本".len());
        assert_eq!(shared_prefix("日本語", "日本語"), "日本語".len());
        assert_eq!(shared_prefix("日本語です", "日本語"), "日本語".len());
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

//! Long calls: the summary that replaces older exchanges the caller heard, and the notes the brain
//! pinned (docs/protocol.md §6.19).
//!
//! The summary is one user turn, first in the history, so the instruction and it make a prefix
//! that changes only when the call is summarised again (a provider's prompt cache keeps it). What
//! a summary replaces is chosen here, under the lock, and replaced here once the summary comes
//! back (found by id: the bounds may have dropped some meanwhile); the request runs between the
//! two with no lock held (`voice/long_call.rs`).
//!
//! Kept verbatim, never summarised: the pinned notes, and every model turn that made a tool call
//! together with its results turn (its words with it), so no call is split from its result. They
//! stay in their order after the summary; the bounds may still drop the calls, as before.

use super::{Conversation, Entry, EntryId, Part, Role};

/// What the summary entry's text starts with; it ends with `)`.
pub(crate) const SUMMARY_OPENING: &str = "(Earlier in this call, summarised: ";

/// The older exchanges a summary will replace, chosen at one moment of the call.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// The ids of the entries the summary replaces, sorted for the search (ids do not ascend
    /// in history order: a restart puts its note, a new id, in front of the entries it keeps).
    ids: Vec<EntryId>,
    /// What the caller heard of them (`Caller:` and `Agent:` lines).
    pub(crate) transcript: String,
    /// The summary in place now: the new one folds it in.
    pub(crate) previous: Option<String>,
    /// The conversation's restarts when it was chosen.
    epoch: u64,
}

impl Conversation {
    /// Whether entry `id` is the summary or a pinned note: the bounds never drop it.
    pub(crate) fn kept(&self, id: EntryId) -> bool {
        Some(id) == self.summary || self.pinned.contains(&id)
    }

    /// How many entries and bytes the history holds now.
    pub(crate) fn load(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }

    /// Appends `text` as a pinned note (a user turn, as [`push_note`](Self::push_note)): kept
    /// verbatim, never summarised nor dropped by the bounds. Its text is cut to half of
    /// `max_bytes`; past `max_pins` pins, or `max_bytes` of them (as [`Entry::bytes`] counts),
    /// the oldest pins are unpinned (they become ordinary notes), never the newest. Both are
    /// held within half of the history's own bounds, so the pins never hold it past them.
    pub(crate) fn pin(&mut self, text: &str, max_pins: usize, max_bytes: usize) -> EntryId {
        let max_pins = max_pins.min(self.max_entries / 2);
        let max_bytes = max_bytes.min(self.max_bytes / 2);
        let text = crate::tools::shortened_to(text, max_bytes / 2);
        // The id `push` gives it: the bound it applies keeps the pin.
        self.pinned.push_back(self.next_id + 1);
        let id = self.push(Role::User, vec![Part::text(text)]);
        loop {
            self.pinned
                .retain(|p| self.entries.iter().any(|e| e.id == *p));
            let bytes: usize = self
                .entries
                .iter()
                .filter(|e| self.pinned.contains(&e.id))
                .map(|e| e.bytes)
                .sum();
            if self.pinned.len() <= 1 || (self.pinned.len() <= max_pins && bytes <= max_bytes) {
                break;
            }
            self.pinned.pop_front();
        }
        id
    }

    /// The text of the summary in place, if any.
    pub(crate) fn summary_text(&self) -> Option<&str> {
        let at = self.position(self.summary?)?;
        self.entries[at].parts.iter().find_map(|p| match p {
            Part::Text { text, .. } => Some(
                text.strip_prefix(SUMMARY_OPENING)
                    .and_then(|t| t.strip_suffix(')'))
                    .unwrap_or(text),
            ),
            _ => None,
        })
    }

    /// The older exchanges to summarise now, so that what stays is within `keep_entries` and
    /// `keep_bytes` (else as much as may go): whole exchanges from the front, cut only in front
    /// of a user turn, all heard (it stops at the first unit whose `Finalize` has not come, and at
    /// the exchange in progress). The summary in place and the pins are not in it (the summary
    /// is folded in through [`Window::previous`]), nor any model turn with a call or its results
    /// (they stay verbatim). `None` when nothing the caller heard would go, or less than
    /// `at_least` (entries, bytes) in both counts. The transcript is its newest
    /// `max_transcript` bytes.
    pub(crate) fn window(
        &self,
        (keep_entries, keep_bytes): (usize, usize),
        at_least: (usize, usize),
        max_transcript: usize,
    ) -> Option<Window> {
        let len = self.entries.len();
        let exchange = self
            .exchange
            .and_then(|id| self.position(id))
            .unwrap_or(len);
        let speaking = self
            .entries
            .iter()
            .position(|e| self.still_speaking(e.id))
            .unwrap_or(len);
        let limit = exchange.min(speaking);
        let (mut rest_entries, mut rest_bytes) = (len, self.bytes);
        let mut cut = None;
        for (i, entry) in self
            .entries
            .iter()
            .enumerate()
            .take(limit.saturating_add(1))
        {
            if i > 0 && i <= limit && entry.role == Role::User && !self.kept(entry.id) {
                cut = Some(i);
                if rest_entries <= keep_entries && rest_bytes <= keep_bytes {
                    break;
                }
            }
            if !self.kept(entry.id) && !verbatim(entry) {
                rest_entries -= 1;
                rest_bytes = rest_bytes.saturating_sub(entry.bytes);
            }
        }
        let gone: Vec<&Entry> = self.entries[..cut?]
            .iter()
            .filter(|e| !self.kept(e.id) && !verbatim(e))
            .collect();
        let bytes: usize = gone.iter().map(|e| e.bytes).sum();
        if gone.len() < at_least.0 && bytes < at_least.1 {
            return None;
        }
        let transcript = self.transcript_of(gone.iter().copied(), max_transcript);
        if transcript.is_empty() {
            return None;
        }
        let mut ids: Vec<EntryId> = gone.iter().map(|e| e.id).collect();
        ids.sort_unstable();
        Some(Window {
            ids,
            transcript,
            previous: self.summary_text().map(str::to_owned),
            epoch: self.epoch,
        })
    }

    /// Replaces what `window` chose (what is left of it) and the summary in place with one
    /// summary entry, `summary`, first in the history. `false`, changing nothing, when the
    /// conversation was restarted (a handoff) since `window` was chosen.
    pub(crate) fn replace(&mut self, window: &Window, summary: &str) -> bool {
        if window.epoch != self.epoch {
            return false;
        }
        let old = self.summary.take();
        let mut dropped = 0;
        self.entries.retain(|e| {
            let gone = Some(e.id) == old || window.ids.binary_search(&e.id).is_ok();
            if gone {
                dropped += e.bytes;
            }
            !gone
        });
        self.bytes = self.bytes.saturating_sub(dropped);
        self.next_id += 1;
        let id = self.next_id;
        let text = format!("{SUMMARY_OPENING}{summary})");
        let entry = Entry::new(id, Role::User, vec![Part::text(text)]);
        self.bytes += entry.bytes;
        self.entries.insert(0, entry);
        self.summary = Some(id);
        self.bound();
        true
    }
}

/// A model turn that made a call, or a results turn: kept verbatim, never summarised.
fn verbatim(entry: &Entry) -> bool {
    entry.role == Role::Results || entry.parts.iter().any(|p| matches!(p, Part::Call { .. }))
}

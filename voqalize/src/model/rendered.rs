//! The history as a layer last serialised it, kept between requests so a request serialises only
//! what is new.
//!
//! Every request replays the whole conversation: at nine turns of history, escaping the replayed
//! text was most of a Gemini body's work and its tree most of the turn's allocations. An entry
//! before the current turn renders the same bytes on every request until it changes, so the
//! layer keeps each such entry's rendered parts here and copies them into the next body.
//!
//! The conversation owns one [`Rendered`] and tells it of every entry it changes in place
//! ([`Rendered::forget`]); an entry removed or moved is simply not asked for again, and whatever
//! the last request did not ask for is dropped when it ends. The bytes are only valid for the
//! view of the history one layer is sent (its format and model decide which turns reach it
//! without their provider's JSON), so asking for another layer starts again.
//! What is kept is bounded by the history's own byte bound.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// An entry's id, as `history::EntryId` (not imported: `history` names this module's type).
type EntryId = u64;

/// The most room the write buffer keeps between requests (16 KiB): an entry of a few kilobytes is
/// written without allocating, and a large one's room is given back.
const SCRATCH_KEPT: usize = 16 * 1024;

/// The rendered entries of one conversation, for the last layer that built a request of it.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    slot: Mutex<Slot>,
    /// The most bytes kept (the history's byte bound): past it an entry is rendered per request.
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Slot {
    /// Whose view the bytes render: the layer's format and model.
    format: String,
    model: String,
    /// Each kept entry's rendered parts, by id (ascending), with the request that last used it.
    entries: Vec<Kept>,
    /// The bytes held in `entries`.
    bytes: usize,
    /// Counts the requests built: an entry not used by the last one is dropped.
    request: u64,
    /// The size of the last body built, in bytes: the next one's first allocation.
    last_body: usize,
    /// Where an entry not kept yet is written.
    scratch: Vec<u8>,
}

#[derive(Debug)]
struct Kept {
    id: EntryId,
    used: u64,
    bytes: Box<[u8]>,
}

impl Rendered {
    /// Keeps at most `max_bytes` bytes of rendered entries.
    pub(crate) fn new(max_bytes: usize) -> Rendered {
        Rendered {
            slot: Mutex::default(),
            max_bytes,
        }
    }

    /// Entry `id` changed: its bytes are stale.
    pub(crate) fn forget(&mut self, id: EntryId) {
        let slot = self.slot.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Ok(at) = slot.entries.binary_search_by_key(&id, |k| k.id) {
            let kept = slot.entries.remove(at);
            slot.bytes -= kept.bytes.len();
        }
    }

    /// How many entries are kept.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.slot.lock().map_or(0, |s| s.entries.len())
    }

    /// The bytes kept.
    #[cfg(test)]
    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot.lock().map_or(0, |s| s.bytes)
    }

    /// Opens the kept bytes for one request by the layer of `format` and `model` (what was kept
    /// for another layer is dropped).
    pub(crate) fn open(&self, format: &str, model: &str) -> Reuse<'_> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.format != format || slot.model != model {
            slot.entries.clear();
            slot.bytes = 0;
            format.clone_into(&mut slot.format);
            model.clone_into(&mut slot.model);
        }
        slot.request += 1;
        Reuse {
            slot,
            max_bytes: self.max_bytes,
        }
    }
}

/// The kept bytes, open for one request; what it did not use is dropped when it is
/// [`done`](Reuse::done).
pub(crate) struct Reuse<'a> {
    slot: MutexGuard<'a, Slot>,
    max_bytes: usize,
}

impl Reuse<'_> {
    /// Entry `id`'s rendered parts: the kept bytes, else what `render` writes (onto an empty
    /// buffer), then kept unless that would pass the byte bound.
    ///
    /// # Errors
    /// What `render` fails with (nothing is kept then).
    pub(crate) fn parts<E>(
        &mut self,
        id: EntryId,
        render: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<&[u8], E> {
        let slot = &mut *self.slot;
        let found = slot.entries.binary_search_by_key(&id, |k| k.id);
        if let Ok(at) = found {
            slot.entries[at].used = slot.request;
            return Ok(&slot.entries[at].bytes);
        }
        slot.scratch.clear();
        render(&mut slot.scratch)?;
        if let Err(at) = found
            && slot.bytes + slot.scratch.len() <= self.max_bytes
        {
            slot.bytes += slot.scratch.len();
            let kept = Kept {
                id,
                used: slot.request,
                bytes: slot.scratch.as_slice().into(),
            };
            slot.entries.insert(at, kept);
        }
        Ok(&slot.scratch)
    }

    /// The size of the last body built: what the next one reserves.
    pub(crate) fn last_body(&self) -> usize {
        self.slot.last_body
    }

    /// The request was built, its body `body` bytes long: what it did not use goes, and so does
    /// a write buffer a large entry grew past [`SCRATCH_KEPT`].
    pub(crate) fn done(mut self, body: usize) {
        let slot = &mut *self.slot;
        slot.last_body = body;
        if slot.scratch.capacity() > SCRATCH_KEPT {
            slot.scratch = Vec::new();
        }
        let request = slot.request;
        let mut dropped = 0;
        slot.entries.retain(|k| {
            let keep = k.used == request;
            if !keep {
                dropped += k.bytes.len();
            }
            keep
        });
        slot.bytes -= dropped;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entry `id`'s parts through `reuse`, rendered as `text` when not kept; whether it was kept.
    fn parts(reuse: &mut Reuse<'_>, id: EntryId, text: &str) -> (Vec<u8>, bool) {
        let mut rendered = false;
        let bytes = reuse
            .parts(id, |buf| {
                rendered = true;
                buf.extend_from_slice(text.as_bytes());
                Ok::<_, ()>(())
            })
            .map(<[u8]>::to_vec);
        (bytes.unwrap_or_default(), !rendered)
    }

    #[test]
    fn an_entry_is_kept_until_it_changes_or_a_request_leaves_it_out() {
        let mut rendered = Rendered::new(1024);
        let mut reuse = rendered.open("google.generateContent", "m");
        assert_eq!(parts(&mut reuse, 1, "a"), (b"a".to_vec(), false));
        assert_eq!(parts(&mut reuse, 2, "b"), (b"b".to_vec(), false));
        reuse.done(100);

        let mut reuse = rendered.open("google.generateContent", "m");
        assert_eq!(reuse.last_body(), 100);
        assert_eq!(parts(&mut reuse, 2, "changed"), (b"b".to_vec(), true));
        reuse.done(100); // entry 1 was not asked for: it goes

        let mut reuse = rendered.open("google.generateContent", "m");
        assert_eq!(parts(&mut reuse, 1, "a2"), (b"a2".to_vec(), false));
        assert!(parts(&mut reuse, 2, "b").1);
        reuse.done(100);

        rendered.forget(2);
        let mut reuse = rendered.open("google.generateContent", "m");
        assert_eq!(parts(&mut reuse, 2, "b2"), (b"b2".to_vec(), false));
    }

    #[test]
    fn another_layer_starts_again_and_the_byte_bound_holds() {
        let rendered = Rendered::new(10);
        let mut reuse = rendered.open("google.generateContent", "m");
        assert!(!parts(&mut reuse, 1, "0123456789").1);
        assert!(!parts(&mut reuse, 2, "x").1);
        assert!(
            !parts(&mut reuse, 2, "x").1,
            "past the bound: written each time"
        );
        assert!(parts(&mut reuse, 1, "").1);
        reuse.done(0);
        let mut reuse = rendered.open("google.generateContent", "other");
        assert!(
            !parts(&mut reuse, 1, "0123456789").1,
            "another model's view"
        );
        assert!(parts(&mut reuse, 1, "").1);
    }

    #[test]
    fn a_large_entry_s_write_buffer_is_given_back() {
        let rendered = Rendered::new(1 << 20);
        let mut reuse = rendered.open("f", "m");
        parts(&mut reuse, 1, &"x".repeat(SCRATCH_KEPT + 1));
        reuse.done(0);
        let slot = rendered.slot.lock().expect("not poisoned");
        assert_eq!(slot.scratch.capacity(), 0);
        assert_eq!(slot.bytes, SCRATCH_KEPT + 1, "the entry itself is kept");
    }

    #[test]
    fn a_failed_render_keeps_nothing() {
        let rendered = Rendered::new(1024);
        let mut reuse = rendered.open("f", "m");
        assert!(reuse.parts(1, |_| Err("no")).is_err());
        assert!(!parts(&mut reuse, 1, "a").1);
    }
}

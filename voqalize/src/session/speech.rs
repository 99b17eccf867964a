//! Speaking: a [`Turn`] opens [`SpeechUnit`]s, one at a time; a unit is written to and closed (or
//! closed when dropped). The borrow of the turn makes "SpeechStart inside an open unit" and "a chunk
//! outside a unit" impossible to write (the reference SDK raises these at run time, wire.md §2.5).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::handle::Session;
use super::outbound::Pushed;
use crate::wire::Frame;

/// One turn of the call: the answer to a `UserMessage`, a `UserIdle`, or the greeting of
/// `SessionStart`. A speaking callback receives it and speaks through it.
///
/// A turn is cancelled by a barge-in (`Interruption` with `through_turn` ≥ its id) or by teardown:
/// its task is dropped at its next `.await`, nothing more is sent for it, and no `SpeechEnd` goes out
/// for the unit it was speaking (Voqalize finalizes the unit it cut).
pub struct Turn {
    session: Session,
    id: u64,
    cancelled: Arc<AtomicBool>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("id", &self.id)
            .field("session", &self.session.id())
            .finish()
    }
}

impl Turn {
    pub(crate) fn new(session: Session, id: u64, cancelled: Arc<AtomicBool>) -> Self {
        Turn {
            session,
            id,
            cancelled,
        }
    }

    /// The turn id (the stimulus's `turn_id`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The session this turn belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// True once a barge-in or teardown has cancelled this turn.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Opens a speech unit: mints the next session-wide speech id (1, 2, 3, ...) and sends
    /// `SpeechStart{speech_id, turn_id}`.
    pub fn open_unit(&mut self) -> SpeechUnit<'_> {
        let id = {
            let mut book = self.session.units();
            book.speech_seq += 1;
            let id = book.speech_seq;
            book.open.insert(id);
            book.generated.insert(id, String::new());
            id
        };
        if !self.is_cancelled() {
            self.session.emit(Frame::SpeechStart {
                speech_id: id,
                turn_id: self.id,
            });
        }
        SpeechUnit {
            turn: self,
            id,
            done: false,
        }
    }

    /// Speaks `text` as one whole unit (start, one chunk, end) and returns its speech id. An empty
    /// `text` still opens and closes a (silent) unit.
    pub fn say(&mut self, text: &str) -> u64 {
        let mut unit = self.open_unit();
        unit.write(text);
        let id = unit.id();
        unit.close();
        id
    }
}

/// An open speech unit: text written to it is streamed to Voqalize as `SpeechChunk`s.
///
/// Close it with [`close`](Self::close), or let it drop: when the callback returns or fails (even
/// by panicking) the drop sends `SpeechEnd`; when the turn was cancelled by a barge-in or teardown
/// it sends nothing. Once Voqalize finalized the unit or the brain cancelled it
/// ([`Session::cancel_speech`]), further writes and the end are dropped.
pub struct SpeechUnit<'t> {
    turn: &'t mut Turn,
    id: u64,
    done: bool,
}

impl std::fmt::Debug for SpeechUnit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpeechUnit")
            .field("speech_id", &self.id)
            .field("turn", &self.turn.id)
            .finish()
    }
}

impl SpeechUnit<'_> {
    /// The unit's speech id, for [`Session::cancel_speech`].
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.turn.session
    }

    /// The turn this unit answers.
    pub fn turn_id(&self) -> u64 {
        self.turn.id
    }

    /// True once Voqalize finalized the unit or this brain cancelled it; writes are then dropped.
    pub fn is_closed(&self) -> bool {
        self.turn.session.units().is_closed(self.id)
    }

    /// Streams `text` as one `SpeechChunk`. Empty text is skipped; text for a closed unit or a
    /// cancelled turn is dropped. Only text that reaches the outbound lane counts as generated.
    pub fn write(&mut self, text: &str) {
        if text.is_empty() || self.turn.is_cancelled() {
            return;
        }
        let session = &self.turn.session;
        let mut book = session.units();
        if book.is_closed(self.id) {
            return;
        }
        // Pushed under the unit lock so a Finalize cannot settle between the check and the append.
        let pushed = session.emit(Frame::SpeechChunk {
            speech_id: self.id,
            text: text.to_owned(),
        });
        if pushed == Pushed::Queued
            && let Some(g) = book.generated.get_mut(&self.id)
        {
            g.push_str(text);
        }
    }

    /// Closes the unit: sends `SpeechEnd` (unless the unit was finalized or cancelled already).
    pub fn close(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if std::mem::replace(&mut self.done, true) || self.turn.is_cancelled() {
            return;
        }
        let session = &self.turn.session;
        let mut book = session.units();
        if !book.open.contains(&self.id) {
            return; // finalized already
        }
        if book.cancelled.contains(&self.id) {
            // Held back; sent if the cancel times out (wire.md §2.8 step 7).
            book.withheld_end.insert(self.id);
            return;
        }
        session.emit(Frame::SpeechEnd { speech_id: self.id });
    }
}

impl Drop for SpeechUnit<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

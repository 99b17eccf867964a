//! Speaking: a [`Turn`] opens [`SpeechUnit`]s; a unit is written to and closed (or closed when
//! dropped). Text can only be written through a unit, so a chunk outside a unit cannot be written
//! (docs/protocol.md §4.5).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{Stream, StreamExt};

use super::Session;
use super::outbound::Pushed;
use super::units::EndAction;
use crate::recover::lock;
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
    /// The unit this turn has open, if any: a turn speaks one unit at a time.
    open: Mutex<Option<u64>>,
    /// Some text of this turn reached the outbound lane.
    spoke: AtomicBool,
    /// The user's words this turn answers (a `UserMessage`'s text).
    user_text: Option<String>,
    /// When the user's message this turn answers was read.
    read: Option<std::time::Instant>,
    /// The tool calls the voice core started in this turn, over every `respond`: the next
    /// call's number in its id.
    tool_calls: AtomicUsize,
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
            open: Mutex::new(None),
            spoke: AtomicBool::new(false),
            user_text: None,
            read: None,
            tool_calls: AtomicUsize::new(0),
        }
    }

    /// This turn answers the user's words `text`, read at `read`.
    pub(crate) fn answering(mut self, text: String, read: std::time::Instant) -> Self {
        self.user_text = Some(text);
        self.read = Some(read);
        self
    }

    /// The user's words this turn answers: the `UserMessage`'s text, or `None` for a turn that
    /// answers silence (`UserIdle`) or speaks the greeting. [`Model::respond`] adds them to the
    /// conversation before it asks the model.
    ///
    /// [`Model::respond`]: crate::voice::Model::respond
    pub fn user_text(&self) -> Option<&str> {
        self.user_text.as_deref()
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

    /// The flag a barge-in or teardown sets: what outlives the turn reads it (a tool run that
    /// ends after its turn).
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn cancelled_flag(&self) -> Arc<AtomicBool> {
        self.cancelled.clone()
    }

    /// The number of the turn's next tool call, from 0: its id is
    /// `{session}/{turn}/{number}` (see `CurrentCall::id`). Counted on the turn itself, so two
    /// turns of one call running at once, sharing one `Model`, never number a call alike.
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    pub(crate) fn next_tool_call(&self) -> usize {
        self.tool_calls.fetch_add(1, Ordering::Relaxed)
    }

    /// Opens a speech unit: mints the next session-wide speech id (1, 2, 3, ...) and sends
    /// `SpeechStart{speech_id, turn_id}`.
    ///
    /// It takes `&self`, so a unit can be opened lazily inside a read loop
    /// (`unit.get_or_insert_with(|| turn.open_unit())`). A turn speaks one unit at a time: opening
    /// a unit while another unit of this turn is still open first closes that one (`SpeechEnd`,
    /// with a warning), and writes to its handle are then dropped.
    pub fn open_unit(&self) -> SpeechUnit<'_> {
        let mut book = self.session.units();
        let mut open = lock(&self.open);
        if let Some(previous) = open.take()
            && !book.is_closed(previous)
            && book.end(previous) == EndAction::Send
        {
            tracing::warn!(
                "turn {} opened a unit while unit {previous} was still open; closing {previous} first",
                self.id
            );
            self.session.emit(Frame::SpeechEnd {
                speech_id: previous,
            });
        }
        let id = book.open();
        *open = Some(id);
        let started = !self.is_cancelled() && {
            let (pushed, at) = self.session.emit_numbered(Frame::SpeechStart {
                speech_id: id,
                turn_id: self.id,
            });
            if pushed == Pushed::Queued {
                // A Finalize for the unit counts once this frame has gone out.
                book.started(id, at);
            }
            pushed == Pushed::Queued
        };
        SpeechUnit {
            turn: self,
            id,
            started,
            done: false,
        }
    }

    /// Speaks `text` as one whole unit (start, one chunk, end) and returns its speech id. An empty
    /// `text` still opens and closes a (silent) unit.
    pub fn say(&self, text: &str) -> u64 {
        let mut unit = self.open_unit();
        unit.write(text);
        let id = unit.id();
        unit.close();
        id
    }

    /// True once this turn has put speech on the wire: some text written to one of its units
    /// reached the outbound lane (an empty or silent unit does not count). A model-backed brain's
    /// `respond` override reads it to know whether the model said anything.
    pub fn has_spoken(&self) -> bool {
        self.spoke.load(Ordering::Acquire)
    }

    /// Speaks a stream of text pieces (an agent's or a model's streamed answer) as one unit;
    /// gives `Ok(Some(speech_id))` of the unit, or `Ok(None)` when nothing was spoken.
    ///
    /// Items are text (`String`, `&str`, `Cow<str>`, `Box<str>`, `Arc<str>`) or a `Result` of
    /// text, as most agents stream them ([`SpeechPiece`]). The unit opens on the first non-empty
    /// piece, so a stream that yields nothing (or only empty pieces) opens no unit and gives
    /// `Ok(None)`. Each piece is written as it arrives, and the unit is closed when the stream
    /// ends. An `Err` item closes the unit (what was written stays spoken) and is returned. A
    /// barge-in drops this future at its next `.await`, like the rest of the turn: nothing more is
    /// read or spoken.
    ///
    /// ```no_run
    /// use futures_util::stream;
    /// use voqalize::prelude::*;
    ///
    /// struct Ported;
    ///
    /// impl Brain for Ported {
    ///     async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
    ///         // Your agent's streamed answer: a `Stream` of text, or of `Result`s of text.
    ///         let pieces = ["You said ", "\"", message.text.as_str(), "\"."];
    ///         turn.speak_stream(stream::iter(pieces)).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    ///
    /// # Errors
    /// The first `Err` item of the stream; nothing after it is read. A stream of plain text never
    /// fails (its error type is `Infallible`).
    pub async fn speak_stream<S>(
        &self,
        stream: S,
    ) -> Result<Option<u64>, <S::Item as SpeechPiece>::Error>
    where
        S: Stream,
        S::Item: SpeechPiece,
    {
        let mut stream = std::pin::pin!(stream);
        let mut unit: Option<SpeechUnit<'_>> = None;
        while let Some(piece) = stream.next().await {
            let piece = match piece.into_text() {
                Ok(piece) => piece,
                Err(e) => {
                    if let Some(unit) = unit {
                        unit.close();
                    }
                    return Err(e);
                }
            };
            let text = piece.as_ref();
            if text.is_empty() {
                continue;
            }
            unit.get_or_insert_with(|| self.open_unit()).write(text);
        }
        Ok(unit.map(|unit| {
            let id = unit.id();
            unit.close();
            id
        }))
    }
}

/// One item of a stream [`Turn::speak_stream`] speaks: text, or a `Result` of text (an agent's
/// fallible stream; its `Err` ends the unit and is returned).
///
/// An item that is neither is a compile error naming the fix (map the items to their text):
///
/// ```compile_fail
/// use futures_util::stream;
/// use voqalize::prelude::*;
///
/// struct Event {
///     text: String,
/// }
///
/// async fn speak(turn: &Turn) {
///     let events = stream::iter([Event { text: "Hi.".into() }]);
///     let _ = turn.speak_stream(events).await; // `Event` is not a piece of text
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`speak_stream` speaks text: `{Self}` is not a piece of text",
    label = "the stream's items",
    note = "items are `String`, `&str`, `Cow<str>`, `Box<str>`, `Arc<str>`, or a `Result` of one; map your agent's items to the text to speak first (`.map(|item| item.text)`)"
)]
pub trait SpeechPiece {
    /// The text, as the stream holds it.
    type Text: AsRef<str>;
    /// What a failed item carries (`Infallible` for plain text).
    type Error;
    /// The item's text, or its error.
    ///
    /// # Errors
    /// The item is an `Err`.
    fn into_text(self) -> Result<Self::Text, Self::Error>;
}

macro_rules! text_piece {
    ($(<$($l:lifetime),*> $t:ty),*) => {$(
        impl<$($l),*> SpeechPiece for $t {
            type Text = $t;
            type Error = std::convert::Infallible;
            fn into_text(self) -> Result<Self, std::convert::Infallible> {
                Ok(self)
            }
        }
    )*};
}

text_piece!(
    <> String,
    <'a> &'a str,
    <'a> &'a String,
    <'a> std::borrow::Cow<'a, str>,
    <> Box<str>,
    <> Arc<str>
);

impl<T: AsRef<str>, E> SpeechPiece for Result<T, E> {
    type Text = T;
    type Error = E;
    fn into_text(self) -> Result<T, E> {
        self
    }
}

/// An open speech unit: text written to it is streamed to Voqalize as `SpeechChunk`s.
///
/// Close it with [`close`](Self::close), or let it drop: when the callback returns or fails (even
/// by panicking) the drop sends `SpeechEnd`; when the turn was cancelled by a barge-in or teardown
/// it sends nothing. Once Voqalize finalized the unit or the brain cancelled it
/// ([`Session::cancel_speech`]), further writes and the end are dropped.
pub struct SpeechUnit<'t> {
    turn: &'t Turn,
    id: u64,
    started: bool,
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

    /// True when this unit's `SpeechStart` reached the outbound lane (false when the turn was
    /// already cancelled, or the session had ended): only such a unit will be finalized.
    pub fn started(&self) -> bool {
        self.started
    }

    /// True once Voqalize finalized the unit or this brain cancelled or closed it; writes are then
    /// dropped.
    pub fn is_closed(&self) -> bool {
        self.turn.session.units().is_closed(self.id)
    }

    /// Streams `text` as one `SpeechChunk`, or as several when it is longer than the chunk limit
    /// ([`HostBuilder::max_chunk_bytes`](crate::host::HostBuilder::max_chunk_bytes), 16 KiB by
    /// default): cut at character boundaries, in order,
    /// so their concatenation is `text` and no frame outgrows the socket (a model's text delta has
    /// no length of its own). Empty text is skipped; text for a closed unit or a cancelled turn is
    /// dropped. Only text that reaches the outbound lane counts as generated: when a congested
    /// lane sheds a chunk, the rest of this `text` is dropped with it.
    pub fn write(&mut self, text: &str) {
        if text.is_empty() || self.turn.is_cancelled() {
            return;
        }
        let session = &self.turn.session;
        let max = session.chunk_bytes();
        let mut book = session.units();
        if book.is_closed(self.id) {
            return;
        }
        // Pushed under the book's lock so a Finalize cannot settle between the check and the
        // bookkeeping.
        let mut rest = text;
        while !rest.is_empty() {
            // `max` is at least 4 bytes, one character of any width: every piece holds one.
            let cut = rest.floor_char_boundary(max);
            let (piece, after) = rest.split_at(cut);
            let pushed = session.emit(Frame::SpeechChunk {
                speech_id: self.id,
                text: piece.to_owned(),
            });
            if pushed != Pushed::Queued {
                break;
            }
            book.generated(self.id, piece);
            if !self.turn.spoke.swap(true, Ordering::AcqRel)
                && let Some(read) = self.turn.read
            {
                crate::metrics::first_chunk(read.elapsed());
            }
            rest = after;
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
        let mut open = lock(&self.turn.open);
        if *open == Some(self.id) {
            *open = None;
        }
        if book.end(self.id) == EndAction::Send {
            session.emit(Frame::SpeechEnd { speech_id: self.id });
        }
    }
}

impl Drop for SpeechUnit<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

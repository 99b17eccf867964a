//! One model response and its one owner (docs/protocol.md §6.5–§6.7): the response's model turn
//! in the history, the leak guard on its text, the speech unit its words go out in, and the call
//! whose tool is running.
//!
//! The turn hands a [`Response`] every part a decoder produced, owned and in stream order. The
//! response screens text through its [`Guard`], writes what the guard releases to its unit
//! (opened at the first released word), and moves the part into its model turn: nothing else
//! writes that turn while the response is open. What the response said is recorded once, in the
//! session's unit book; when the model turn must keep no more than that (a call written as text,
//! a cut, a barge-in), it is cut to what the book holds for the response's unit.
//!
//! Every method takes the conversation already locked, so the turn locks it once for a run of
//! parts, not once per part.

use serde_json::{Value, json};

use super::bounds::{Bounds, Tripped, kept_name};
use super::conversation::Conversation;
use super::guard::{Guard, Released};
use super::report::Clock;
use super::runs::Slot;
use crate::model::history::{Call, EntryId, Kept, Origin, Part, ToolResult};
use crate::session::{SpeechUnit, Turn};
use crate::tools::Arguments;

/// How the model ended a response, as far as its text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// A finish reason, the provider's terminal event, or the end of the stream.
    Finished,
    /// It ended because its output did not parse (Gemini's `MALFORMED_FUNCTION_CALL`).
    Malformed,
}

/// What a closed response leaves its turn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closed {
    /// It spoke, made its calls, or said nothing: the turn goes on.
    Answered,
    /// It tried to make a call and made none (it wrote the call as text, or ended malformed):
    /// the turn may ask once more.
    Stranded,
}

/// A call the response filed in its model turn, to run now.
#[derive(Debug)]
pub(super) struct Filed {
    /// The call's id, which its result echoes (some providers send none).
    pub call_id: Option<String>,
    /// The model turn holding it.
    pub entry: EntryId,
    /// The call's place among the response's calls: its result is filed in that order.
    pub ordinal: usize,
    /// The name the model wrote: the tool looked up.
    pub name: String,
    /// The name the history keeps (cut when no tool could have the one written).
    pub kept: String,
    /// The arguments, for the tool.
    pub arguments: Arguments,
}

/// One model response being written.
pub(super) struct Response<'t> {
    turn: &'t Turn,
    /// The response's model turn in the history.
    entry: EntryId,
    guard: Guard,
    /// What the model turn keeps so far, for the bounds on it.
    kept: Kept,
    /// Calls filed (refused ones included).
    calls: usize,
    /// The runs of its calls' tools that end with the turn (a barge-in answers each as
    /// cancelled), and the tasks to stop for them.
    stopping: Vec<(Slot, Option<tokio::task::AbortHandle>)>,
    /// Pieces of speech written so far (the model's words and lines spoken while a tool ran).
    spoken: u64,
    /// `spoken` right after the last filler line: a filler is never spoken twice in a row.
    filler_at: Option<u64>,
    /// The last piece spoken was a line of its own (a filler, a tool's progress): the model's
    /// next words are set apart from it by a space.
    after_line: bool,
    /// The unit speaking the response, while open.
    speech: Option<SpeechUnit<'t>>,
    /// The unit whose `SpeechStart` went out, remembered after it closes: what the unit book
    /// holds for it is what this response said.
    spoke: Option<u64>,
}

impl<'t> Response<'t> {
    /// Opens a response: an empty model turn at the end of the history, marked with `origin`
    /// (the layer answering: what its provider sent goes back only to it).
    pub(super) fn open(turn: &'t Turn, conversation: &mut Conversation, origin: Origin) -> Self {
        Response {
            turn,
            entry: conversation.push_response(origin),
            guard: Guard::new(),
            kept: Kept::default(),
            calls: 0,
            stopping: Vec::new(),
            spoken: 0,
            filler_at: None,
            after_line: false,
            speech: None,
            spoke: None,
        }
    }

    /// Counts `part` against what one response may keep (its parts, and its bytes as the history
    /// counts them).
    ///
    /// # Errors
    /// The bound keeping `part` would pass: the part is not kept, and the response is cut there.
    pub(super) fn keep(&mut self, part: &Part, bounds: &Bounds) -> Result<(), Tripped> {
        let kept = self.kept.with(part);
        if let Some(bound) = bounds.over_kept(kept) {
            return Err(bound);
        }
        self.kept = kept;
        Ok(())
    }

    /// A part that is not a call: its text is screened and what the guard releases is spoken at
    /// once (a barge-in at the turn's next `.await` finds every released word in the unit);
    /// then the part joins the model turn.
    pub(super) fn write(&mut self, conversation: &mut Conversation, part: Part, clock: &mut Clock) {
        if let Part::Text { text, .. } = &part {
            let mut released = self.guard.release(text);
            self.set_apart(&mut released);
            self.speak(conversation, released, clock);
        }
        conversation.extend(self.entry, part);
    }

    /// A real call arrived: the words the guard held in case they began a call written as text
    /// are speech after all, and go out before the tool runs.
    pub(super) fn before_call(&mut self, conversation: &mut Conversation, clock: &mut Clock) {
        let mut released = self.guard.before_call();
        self.set_apart(&mut released);
        self.speak(conversation, released, clock);
    }

    /// Files `call` in the model turn, as a call whose tool runs now and must answer by `due`.
    /// A name no tool could have is cut in the history; the tool is looked up by the name the
    /// model wrote.
    pub(super) fn file_call(
        &mut self,
        conversation: &mut Conversation,
        mut call: Call,
        raw: Value,
        due: std::time::Instant,
    ) -> Filed {
        let kept = kept_name(&call.name);
        let name = std::mem::replace(&mut call.name, kept.clone());
        let call_id = call.id.clone();
        let arguments = call.arguments.clone();
        self.calls += 1;
        conversation.extend(self.entry, Part::Call { call, raw });
        Filed {
            call_id,
            entry: self.entry,
            ordinal: conversation.call_filed(self.entry, due),
            name,
            kept,
            arguments,
        }
    }

    /// A run of one of its calls that ends with the turn: when the turn ends before the run, the
    /// run is stopped (`abort`) and its call answered as cancelled.
    pub(super) fn stops_with_turn(&mut self, slot: Slot, abort: Option<tokio::task::AbortHandle>) {
        self.stopping.push((slot, abort));
    }

    /// How many pieces of speech it has written.
    pub(super) fn spoken(&self) -> u64 {
        self.spoken
    }

    /// Whether a filler may be spoken now: the response's speech is open (or has not begun)
    /// and its last words were not a filler.
    pub(super) fn filler_allowed(&self) -> bool {
        self.filler_at != Some(self.spoken) && (self.speech.is_some() || self.spoke.is_none())
    }

    /// Speaks `line` while a tool runs (a filler, or the tool's progress), as the response's own
    /// words: in its unit (opened for it when none is), and in its model turn before its calls,
    /// where heard truth puts the words the unit carried. Nothing if the response's unit was
    /// closed early (a call written as text ended its speech), or if the line would take what the
    /// response keeps past its byte bound (a tool that says its progress in a loop).
    pub(super) fn side_line(
        &mut self,
        conversation: &mut Conversation,
        line: &str,
        filler: bool,
        (clock, bounds): (&mut Clock, &Bounds),
    ) -> bool {
        if self.speech.is_none() && self.spoke.is_some() {
            return false;
        }
        // Pieces of a unit are spoken as one text: a line after words starts with a space.
        let line = if self.spoken > 0 && !line.starts_with(char::is_whitespace) {
            std::borrow::Cow::Owned(format!(" {line}"))
        } else {
            std::borrow::Cow::Borrowed(line)
        };
        let mut kept = self.kept;
        kept.bytes += line.len();
        if bounds.over_kept(kept).is_some() {
            if filler {
                // Not tried again until more is said.
                self.filler_at = Some(self.spoken);
            }
            return false;
        }
        self.kept = kept;
        conversation.say_before_calls(self.entry, &line);
        self.speak(conversation, Released::one(line), clock);
        self.after_line = true;
        if filler {
            self.filler_at = Some(self.spoken);
        }
        true
    }

    /// Files a call that passed `bound`: in the history with no arguments (a name no tool has is
    /// cut), answered with an error the model reads. No tool runs.
    pub(super) fn refuse(
        &mut self,
        conversation: &mut Conversation,
        call: Call,
        raw: Value,
        bound: Tripped,
    ) {
        self.file_unrun(conversation, call, raw, |name| bound.answer(name));
    }

    /// Files a call the stop cut off before its arguments were complete (docs/protocol.md
    /// §6.4): in the history with no arguments (a name no tool has is cut), answered with an
    /// error the model reads. No tool runs.
    pub(super) fn cut_off(&mut self, conversation: &mut Conversation, call: Call, raw: Value) {
        self.file_unrun(conversation, call, raw, |name| {
            format!(
                "'{name}' did not run: the reply stopped before this call's arguments were \
                 complete (the output token limit, or the provider stopped it); call it again \
                 with all its arguments if it is still needed"
            )
        });
    }

    /// Files a call whose tool does not run: with no arguments, answered with `answer(name)`.
    fn file_unrun(
        &mut self,
        conversation: &mut Conversation,
        call: Call,
        raw: Value,
        answer: impl FnOnce(&str) -> String,
    ) {
        let name = kept_name(&call.name);
        let result = ToolResult {
            call_id: call.id.clone(),
            name: name.clone(),
            response: json!({ "error": answer(&name) }),
        };
        let call = Call {
            id: call.id,
            name,
            arguments: Arguments::Raw("{}".to_owned()),
        };
        self.calls += 1;
        conversation.extend(self.entry, Part::Call { call, raw });
        let ordinal = conversation.call_filed(self.entry, std::time::Instant::now());
        conversation.answer(self.entry, ordinal, result);
    }

    /// When the guard has seen a call written as text after speech began, the speech ends now:
    /// nothing more of the response is spoken. True when it ended with this call.
    pub(super) fn stop_speaking_if_leaked(&mut self) -> bool {
        if self.guard.leaked() != Some(true) {
            return false;
        }
        self.speech.take().map(SpeechUnit::close).is_some()
    }

    /// The request failed: the speech ends where it is (what was said stays, and is finalized
    /// like any unit); the turn's cleanup abandons the response.
    pub(super) fn fall_silent(&mut self) {
        if let Some(unit) = self.speech.take() {
            unit.close();
        }
    }

    /// The response ended (`ending`): what the guard still holds is released unless it ended
    /// malformed, the speech ends, and a response that wrote a call as text keeps only what it
    /// said (and its real calls).
    pub(super) fn close(
        mut self,
        conversation: &mut Conversation,
        ending: Ending,
        clock: &mut Clock,
    ) -> Closed {
        conversation.response_closed(self.entry);
        let mut released = self.guard.settle(ending == Ending::Malformed);
        self.set_apart(&mut released);
        self.speak(conversation, released, clock);
        if let Some(unit) = self.speech.take() {
            unit.close();
        }
        let leaked = self.guard.leaked() == Some(true);
        if leaked {
            conversation.strip(self.entry, &self.said());
        }
        if (leaked || self.guard.malformed()) && self.calls == 0 {
            Closed::Stranded
        } else {
            Closed::Answered
        }
    }

    /// The runs that end with the turn and may still be running: the turn stops each and
    /// answers its call as cancelled before it abandons the response (answering locks the
    /// conversation, which [`abandon`](Self::abandon) is given locked).
    pub(super) fn take_stopping(&mut self) -> Vec<(Slot, Option<tokio::task::AbortHandle>)> {
        std::mem::take(&mut self.stopping)
    }

    /// The response ends before its finish: a bound cut it, the request failed, or a barge-in
    /// dropped the turn. Its calls stay: each is answered, now or when its run ends (see
    /// `voice::runs`). Text never released (an opening held, words after a call written as
    /// text) and text of a unit whose `SpeechStart` never went out was not heard: the model turn
    /// is cut to what was said.
    pub(super) fn abandon(mut self, conversation: &mut Conversation) {
        conversation.response_closed(self.entry);
        let unstarted = self.speech.as_ref().is_some_and(|unit| !unit.started());
        if let Some(unit) = self.speech.take() {
            unit.close();
        }
        if self.guard.leaked() != Some(false) || unstarted {
            conversation.strip(self.entry, &self.said());
        }
    }

    /// After a line of its own, the model's next words start with a space.
    fn set_apart(&mut self, released: &mut Released<'_>) {
        if !self.after_line {
            return;
        }
        if let Some(first) = released.iter_mut().find(|p| !p.is_empty()) {
            self.after_line = false;
            if !first.starts_with(char::is_whitespace) {
                *first = std::borrow::Cow::Owned(format!(" {first}"));
            }
        }
    }

    /// Speaks released pieces, opening the unit at the first.
    fn speak(
        &mut self,
        conversation: &mut Conversation,
        released: Released<'_>,
        clock: &mut Clock,
    ) {
        for piece in released.iter().filter(|p| !p.is_empty()) {
            let unit = match &mut self.speech {
                Some(unit) => unit,
                None => {
                    let unit = self.turn.open_unit();
                    if unit.started() {
                        conversation.speaking(unit.id(), Some(self.entry));
                        self.spoke = Some(unit.id());
                    }
                    clock.mark_speak();
                    self.speech.insert(unit)
                }
            };
            unit.write(piece);
            self.spoken += 1;
        }
    }

    /// What the response said, as the unit book records it (nothing if no unit started).
    fn said(&self) -> String {
        self.spoke
            .map(|id| self.turn.session().said(id))
            .unwrap_or_default()
    }
}

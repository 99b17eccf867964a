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
use crate::model::history::{Call, EntryId, Kept, Part, Role, ToolResult};
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
    /// How many calls have their result filed: results are filed in call order, so these are
    /// the first ones. The others' tools are running, or their results wait in `ready`.
    answered: usize,
    /// Results of later calls, waiting for an earlier call's.
    ready: std::collections::BTreeMap<usize, ToolResult>,
    /// The results turn right after the model turn, once a result was filed.
    results: Option<EntryId>,
    /// The unit speaking the response, while open.
    speech: Option<SpeechUnit<'t>>,
    /// The unit whose `SpeechStart` went out, remembered after it closes: what the unit book
    /// holds for it is what this response said.
    spoke: Option<u64>,
}

impl<'t> Response<'t> {
    /// Opens a response: an empty model turn at the end of the history.
    pub(super) fn open(turn: &'t Turn, conversation: &mut Conversation) -> Self {
        Response {
            turn,
            entry: conversation.push(Role::Model, Vec::new()),
            guard: Guard::new(),
            kept: Kept::default(),
            calls: 0,
            answered: 0,
            ready: std::collections::BTreeMap::new(),
            results: None,
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
            let released = self.guard.release(text);
            self.speak(conversation, released, clock);
        }
        conversation.extend(self.entry, part);
    }

    /// A real call arrived: the words the guard held in case they began a call written as text
    /// are speech after all, and go out before the tool runs.
    pub(super) fn before_call(&mut self, conversation: &mut Conversation, clock: &mut Clock) {
        let released = self.guard.before_call();
        self.speak(conversation, released, clock);
    }

    /// Files `call` in the model turn, as a call whose tool runs now. A name no tool could have
    /// is cut in the history; the tool is looked up by the name the model wrote.
    pub(super) fn file_call(
        &mut self,
        conversation: &mut Conversation,
        mut call: Call,
        raw: Value,
    ) -> Filed {
        let kept = kept_name(&call.name);
        let name = std::mem::replace(&mut call.name, kept.clone());
        let filed = Filed {
            call_id: call.id.clone(),
            ordinal: self.calls,
            name,
            kept,
            arguments: call.arguments.clone(),
        };
        self.calls += 1;
        conversation.extend(self.entry, Part::Call { call, raw });
        filed
    }

    /// Files the result of call `ordinal` right after the model turn, once every earlier call
    /// has its result there (until then it waits): results stand in call order.
    pub(super) fn answer(
        &mut self,
        conversation: &mut Conversation,
        ordinal: usize,
        result: ToolResult,
    ) {
        self.ready.insert(ordinal, result);
        while let Some(result) = self.ready.remove(&self.answered) {
            conversation.file(self.entry, &mut self.results, result);
            self.answered += 1;
        }
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
        let ordinal = self.calls;
        self.calls += 1;
        conversation.extend(self.entry, Part::Call { call, raw });
        self.answer(conversation, ordinal, result);
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
        let released = self.guard.settle(ending == Ending::Malformed);
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

    /// The response ends before its finish: a bound cut it, the request failed, or a barge-in
    /// dropped the turn. Each call without its result filed goes with the reasoning before it
    /// (its tool was cancelled, or an earlier call's was). Text never released (an opening held, words after a call written as
    /// text) and text of a unit whose `SpeechStart` never went out was not heard: the model turn
    /// is cut to what was said.
    pub(super) fn abandon(mut self, conversation: &mut Conversation) {
        // The last first: dropping a call does not move the ones before it.
        for ordinal in (self.answered..self.calls).rev() {
            conversation.drop_call(self.entry, ordinal);
        }
        let unstarted = self.speech.as_ref().is_some_and(|unit| !unit.started());
        if let Some(unit) = self.speech.take() {
            unit.close();
        }
        if self.guard.leaked() != Some(false) || unstarted {
            conversation.strip(self.entry, &self.said());
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
        }
    }

    /// What the response said, as the unit book records it (nothing if no unit started).
    fn said(&self) -> String {
        self.spoke
            .map(|id| self.turn.session().said(id))
            .unwrap_or_default()
    }
}

//! [`HeardHistory`]: an agent's own history, in its own message type, that holds what the user
//! heard: each answer's words cut to the heard prefix, its tool calls and results kept in place.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use futures_util::{Stream, StreamExt};

use super::{Finalized, SpeechUnit, Turn, shared_prefix};
use crate::recover::lock;

/// What one item of an agent's streamed answer is to the voice and the history: the mapper given
/// to [`HeardHistory::speak`] turns each item into one.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerPart<M> {
    /// Words to speak now. Kept in the history as far as the user heard them.
    Say(String),
    /// A tool call the agent made, under its call id. Kept only together with the first
    /// [`Result`](Self::Result) filed after it: a call that never got one (cut by a barge-in while
    /// its tool ran) leaves the history, as the next request to an OpenAI-compatible server would
    /// otherwise fail; so do a second call under the same id and a result filed before its call.
    Call {
        /// The call's id, as the agent pairs calls and results.
        id: String,
        /// The call, as the agent's history holds it.
        message: M,
    },
    /// The result of the call with `id`. Kept with its call, whatever was heard of the words
    /// around them: a tool that ran is real.
    Result {
        /// The id of the call this answers.
        id: String,
        /// The result, as the agent's history holds it.
        message: M,
    },
    /// Any other item to keep where it came (a reasoning step, a handoff...), heard or not.
    Keep(M),
    /// Nothing for the voice or the history.
    Skip,
}

/// An agent's history in its own message type `M`, holding only what the user heard: the piece
/// of bookkeeping a ported agent needs around [`Turn::speak_stream`], done once.
///
/// * Begin each turn with [`push`](Self::push) of the user's message (and anything else the agent
///   adds itself), then hand [`messages`](Self::messages) to the agent.
/// * Speak its answer with [`speak`](Self::speak) and a mapper from the agent's stream items to
///   [`AnswerPart`]s: the words are spoken as one unit, and the calls, results and other kept items
///   are filed in stream order beside them.
/// * Feed every [`Finalized`] from `on_finalize` to [`heard`](Self::heard). The answer's words are
///   then cut to what the user heard: the text before each kept item is its own assistant message
///   (made by the `said` function you give [`new`](Self::new)), words never heard leave nothing,
///   and calls stay only with their results. A unit this history did not speak (the greeting,
///   a `turn.say`) is filed as one assistant message of what was heard of it.
///
/// Until an answer's `Finalize` arrives (Voqalize sends it once the unit has played or been cut),
/// [`messages`](Self::messages) holds its kept items but none of its words: no word is claimed
/// heard before it was.
///
/// Bounded: at most [`max_entries`](Self::max_entries) messages and answer parts in all (4,096 by
/// default); past it the oldest are forgotten (and an answer alone that long files no more
/// parts), and at most 1 MiB of one answer's words. Speaking is cancelled with the turn on a barge-in,
/// and what had been filed of the answer stays filed.
///
/// ```
/// use voqalize::prelude::*;
///
/// #[derive(Debug, Clone, PartialEq)]
/// enum Msg {
///     User(String),
///     Assistant(String),
///     Call(String),
///     Result(String),
/// }
///
/// let history = HeardHistory::new(Msg::Assistant);
/// history.push(Msg::User("Book me a table.".into()));
/// // What `speak` files for an answer "Let me check. " + a call + its result + "Booked for eight."
/// // spoken as unit 7:
/// history.file(7, [
///     AnswerPart::Say("Let me check. ".into()),
///     AnswerPart::Call { id: "c1".into(), message: Msg::Call("book".into()) },
///     AnswerPart::Result { id: "c1".into(), message: Msg::Result("ok".into()) },
///     AnswerPart::Say("Booked for eight.".into()),
/// ]);
/// // The user talked over it after "Let me check. Booked":
/// history.heard(&Finalized {
///     speech_id: 7,
///     heard: "Let me check. Booked".into(),
///     generated: "Let me check. Booked for eight.".into(),
/// });
/// assert_eq!(history.messages(), [
///     Msg::User("Book me a table.".into()),
///     Msg::Assistant("Let me check. ".into()),
///     Msg::Call("book".into()),
///     Msg::Result("ok".into()),
///     Msg::Assistant("Booked".into()),
/// ]);
/// ```
pub struct HeardHistory<M> {
    state: Mutex<State<M>>,
    said: Box<dyn Fn(String) -> M + Send + Sync>,
}

/// The words of one answer that are filed, in bytes (1 MiB: hours of speech); words past it are
/// still spoken.
const MAX_ANSWER_TEXT: usize = 1024 * 1024;

impl<M> std::fmt::Debug for HeardHistory<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("HeardHistory")
            .field("entries", &state.entries.len())
            .field("max_entries", &state.max_entries)
            .finish_non_exhaustive()
    }
}

struct State<M> {
    entries: VecDeque<Entry<M>>,
    /// Messages and answer parts held, against `max_entries`.
    size: usize,
    max_entries: usize,
    next_answer: u64,
}

enum Entry<M> {
    Message(M),
    Answer(Answer<M>),
}

/// One spoken answer: its parts in stream order, and what was heard of its unit once known.
struct Answer<M> {
    id: u64,
    speech_id: Option<u64>,
    parts: Vec<AnswerPart<M>>,
    /// Bytes of text over the answer's `Say` parts (at most [`MAX_ANSWER_TEXT`]).
    text_bytes: usize,
    heard: Option<String>,
}

impl<M> Entry<M> {
    fn size(&self) -> usize {
        match self {
            Entry::Message(_) => 1,
            Entry::Answer(a) => a.parts.len().max(1),
        }
    }
}

impl<M: Clone> HeardHistory<M> {
    /// An empty history; `said` makes the agent's assistant message from heard text.
    pub fn new(said: impl Fn(String) -> M + Send + Sync + 'static) -> Self {
        HeardHistory {
            state: Mutex::new(State {
                entries: VecDeque::new(),
                size: 0,
                max_entries: 4096,
                next_answer: 0,
            }),
            said: Box::new(said),
        }
    }

    /// Holds at most `max` messages and answer parts in all (default 4,096; at least 1); past it
    /// the oldest entries are forgotten.
    pub fn max_entries(self, max: usize) -> Self {
        lock(&self.state).max_entries = max.max(1);
        self
    }

    /// Adds a message of the agent's own (the user's words, a system note) at the end.
    pub fn push(&self, message: M) {
        let mut state = lock(&self.state);
        state.add(Entry::Message(message));
    }

    /// The history as the agent should see it now, oldest first: every message, and each answer as
    /// far as it was heard (see the type's docs).
    pub fn messages(&self) -> Vec<M> {
        let state = lock(&self.state);
        let mut out = Vec::with_capacity(state.size);
        for entry in &state.entries {
            match entry {
                Entry::Message(m) => out.push(m.clone()),
                Entry::Answer(a) => a.flatten(&self.said, &mut out),
            }
        }
        out
    }

    /// Records what the user heard of a unit; call it from `on_finalize` with every
    /// [`Finalized`]. An answer this history spoke is cut to `heard`; any other unit with heard
    /// text (the greeting, a `turn.say`) is added as one assistant message. Returns false when the
    /// unit added nothing (nobody heard it).
    pub fn heard(&self, finalized: &Finalized) -> bool {
        let mut state = lock(&self.state);
        // The newest answer of that unit not heard yet: speech ids start again at 1 each call,
        // and a history kept across calls holds answers of earlier ones.
        let answer = state.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Answer(a) if a.speech_id == Some(finalized.speech_id) && a.heard.is_none() => {
                Some(a)
            }
            _ => None,
        });
        if let Some(answer) = answer {
            // Heard text is a prefix of what the unit said: no more of it than the answer holds.
            let mut heard = finalized.heard.clone();
            crate::wire::clip(&mut heard, answer.text_bytes);
            answer.heard = Some(heard);
            return !finalized.heard.is_empty();
        }
        if finalized.heard.is_empty() {
            return false;
        }
        let mut heard = finalized.heard.clone();
        crate::wire::clip(&mut heard, MAX_ANSWER_TEXT);
        let message = (self.said)(heard);
        state.add(Entry::Message(message));
        true
    }

    /// Files `parts` as the answer spoken as unit `speech_id`, as [`speak`](Self::speak) does
    /// while it speaks (for a loop of your own, or a test).
    pub fn file(&self, speech_id: u64, parts: impl IntoIterator<Item = AnswerPart<M>>) {
        let id = self.begin();
        self.opened(id, speech_id);
        for part in parts {
            self.add_part(id, part);
        }
    }

    /// Speaks an agent's streamed answer as one unit and files it: each item goes through `map`;
    /// [`AnswerPart::Say`] text is spoken (the unit opens on the first non-empty text), every other
    /// part is filed in stream order. Gives `Ok(Some(speech_id))`, or `Ok(None)` when nothing was
    /// spoken. A barge-in drops this future at its next `.await` with the rest of the turn: what
    /// was filed stays, and the unit's Finalize cuts its words.
    ///
    /// The stream yields `Result`s, as agent frameworks' streams do; for a plain stream of text use
    /// [`Turn::speak_stream`], or wrap its items in `Ok`.
    ///
    /// # Errors
    /// The first `Err` item of the stream: the unit closes (what was said stays said and filed)
    /// and nothing after it is read.
    pub async fn speak<S, I, E, F>(
        &self,
        turn: &Turn,
        stream: S,
        mut map: F,
    ) -> Result<Option<u64>, E>
    where
        S: Stream<Item = Result<I, E>>,
        F: FnMut(I) -> AnswerPart<M>,
    {
        let id = self.begin();
        let mut stream = std::pin::pin!(stream);
        let mut unit: Option<SpeechUnit<'_>> = None;
        while let Some(item) = stream.next().await {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    if let Some(unit) = unit {
                        unit.close();
                    }
                    return Err(e);
                }
            };
            match map(item) {
                AnswerPart::Say(text) if text.is_empty() => {}
                AnswerPart::Say(text) => {
                    let unit = unit.get_or_insert_with(|| {
                        let unit = turn.open_unit();
                        self.opened(id, unit.id());
                        unit
                    });
                    unit.write(&text);
                    self.add_part(id, AnswerPart::Say(text));
                }
                AnswerPart::Skip => {}
                part => self.add_part(id, part),
            }
        }
        Ok(unit.map(|unit| {
            let speech_id = unit.id();
            unit.close();
            speech_id
        }))
    }

    fn begin(&self) -> u64 {
        let mut state = lock(&self.state);
        let id = state.next_answer;
        state.next_answer += 1;
        state.add(Entry::Answer(Answer {
            id,
            speech_id: None,
            parts: Vec::new(),
            text_bytes: 0,
            heard: None,
        }));
        id
    }

    fn opened(&self, id: u64, speech_id: u64) {
        let mut state = lock(&self.state);
        if let Some(answer) = state.answer(id) {
            answer.speech_id = Some(speech_id);
        }
    }

    fn add_part(&self, id: u64, part: AnswerPart<M>) {
        let mut state = lock(&self.state);
        let max = state.max_entries;
        let Some(answer) = state.answer(id) else {
            return; // forgotten: the history outgrew its bound while the answer was spoken
        };
        // At most MAX_ANSWER_TEXT bytes of one answer's words are filed (cut at a character).
        let part = match part {
            AnswerPart::Say(mut text) => {
                crate::wire::clip(&mut text, MAX_ANSWER_TEXT - answer.text_bytes);
                if text.is_empty() {
                    return;
                }
                answer.text_bytes += text.len();
                // Consecutive words are one piece of text.
                if let Some(AnswerPart::Say(before)) = answer.parts.last_mut() {
                    before.push_str(&text);
                    return;
                }
                AnswerPart::Say(text)
            }
            other => other,
        };
        if answer.parts.len() >= max {
            return; // one answer alone fills the history: the rest of it is not filed
        }
        let grew = !answer.parts.is_empty();
        answer.parts.push(part);
        if grew {
            state.size += 1;
            state.trim();
        }
    }
}

impl<M> State<M> {
    fn add(&mut self, entry: Entry<M>) {
        self.size += entry.size();
        self.entries.push_back(entry);
        self.trim();
    }

    /// Forgets the oldest entries past the bound (never the newest one).
    fn trim(&mut self) {
        while self.size > self.max_entries && self.entries.len() > 1 {
            if let Some(old) = self.entries.pop_front() {
                self.size -= old.size();
            }
        }
    }

    fn answer(&mut self, id: u64) -> Option<&mut Answer<M>> {
        self.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Answer(a) if a.id == id => Some(a),
            _ => None,
        })
    }
}

impl<M: Clone> Answer<M> {
    /// This answer as the agent's messages: text cut to what was heard (none while that is not
    /// known yet), calls only with their results, results only with their calls, kept items as
    /// they are.
    fn flatten(&self, said: &dyn Fn(String) -> M, out: &mut Vec<M>) {
        // A call is kept with the first result filed after it; a second call under one id, a
        // result before its call or a second result are not kept.
        let mut open: Vec<&str> = Vec::new();
        let mut answered: HashSet<&str> = HashSet::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for part in &self.parts {
            match part {
                AnswerPart::Call { id, .. } if seen.insert(id.as_str()) => open.push(id.as_str()),
                AnswerPart::Result { id, .. } if open.contains(&id.as_str()) => {
                    answered.insert(id.as_str());
                    open.retain(|o| *o != id.as_str());
                }
                _ => {}
            }
        }
        let mut emitted_calls: HashSet<&str> = HashSet::new();
        let mut emitted_results: HashSet<&str> = HashSet::new();
        let mut heard = self.heard.as_deref().unwrap_or_default();
        for part in &self.parts {
            match part {
                AnswerPart::Say(text) => {
                    let take = shared_prefix(text, heard);
                    heard = &heard[take..];
                    if take > 0 {
                        out.push(said(text[..take].to_owned()));
                    }
                }
                AnswerPart::Call { id, message } => {
                    if answered.contains(id.as_str()) && emitted_calls.insert(id.as_str()) {
                        out.push(message.clone());
                    }
                }
                AnswerPart::Result { id, message } => {
                    if emitted_calls.contains(id.as_str()) && emitted_results.insert(id.as_str()) {
                        out.push(message.clone());
                    }
                }
                AnswerPart::Keep(message) => out.push(message.clone()),
                AnswerPart::Skip => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Msg {
        User(&'static str),
        Said(String),
        Call(&'static str),
        Result(&'static str),
        Note(&'static str),
    }

    fn finalized(speech_id: u64, heard: &str) -> Finalized {
        Finalized {
            speech_id,
            heard: heard.into(),
            generated: String::new(),
        }
    }

    fn say(text: &str) -> AnswerPart<Msg> {
        AnswerPart::Say(text.into())
    }

    #[test]
    fn words_wait_for_their_finalize_and_calls_for_their_results() {
        let history = HeardHistory::new(Msg::Said);
        history.push(Msg::User("hi"));
        history.file(
            3,
            [
                say("One "),
                say("two. "),
                AnswerPart::Call {
                    id: "a".into(),
                    message: Msg::Call("a"),
                },
                AnswerPart::Call {
                    id: "b".into(),
                    message: Msg::Call("b"),
                },
                AnswerPart::Result {
                    id: "a".into(),
                    message: Msg::Result("a"),
                },
                AnswerPart::Keep(Msg::Note("n")),
                say("Three."),
            ],
        );
        // Not heard yet: the kept items only; `b` never got its result.
        assert_eq!(
            history.messages(),
            [
                Msg::User("hi"),
                Msg::Call("a"),
                Msg::Result("a"),
                Msg::Note("n")
            ]
        );
        assert!(history.heard(&finalized(3, "One two. Three.")));
        assert_eq!(
            history.messages(),
            [
                Msg::User("hi"),
                Msg::Said("One two. ".into()),
                Msg::Call("a"),
                Msg::Result("a"),
                Msg::Note("n"),
                Msg::Said("Three.".into()),
            ]
        );
    }

    #[test]
    fn unheard_words_leave_nothing_and_other_units_are_lines() {
        let history = HeardHistory::new(Msg::Said);
        assert!(history.heard(&finalized(1, "Hello!"))); // the greeting
        history.file(
            2,
            [
                say("Let me look. "),
                AnswerPart::Call {
                    id: "c".into(),
                    message: Msg::Call("c"),
                },
                AnswerPart::Result {
                    id: "c".into(),
                    message: Msg::Result("c"),
                },
                say("Found it."),
            ],
        );
        assert!(!history.heard(&finalized(2, "")));
        assert!(!history.heard(&finalized(9, "")));
        assert_eq!(
            history.messages(),
            [Msg::Said("Hello!".into()), Msg::Call("c"), Msg::Result("c")]
        );
    }

    #[test]
    fn heard_text_is_cut_at_a_character_boundary_and_a_forged_one_claims_nothing() {
        let history = HeardHistory::new(Msg::Said);
        history.file(1, [say("héllo wörld")]);
        history.heard(&finalized(1, "héllo wö and more"));
        assert_eq!(history.messages(), [Msg::Said("héllo wö".into())]);
        history.file(2, [say("abc")]);
        history.heard(&finalized(2, "xyz"));
        assert_eq!(history.messages().len(), 1);
    }

    #[test]
    fn a_history_kept_across_calls_matches_each_finalize_to_the_newest_unheard_answer() {
        let history = HeardHistory::new(Msg::Said);
        history.push(Msg::User("call 1"));
        history.file(1, [say("Answer of call one.")]);
        assert!(history.heard(&finalized(1, "Answer of call one.")));
        history.push(Msg::User("call 2"));
        history.file(1, [say("Answer of call two.")]); // speech ids start again at 1
        assert!(history.heard(&finalized(1, "Answer of call two.")));
        assert_eq!(
            history.messages(),
            [
                Msg::User("call 1"),
                Msg::Said("Answer of call one.".into()),
                Msg::User("call 2"),
                Msg::Said("Answer of call two.".into()),
            ]
        );
    }

    #[test]
    fn odd_tool_orders_keep_only_a_call_followed_by_its_result() {
        let call = |id: &str| AnswerPart::Call {
            id: id.into(),
            message: Msg::Call("c"),
        };
        let result = |id: &str| AnswerPart::Result {
            id: id.into(),
            message: Msg::Result("r"),
        };
        let history = HeardHistory::new(Msg::Said);
        // A result before its call; a call twice under one id; a result twice.
        history.file(
            1,
            [
                result("a"),
                call("a"),
                call("b"),
                call("b"),
                result("b"),
                result("b"),
            ],
        );
        assert_eq!(history.messages(), [Msg::Call("c"), Msg::Result("r")]);
    }

    #[test]
    fn words_and_heard_text_are_bounded_in_bytes() {
        let history = HeardHistory::new(Msg::Said);
        let big = "é".repeat(MAX_ANSWER_TEXT); // twice the bound, in bytes
        history.file(1, [say(&big), AnswerPart::Keep(Msg::Note("n")), say(&big)]);
        history.heard(&finalized(1, &big));
        let said: Vec<usize> = history
            .messages()
            .iter()
            .filter_map(|m| match m {
                Msg::Said(t) => Some(t.len()),
                _ => None,
            })
            .collect();
        assert_eq!(said, [MAX_ANSWER_TEXT], "the answer's words: 1 MiB in all");
        // A unit this history did not speak: its heard text is bounded too.
        history.heard(&finalized(9, &big));
        let last = history.messages().pop();
        assert!(matches!(last, Some(Msg::Said(t)) if t.len() == MAX_ANSWER_TEXT));
    }

    #[test]
    fn the_oldest_entries_go_past_the_bound() {
        let history = HeardHistory::new(Msg::Said).max_entries(3);
        for m in ["a", "b", "c", "d"] {
            history.push(Msg::User(m));
        }
        assert_eq!(
            history.messages(),
            [Msg::User("b"), Msg::User("c"), Msg::User("d")]
        );
        history.file(1, (0..10).map(|_| AnswerPart::Keep(Msg::Note("n"))));
        assert_eq!(history.messages().len(), 3, "an answer's parts count too");
        assert!(format!("{history:?}").contains("max_entries: 3"));
    }
}

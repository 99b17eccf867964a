//! The conversation a model-backed brain keeps: entries found by id, every call answered once with
//! its result right after it (`filing.rs`), heard truth applied, and the whole bounded in entries and
//! in bytes (docs/protocol.md §6).
//!
//! Every operation here is synchronous and runs under the conversation's lock, so a turn cut by a
//! barge-in can still clean up from a `Drop`. Every operation that changes an entry keeps its
//! [`Entry::bytes`] and the conversation's total up to date, so the byte bound costs no walk.
//!
//! A summary of older exchanges and the brain's pinned notes (`compact.rs`) are never dropped by
//! the bounds: the summary stays first, the pins in their place.

use std::collections::VecDeque;

use serde_json::Value;

use super::filing::Filings;
use crate::model::history::{Entry, EntryId, Origin, Part, Role, ToolResult};
use crate::model::rendered::Rendered;

/// How many speaking units the conversation remembers while their `Finalize` is due; the runtime
/// finalizes every unit, so this only bounds memory against a runtime that does not.
const SPEAKING_KEPT: usize = 256;

/// The smallest byte bound a conversation takes (1 KiB): below it not even one exchange fits.
const MIN_BYTES: usize = 1024;

/// The history, and which model turn each speaking unit belongs to.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    entries: Vec<Entry>,
    next_id: EntryId,
    /// Speech units awaiting their Finalize: the model turn whose text the user hears, or `None`
    /// for a line that is not remembered.
    speaking: VecDeque<(u64, Option<EntryId>)>,
    /// The oldest entries are dropped beyond this many (whole exchanges, from a user turn on).
    max_entries: usize,
    /// ... and beyond this many bytes ([`Entry::bytes`] summed).
    max_bytes: usize,
    /// The entries' bytes, summed.
    bytes: usize,
    /// The calls waiting for their answers, and the order their results are filed in.
    filings: Filings,
    /// The user's last words: where the exchange in progress starts.
    exchange: Option<EntryId>,
    /// The summary of the older exchanges, first in the history (`compact.rs`).
    summary: Option<EntryId>,
    /// The notes the brain pinned, oldest first: kept verbatim, never dropped nor summarised.
    pinned: VecDeque<EntryId>,
    /// Counts the restarts (handoffs): a summary of the history before one is stale.
    epoch: u64,
    /// The entries as a layer last rendered them: told of each entry changed in place.
    rendered: Rendered,
}

/// The entry at `at`, to change in place: what was rendered of it (and of the entry after it,
/// whose rendering may follow from it: a foreign call's results) is stale. Every change in
/// place goes through here; an entry added, moved or removed needs no word, since rendered
/// bytes are found by id.
fn entry_mut<'e>(entries: &'e mut [Entry], rendered: &mut Rendered, at: usize) -> &'e mut Entry {
    for next in entries[at..].iter().take(2) {
        rendered.forget(next.id);
    }
    &mut entries[at]
}

impl Conversation {
    /// A conversation that keeps at most `max_entries` entries (8 at least) and `max_bytes`
    /// bytes (1 KiB at least), dropping the oldest whole exchanges first.
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        let max_bytes = max_bytes.max(MIN_BYTES);
        Conversation {
            max_entries: max_entries.max(8),
            max_bytes,
            rendered: Rendered::new(max_bytes),
            ..Conversation::default()
        }
    }

    /// The entries as a layer last rendered them, for the next request.
    pub(crate) fn rendered(&self) -> &Rendered {
        &self.rendered
    }

    /// The history, oldest first.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// What the history holds, in bytes.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends an entry and returns its id.
    pub(crate) fn push(&mut self, role: Role, parts: Vec<Part>) -> EntryId {
        self.next_id += 1;
        let id = self.next_id;
        let entry = Entry::new(id, role, parts);
        self.bytes += entry.bytes;
        self.entries.push(entry);
        self.bound();
        id
    }

    /// Appends an empty model turn, written by the layer of `origin` (a response), and returns
    /// its id.
    pub(crate) fn push_response(&mut self, origin: Origin) -> EntryId {
        let id = self.push(Role::Model, Vec::new());
        if let Some(at) = self.entries.len().checked_sub(1) {
            entry_mut(&mut self.entries, &mut self.rendered, at).origin = Some(origin);
        }
        id
    }

    /// Appends the user's words as a user turn: an exchange starts.
    pub(crate) fn push_user(&mut self, text: &str) -> EntryId {
        // The id `push` gives it: the bound it applies keeps the new exchange whole.
        self.exchange = Some(self.next_id + 1);
        self.push(Role::User, vec![Part::text(text)])
    }

    /// Appends a note (an app event, a background tool's result) as a user turn: part of the
    /// exchange in progress, not the start of one.
    pub(crate) fn push_note(&mut self, text: &str) -> EntryId {
        self.push(Role::User, vec![Part::text(text)])
    }

    /// Where entry `id` is, searched from the newest: what a turn writes is at the end.
    fn position(&self, id: EntryId) -> Option<usize> {
        self.entries.iter().rposition(|e| e.id == id)
    }

    /// Appends a part to the model turn `id` (gone if heard truth removed it meanwhile: then the
    /// part is dropped with it). Plain text right after plain text joins it: a response streamed
    /// as a million one-byte deltas is one text part, not a million. Text with more than its
    /// words (a Gemini signature) stays a part of its own, and so does text after a call.
    pub(crate) fn extend(&mut self, id: EntryId, part: Part) {
        let Some(at) = self.position(id) else {
            return;
        };
        let entry = entry_mut(&mut self.entries, &mut self.rendered, at);
        let added = match (entry.parts.last_mut(), part) {
            (
                Some(Part::Text {
                    text,
                    raw: Value::Null,
                    trimmed: false,
                }),
                Part::Text {
                    text: more,
                    raw: Value::Null,
                    trimmed: false,
                },
            ) => {
                text.push_str(&more);
                more.len()
            }
            (_, part) => {
                let added = part.bytes();
                entry.parts.push(part);
                added
            }
        };
        entry.bytes += added;
        self.bytes += added;
    }

    /// Adds `text` (words spoken while a tool ran) to model turn `id` before its first call,
    /// joined to the plain text there: where heard truth puts every word its unit carried.
    pub(crate) fn say_before_calls(&mut self, id: EntryId, text: &str) {
        let Some(at) = self.position(id) else {
            return;
        };
        let entry = entry_mut(&mut self.entries, &mut self.rendered, at);
        let first_call = entry
            .parts
            .iter()
            .position(|p| matches!(p, Part::Call { .. }))
            .unwrap_or(entry.parts.len());
        let added = match first_call
            .checked_sub(1)
            .and_then(|before| entry.parts.get_mut(before))
        {
            Some(Part::Text {
                text: words,
                raw: Value::Null,
                trimmed: false,
            }) => {
                words.push_str(text);
                text.len()
            }
            _ => {
                let part = Part::text(text);
                let added = part.bytes();
                entry.parts.insert(first_call, part);
                added
            }
        };
        entry.bytes += added;
        self.bytes += added;
    }

    /// Files a call's result: into the results turn `results` if the unit has one already, else
    /// into a new results turn placed directly after the model turn `model`, so nothing appended
    /// while the tool ran (a note, an app event) can land between a call and its answer.
    fn file(&mut self, model: EntryId, results: &mut Option<EntryId>, result: ToolResult) {
        let part = Part::Result(result);
        if let Some(r) = results.and_then(|r| self.position(r)) {
            let added = part.bytes();
            let entry = entry_mut(&mut self.entries, &mut self.rendered, r);
            entry.parts.push(part);
            entry.bytes += added;
            self.bytes += added;
            return;
        }
        let Some(at) = self.position(model) else {
            return; // the model turn is gone: so is the call this answers
        };
        self.next_id += 1;
        let id = self.next_id;
        let entry = Entry::new(id, Role::Results, vec![part]);
        self.bytes += entry.bytes;
        self.entries.insert(at + 1, entry);
        *results = Some(id);
        self.bound();
    }

    /// Changes the entry at `at` with `change`, then counts its bytes again (for the operations
    /// that rewrite parts: a dropped call, heard truth, a strip; never per streamed delta).
    fn rewrite(&mut self, at: usize, change: impl FnOnce(&mut Entry)) {
        let entry = entry_mut(&mut self.entries, &mut self.rendered, at);
        change(entry);
        let bytes = entry.parts.iter().map(Part::bytes).sum();
        self.bytes = self.bytes.saturating_sub(entry.bytes) + bytes;
        entry.bytes = bytes;
    }

    /// Removes the entry at `at`.
    fn remove(&mut self, at: usize) {
        let entry = self.entries.remove(at);
        self.bytes = self.bytes.saturating_sub(entry.bytes);
    }

    /// A call was filed in model turn `model` (as its last part), to be answered by `due`: its
    /// ordinal among the turn's calls.
    pub(crate) fn call_filed(&mut self, model: EntryId, due: std::time::Instant) -> usize {
        self.filings.call(model, due)
    }

    /// Answers call `ordinal` of model turn `model` with `result`, unless it was answered
    /// already (then `false`): results are filed right after the model turn, in call order, so
    /// a later call's result waits for an earlier one's (docs/protocol.md §6.5).
    pub(crate) fn answer(&mut self, model: EntryId, ordinal: usize, result: ToolResult) -> bool {
        let mut filings = std::mem::take(&mut self.filings);
        let taken = filings.answer(model, ordinal, result, |results, r| {
            self.file(model, results, r);
        });
        filings.forget_settled(|id| self.position(id).is_some());
        self.filings = filings;
        taken
    }

    /// The response writing model turn `model` ended: no call joins it any more.
    pub(crate) fn response_closed(&mut self, model: EntryId) {
        self.filings.close(model);
        let mut filings = std::mem::take(&mut self.filings);
        filings.forget_settled(|id| self.position(id).is_some());
        self.filings = filings;
    }

    /// Whether a call waits for its answer: a request built now would show it unanswered.
    pub(crate) fn waiting(&self) -> bool {
        self.filings.waiting()
    }

    /// When the last call waiting for its answer is due.
    pub(crate) fn last_due(&self) -> Option<std::time::Instant> {
        self.filings.last_due()
    }

    /// Answers every call still waiting past when it was due with `response` (its run is gone:
    /// it cannot answer any more). How many were answered.
    pub(crate) fn answer_overdue(&mut self, now: std::time::Instant, response: &Value) -> usize {
        let overdue = self.filings.overdue(now);
        let mut answered = 0;
        for (model, ordinal) in overdue {
            let call = self.position(model).and_then(|at| {
                self.entries[at]
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Call { call, .. } => Some(call),
                        _ => None,
                    })
                    .nth(ordinal)
            });
            let result = ToolResult {
                call_id: call.and_then(|c| c.id.clone()),
                name: call.map(|c| c.name.clone()).unwrap_or_default(),
                response: response.clone(),
            };
            answered += usize::from(self.answer(model, ordinal, result));
        }
        answered
    }

    /// A response that wrote a call as text: keep only what was really said (`said`, maybe
    /// nothing) and the real calls, in order (docs/protocol.md §6.7).
    pub(crate) fn strip(&mut self, model: EntryId, said: &str) {
        let Some(at) = self.position(model) else {
            return;
        };
        self.rewrite(at, |entry| {
            if said.is_empty() {
                entry.parts.retain(|p| matches!(p, Part::Call { .. }));
            } else {
                let mut placed = false;
                entry.parts.retain_mut(|p| match p {
                    Part::Text { text, trimmed, .. } => {
                        if placed {
                            return false;
                        }
                        placed = true;
                        *text = said.to_owned();
                        *trimmed = true;
                        true
                    }
                    _ => true,
                });
            }
        });
        self.remove_if_hollow(model);
    }

    /// A turn with no text and no call left says nothing the model should read: it goes, with a
    /// results turn that follows it.
    fn remove_if_hollow(&mut self, model: EntryId) {
        let Some(at) = self.position(model) else {
            return;
        };
        let hollow = !self.entries[at].parts.iter().any(|p| match p {
            Part::Text { text, .. } => !text.is_empty(),
            Part::Call { .. } => true,
            _ => false,
        });
        if hollow {
            self.remove(at);
            if self
                .entries
                .get(at)
                .is_some_and(|e| e.role == Role::Results)
            {
                self.remove(at);
            }
        }
    }

    /// Where the exchange in progress starts (the user's last words), else [`mark`](Self::mark).
    pub(crate) fn exchange_start(&self) -> EntryId {
        self.exchange.unwrap_or_else(|| self.mark())
    }

    /// The id the next entry gets: entries from it on come after now.
    pub(crate) fn mark(&self) -> EntryId {
        self.next_id + 1
    }

    /// Whether an entry was made at or after `mark`.
    pub(crate) fn any_since(&self, mark: EntryId) -> bool {
        self.entries.last().is_some_and(|e| e.id >= mark)
    }

    /// Starts the conversation again from `note`, a user turn (a handoff to another stage):
    /// every entry made before `mark` goes; those made since (the caller's words after the move)
    /// stay, after the note. Units still speaking a removed entry find it gone when their
    /// `Finalize` comes, and change nothing.
    pub(crate) fn restart(&mut self, mark: EntryId, note: &str) {
        // The summary and the pins go too: they tell of the history before the move (a
        // summary made after `mark` has an id past it, so it is left out by name).
        let summary = self.summary.take();
        self.pinned.clear();
        self.epoch += 1;
        // An entry `mark` names (the caller's words that started the exchange) is found where it
        // is: after a restart, ids do not ascend in history order (the note, a new id, is in
        // front of the entries it kept), so a second move in the same exchange keeps them.
        let from = self.position(mark);
        let kept: Vec<Entry> = std::mem::take(&mut self.entries)
            .into_iter()
            .enumerate()
            .filter(|(at, e)| from.map_or(e.id >= mark, |from| *at >= from))
            .map(|(_, e)| e)
            .filter(|e| Some(e.id) != summary)
            .collect();
        self.bytes = 0;
        self.push_user(note);
        for entry in kept {
            self.bytes += entry.bytes;
            self.entries.push(entry);
        }
        self.bound();
    }

    /// What the caller heard, as a transcript (`Caller: ...` and `Agent: ...` lines), its newest
    /// `max_bytes`: the user's turns and notes, and the model's text whose units were finalized
    /// (a unit still speaking may not be heard; calls and results are not speech).
    pub(crate) fn heard_transcript(&self, max_bytes: usize) -> String {
        self.transcript_of(self.entries.iter(), max_bytes)
    }

    /// [`heard_transcript`](Self::heard_transcript) of `entries` (of this conversation).
    fn transcript_of<'e>(
        &self,
        entries: impl Iterator<Item = &'e Entry>,
        max_bytes: usize,
    ) -> String {
        let mut out = String::new();
        for entry in entries {
            let who = match entry.role {
                Role::User => "Caller",
                Role::Model if !self.still_speaking(entry.id) => "Agent",
                _ => continue,
            };
            let text: Vec<&str> = entry
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text, .. } if !text.trim().is_empty() => Some(text.trim()),
                    _ => None,
                })
                .collect();
            if !text.is_empty() {
                out.push_str(who);
                out.push_str(": ");
                out.push_str(&text.join(" "));
                out.push('\n');
            }
        }
        if out.len() > max_bytes {
            let mut from = out.len() - max_bytes;
            while !out.is_char_boundary(from) {
                from += 1;
            }
            out.drain(..from);
        }
        out
    }

    /// Whether model turn `id` is spoken by a unit whose `Finalize` has not come.
    fn still_speaking(&self, id: EntryId) -> bool {
        self.speaking.iter().any(|(_, m)| *m == Some(id))
    }

    /// Remembers that unit `speech_id` speaks model turn `model` (`None`: a line not remembered).
    pub(crate) fn speaking(&mut self, speech_id: u64, model: Option<EntryId>) {
        if self.speaking.len() == SPEAKING_KEPT {
            self.speaking.pop_front();
        }
        self.speaking.push_back((speech_id, model));
    }

    /// Applies what the user heard of unit `speech_id` (docs/protocol.md §6.10): the unit's model
    /// turn keeps calls, reasoning and other parts in place; its first text part becomes the heard
    /// text and the other text parts go (their signatures, if any, stay on an empty part); a turn
    /// with neither text nor calls left is removed. A unit the conversation did not open (the
    /// greeting, a line the brain spoke itself) is recorded as model text when something was heard.
    pub(crate) fn heard(&mut self, speech_id: u64, heard: &str, interrupted: bool) {
        let known = self
            .speaking
            .iter()
            .position(|(id, _)| *id == speech_id)
            .and_then(|i| self.speaking.remove(i));
        let model = match known {
            Some((_, None)) => return, // a line not remembered
            Some((_, Some(model))) => model,
            None => {
                if !heard.is_empty() {
                    self.push(Role::Model, vec![Part::text(heard)]);
                }
                return;
            }
        };
        let Some(at) = self.position(model) else {
            return;
        };
        self.rewrite(at, |entry| apply_heard(entry, heard, interrupted));
        self.remove_if_hollow(model);
    }

    /// Drops the oldest exchanges beyond the bounds (entries and bytes), cutting only in front of
    /// a user turn so no call is ever separated from its result. When the exchange in progress
    /// alone outgrows a bound (a long tool chain, a huge response), everything before it goes and
    /// it stays whole, its user turn first: its size is bounded by the turn's own bounds
    /// (`max_tool_hops`, `max_response_bytes`). It starts at the user's last words: a note
    /// after them is a place to cut only past twice the bounds.
    fn bound(&mut self) {
        let fits =
            |entries: usize, bytes: usize| entries <= self.max_entries && bytes <= self.max_bytes;
        if fits(self.entries.len(), self.bytes) {
            return;
        }
        let user = |e: &Entry| e.role == Role::User;
        let len = self.entries.len();
        // A note after the user's last words (a background tool's result, an app event) is no
        // place to cut while the history is within twice its bounds: the exchange in progress
        // stays whole, its question and calls with it. Past that a note is one (notes an app
        // sends without end must not grow the history without end).
        let within_twice = len <= self.max_entries.saturating_mul(2)
            && self.bytes <= self.max_bytes.saturating_mul(2);
        let start = self
            .exchange
            .filter(|_| within_twice)
            .and_then(|id| self.position(id));
        // The first cut in front of a user turn after which the rest fits; the summary and the
        // pinned notes in front of it stay (they count as the rest).
        let mut rest = self.bytes;
        let mut held = 0;
        let mut first_fit = None;
        for (i, entry) in self.entries.iter().enumerate() {
            if start.is_some_and(|start| i > start) {
                break;
            }
            let kept = self.kept(entry.id);
            if i > 0 && user(entry) && !kept && fits(len - i + held, rest) {
                first_fit = Some(i);
                break;
            }
            if kept {
                held += 1;
            } else {
                rest = rest.saturating_sub(entry.bytes);
            }
        }
        let cut = match first_fit.or(start) {
            Some(i) => i,
            // Nothing fits: never cut into an exchange (that would leave a result without its
            // call, or a request that starts with the model's words).
            None => match self
                .entries
                .iter()
                .rposition(|e| user(e) && !self.kept(e.id))
            {
                Some(last) => last,
                // No user turn at all (lines spoken without one): the first model turn after
                // which the rest fits, else the last one.
                None => self.model_cut(),
            },
        };
        let (summary, pinned) = (self.summary, &self.pinned);
        let mut dropped = 0;
        let mut at = 0;
        self.entries.retain(|e| {
            let gone = at < cut && Some(e.id) != summary && !pinned.contains(&e.id);
            at += 1;
            if gone {
                dropped += e.bytes;
            }
            !gone
        });
        self.bytes = self.bytes.saturating_sub(dropped);
    }

    /// Where [`bound`](Self::bound) cuts a history with no user turn: in front of the first
    /// model turn after which the rest fits, else in front of the last one.
    fn model_cut(&self) -> usize {
        let len = self.entries.len();
        let mut rest = self.bytes;
        let mut last = 0;
        for (i, entry) in self.entries.iter().enumerate() {
            if entry.role != Role::Results {
                if len - i <= self.max_entries && rest <= self.max_bytes {
                    return i;
                }
                last = i;
            }
            rest = rest.saturating_sub(entry.bytes);
        }
        last
    }
}

/// Heard truth on one model turn (see [`Conversation::heard`]).
fn apply_heard(entry: &mut Entry, heard: &str, interrupted: bool) {
    let mut placed = false;
    let parts = std::mem::take(&mut entry.parts);
    for part in parts {
        match part {
            Part::Text { raw, .. } if !placed && !heard.is_empty() => {
                placed = true;
                entry.parts.push(Part::Text {
                    text: heard.to_owned(),
                    raw,
                    trimmed: interrupted,
                });
            }
            Part::Text { raw, .. } if !placed && interrupted => {
                // Heard as nothing: an empty, trimmed text keeps its place (and signature),
                // so a reasoning item before it is known to have lost what followed it.
                entry.parts.push(Part::Text {
                    text: String::new(),
                    raw: signature_only(raw).unwrap_or(Value::Null),
                    trimmed: true,
                });
            }
            Part::Text { raw, .. } => {
                if let Some(signed) = signature_only(raw) {
                    entry.parts.push(Part::Other { raw: signed });
                }
            }
            other => entry.parts.push(other),
        }
    }
    if !placed && interrupted {
        // Nothing of the text was heard: what follows it was never reached by the user.
        for part in &mut entry.parts {
            if let Part::Text { trimmed, .. } = part {
                *trimmed = true;
            }
        }
    }
}

/// A dropped text part that carried more than its text (a Gemini `thoughtSignature`): the rest of
/// it, with empty text, so the signature is replayed on the part that carried it.
fn signature_only(raw: Value) -> Option<Value> {
    let Value::Object(mut m) = raw else {
        return None;
    };
    m.remove("text");
    if m.is_empty() {
        return None;
    }
    m.insert("text".into(), Value::String(String::new()));
    Some(Value::Object(m))
}

mod compact;
pub(crate) use compact::Window;
#[cfg(test)]
mod tests;

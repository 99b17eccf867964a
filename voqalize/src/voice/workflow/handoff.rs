//! What a transition does to the conversation, before the next request: `keep` leaves it,
//! `fresh` starts it again from the carried note, `summary` from a summary of what the caller
//! heard (a model request of its own, bounded in bytes and time, cached per handoff) and the note.
//! Then the entered stage's entry line is spoken, unless the caller has spoken since the move.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::MAX_TRANSCRIPT_BYTES;
use super::state::Pending;
use crate::model::history::Role;
use crate::recover::lock;
use crate::session::Turn;
use crate::stages::Context;
use crate::voice::Model;
use crate::voice::ask::summarise;

/// How many summaries a call keeps for reuse.
const SUMMARIES_KEPT: usize = 4;

/// Applies the transition made since the last request, if any: the conversation as its context
/// says, then the entered stage's entry line. The move stays waiting until the conversation is
/// changed: a barge-in during the summary request (the turn's task aborted) leaves it for the
/// next turn, which applies it in full.
pub(crate) async fn hand_off(model: &Model, turn: &Turn) {
    // A move made while the summary was asked for (brain code) replaces the one asked about: a
    // few rounds at most, each a new move.
    for _ in 0..4 {
        let (pending, epoch, enter_line) = {
            let machine = lock(&model.inner.workflow);
            let Some(m) = machine.as_ref() else {
                return;
            };
            let Some((pending, epoch)) = m.peek_pending() else {
                return;
            };
            let line = m.setup().stages[pending.to].enter_line.clone();
            (pending, epoch, line)
        };
        let summary = match pending.context {
            Context::Summary => summary(model, &pending).await,
            _ => None,
        };
        let taken = lock(&model.inner.workflow)
            .as_mut()
            .is_some_and(|m| m.take_pending(epoch));
        if !taken {
            continue;
        }
        // Once the caller has spoken since the move (a transition that ran on after a
        // barge-in), the entry line's moment has passed: a request must end with the caller's
        // words.
        let spoke_since = model.conversation().any_since(pending.since);
        if pending.context != Context::Keep {
            let note = carried(model, &pending, summary.as_deref());
            model.conversation().restart(pending.mark, &note);
        }
        if let Some(line) = enter_line
            && !spoke_since
        {
            model.say_line(turn, &line);
        }
        return;
    }
}

/// The note the next stage starts from.
fn carried(model: &Model, pending: &Pending, summary: Option<&str>) -> String {
    let machine = lock(&model.inner.workflow);
    let (from, to) = machine
        .as_ref()
        .map_or(("?", "?"), |m| (m.name(pending.from), m.name(pending.to)));
    let mut note = format!("(The call moved from stage {from} to stage {to}.");
    if let Some(summary) = summary {
        note.push_str(" What was said before: ");
        note.push_str(summary);
    }
    if !pending.note.is_empty() {
        note.push_str(" Note: ");
        note.push_str(&pending.note);
    }
    note.push(')');
    note
}

/// A summary of what the caller heard, made once per handoff (a call that comes back to the
/// same point reuses it); `None` when the request fails, times out or says nothing (logged
/// once per call, then counted).
async fn summary(model: &Model, pending: &Pending) -> Option<String> {
    let transcript = model.conversation().heard_transcript(MAX_TRANSCRIPT_BYTES);
    if transcript.is_empty() {
        return None;
    }
    let key = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (pending.from, pending.to, &transcript).hash(&mut h);
        h.finish()
    };
    let (layer, instruction, max_bytes, timeout) = {
        let machine = lock(&model.inner.workflow);
        let m = machine.as_ref()?;
        if let Some((_, s)) = m.summaries.iter().find(|(k, _)| *k == key) {
            return Some(s.to_string());
        }
        let setup = m.setup();
        let layer = setup
            .summarizer
            .as_ref()
            .or(setup.stages[pending.from].layer.as_ref())
            .map_or_else(|| model.inner.layer.clone(), Clone::clone);
        (
            layer,
            setup.summary_instruction.clone(),
            setup.max_summary_bytes,
            setup.summary_timeout,
        )
    };
    // One request: the instruction, the transcript as the user's message, no tools.
    let messages = [(Role::User, transcript)];
    let made = match summarise(&layer, &instruction, &messages, max_bytes, timeout).await {
        Ok(made) => made,
        Err(why) => return failed(model, &why.why()),
    };
    let mut machine = lock(&model.inner.workflow);
    if let Some(m) = machine.as_mut() {
        if m.summaries.len() == SUMMARIES_KEPT {
            m.summaries.remove(0);
        }
        m.summaries.push((key, Arc::from(made.as_str())));
    }
    Some(made)
}

/// A failed summary: logged once per call; the carried note alone crosses.
fn failed(model: &Model, why: &str) -> Option<String> {
    if !model.inner.warned_summary.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "stage: the handoff summary failed ({}); the carried note alone crosses (said once per call)",
            crate::logline::outside(why)
        );
    }
    None
}

//! Tool runs, and how each call is answered exactly once (docs/protocol.md §6.8).
//!
//! A call whose tool starts gets a [`Settle`]: everything its answer needs, in a slot that whoever
//! answers the call first empties. The run itself answers when it ends or times out; a barge-in
//! answers a run that stops with its turn (`#[tool(on_barge_in = cancel)]`) as cancelled; a call
//! refused before it ran is answered at once. A run that holds the call's brain (the brain
//! the runtime made, shared) is a task of its own, so a `Finish` run goes on after a barge-in
//! drops its turn and a `Background` run never holds its turn at all; a run on a toolbox that is
//! not the call's brain can only live inside its turn.
//!
//! Answering runs the guard after the tool, the observers, the log and metrics, writes the call's
//! recording line, files the result right after its call (a `Background` run's as a note), reports
//! its `tool` TurnStep, and wakes a request waiting for it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Inner;
use super::report::report;
use super::taping::ToolTaping;
use super::tool_guard::{GuardedCall, ToolRun, Verdict};
use crate::logline::{Repeated, outside};
use crate::model::history::{EntryId, ToolResult};
use crate::recover::lock;
use crate::session::{Session, Step};
use crate::tools::{
    DeclRef, RunEnd, TOOL_BUDGET_MS, ToolDecl, ToolError, ToolErrorKind, ToolOutcome, ToolPolicy,
};

/// How long after its timeout a run must have answered before a request stops waiting for it
/// and answers for it (its task was lost: a runtime shutting down drops tasks).
pub(super) const ANSWER_MARGIN: Duration = Duration::from_secs(1);

/// A call's answer in waiting: taken by whoever answers first.
pub(super) type Slot = Arc<Mutex<Option<Settle>>>;

/// Everything answering one call needs.
pub(super) struct Settle {
    pub(super) inner: Arc<Inner>,
    pub(super) session: Session,
    pub(super) turn_id: u64,
    /// The turn's cancellation flag: set, the run ends after a barge-in.
    pub(super) cancelled: Arc<std::sync::atomic::AtomicBool>,
    /// The model turn holding the call, and the call's place among its calls.
    pub(super) model_entry: EntryId,
    pub(super) ordinal: usize,
    pub(super) call_id: Option<String>,
    /// The name the model wrote (what logs name, escaped).
    pub(super) called: String,
    /// The name the history keeps.
    pub(super) kept: String,
    /// The tool, when the name is one of the turn's.
    pub(super) decl: Option<DeclRef>,
    /// The arguments as the guards and observers read them, when any is set.
    pub(super) seen: Option<Value>,
    /// The arguments as the session's watcher reads them, when it has one.
    pub(super) watched: Option<Value>,
    /// Whether the tool runs (false: refused by a guard, or tools were off).
    pub(super) ran: bool,
    pub(super) policy: ToolPolicy,
    pub(super) started: Instant,
    pub(super) taping: ToolTaping,
    pub(super) span: tracing::Span,
    pub(super) steps: bool,
}

impl Settle {
    /// Answers the call with `outcome`; `false` when the call was answered already (a second
    /// answer changes nothing in the history, but its trace is written).
    pub(super) fn answer(mut self, mut outcome: ToolOutcome) -> bool {
        let end = if self.policy == ToolPolicy::Background && self.ran {
            RunEnd::Background
        } else if self.cancelled.load(std::sync::atomic::Ordering::Acquire) {
            RunEnd::AfterBargeIn
        } else {
            RunEnd::InTurn
        };
        if self.ran {
            if let Err(e) = &outcome.result
                && allowed(&self.inner, |log| &mut log.failed_calls)
            {
                tracing::warn!(
                    "tool {} failed: {}",
                    outside(&self.called),
                    outside(&e.message)
                );
            }
            over_budget(&self.inner, self.decl.as_deref(), &outcome);
        }
        let arguments = self.seen.take().unwrap_or(Value::Null);
        let response = self.checked_after(&mut outcome, &arguments);
        let outcome_name = match &outcome.result {
            Ok(_) => "ok",
            Err(e) => e.kind.name(),
        };
        self.trace(&outcome, outcome_name, end, &arguments, &response);
        // A transition that ended well moves the call, once its result is filed.
        let moving = match (
            &outcome.result,
            self.decl.as_deref().and_then(ToolDecl::transition),
        ) {
            (Ok(value), Some(transition)) if self.ran => Some((transition, value.clone())),
            _ => None,
        };
        let filed = self.file(end, response);
        match (filed, moving) {
            (true, Some((transition, value))) => {
                super::workflow::moved(
                    &self.inner,
                    &self.session,
                    self.turn_id,
                    transition,
                    &value,
                );
            }
            _ if self.ran
                && self
                    .decl
                    .as_deref()
                    .is_some_and(|d| d.transition().is_some()) =>
            {
                super::workflow::unmoved(&self.inner);
            }
            _ => {}
        }
        self.inner.settled.notify_waiters();
        self.report(end, outcome_name);
        filed
    }

    /// The result the model reads (bounded), once the guard after the tool has read it: a
    /// refusal there turns `outcome` into a refused call.
    fn checked_after(&self, outcome: &mut ToolOutcome, arguments: &Value) -> Value {
        let checked = GuardedCall {
            name: &self.kept,
            arguments,
            turn_id: self.turn_id,
            session_id: self.session.id(),
        };
        let mut response = bounded(outcome.response(), self.inner.settings.max_result_bytes);
        let after = if self.ran {
            self.inner.settings.guards.after(&checked, &mut response)
        } else {
            Verdict::Allowed
        };
        if !matches!(after, Verdict::Allowed) {
            guarded(
                &self.inner,
                &self.session,
                self.turn_id,
                &self.kept,
                &after,
                "after",
            );
            outcome.result = Err(ToolError::new(ToolErrorKind::Refused, String::new()));
        }
        response
    }

    /// What the answer leaves behind besides the history: the span's fields, the observers,
    /// the metrics, the recording's line and the session's tool watcher.
    fn trace(
        &mut self,
        outcome: &ToolOutcome,
        outcome_name: &'static str,
        end: RunEnd,
        arguments: &Value,
        response: &Value,
    ) {
        if let Err(e) = &outcome.result {
            self.span.record("error.type", e.kind.name());
        }
        self.span.record("voqalize.tool.end", end.name());
        let ran = self.ran;
        self.inner.settings.guards.observe(&ToolRun {
            session_id: self.session.id(),
            turn_id: self.turn_id,
            name: &self.kept,
            arguments,
            response,
            duration: if ran { outcome.elapsed } else { Duration::ZERO },
            ran,
            outcome: outcome_name,
            end,
        });
        crate::metrics::tool_run(
            self.decl
                .as_deref()
                .map_or(std::borrow::Cow::Borrowed("unknown"), ToolDecl::label),
            outcome_name,
            end.name(),
            ran.then_some(outcome.elapsed),
        );
        self.taping
            .answered(outcome_name, end, self.decl.as_deref(), response);
        let watched = self.watched.take();
        self.session.tool_answered(|| crate::session::Answered {
            turn_id: self.turn_id,
            name: self.called.clone(),
            arguments: watched.unwrap_or(Value::Null),
            outcome: outcome_name.to_owned(),
            end: end.name(),
        });
    }

    /// Files `response` right after its call (a `Background` run's as a note); `false` when the
    /// call was answered already.
    fn file(&mut self, end: RunEnd, response: Value) -> bool {
        let kept = &self.kept;
        if end == RunEnd::Background {
            let note = format!(
                "(The background tool {kept} finished{}: {response})",
                self.call_id
                    .as_deref()
                    .map(|id| format!(" (call {id})"))
                    .unwrap_or_default()
            );
            lock(&self.inner.conversation).push_note(&note);
            true
        } else {
            let result = ToolResult {
                call_id: self.call_id.take(),
                name: kept.clone(),
                response,
            };
            lock(&self.inner.conversation).answer(self.model_entry, self.ordinal, result)
        }
    }

    /// A `tool` step for a tool that ran; a call refused because tools were off, or by a guard
    /// before it ran, did not. A run that ended after its turn is reported even so: it ran.
    fn report(self, end: RunEnd, outcome_name: &str) {
        if !(self.steps && self.ran) {
            return;
        }
        let ms = u32::try_from(self.started.elapsed().as_millis()).unwrap_or(u32::MAX);
        // An MCP tool's run is a step of kind `mcp`, its provider the toolset's name.
        let mut step = match self.decl.as_deref().and_then(ToolDecl::added_origin) {
            Some(added) => Step::new(added.kind, self.kept).provider(&*added.source),
            None => Step::new("tool", self.kept),
        }
        .duration_ms(ms);
        if end != RunEnd::InTurn {
            step = step.count(end.name(), 1);
        }
        if matches!(outcome_name, "cancelled" | "timed_out") {
            step = step.count(outcome_name, 1);
        }
        report(&self.session, step, self.turn_id, end != RunEnd::InTurn);
    }
}

/// Answers `slot`'s call with `outcome`, unless someone did already.
pub(super) fn settle(slot: &Slot, outcome: impl FnOnce(&Settle) -> ToolOutcome) {
    let taken = lock(slot).take();
    if let Some(settle) = taken {
        let outcome = outcome(&settle);
        settle.answer(outcome);
    }
}

/// Runs `call` (a tool's run) within `timeout`, then answers its call from `slot`. A run that
/// stops with its turn and ends after the user cut in is answered as cancelled all the same: the
/// barge-in came first, and its turn's end would have stopped it.
pub(super) async fn run(slot: Slot, timeout: Duration, call: impl Future<Output = ToolOutcome>) {
    let outcome = match tokio::time::timeout(timeout, call).await {
        Ok(outcome) => outcome,
        Err(_) => timed_out(&slot, timeout),
    };
    settle(&slot, |settle| {
        if settle.policy == ToolPolicy::Cancel
            && settle.cancelled.load(std::sync::atomic::Ordering::Acquire)
        {
            cancelled(settle)
        } else {
            outcome
        }
    });
}

fn timed_out(slot: &Slot, after: Duration) -> ToolOutcome {
    let name = lock(slot)
        .as_ref()
        .map(|s| s.kept.clone())
        .unwrap_or_default();
    ToolOutcome {
        result: Err(ToolError::new(
            ToolErrorKind::TimedOut,
            format!(
                "'{name}' did not finish within {} and was stopped; whatever it did before stands, \
                 so check before calling it again",
                seconds(after)
            ),
        )),
        elapsed: after,
    }
}

/// The answer of a run a barge-in stopped (`#[tool(on_barge_in = cancel)]`, or a run that can
/// only live inside its turn).
pub(super) fn cancelled(settle: &Settle) -> ToolOutcome {
    ToolOutcome {
        result: Err(ToolError::new(
            ToolErrorKind::Cancelled,
            format!(
                "the user interrupted, so '{}' was cancelled before it finished: it did not \
                 complete",
                settle.kept
            ),
        )),
        elapsed: settle.started.elapsed(),
    }
}

/// What the model reads at once of a `Background` call: it started.
pub(super) fn started(name: &str) -> Value {
    json!({ "result": format!(
        "'{name}' started in the background; its result will follow in a note. Do not call it \
         again for this"
    ) })
}

/// `3 s`, `1.5 s`, `250 ms`.
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// `response` (`{"result": ...}` or `{"error": ...}`) as the model reads it, within `max` bytes
/// of JSON: past it, the model reads the start of the result's JSON text (or of the error's
/// text) and that it was cut.
fn bounded(response: Value, max: usize) -> Value {
    let Ok(whole) = serde_json::to_vec(&response) else {
        return response;
    };
    if whole.len() <= max {
        return response;
    }
    let Value::Object(mut map) = response else {
        return Value::Null;
    };
    let (key, inner) = match (map.remove("result"), map.remove("error")) {
        (Some(v), _) => ("result", v),
        (None, Some(v)) => ("error", v),
        (None, None) => return Value::Null,
    };
    let text = match inner {
        Value::String(text) => text,
        other => other.to_string(),
    };
    // What the cut answer itself takes besides the text: its keys and the note. The text is
    // cut where its JSON, escapes and all, fills the rest (a quote takes two bytes, a control
    // character six).
    let room = max.saturating_sub(160);
    let cut = &text[..json_prefix(&text, room)];
    json!({
        key: cut,
        "cut": format!("the {key} was {} bytes; only the first {} are here", text.len(), cut.len()),
    })
}

/// How many bytes of `text` fit in `room` bytes once written as a JSON string (without its
/// quotes): a cut at a character boundary.
fn json_prefix(text: &str, room: usize) -> usize {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if u32::from(c) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if used > room {
            return at;
        }
    }
    text.len()
}

/// Waits until no call waits for its answer, so a request shows every call answered: a run that
/// goes on after its turn was barged in on is waited for (within its timeout). A run past the
/// margin after its timeout is lost; its call is answered for it, with one warning.
pub(super) async fn all_answered(inner: &Inner) {
    loop {
        let notified = inner.settled.notified();
        let due = {
            let conversation = lock(&inner.conversation);
            if !conversation.waiting() {
                return;
            }
            conversation.last_due()
        };
        let Some(due) = due else {
            notified.await;
            continue;
        };
        if tokio::time::timeout_at(due.into(), notified).await.is_ok() {
            continue;
        }
        let lost = json!({
            "error": "this call's run was lost before it answered (the process stopped it); \
                      whether it took effect is unknown"
        });
        let answered = lock(&inner.conversation).answer_overdue(Instant::now(), &lost);
        if answered > 0 && allowed(inner, |log| &mut log.failed_calls) {
            tracing::warn!(
                "{answered} tool call(s) never answered within their timeout; the model reads that \
                 they were lost"
            );
        }
    }
}

/// Whether a line of the kind `kind` picks from the session's turn log is written now; when it
/// is not, it is counted, and summed up later.
pub(super) fn allowed(
    inner: &Inner,
    kind: impl FnOnce(&mut super::report::TurnLog) -> &mut Repeated,
) -> bool {
    kind(&mut lock(&inner.log)).allow()
}

/// A tool that ran over [`TOOL_BUDGET_MS`]: the user waited for it. Logged once per session,
/// then counted (a model can call a slow tool sixteen times a reply, every turn). The budget is
/// for a tool in the brain's process: an MCP server's tool is a network call, bounded by its
/// timeout and covered by the filler, and is not held to it.
fn over_budget(inner: &Inner, decl: Option<&ToolDecl>, outcome: &ToolOutcome) {
    let ms = outcome.elapsed.as_secs_f64() * 1000.0;
    if ms > TOOL_BUDGET_MS as f64
        && let Some(tool) = decl.filter(|d| d.mcp_server().is_none())
        && allowed(inner, |log| &mut log.slow_tools)
    {
        tracing::warn!(
            "tool {} took {}ms, over the {TOOL_BUDGET_MS}ms budget; the user waited for it",
            tool.method(),
            ms.round()
        );
    }
}

/// A guard refused `tool`'s call or its result (`at`: "before" or "after"), or failed: logged
/// (once, then summed up) and reported as a `guard` step.
pub(super) fn guarded(
    inner: &Inner,
    session: &Session,
    turn_id: u64,
    tool: &str,
    verdict: &Verdict,
    at: &str,
) {
    match verdict {
        Verdict::Allowed => return,
        Verdict::Refused(message) => {
            if allowed(inner, |log| &mut log.guard_refusals) {
                tracing::info!(
                    "tool {}: the guard {at} it refused: {}",
                    outside(tool),
                    outside(message)
                );
            }
        }
        Verdict::Failed { log, .. } => {
            if allowed(inner, |l| &mut l.guard_failures) {
                tracing::warn!(
                    "tool {}: the guard {at} it failed, so it fails closed: {}",
                    outside(tool),
                    outside(log)
                );
            }
        }
    }
    if inner.settings.report_steps
        && let Some(count) = verdict.count()
    {
        report(
            session,
            Step::new("guard", tool).count(count, 1).count(at, 1),
            turn_id,
            false,
        );
    }
}

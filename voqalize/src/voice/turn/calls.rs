//! The calls of a turn's responses: each started the moment it is read (after the speech before
//! it is on the wire), within the tool's policy and timeout, and waited for while the caller
//! hears a filler or the tool's progress (docs/protocol.md §6.4, §6.8).
//!
//! A run that can outlive its turn (the brain passed to `respond` is the call's brain) is a task
//! of its own; the turn holds a handle to its end. Otherwise it runs inside the turn. Either way
//! the run answers its own call (see `voice::runs`), so a call is never left without its answer
//! between a tool's end and its filing.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::{RequestEnd, TurnState};
use crate::logline::outside;
use crate::model::history::{Call, ToolResult};
use crate::session::context;
use crate::session::{CurrentCall, MAX_PROGRESS_BYTES};
use crate::tools::{
    Arguments, ToolDecl, ToolError, ToolErrorKind, ToolOutcome, ToolPolicy, ToolSet, Toolbox,
    restore_enum_strings,
};
use crate::voice::bounds::Tripped;
use crate::voice::response::Filed;
use crate::voice::runs::{self, Settle, Slot};
use crate::voice::spans;
use crate::voice::taping::ToolTaping;
use crate::voice::tool_guard::{GuardedCall, Verdict};

/// How long a tool waits for the speech before its call to reach the socket.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// A run the turn waits for has ended: its call is answered.
pub(super) struct Answered {
    /// The run's key among the turn's runs in flight.
    key: u64,
    /// A `#[needs_result_now]` tool: the model is asked again once the response is answered.
    awaited: bool,
}

/// The runs of the request in flight that the turn waits for: each future is one run (or the
/// end of a run's task), polled while the stream is read on.
pub(super) type Answering<'a> =
    FuturesUnordered<Pin<Box<dyn Future<Output = Answered> + Send + 'a>>>;

/// A call whose tool is about to run: what starting it needs.
struct Run<'a> {
    tools: &'a ToolSet,
    filed: Filed,
    /// The arguments, for the tool.
    arguments: Arguments,
    decl: Option<&'static ToolDecl>,
    timeout: Duration,
    started: Instant,
    /// A `#[needs_result_now]` tool.
    awaited: bool,
}

/// A run the turn waits for, as the filler sees it.
pub(super) struct InFlight {
    key: u64,
    started: Instant,
    /// What the response had spoken when the call was made: a filler is for silence since.
    spoken_at: u64,
    /// The line spoken if the caller waits too long: the tool's own, else the model's.
    filler: Option<Arc<str>>,
}

impl<'t> TurnState<'t> {
    /// The call's brain as a shared toolbox, when `brain` is it (then a run can outlive the
    /// turn); decided at the turn's first call.
    fn shared(&mut self, brain: &dyn Toolbox) -> Option<Arc<dyn Toolbox>> {
        let session = &self.session;
        self.shared
            .get_or_insert_with(|| session.brain().and_then(|b| brain.__shared(b)))
            .clone()
    }

    /// Starts one call of the open response, once the speech before it is on the wire: its tool
    /// runs (a call refused before it runs is answered at once). While
    /// [`parallel_tools`](crate::voice::Model::parallel_tools) runs are being waited for, waits
    /// for one to end first (at 1, each call is answered before the stream is read on).
    ///
    /// # Errors
    /// The bound the call passes (calls per response, argument bytes, tool runs): it is
    /// refused, answered with an error the model reads, and the response is cut there.
    pub(super) async fn dispatch<'a>(
        &mut self,
        brain: &'a dyn Toolbox,
        tools: &'a ToolSet,
        tools_off: bool,
        (call, raw): (Call, Value),
        answering: &mut Answering<'a>,
        end: &mut RequestEnd,
    ) -> Result<(), Tripped> {
        let model = self.model;
        if let Some(bound) = self.over_bound(&call, !tools_off) {
            let mut conversation = model.conversation();
            self.response(&mut conversation)
                .refuse(&mut conversation, call, raw, bound);
            return Err(bound);
        }
        self.request_calls += 1;
        self.session.flushed(FLUSH_WAIT).await;
        let decl = tools.get(&call.name);
        let timeout = decl
            .and_then(ToolDecl::timeout)
            .unwrap_or(model.inner.settings.tool_timeout);
        let started = Instant::now();
        let mut filed = {
            let mut conversation = model.conversation();
            self.response(&mut conversation).file_call(
                &mut conversation,
                call,
                raw,
                started + timeout + runs::ANSWER_MARGIN,
            )
        };
        let awaited = !tools_off && decl.is_some_and(ToolDecl::needs_result_now);
        let (settle, arguments, before, shared) =
            self.prepare(brain, decl, tools_off, &mut filed, started);
        self.tally.calls += 1;
        if !settle.ran {
            self.answer_unrun(settle, tools_off, before);
            self.awaited(awaited, end);
            return Ok(());
        }
        let run = Run {
            tools,
            filed,
            arguments,
            decl,
            timeout,
            started,
            awaited,
        };
        self.start(brain, shared, settle, run, answering);
        while answering.len() >= model.inner.settings.parallel_tools {
            self.answer_next(answering, end).await;
        }
        Ok(())
    }

    /// What answering a filed call needs: the tool's arguments read (the history keeps its own
    /// copy), the guard before the tool asked, the run's policy decided. Also returns the
    /// arguments for the tool, the guard's verdict, and the call's brain when a run can outlive
    /// the turn.
    fn prepare(
        &mut self,
        brain: &dyn Toolbox,
        decl: Option<&'static ToolDecl>,
        tools_off: bool,
        filed: &mut Filed,
        started: Instant,
    ) -> (Settle, Arguments, Verdict, Option<Arc<dyn Toolbox>>) {
        let model = self.model;
        let (arguments, seen) = self.tool_arguments(decl, filed);
        let taping =
            ToolTaping::dispatched(self.session.tape(), self.turn.id(), &filed.name, &arguments);
        let before = match &seen {
            Some(seen) if !tools_off => model.inner.settings.guards.before(&GuardedCall {
                name: &filed.name,
                arguments: seen,
                turn_id: self.turn.id(),
                session_id: self.session.id(),
            }),
            _ => Verdict::Allowed,
        };
        let ran = !tools_off && matches!(before, Verdict::Allowed);
        let (policy, shared) = self.policy(brain, decl, ran, &filed.name);
        let settle = Settle {
            inner: model.inner.clone(),
            session: self.session.clone(),
            turn_id: self.turn.id(),
            cancelled: self.turn.cancelled_flag(),
            model_entry: filed.entry,
            ordinal: filed.ordinal,
            call_id: filed.call_id.clone(),
            called: filed.name.clone(),
            kept: filed.kept.clone(),
            decl,
            seen,
            watched: self
                .session
                .watches_tools()
                .then(|| crate::voice::taping::kept(&arguments)),
            ran,
            policy,
            started,
            taping,
            span: if ran {
                spans::execute_tool(&filed.kept)
            } else {
                tracing::Span::none()
            },
            steps: self.steps_on(),
        };
        (settle, arguments, before, shared)
    }

    /// The tool's arguments, taken from `filed` (the history keeps its own copy), and the JSON
    /// the guards and observers read when any guard is set.
    fn tool_arguments(
        &self,
        decl: Option<&'static ToolDecl>,
        filed: &mut Filed,
    ) -> (Arguments, Option<Value>) {
        let guards = &self.model.inner.settings.guards;
        let arguments = std::mem::replace(&mut filed.arguments, Arguments::Raw(String::new()));
        let arguments = match decl {
            Some(decl) if self.model.inner.layer.enums_as_strings() => {
                restore_enum_strings(decl, arguments)
            }
            _ => arguments,
        };
        // A guard reads the arguments as JSON: JSON text is parsed once here (the tool gets the
        // parsed value). Text that is not JSON is not checked: its call cannot run (the tool's
        // arguments do not read).
        let arguments = if guards.any() {
            as_json(arguments)
        } else {
            arguments
        };
        let seen = match &arguments {
            Arguments::Json(v) if guards.any() => Some(v.clone()),
            _ => None,
        };
        (arguments, seen)
    }

    /// The run's policy, and the call's brain when the run can outlive the turn: a `background`
    /// tool given a toolbox that is not the call's brain runs as `finish` (warned once).
    fn policy(
        &mut self,
        brain: &dyn Toolbox,
        decl: Option<&'static ToolDecl>,
        ran: bool,
        name: &str,
    ) -> (ToolPolicy, Option<Arc<dyn Toolbox>>) {
        let mut policy = decl.map_or(ToolPolicy::Finish, ToolDecl::policy);
        let shared = if ran { self.shared(brain) } else { None };
        if policy == ToolPolicy::Background && shared.is_none() {
            // Only the call's own brain can be held past the turn.
            if ran
                && !self
                    .model
                    .inner
                    .warned_background
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    "tool {} is `background`, but the toolbox given to respond is not the call's \
                     brain: it runs inside its turn (pass the brain itself, `self`)",
                    outside(name)
                );
            }
            policy = ToolPolicy::Finish;
        }
        (policy, shared)
    }

    /// Answers a call whose tool does not run: tools were off, or the guard before it refused.
    fn answer_unrun(&self, settle: Settle, tools_off: bool, before: Verdict) {
        let outcome = if tools_off {
            refused(&settle.kept)
        } else {
            runs::guarded(
                &self.model.inner,
                &self.session,
                self.turn.id(),
                &settle.kept,
                &before,
                "before",
            );
            let (Verdict::Refused(message) | Verdict::Failed { message, .. }) = before else {
                unreachable!("a call that does not run was refused")
            };
            ToolOutcome {
                result: Err(ToolError::new(ToolErrorKind::Refused, message)),
                elapsed: Duration::ZERO,
            }
        };
        settle.answer(outcome);
    }

    /// Starts the call's tool: a task of its own when it holds the call's brain (`shared`),
    /// else inside the turn. A run the turn waits for joins `answering`.
    fn start<'a>(
        &mut self,
        brain: &'a dyn Toolbox,
        shared: Option<Arc<dyn Toolbox>>,
        settle: Settle,
        run: Run<'a>,
        answering: &mut Answering<'a>,
    ) {
        self.runs += 1;
        let policy = settle.policy;
        let ordinal = self.turn.next_tool_call();
        let progress = (policy != ToolPolicy::Background).then(|| {
            let (lines, _) = self
                .progress
                .get_or_insert_with(|| mpsc::channel(crate::session::PROGRESS_QUEUE));
            lines.clone()
        });
        let Run {
            tools,
            filed,
            arguments,
            decl,
            timeout,
            started,
            awaited,
        } = run;
        let call = CurrentCall::new(
            self.session.id(),
            self.turn.id(),
            ordinal,
            &filed.name,
            progress,
        );
        let span = settle.span.clone();
        let slot: Slot = Arc::new(Mutex::new(Some(settle)));
        let name = filed.name;
        let Some(brain) = shared else {
            let run = runs::run(
                slot.clone(),
                timeout,
                brain.call_tool(tools, &name, arguments).instrument(span),
            );
            let run = context::scope_tool(self.session.clone(), call, true, run);
            // A run inside its turn ends with it, whatever its policy.
            self.response_mut().stops_with_turn(slot, None);
            let key = self.in_flight(decl, started);
            answering.push(Box::pin(async move {
                run.await;
                Answered { key, awaited }
            }));
            return;
        };
        let tools = tools.clone();
        let run = runs::run(slot.clone(), timeout, async move {
            brain
                .call_tool(&tools, &name, arguments)
                .instrument(span)
                .await
        });
        let task = tokio::spawn(context::scope_tool(self.session.clone(), call, false, run));
        if policy == ToolPolicy::Background {
            // The turn does not wait: the model reads at once that it started.
            let result = ToolResult {
                call_id: filed.call_id,
                name: filed.kept.clone(),
                response: runs::started(&filed.kept),
            };
            self.model
                .conversation()
                .answer(filed.entry, filed.ordinal, result);
            return;
        }
        if policy == ToolPolicy::Cancel {
            self.response_mut()
                .stops_with_turn(slot, Some(task.abort_handle()));
        }
        let key = self.in_flight(decl, started);
        answering.push(Box::pin(async move {
            // The run answers its call itself; a task that panicked or was stopped left its
            // call to whoever stopped it.
            let _ = task.await;
            Answered { key, awaited }
        }));
    }

    /// The open response (a call was just filed in it, so there is one).
    fn response_mut(&mut self) -> &mut crate::voice::response::Response<'t> {
        let mut conversation = self.model.conversation();
        self.response(&mut conversation)
    }

    /// Notes a run the turn waits for, for its filler: its key.
    fn in_flight(&mut self, decl: Option<&'static ToolDecl>, started: Instant) -> u64 {
        self.next_key += 1;
        let filler = decl
            .and_then(ToolDecl::filler)
            .map(Arc::from)
            .or_else(|| self.model.inner.settings.filler.clone());
        let spoken_at = self.response.as_ref().map_or(0, |r| r.spoken());
        self.waiting.push(InFlight {
            key: self.next_key,
            started,
            spoken_at,
            filler,
        });
        self.next_key
    }

    /// A `#[needs_result_now]` call was answered: the model is asked again after the response.
    fn awaited(&mut self, awaited: bool, end: &mut RequestEnd) {
        if awaited {
            self.tally.awaited += 1;
            end.awaited = true;
        }
    }

    /// When the filler is due, if one may be spoken: the oldest run waited for that has a filler,
    /// with nothing said since its call, once it has run [`filler_after`].
    ///
    /// [`filler_after`]: crate::voice::Model::filler_after
    fn filler_due(&self) -> Option<(Instant, Arc<str>)> {
        let response = self.response.as_ref()?;
        if !response.filler_allowed() {
            return None;
        }
        let after = self.model.inner.settings.filler_after;
        self.waiting
            .iter()
            .filter(|w| w.spoken_at == response.spoken())
            .filter_map(|w| Some((w.started.checked_add(after)?, w.filler.clone()?)))
            .min_by_key(|(at, _)| *at)
    }

    /// Speaks `line` while tools run, as the response's words.
    fn side_line(&mut self, line: &str, filler: bool) {
        let model = self.model;
        let mut conversation = model.conversation();
        if let Some(r) = self.response.as_mut() {
            r.side_line(
                &mut conversation,
                line,
                filler,
                (&mut self.clock, &self.bounds),
            );
        }
    }

    /// Speaks a tool's progress `line` (cut to [`MAX_PROGRESS_BYTES`]).
    fn progress_line(&mut self, line: &str) {
        let line = &line[..line.floor_char_boundary(MAX_PROGRESS_BYTES)];
        self.side_line(line, false);
    }

    /// Waits for the next run the turn waits for to end (its call is answered by then); the
    /// caller hears the tools' progress meanwhile, and a filler when one keeps it waiting.
    pub(super) async fn answer_next(
        &mut self,
        answering: &mut Answering<'_>,
        end: &mut RequestEnd,
    ) {
        loop {
            let filler = self.filler_due();
            let due = filler.as_ref().map(|(at, _)| *at);
            let filler_sleep = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answered = answering.next() => {
                    if let Some(Answered { key, awaited }) = answered {
                        self.waiting.retain(|w| w.key != key);
                        self.awaited(awaited, end);
                    }
                    // A line the run queued just before it returned is spoken now, before the
                    // model's next words, not during some later tool (or never).
                    while let Some(line) = self
                        .progress
                        .as_mut()
                        .and_then(|(_, lines)| lines.try_recv().ok())
                    {
                        self.progress_line(&line);
                    }
                    return;
                }
                Some(line) = next_line(&mut self.progress) => self.progress_line(&line),
                () = filler_sleep => {
                    if let Some((_, line)) = filler {
                        self.side_line(&line, true);
                    }
                }
            }
        }
    }

    /// Waits until every run the turn waits for has ended: before the response closes or is
    /// cut, so its results are filed right after it, and before any follow-up is asked.
    pub(super) async fn answer_all(&mut self, answering: &mut Answering<'_>, end: &mut RequestEnd) {
        while !answering.is_empty() {
            self.answer_next(answering, end).await;
        }
    }

    /// The turn ends (a barge-in, teardown, or its end): each run that ends with it and still
    /// runs is stopped, and its call answered as cancelled.
    pub(super) fn stop_runs(&mut self) {
        let Some(response) = self.response.as_mut() else {
            return;
        };
        for (slot, abort) in response.take_stopping() {
            if let Some(abort) = abort {
                abort.abort();
            }
            runs::settle(&slot, runs::cancelled);
        }
    }
}

/// The next progress line of the turn's tools; never, before the turn's first tool run.
async fn next_line(
    progress: &mut Option<(mpsc::Sender<String>, mpsc::Receiver<String>)>,
) -> Option<String> {
    match progress {
        Some((_, lines)) => lines.recv().await,
        None => std::future::pending().await,
    }
}

/// `arguments` as a JSON value when they are JSON text (empty text is `{}`); text that is not
/// JSON is left as it is.
fn as_json(arguments: Arguments) -> Arguments {
    match arguments {
        Arguments::Raw(text) if text.trim().is_empty() => {
            Arguments::Json(Value::Object(Default::default()))
        }
        Arguments::Raw(text) => match serde_json::from_str(&text) {
            Ok(value) => Arguments::Json(value),
            Err(_) => Arguments::Raw(text),
        },
        json => json,
    }
}

/// A call on a request that allowed none: not run, answered with an error the model reads.
fn refused(name: &str) -> ToolOutcome {
    ToolOutcome {
        result: Err(ToolError::new(
            ToolErrorKind::Hidden,
            format!(
                "no tool may be called in this reply, so '{name}' did not run; answer in speech"
            ),
        )),
        elapsed: Duration::ZERO,
    }
}

//! Starting the calls of a turn's responses: each the moment it is read (after the speech before
//! it is on the wire), within the turn's bounds, the guards, the tool's policy and timeout
//! (docs/protocol.md §6.4, §6.8). `turn/waiting.rs` waits for them.
//!
//! A run that can outlive its turn (the brain passed to `respond` is the call's brain) is a task
//! of its own; the turn holds a handle to its end. Otherwise it runs inside the turn. Either way
//! the run answers its own call (see `voice::runs`), so a call is never left without its answer
//! between a tool's end and its filing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::waiting::{Answered, Answering};
use super::{Calling, RequestEnd, TurnState};
use crate::logline::outside;
use crate::model::history::{Call, ToolResult};
use crate::session::CurrentCall;
use crate::session::context;
use crate::tools::{
    Arguments, DeclRef, ToolDecl, ToolError, ToolErrorKind, ToolOutcome, ToolPolicy, Toolbox,
    call_added, restore_enum_strings,
};
use crate::voice::bounds::Tripped;
use crate::voice::response::Filed;
use crate::voice::runs::{self, Settle, Slot};
use crate::voice::spans;
use crate::voice::taping::ToolTaping;
use crate::voice::tool_guard::{GuardedCall, Verdict};

/// How long a tool waits for the speech before its call to reach the socket.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// A run about to start: the slot its answer is settled from, its span, and its call as the tool
/// sees it.
struct Run {
    slot: Slot,
    span: tracing::Span,
    call: CurrentCall,
}

/// What the turn decided about one filed call.
struct Decided {
    /// The tool, when the name is one of the turn's.
    decl: Option<DeclRef>,
    timeout: Duration,
    started: Instant,
    /// What the guards said before it ran ([`Verdict::Allowed`] when none looked).
    before: Verdict,
    /// Why the stage refused it (a transition past the turn's cap, a tool of another stage).
    stage: Option<String>,
    /// Whether the tool runs (false: refused by a guard, or tools were off).
    ran: bool,
    /// A `#[needs_result_now]` tool: the model is asked again once the response is answered.
    awaited: bool,
    policy: ToolPolicy,
    /// The call's brain as a shared toolbox, when the run may outlive the turn.
    shared: Option<Arc<dyn Toolbox>>,
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
        calling: Calling<'a>,
        (call, raw): (Call, Value),
        answering: &mut Answering<'a>,
        end: &mut RequestEnd,
    ) -> Result<(), Tripped> {
        let model = self.model;
        if let Some(bound) = self.over_bound(&call, !calling.off) {
            let mut conversation = model.conversation();
            self.response(&mut conversation)
                .refuse(&mut conversation, call, raw, bound);
            return Err(bound);
        }
        self.request_calls += 1;
        self.session.flushed(FLUSH_WAIT).await;
        let decl = calling.tools.find(&call.name);
        let timeout = decl
            .as_deref()
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
        let seen = self.for_tool(decl.as_deref(), &mut filed);
        let taping = ToolTaping::dispatched(
            self.session.tape(),
            self.turn.id(),
            &filed.name,
            &filed.arguments,
        );
        let decided = self.decide(calling, &filed, decl, seen.as_ref(), (timeout, started));
        let settle = self.settle(&filed, seen, taping, &decided);
        self.tally.calls += 1;
        if !decided.ran {
            self.answer_unrun(settle, calling.off, decided, end);
            return Ok(());
        }
        self.start(calling, filed, settle, decided, answering);
        while answering.len() >= model.inner.settings.parallel_tools {
            self.answer_next(answering, end).await;
        }
        Ok(())
    }

    /// Readies the filed call's arguments for its tool (the history keeps its own copy): enums
    /// written as strings restored, and JSON text parsed once when a guard reads it (the tool gets
    /// the parsed value; text that is not JSON is not checked: its call cannot run). Returns the
    /// arguments as the guards read them, when any is set.
    fn for_tool(&self, decl: Option<&ToolDecl>, filed: &mut Filed) -> Option<Value> {
        let guards = &self.model.inner.settings.guards;
        let arguments = std::mem::replace(&mut filed.arguments, Arguments::Raw(String::new()));
        let arguments = match decl {
            Some(decl) if self.layer().enums_as_strings() => restore_enum_strings(decl, arguments),
            _ => arguments,
        };
        filed.arguments = if guards.any() {
            as_json(arguments)
        } else {
            arguments
        };
        match &filed.arguments {
            Arguments::Json(v) if guards.any() => Some(v.clone()),
            _ => None,
        }
    }

    /// Whether the call runs (the guards asked, unless tools are off), how, and where.
    fn decide(
        &mut self,
        calling: Calling<'_>,
        filed: &Filed,
        decl: Option<DeclRef>,
        seen: Option<&Value>,
        (timeout, started): (Duration, Instant),
    ) -> Decided {
        // A transition past the turn's cap, or a tool the stage does not offer: refused before
        // any guard looks, with why.
        let stage = if calling.off {
            None
        } else {
            self.model
                .stage_refusal(self.turn.id(), &filed.name, decl.as_deref(), calling.brain)
        };
        let before = match seen {
            _ if stage.is_some() => Verdict::Allowed,
            Some(seen) if !calling.off => self.model.inner.settings.guards.before(&GuardedCall {
                name: &filed.name,
                arguments: seen,
                turn_id: self.turn.id(),
                session_id: self.session.id(),
            }),
            _ => Verdict::Allowed,
        };
        let ran = !calling.off && stage.is_none() && matches!(before, Verdict::Allowed);
        if ran && decl.as_deref().is_some_and(|d| d.transition().is_some()) {
            self.model.transition_started();
        }
        let shared = if ran {
            self.shared(calling.brain)
        } else {
            None
        };
        Decided {
            // A call the stage refused: the model reads why at once, and goes on.
            awaited: !calling.off
                && (stage.is_some() || decl.as_deref().is_some_and(ToolDecl::needs_result_now)),
            // An MCP tool's run is a task of its own: it can always outlive the turn.
            policy: self.policy(
                decl.as_deref(),
                shared.is_some() || matches!(decl, Some(DeclRef::Added(_))),
                ran,
                &filed.name,
            ),
            decl,
            timeout,
            started,
            before,
            stage,
            ran,
            shared,
        }
    }

    /// The tool's policy. Only the call's own brain can be held past the turn (`held`): a
    /// `background` tool that is not runs inside its turn, and one that runs so is logged once.
    fn policy(&self, decl: Option<&ToolDecl>, held: bool, ran: bool, name: &str) -> ToolPolicy {
        let policy = decl.map_or(ToolPolicy::Finish, ToolDecl::policy);
        if policy != ToolPolicy::Background || held {
            return policy;
        }
        let warned = &self.model.inner.warned_background;
        if ran && !warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                "tool {} is `background`, but the toolbox given to respond is not the call's \
                 brain: it runs inside its turn (pass the brain itself, `self`)",
                outside(name)
            );
        }
        ToolPolicy::Finish
    }

    /// Everything answering the call needs (see [`Settle`]).
    fn settle(
        &self,
        filed: &Filed,
        seen: Option<Value>,
        taping: ToolTaping,
        decided: &Decided,
    ) -> Settle {
        Settle {
            inner: self.model.inner.clone(),
            session: self.session.clone(),
            turn_id: self.turn.id(),
            cancelled: self.turn.cancelled_flag(),
            model_entry: filed.entry,
            ordinal: filed.ordinal,
            call_id: filed.call_id.clone(),
            called: filed.name.clone(),
            kept: filed.kept.clone(),
            decl: decided.decl.clone(),
            seen,
            watched: self
                .session
                .watches_tools()
                .then(|| crate::voice::taping::kept(&filed.arguments)),
            ran: decided.ran,
            policy: decided.policy,
            started: decided.started,
            taping,
            span: if decided.ran {
                spans::execute_tool(
                    &filed.kept,
                    decided.decl.as_deref().and_then(ToolDecl::mcp_server),
                )
            } else {
                tracing::Span::none()
            },
            steps: self.steps_on(),
        }
    }

    /// A call that does not run (tools are off, or a guard refused it) is answered at once with
    /// an error the model reads.
    fn answer_unrun(
        &mut self,
        settle: Settle,
        tools_off: bool,
        decided: Decided,
        end: &mut RequestEnd,
    ) {
        let outcome = if tools_off {
            refused(&settle.kept)
        } else if let Some(message) = decided.stage.clone() {
            ToolOutcome {
                result: Err(ToolError::new(ToolErrorKind::Refused, message)),
                elapsed: Duration::ZERO,
            }
        } else {
            runs::guarded(
                &self.model.inner,
                &self.session,
                self.turn.id(),
                &settle.kept,
                &decided.before,
                "before",
            );
            let (Verdict::Refused(message) | Verdict::Failed { message, .. }) = decided.before
            else {
                unreachable!("a call that does not run was refused")
            };
            ToolOutcome {
                result: Err(ToolError::new(ToolErrorKind::Refused, message)),
                elapsed: Duration::ZERO,
            }
        };
        settle.answer(outcome);
        self.awaited(decided.awaited, end);
    }

    /// Runs the call's tool: a task of its own when the run may outlive the turn, else inside the
    /// turn. The turn waits for it in `answering`, but for a `background` one (see
    /// [`spawn`](Self::spawn)).
    fn start<'a>(
        &mut self,
        calling: Calling<'a>,
        filed: Filed,
        settle: Settle,
        decided: Decided,
        answering: &mut Answering<'a>,
    ) {
        let Run { slot, span, call } = self.prepare(settle, &filed.name, decided.policy);
        if let Some(DeclRef::Added(decl)) = decided.decl.clone() {
            // An MCP tool's run holds no brain: it is always a task of its own.
            let mut filed = filed;
            let arguments = std::mem::replace(&mut filed.arguments, Arguments::Raw(String::new()));
            let tool = call_added(decl, arguments).instrument(span);
            let run = runs::run(slot.clone(), decided.timeout, tool);
            return self.spawn_task(run, (filed, slot, call), decided, answering);
        }
        if let Some(brain) = decided.shared.clone() {
            return self.spawn(
                brain,
                calling,
                filed,
                Run { slot, span, call },
                decided,
                answering,
            );
        }
        let tool = calling
            .brain
            .call_tool(calling.tools, &filed.name, filed.arguments)
            .instrument(span);
        let run = runs::run(slot.clone(), decided.timeout, tool);
        let run = context::scope_tool(self.session.clone(), call, true, run);
        // A run inside its turn ends with it, whatever its policy.
        self.response_mut().stops_with_turn(slot, None);
        self.wait_on(&decided, run, answering);
    }

    /// The run as the tool sees it: counted, its progress lines (but for a `background` tool,
    /// which outlives the turn that speaks them), and the slot its answer is settled from.
    fn prepare(&mut self, settle: Settle, name: &str, policy: ToolPolicy) -> Run {
        self.runs += 1;
        let ordinal = self.turn.next_tool_call();
        let progress = (policy != ToolPolicy::Background).then(|| {
            let (lines, _) = self
                .progress
                .get_or_insert_with(|| mpsc::channel(crate::session::PROGRESS_QUEUE));
            lines.clone()
        });
        let call = CurrentCall::new(self.session.id(), self.turn.id(), ordinal, name, progress);
        let span = settle.span.clone();
        Run {
            slot: Arc::new(Mutex::new(Some(settle))),
            span,
            call,
        }
    }

    /// Runs the call's tool as a task of its own on the call's `brain`: the turn waits for its
    /// end, but for a `background` tool, whose call the model reads at once as started.
    fn spawn<'a>(
        &mut self,
        brain: Arc<dyn Toolbox>,
        calling: Calling<'a>,
        mut filed: Filed,
        Run { slot, span, call }: Run,
        decided: Decided,
        answering: &mut Answering<'a>,
    ) {
        let tools = calling.tools.clone();
        let name = filed.name.clone();
        let arguments = std::mem::replace(&mut filed.arguments, Arguments::Raw(String::new()));
        let run = runs::run(slot.clone(), decided.timeout, async move {
            brain
                .call_tool(&tools, &name, arguments)
                .instrument(span)
                .await
        });
        self.spawn_task(run, (filed, slot, call), decided, answering);
    }

    /// Runs `run` (a tool's run, which answers its call) as a task of its own, with the call's
    /// context: the turn waits for its end, but for a `background` tool, whose call the model
    /// reads at once as started.
    fn spawn_task<'a>(
        &mut self,
        run: impl Future<Output = ()> + Send + 'static,
        (filed, slot, call): (Filed, Slot, CurrentCall),
        decided: Decided,
        answering: &mut Answering<'a>,
    ) {
        let task = tokio::spawn(context::scope_tool(self.session.clone(), call, false, run));
        match decided.policy {
            ToolPolicy::Background => {
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
            ToolPolicy::Cancel => self
                .response_mut()
                .stops_with_turn(slot, Some(task.abort_handle())),
            _ => {}
        }
        self.wait_on(
            &decided,
            async move {
                // The run answers its call itself; a task that panicked or was stopped left its
                // call to whoever stopped it.
                let _ = task.await;
            },
            answering,
        );
    }

    /// The turn waits for a run to end (`ended`), for its filler and its answer.
    fn wait_on<'a>(
        &mut self,
        decided: &Decided,
        ended: impl Future<Output = ()> + Send + 'a,
        answering: &mut Answering<'a>,
    ) {
        let key = self.in_flight(decided.decl.as_deref(), decided.started);
        let awaited = decided.awaited;
        answering.push(Box::pin(async move {
            ended.await;
            Answered { key, awaited }
        }));
    }

    /// The open response (a call was just filed in it, so there is one).
    fn response_mut(&mut self) -> &mut crate::voice::response::Response<'t> {
        let mut conversation = self.model.conversation();
        self.response(&mut conversation)
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

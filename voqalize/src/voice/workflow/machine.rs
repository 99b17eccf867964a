//! The workflow in the voice core's turns: what each request declares and is told, the stage's
//! layer and fallback, and a transition's effects (hooks, TurnStep, metrics, recording) once its
//! call ends well.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::Setup;
use super::state::{Change, Machine};
use crate::model::layer::Layer;
use crate::model::origin::Origin;
use crate::recover::lock;
use crate::session::{Session, Step, Turn};
use crate::stages::{StageTable, Transition};
use crate::tools::{ToolDecl, ToolSet, Toolbox};
use crate::voice::{Inner, Model, ModelLayer};

impl Model {
    /// Readies the workflow for a turn of `brain`: follows the brain's stages when the `Model`
    /// was given none, and reports the stage the turn starts in.
    pub(crate) fn begin_stages(&self, brain: &dyn Toolbox, turn: &Turn) {
        let table = brain.stage_table();
        let mut machine = lock(&self.inner.workflow);
        match (&*machine, table) {
            (None, None) => return,
            // A brain once answered with other stages than the `Model`'s: no stages, every turn.
            (None, Some(_)) if self.inner.warned_stages.load(Ordering::Relaxed) => return,
            (None, Some(table)) => {
                *machine = Some(Machine::new(Arc::new(Setup::of(table))));
            }
            (Some(m), table) if !same(&m.setup().table, table.as_ref()) => {
                if !self.inner.warned_stages.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        "this Model follows the stages of `{}`, but the brain it answers declares {}: \
                         its tools are declared as the brain's are, with no stages (give the brain \
                         `#[brain(stages = {})]`)",
                        m.type_name(),
                        table.map_or("none".to_owned(), |t| format!("`{}`", t.type_name)),
                        m.type_name()
                    );
                }
                *machine = None;
                return;
            }
            _ => {}
        }
        let Some(m) = machine.as_ref() else {
            return;
        };
        let (stages, type_name, current) = (m.setup().table.stages(), m.type_name(), m.current());
        drop(machine);
        #[cfg(feature = "mcp")]
        self.check_stage_mcp(stages, type_name);
        if self.inner.settings.report_steps {
            let step = Step::new("stage", stages[current].name()).provider(type_name);
            crate::voice::report::report(turn.session(), step, turn.id(), false);
        }
    }

    /// This turn's tools: the brain's visible tools the current stage offers (all of them
    /// without stages), then the MCP tools the stage takes.
    pub(crate) fn turn_tools(&self, brain: &dyn Toolbox, turn: &Turn) -> ToolSet {
        // Read without the call's lock: `tool_visible` is the brain's code, and may ask the
        // `Model` where the call is.
        let stage = lock(&self.inner.workflow)
            .as_ref()
            .map(|m| (m.shared_setup(), m.current()));
        #[cfg_attr(not(feature = "mcp"), allow(unused_mut))]
        let mut tools = match stage {
            Some((setup, current)) => ToolSet::from_table(brain.tools(), |t| {
                super::state::allows(&setup, current, t) && brain.tool_visible(t)
            }),
            None => brain.tools_for_turn(),
        };
        #[cfg(feature = "mcp")]
        self.add_mcp_tools(&mut tools, turn.session().tape());
        let _ = turn;
        tools
    }

    /// Whether the current stage takes the MCP toolset `name` (every toolset without stages).
    #[cfg(feature = "mcp")]
    pub(crate) fn stage_takes_mcp(&self, name: &str) -> bool {
        lock(&self.inner.workflow)
            .as_ref()
            .is_none_or(|m| m.decl(m.current()).mcp.contains(&name))
    }

    /// Bumped at every stage change.
    pub(crate) fn stage_epoch(&self) -> u64 {
        lock(&self.inner.workflow).as_ref().map_or(0, |m| m.epoch)
    }

    /// The origin of what `layer` writes, made once per layer of the call (the model turns of
    /// every response share it). At most 32 are kept; past that the list starts again.
    pub(crate) fn origin_of(&self, layer: &dyn Layer) -> Origin {
        let mut origins = lock(&self.inner.origins);
        if let Some(origin) = origins.iter().find(|o| o.is(layer)) {
            return origin.clone();
        }
        if origins.len() == 32 {
            origins.clear();
        }
        let origin = Origin::of(layer);
        origins.push(origin.clone());
        origin
    }

    /// The layer the current stage's requests go to first.
    pub(crate) fn layer_now(&self) -> Arc<dyn Layer> {
        self.chain_now().layer().clone()
    }

    /// The current stage's layer (a chain, maybe), else the `Model`'s: what the next request
    /// asks.
    pub(crate) fn chain_now(&self) -> ModelLayer {
        lock(&self.inner.workflow)
            .as_ref()
            .and_then(|m| m.here().layer.clone())
            .unwrap_or_else(|| self.inner.layer.clone())
    }

    /// The current stage's fallback line, else the `Model`'s.
    pub(crate) fn fallback_now(&self) -> Option<String> {
        lock(&self.inner.workflow)
            .as_ref()
            .and_then(|m| m.here().fallback.clone())
            .or_else(|| self.inner.settings.fallback.clone())
    }

    /// The current stage's name, when the `Model` follows stages (for spans and logs).
    pub(crate) fn stage_name(&self) -> Option<&'static str> {
        lock(&self.inner.workflow)
            .as_ref()
            .map(|m| m.name(m.current()))
    }

    /// A transition's run starts: it counts against the turn's cap, and no other may start
    /// until it is answered.
    pub(crate) fn transition_started(&self) {
        if let Some(m) = lock(&self.inner.workflow).as_mut() {
            m.started();
        }
    }

    /// Why a call to `name` may not run in this stage (see [`Machine::refusal`]).
    pub(crate) fn stage_refusal(
        &self,
        turn_id: u64,
        name: &str,
        decl: Option<&ToolDecl>,
        brain: &dyn Toolbox,
    ) -> Option<String> {
        lock(&self.inner.workflow)
            .as_mut()?
            .refusal(turn_id, name, decl, brain.tools())
    }
}

/// Whether the machine's table is `table`.
fn same(a: &StageTable, b: Option<&StageTable>) -> bool {
    b.is_some_and(|b| a.type_id == b.type_id)
}

/// A transition's call ended well (`result` is what it returned): the call moves.
pub(crate) fn moved(
    inner: &Inner,
    session: &Session,
    turn_id: u64,
    transition: Transition,
    result: &Value,
) {
    let note = match result {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mark = lock(&inner.conversation).mark();
    let change = {
        let mut machine = lock(&inner.workflow);
        let Some(m) = machine.as_mut() else {
            return;
        };
        m.answered();
        let Some(to) = m.target(&transition) else {
            return;
        };
        if m.moved_since_start() {
            // Brain code moved the call while the transition ran: its move stands (it may have
            // ended the call's way out).
            tracing::info!(
                "stage: a transition to {} ended after brain code moved the call to {}; the \
                 call stays there",
                m.name(to),
                m.name(m.current())
            );
            return;
        }
        m.move_now(to, transition.context, &note, (mark, mark))
    };
    if let Some(change) = change {
        changed(inner, session, Some(turn_id), change);
    }
}

/// A transition's call that ran ended without moving the call (an error, a timeout, a
/// cancellation, a guard's refusal): another may run.
pub(crate) fn unmoved(inner: &Inner) {
    if let Some(m) = lock(&inner.workflow).as_mut() {
        m.answered();
    }
}

/// What a change leaves behind: its line, hooks, metrics, TurnStep and recording.
pub(crate) fn changed(inner: &Inner, session: &Session, turn_id: Option<u64>, change: Change) {
    let (from, to, hooks) = {
        let machine = lock(&inner.workflow);
        let Some(m) = machine.as_ref() else {
            return;
        };
        (
            m.name(change.from),
            m.name(change.to),
            (
                m.setup().stages[change.from].on_exit.clone(),
                m.setup().stages[change.to].on_enter.clone(),
            ),
        )
    };
    tracing::info!("stage: {from} -> {to} (context {})", change.context.name());
    for hook in [hooks.0, hooks.1].into_iter().flatten() {
        let run = std::panic::AssertUnwindSafe(|| hook(change.from, change.to, session));
        if let Err(panic) = std::panic::catch_unwind(run) {
            tracing::error!(
                "a stage hook ({from} -> {to}) panicked: {}",
                crate::recover::panic_text(panic.as_ref())
            );
        }
    }
    crate::metrics::stage_transition(from, to);
    if let Some(tape) = session.tape() {
        tape.stage(turn_id.unwrap_or(0), from, to, change.context.name());
    }
    if inner.settings.report_steps
        && let Some(turn_id) = turn_id
    {
        let step = Step::new("transition", to)
            .provider(from)
            .count(change.context.name(), 1);
        // A transition that ran on after a barge-in reports after its turn: always.
        crate::voice::report::report(session, step, turn_id, true);
    }
}

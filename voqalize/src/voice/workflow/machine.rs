//! The call's stage: what each request declares and is told in it, which transitions it allows
//! now, and a transition's effects (hooks, TurnStep, metrics, recording) once its call ends well.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::{Setup, StageSetup};
use crate::model::history::EntryId;
use crate::model::layer::Layer;
use crate::recover::lock;
use crate::session::{Session, Step, Turn};
use crate::stages::{Context, StageDecl, StageTable, Stages, Transition};
use crate::tools::{ToolDecl, ToolSet, Toolbox};
use crate::voice::{Inner, Model};

/// A transition made, waiting to be applied to the conversation before the next request.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) context: Context,
    /// The carried note, bounded.
    pub(crate) note: String,
    /// Entries from this id on came after the move (the caller's next words): they stay.
    pub(crate) mark: EntryId,
}

/// A stage change, for its hooks and reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Change {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) context: Context,
}

/// Where the call is in its workflow.
pub(crate) struct Machine {
    setup: Arc<Setup>,
    current: usize,
    pending: Option<Pending>,
    /// The turn `moves` counts for, and the transitions started in it.
    turn: u64,
    moves: usize,
    /// Bumped at every change: a turn redeclares its tools when it moved.
    epoch: u64,
    /// The last instruction composed: the `Model`'s, the stage, and the result.
    composed: Option<(Option<Arc<str>>, usize, Arc<str>)>,
    /// The summaries made, newest last (a few: a call that goes back and forth reuses them).
    pub(super) summaries: Vec<(u64, Arc<str>)>,
}

impl Machine {
    pub(crate) fn new(setup: Arc<Setup>) -> Machine {
        Machine {
            current: setup.start,
            setup,
            pending: None,
            turn: 0,
            moves: 0,
            epoch: 0,
            composed: None,
            summaries: Vec::new(),
        }
    }

    pub(crate) fn is<S: Stages>(&self) -> bool {
        self.setup.table.is::<S>()
    }

    pub(crate) fn type_name(&self) -> &'static str {
        self.setup.table.type_name
    }

    pub(crate) fn current(&self) -> usize {
        self.current
    }

    pub(crate) fn setup(&self) -> &Setup {
        &self.setup
    }

    fn decl(&self, index: usize) -> &'static StageDecl {
        &self.setup.table.stages[index]
    }

    pub(crate) fn name(&self, index: usize) -> &'static str {
        self.decl(index).name
    }

    fn here(&self) -> &StageSetup {
        &self.setup.stages[self.current]
    }

    /// Whether the current stage declares `decl`: a `#[tool]` it names, a transition into a
    /// stage it leads to, an MCP tool of a toolset it names.
    pub(crate) fn allows(&self, decl: &ToolDecl) -> bool {
        let stage = self.decl(self.current);
        if let Some(server) = decl.mcp_server() {
            return stage.mcp.contains(&server);
        }
        match decl.transition() {
            Some(t) => self.target(&t).is_some_and(|to| stage.leads_to(to)),
            None => stage.tools.contains(&decl.name()),
        }
    }

    fn target(&self, t: &Transition) -> Option<usize> {
        self.setup.table.index_of(t.to)
    }

    /// Moves the call now (brain code, or a transition's call that ended well); `None` when
    /// `to` is no stage.
    pub(crate) fn move_now(
        &mut self,
        to: usize,
        context: Context,
        note: &str,
        mark: EntryId,
    ) -> Option<Change> {
        if to >= self.setup.table.stages.len() {
            return None;
        }
        let from = self.current;
        self.current = to;
        self.epoch += 1;
        self.pending = Some(Pending {
            from,
            to,
            context,
            note: crate::tools::shortened_to(note.trim(), self.setup.max_note_bytes),
            mark,
        });
        Some(Change { from, to, context })
    }

    pub(crate) fn take_pending(&mut self) -> Option<Pending> {
        self.pending.take()
    }

    /// The instruction for the current stage: the `Model`'s, then the stage's (the shared part
    /// first, so it stays the prompt's cached prefix). Composed once per change.
    pub(crate) fn instruction(&mut self, base: Option<Arc<str>>) -> Option<Arc<str>> {
        let stage = self.decl(self.current).instruction;
        if let Some((b, at, out)) = &self.composed
            && *at == self.current
            && same_text(b, &base)
        {
            return Some(out.clone());
        }
        let out: Arc<str> = match &base {
            Some(b) if !stage.is_empty() => format!("{b}\n\n{stage}").into(),
            Some(b) => b.clone(),
            None if stage.is_empty() => return None,
            None => stage.into(),
        };
        self.composed = Some((base, self.current, out.clone()));
        Some(out)
    }

    /// Why the call to `name` may not run now, in words the model reads: a transition past the
    /// turn's cap or while another is under way, a transition or tool the stage does not offer.
    /// `decl` is the tool, when the turn declared it; `table` the brain's tools.
    pub(crate) fn refusal(
        &mut self,
        turn_id: u64,
        name: &str,
        decl: Option<&ToolDecl>,
        table: &[ToolDecl],
    ) -> Option<String> {
        if self.turn != turn_id {
            (self.turn, self.moves) = (turn_id, 0);
        }
        let here = self.name(self.current);
        if let Some(t) = decl.and_then(ToolDecl::transition) {
            if let Some(p) = &self.pending {
                return Some(format!(
                    "'{name}' did not run: the call is already moving to {}; go on there",
                    self.name(p.to)
                ));
            }
            if self.moves >= self.setup.max_transitions_per_turn {
                return Some(format!(
                    "'{name}' did not run: this turn already moved the call {} times, the most a \
                     turn may; answer the caller in stage {here}",
                    self.moves
                ));
            }
            self.moves += 1;
            let _ = t;
            return None;
        }
        if decl.is_some() {
            return None;
        }
        let known = table.iter().find(|d| d.name() == name)?;
        let offered = self.offered();
        Some(match known.transition() {
            Some(t) => format!(
                "'{name}' did not run: it moves the call to {}, and stage {here} does not lead \
                 there ({offered})",
                t.to
            ),
            None => format!("'{name}' did not run: it is not a tool of stage {here} ({offered})"),
        })
    }

    /// What the current stage offers, for a refusal.
    fn offered(&self) -> String {
        let stage = self.decl(self.current);
        let to: Vec<&str> = stage.to.iter().map(|&i| self.name(i)).collect();
        let tools = if stage.tools.is_empty() {
            "no tools".to_owned()
        } else {
            format!("its tools: {}", stage.tools.join(", "))
        };
        if to.is_empty() {
            format!("{tools}; the call ends here")
        } else {
            format!("{tools}; it leads to {}", to.join(", "))
        }
    }
}

/// Whether two instructions are the same text (the same `Arc`, usually).
fn same_text(a: &Option<Arc<str>>, b: &Option<Arc<str>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        (None, None) => true,
        _ => false,
    }
}

/// `S`'s name without its module path.
pub(crate) fn short_name<S>() -> &'static str {
    let full = std::any::type_name::<S>();
    full.rsplit("::").next().unwrap_or(full)
}

impl Model {
    /// Readies the workflow for a turn of `brain`: follows the brain's stages when the `Model`
    /// was given none, and reports the stage the turn starts in.
    pub(crate) fn begin_stages(&self, brain: &dyn Toolbox, turn: &Turn) {
        let table = brain.stage_table();
        let mut machine = lock(&self.inner.workflow);
        match (&*machine, table) {
            (None, None) => return,
            (None, Some(table)) => {
                *machine = Some(Machine::new(Arc::new(Setup::of(table))));
            }
            (Some(m), table) if !same(&m.setup.table, table.as_ref()) => {
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
        if self.inner.settings.report_steps {
            let step = Step::new("stage", m.name(m.current)).provider(m.type_name());
            crate::voice::report::report(turn.session(), step, turn.id(), false);
        }
    }

    /// This turn's tools: the brain's visible tools the current stage offers (all of them
    /// without stages), then the MCP tools the stage takes.
    pub(crate) fn turn_tools(&self, brain: &dyn Toolbox, turn: &Turn) -> ToolSet {
        let machine = lock(&self.inner.workflow);
        #[cfg_attr(not(feature = "mcp"), allow(unused_mut))]
        let mut tools = match machine.as_ref() {
            Some(m) => ToolSet::from_table(brain.tools(), |t| m.allows(t) && brain.tool_visible(t)),
            None => brain.tools_for_turn(),
        };
        drop(machine);
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
            .is_none_or(|m| m.decl(m.current).mcp.contains(&name))
    }

    /// Bumped at every stage change.
    pub(crate) fn stage_epoch(&self) -> u64 {
        lock(&self.inner.workflow).as_ref().map_or(0, |m| m.epoch)
    }

    /// The layer the current stage's requests go to.
    pub(crate) fn layer_now(&self) -> Arc<dyn Layer> {
        lock(&self.inner.workflow)
            .as_ref()
            .and_then(|m| m.here().layer.as_ref().map(|l| l.0.clone()))
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
            .map(|m| m.name(m.current))
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

/// A transition's call ended well (`result` is what it returned): the call moves, unless a
/// move is under way already.
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
        let Some(to) = m.target(&transition) else {
            return;
        };
        m.move_now(to, transition.context, &note, mark)
    };
    if let Some(change) = change {
        changed(inner, session, Some(turn_id), change);
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
                m.setup.stages[change.from].on_exit.clone(),
                m.setup.stages[change.to].on_enter.clone(),
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

//! Where the call is in its workflow: the current stage, the transition waiting to be applied,
//! the turn's count of transitions, and what the stage declares and refuses.

use std::sync::Arc;

use super::{Setup, StageSetup};
use crate::model::history::EntryId;
use crate::stages::{Context, StageDecl, Stages, Transition};
use crate::tools::ToolDecl;

/// A transition made, waiting to be applied to the conversation before the next request.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) context: Context,
    /// The carried note, bounded.
    pub(crate) note: String,
    /// Entries from this id on stay (the caller's words that started a turn whose brain code
    /// moved the call, or those after the move).
    pub(crate) mark: EntryId,
    /// Entries from this id on were made after the move: when there is one, the caller spoke
    /// since, and the entered stage's line is not spoken.
    pub(crate) since: EntryId,
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
    /// Transitions allowed to run that have not been answered yet.
    running: usize,
    /// `epoch` when the running transition started: a change since (brain code moved the call)
    /// wins over its move.
    started_at: u64,
    /// Bumped at every change: a turn redeclares its tools when it moved.
    pub(super) epoch: u64,
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
            running: 0,
            started_at: 0,
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

    pub(super) fn decl(&self, index: usize) -> &'static StageDecl {
        &self.setup.table.stages[index]
    }

    pub(crate) fn name(&self, index: usize) -> &'static str {
        self.decl(index).name
    }

    pub(super) fn here(&self) -> &StageSetup {
        &self.setup.stages[self.current]
    }

    /// A transition starts its run (after the stage and the guards let it).
    pub(crate) fn started(&mut self) {
        self.moves += 1;
        self.running += 1;
        self.started_at = self.epoch;
    }

    /// Whether the call moved since the running transition started (brain code's
    /// [`Model::move_to`](crate::voice::Model::move_to)).
    pub(crate) fn moved_since_start(&self) -> bool {
        self.epoch != self.started_at
    }

    /// A transition that started was answered, however it ended.
    pub(crate) fn answered(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    /// The settings, shared (to read what the stage allows without holding the call's lock).
    pub(crate) fn shared_setup(&self) -> Arc<Setup> {
        self.setup.clone()
    }

    pub(super) fn target(&self, t: &Transition) -> Option<usize> {
        self.setup.table.index_of(t.to)
    }

    /// Moves the call now (brain code, or a transition's call that ended well), keeping the
    /// entries from `mark` on, the move made when the next entry would be `since`; `None` when
    /// `to` is no stage.
    pub(crate) fn move_now(
        &mut self,
        to: usize,
        context: Context,
        note: &str,
        (mark, since): (EntryId, EntryId),
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
            since,
        });
        Some(Change { from, to, context })
    }

    /// The move waiting to be applied, and the epoch it belongs to (it stays until
    /// [`take_pending`](Self::take_pending): a handoff cut short, by a barge-in during its
    /// summary, is applied again before the next request).
    pub(crate) fn peek_pending(&self) -> Option<(Pending, u64)> {
        self.pending.clone().map(|p| (p, self.epoch))
    }

    /// Takes the waiting move when it is still the one of `epoch` (no other move since).
    pub(crate) fn take_pending(&mut self, epoch: u64) -> bool {
        if self.epoch != epoch || self.pending.is_none() {
            return false;
        }
        self.pending = None;
        true
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
        if decl.and_then(ToolDecl::transition).is_some() {
            if let Some(p) = &self.pending {
                return Some(format!(
                    "'{name}' did not run: the call is already moving to {}; go on there",
                    self.name(p.to)
                ));
            }
            if self.running > 0 {
                return Some(format!(
                    "'{name}' did not run: another transition is running; one moves the call at \
                     a time"
                ));
            }
            if self.moves >= self.setup.max_transitions_per_turn {
                return Some(format!(
                    "'{name}' did not run: this turn already moved the call {} times, the most a \
                     turn may; answer the caller in stage {here}",
                    self.moves
                ));
            }
            return None;
        }
        if decl.is_some() {
            return None;
        }
        let known = table.iter().find(|d| d.name() == name)?;
        if allows(&self.setup, self.current, known) {
            // Called in the response that moved the call: the request declared the stage it
            // left, not this one.
            return Some(format!(
                "'{name}' did not run: it was not declared in this request (the call moved; \
                 stage {here} offers it now: call it again)"
            ));
        }
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

/// Whether stage `current` of `setup` declares `decl`: a `#[tool]` it names, a transition into a
/// stage it leads to, an MCP tool of a toolset it names.
pub(crate) fn allows(setup: &Setup, current: usize, decl: &ToolDecl) -> bool {
    let stage = &setup.table.stages[current];
    if let Some(server) = decl.mcp_server() {
        return stage.mcp.contains(&server);
    }
    match decl.transition() {
        Some(t) => setup
            .table
            .index_of(t.to)
            .is_some_and(|to| stage.leads_to(to)),
        None => stage.tools.contains(&decl.name()),
    }
}

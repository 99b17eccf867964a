//! A call's workflow in the voice core: which stage the call is in, the tools and instruction
//! each request gets from it, transitions, and what crosses a handoff (docs/model-brains.md,
//! "Stages and handoffs").
//!
//! The stages themselves are declared with `#[derive(Stages)]` and tied to a brain with
//! `#[brain(stages = ...)]` ([`crate::stages`]); a [`Model`] follows them with no setting at
//! all. [`Workflow`] adds what only run time can give: a stage's own provider or model, its
//! fallback and entry lines, hooks on entering and leaving, and the handoff's bounds.
//!
//! By job: this file holds the settings and the brain's handles (`Model::workflow`, `stage`,
//! `move_to`); `state.rs` the call's stage and what it declares and refuses; `machine.rs` the
//! workflow in each turn's requests and a transition's effects; `handoff.rs` what a
//! transition does to the conversation (a fresh start, a summary).

mod handoff;
mod machine;
mod state;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use handoff::hand_off;
pub(crate) use machine::{moved, unmoved};
pub(crate) use state::Machine;

use super::{Model, ModelLayer};
use crate::recover::lock;
use crate::session::Session;
use crate::stages::{Context, StageTable, Stages};

/// The most transitions one turn may start, unless [`Workflow::max_transitions_per_turn`] says
/// otherwise: 3. A model that calls transitions in a loop reads an error past it.
pub const MAX_TRANSITIONS_PER_TURN: usize = 3;

/// The most bytes of a transition's carried note kept, unless [`Workflow::max_note_bytes`] says
/// otherwise: 2 KiB.
pub const MAX_NOTE_BYTES: usize = 2 * 1024;

/// The most bytes of a handoff's summary kept, unless [`Workflow::max_summary_bytes`] says
/// otherwise: 4 KiB.
pub const MAX_SUMMARY_BYTES: usize = 4 * 1024;

/// How long a handoff's summary request may take, unless [`Workflow::summary_timeout`] says
/// otherwise: 8 s. Past it the carried note alone crosses.
pub const SUMMARY_TIMEOUT: Duration = Duration::from_secs(8);

/// The most bytes of heard history a summary request reads: the newest 32 KiB.
pub(crate) const MAX_TRANSCRIPT_BYTES: usize = 32 * 1024;

/// What the summary request is told when [`Workflow::summary_instruction`] does not say.
const SUMMARY_INSTRUCTION: &str = "You hand a phone call over to a colleague. From the \
transcript, write what they must know: who the caller is, what they want, what was agreed and \
what is still open. Plain sentences, at most 120 words, only facts the transcript states.";

/// A hook on a stage: called with the change, on the task that made it.
type Hook = Arc<dyn Fn(usize, usize, &Session) + Send + Sync>;

/// What a [`Workflow`] sets for one stage.
#[derive(Clone, Default)]
pub(crate) struct StageSetup {
    pub(crate) layer: Option<ModelLayer>,
    pub(crate) fallback: Option<String>,
    pub(crate) enter_line: Option<Arc<str>>,
    pub(crate) on_enter: Option<Hook>,
    pub(crate) on_exit: Option<Hook>,
}

/// A workflow's settings without their type, as the `Model` keeps them.
#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) table: StageTable,
    pub(crate) start: usize,
    pub(crate) stages: Vec<StageSetup>,
    pub(crate) summarizer: Option<ModelLayer>,
    pub(crate) summary_instruction: Arc<str>,
    pub(crate) max_transitions_per_turn: usize,
    pub(crate) max_note_bytes: usize,
    pub(crate) max_summary_bytes: usize,
    pub(crate) summary_timeout: Duration,
}

impl Setup {
    /// The settings every workflow over `table` starts from.
    pub(crate) fn of(table: StageTable) -> Setup {
        Setup {
            table,
            start: 0,
            stages: vec![StageSetup::default(); table.stages.len()],
            summarizer: None,
            summary_instruction: Arc::from(SUMMARY_INSTRUCTION),
            max_transitions_per_turn: MAX_TRANSITIONS_PER_TURN,
            max_note_bytes: MAX_NOTE_BYTES,
            max_summary_bytes: MAX_SUMMARY_BYTES,
            summary_timeout: SUMMARY_TIMEOUT,
        }
    }
}

impl fmt::Debug for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workflow")
            .field("stages", &self.table.type_name)
            .field("start", &self.table.stages[self.start].name)
            .field("max_transitions_per_turn", &self.max_transitions_per_turn)
            .field("max_note_bytes", &self.max_note_bytes)
            .field("max_summary_bytes", &self.max_summary_bytes)
            .field("summary_timeout", &self.summary_timeout)
            .finish_non_exhaustive()
    }
}

/// A stage change, as a hook sees it ([`Workflow::on_enter`], [`Workflow::on_exit`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct StageChange<'a, S> {
    /// The stage the call leaves.
    pub from: S,
    /// The stage the call enters.
    pub to: S,
    /// The call (to send the app a UI command, [`Session::dispatch`]).
    pub session: &'a Session,
}

/// What a brain's workflow sets at run time, beside what `#[derive(Stages)]` declares: each
/// stage's own provider or model, fallback line and entry line, hooks, and the handoff's bounds.
/// Give it to [`Model::workflow`]; a brain with `#[brain(stages = ...)]` needs none to follow
/// its stages.
///
/// ```
/// use voqalize::prelude::*;
/// use voqalize::model::Gemini;
///
/// /// The support line.
/// #[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
/// enum Support {
///     /// Find out what the caller needs.
///     #[stage(to(Billing))]
///     Triage,
///     /// Sort out the caller's bill.
///     #[stage(end)]
///     Billing,
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cheap = Gemini::builder("key").model("gemini-2.5-flash-lite").build()?;
/// let strong = Gemini::builder("key").model("gemini-2.5-pro").build()?;
/// let model = Model::new(cheap).instruction("You answer Acme's phone line.").workflow(
///     Workflow::<Support>::new()
///         .layer(Support::Billing, strong)
///         .enter_line(Support::Billing, "Let's look at your bill.")
///         .fallback_line(Support::Billing, "Sorry, billing is slow today. One more time?"),
/// );
/// # let _ = model; Ok(()) }
/// ```
pub struct Workflow<S: Stages> {
    setup: Setup,
    stages: PhantomData<fn() -> S>,
}

impl<S: Stages> Default for Workflow<S> {
    fn default() -> Self {
        Workflow::new()
    }
}

impl<S: Stages> fmt::Debug for Workflow<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.setup.fmt(f)
    }
}

impl<S: Stages> Workflow<S> {
    /// `S`'s stages as declared: a call starts in the first, every stage on the `Model`'s layer
    /// and fallback line, no entry lines or hooks, summaries by the stage's own layer, and the
    /// bounds at their defaults ([`MAX_TRANSITIONS_PER_TURN`], [`MAX_NOTE_BYTES`],
    /// [`MAX_SUMMARY_BYTES`], [`SUMMARY_TIMEOUT`]).
    pub fn new() -> Self {
        Workflow {
            setup: Setup::of(StageTable::of::<S>()),
            stages: PhantomData,
        }
    }

    fn stage(mut self, stage: S, change: impl FnOnce(&mut StageSetup)) -> Self {
        if let Some(setup) = self.setup.stages.get_mut(stage.index()) {
            change(setup);
        }
        self
    }

    /// Where a call starts (default: the first stage declared), e.g. a returning caller already
    /// verified.
    #[must_use]
    pub fn start(mut self, stage: S) -> Self {
        self.setup.start = stage.index();
        self
    }

    /// The provider or model `stage`'s requests go to: a cheap model for triage, a strong one for
    /// booking. The history moves with the call (each layer renders it for its provider).
    #[must_use]
    pub fn layer(self, stage: S, layer: impl Into<ModelLayer>) -> Self {
        let layer = layer.into();
        self.stage(stage, |s| s.layer = Some(layer))
    }

    /// The line spoken when a request of `stage` fails before anything was said (instead of the
    /// `Model`'s [`fallback_line`](Model::fallback_line)).
    #[must_use]
    pub fn fallback_line(self, stage: S, line: impl Into<String>) -> Self {
        let line = line.into();
        self.stage(stage, |s| s.fallback = Some(line))
    }

    /// A line spoken when the call enters `stage`, before the model speaks there ("Let's book
    /// you in."): the model reads it as its own words. Not spoken when the caller has spoken
    /// since the move (a transition that ran on after a barge-in): its moment has passed.
    #[must_use]
    pub fn enter_line(self, stage: S, line: impl Into<String>) -> Self {
        let line: Arc<str> = line.into().into();
        self.stage(stage, |s| {
            s.enter_line = (!line.trim().is_empty()).then_some(line);
        })
    }

    /// Calls `hook` whenever the call enters `stage` (after the transition's result is filed):
    /// show a screen with a UI command, start a timer. It runs where the transition ends (the
    /// turn's task, or the run's after a barge-in): keep it cheap. A panic in it is logged and
    /// forgotten.
    #[must_use]
    pub fn on_enter(
        self,
        stage: S,
        hook: impl Fn(&StageChange<'_, S>) + Send + Sync + 'static,
    ) -> Self {
        let hook = typed(hook);
        self.stage(stage, |s| s.on_enter = Some(hook))
    }

    /// Calls `hook` whenever the call leaves `stage`, before the entered stage's
    /// [`on_enter`](Self::on_enter).
    #[must_use]
    pub fn on_exit(
        self,
        stage: S,
        hook: impl Fn(&StageChange<'_, S>) + Send + Sync + 'static,
    ) -> Self {
        let hook = typed(hook);
        self.stage(stage, |s| s.on_exit = Some(hook))
    }

    /// The layer that writes handoff summaries (`context = summary`); default: the layer of the
    /// stage the call leaves.
    #[must_use]
    pub fn summarizer(mut self, layer: impl Into<ModelLayer>) -> Self {
        self.setup.summarizer = Some(layer.into());
        self
    }

    /// What the summary request is told (its system instruction); the transcript of what the
    /// caller heard is its one user message.
    #[must_use]
    pub fn summary_instruction(mut self, text: impl Into<String>) -> Self {
        self.setup.summary_instruction = text.into().into();
        self
    }

    /// The most transitions one turn may start (default [`MAX_TRANSITIONS_PER_TURN`], 3; 1 at
    /// least): past it a transition is not run and the model reads why.
    #[must_use]
    pub fn max_transitions_per_turn(mut self, n: usize) -> Self {
        self.setup.max_transitions_per_turn = n.max(1);
        self
    }

    /// The most bytes of a transition's carried note kept (default [`MAX_NOTE_BYTES`], 2 KiB; 64
    /// at least): past it the note is cut, and says so.
    #[must_use]
    pub fn max_note_bytes(mut self, bytes: usize) -> Self {
        self.setup.max_note_bytes = bytes.max(64);
        self
    }

    /// The most bytes of a summary kept (default [`MAX_SUMMARY_BYTES`], 4 KiB; 256 at least): a
    /// longer one is cut there. Its response is read to four times that (16 KiB at least): one
    /// event past it fails the summary, and the note crosses alone.
    #[must_use]
    pub fn max_summary_bytes(mut self, bytes: usize) -> Self {
        self.setup.max_summary_bytes = bytes.max(256);
        self
    }

    /// How long the summary request may take (default [`SUMMARY_TIMEOUT`], 8 s): the caller
    /// waits for it. Past it the carried note alone crosses.
    #[must_use]
    pub fn summary_timeout(mut self, timeout: Duration) -> Self {
        self.setup.summary_timeout = timeout;
        self
    }
}

/// A typed hook, kept without its type.
fn typed<S: Stages>(hook: impl Fn(&StageChange<'_, S>) + Send + Sync + 'static) -> Hook {
    Arc::new(move |from, to, session| {
        if let (Some(from), Some(to)) = (S::from_index(from), S::from_index(to)) {
            hook(&StageChange { from, to, session });
        }
    })
}

/// Why [`Model::move_to`] did not move the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
    /// The `Model` follows no stages yet: give it a [`Workflow`], or let it answer a turn of a
    /// `#[brain(stages = ...)]` brain first.
    #[error(
        "this Model follows no stages: give it a Workflow, or move the call once it answered a turn"
    )]
    NoStages,
    /// The `Model` follows other stages than the ones named.
    #[error("this Model follows the stages of `{follows}`, not `{named}`")]
    OtherStages {
        /// The enum the `Model` follows.
        follows: &'static str,
        /// The enum named.
        named: &'static str,
    },
}

impl Model {
    /// Follows `workflow`'s stages with its settings (see [`Workflow`]). The brain that this
    /// `Model` answers must declare the same stages (`#[brain(stages = ...)]`): a turn of a brain
    /// with other stages or none logs one error and, that turn and every later one, declares the
    /// brain's tools as they are.
    #[must_use]
    pub fn workflow<S: Stages>(self, workflow: Workflow<S>) -> Model {
        let setup = Arc::new(workflow.setup);
        self.with(|s| s.workflow = Some(setup))
    }

    /// The stage the call is in, when this `Model` follows the stages of `S`.
    pub fn stage<S: Stages>(&self) -> Option<S> {
        let machine = lock(&self.inner.workflow);
        let machine = machine.as_ref()?;
        if !machine.is::<S>() {
            return None;
        }
        S::from_index(machine.current())
    }

    /// Moves the call to `stage` from brain code (an app event, a check the brain made), with
    /// `context` deciding what crosses and `note` the carried note. It applies before the next
    /// request; the model reads the new stage's instruction and tools from then on. Brain code
    /// may move the call to any stage, whatever the current one's `to(..)` says, and its move
    /// stands: a transition running meanwhile ends without moving the call.
    ///
    /// # Errors
    /// [`StageError::NoStages`] when this `Model` follows no stages yet,
    /// [`StageError::OtherStages`] when it follows another enum's.
    pub fn move_to<S: Stages>(
        &self,
        stage: S,
        context: Context,
        note: &str,
    ) -> Result<(), StageError> {
        // In a turn, the caller's words that started it stay; elsewhere, what comes next. Read
        // before the call's stage is locked (a request being built holds the conversation, then
        // the stage).
        let call = crate::session::context::current();
        let turn_id = call.as_ref().and_then(|c| c.turn);
        let (mark, since) = {
            let conversation = self.conversation();
            let since = conversation.mark();
            match turn_id {
                Some(_) => (conversation.exchange_start(), since),
                None => (since, since),
            }
        };
        let mut machine = lock(&self.inner.workflow);
        let Some(m) = machine.as_mut() else {
            return Err(StageError::NoStages);
        };
        if !m.is::<S>() {
            return Err(StageError::OtherStages {
                follows: m.type_name(),
                named: StageTable::of::<S>().type_name(),
            });
        }
        let change = m.move_now(stage.index(), context, note, (mark, since));
        drop(machine);
        if let (Some(change), Some(call)) = (change, call) {
            machine::changed(&self.inner, &call.session, turn_id, change);
        }
        Ok(())
    }
}

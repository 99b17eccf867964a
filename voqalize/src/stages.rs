//! Stages of a call: a workflow the model walks through, declared as an enum.
//!
//! A clinic line verifies the caller, then books, then reads the booking back. Each step is a
//! *stage*: its own instruction, the subset of the brain's tools the model may call there, and the
//! stages it may hand the call to. `#[derive(Stages)]` declares them on a fieldless enum;
//! `#[brain(stages = Clinic)]` ties them to a brain, whose `#[transition(to = ...)]` methods are
//! the tools that move the call. The voice core ([`Model`](crate::voice::Model)) declares, in each
//! request, exactly the current stage's tools and transitions.
//!
//! ```
//! use voqalize::prelude::*;
//!
//! /// The clinic line, stage by stage.
//! #[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
//! enum Clinic {
//!     /// Ask for the caller's name and date of birth, and check them with `find_patient`.
//!     #[stage(tools(find_patient), to(Booking))]
//!     Verify,
//!     /// Offer the open slots and book the one the caller picks.
//!     #[stage(tools(open_slots, book), to(Confirm))]
//!     Booking,
//!     /// Read the booking back and say goodbye.
//!     #[stage(end)]
//!     Confirm,
//! }
//!
//! /// Who the caller is, once checked.
//! #[json_type]
//! struct Verified {
//!     /// The patient's id.
//!     patient: String,
//! }
//!
//! struct Desk;
//!
//! #[brain(stages = Clinic)]
//! impl Desk {
//!     /// Look a patient up by name and date of birth (YYYY-MM-DD).
//!     #[tool]
//!     async fn find_patient(&self) -> &'static str { "p-17" }
//!     /// The slots open this week.
//!     #[tool]
//!     async fn open_slots(&self) -> Vec<&'static str> { vec!["Tue 10:00"] }
//!     /// Book a slot.
//!     #[tool]
//!     async fn book(&self) -> &'static str { "booked" }
//!     /// The caller is verified: move on to booking.
//!     #[transition(to = Booking, context = fresh)]
//!     async fn verified(&self, who: Verified) -> String {
//!         format!("The caller is patient {}.", who.patient)
//!     }
//!     /// The slot is booked: read it back.
//!     #[transition(to = Confirm)]
//!     async fn booked(&self) -> &'static str { "" }
//! }
//!
//! assert_eq!(Clinic::STAGES[0].name(), "Verify");
//! assert_eq!(Clinic::Booking.name(), "Booking");
//! ```
//!
//! # `#[derive(Stages)]`
//!
//! *Grammar*: on a fieldless enum without generics (explicit discriminants are allowed: a stage's
//! place is its place in the declaration). Each variant is a
//! stage; its doc comment is the stage's instruction (sent after the `Model`'s own, so the shared
//! part stays the prompt's cached prefix), and `#[stage(...)]` says the rest:
//! `tools(a, b)` (the brain's `#[tool]`s the model may call there), `to(Stage, ...)` (the stages
//! it may hand the call to: every `#[transition]` into one of them is declared there), `mcp(name,
//! ...)` (the MCP toolsets, by the name each was given, whose tools join the stage), and `end` (a
//! stage the call may end in, with no way out). On the enum, `#[stages(every(a, b))]` names tools
//! offered in every stage (hanging up, a human handover). The first variant is where a call
//! starts.
//!
//! *Checked at compile time*: a missing doc comment, a `to(..)` naming no variant (with the
//! closest name), a stage with no `to(..)` that is not `end`, and a stage no transition can reach
//! from the first are errors of the derive; with `#[brain(stages = ...)]`, a stage naming a tool the
//! brain does not declare, a `#[tool]` in no stage, a `#[transition]` to a stage that does not
//! exist or that no stage's `to(..)` names, are errors of the brain.
//!
//! # `#[transition]`
//!
//! `#[transition(to = Stage)]` or `#[transition(to = Stage, context = keep|fresh|summary, ...)]`
//! marks a method of a `#[brain(stages = ...)]` block as a tool that moves the call: written like
//! a `#[tool]` (a doc comment, `&self`, at most one argument struct, the same options but
//! `background`), its return value is the *carried note* handed to the next stage, and an `Err`
//! refuses the move (the model reads why). The model reads its result at once
//! (`#[needs_result_now]` is implied) and goes on in the new stage. What crosses the handoff is the
//! transition's [`Context`]: `keep` (default), `fresh` or `summary`.

use std::any::TypeId;
use std::fmt;

/// A workflow's stages: `#[derive(Stages)]` implements it on a fieldless enum (see the
/// [module](self) for the grammar). Written by hand it loses the derive's checks: prefer the
/// derive.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `#[derive(Stages)]` enum, so it cannot be a brain's stages",
    label = "not a `#[derive(Stages)]` enum",
    note = "declare the stages on a fieldless enum, one variant a stage: `#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)] enum {Self} {{ ... }}` (see `voqalize::stages`)"
)]
pub trait Stages: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// Every stage, in declaration order; the first is where a call starts.
    const STAGES: &'static [StageDecl];

    /// The stage's place in [`STAGES`](Self::STAGES).
    fn index(self) -> usize;

    /// The stage at `index` in [`STAGES`](Self::STAGES), if there is one.
    fn from_index(index: usize) -> Option<Self>;

    /// The stage's declaration.
    fn decl(self) -> &'static StageDecl {
        &Self::STAGES[self.index()]
    }

    /// The stage's name: the variant's, as written (what TurnSteps, metrics and logs show).
    fn name(self) -> &'static str {
        self.decl().name
    }

    /// The tools the stages name, each with the error a brain that lacks it gets (what
    /// `#[brain(stages = ...)]` checks at compile time).
    #[doc(hidden)]
    const __TOOLS: &'static [(&'static str, &'static str)];
}

/// One stage, as `#[derive(Stages)]` declares it.
#[derive(Debug)]
pub struct StageDecl {
    pub(crate) name: &'static str,
    pub(crate) instruction: &'static str,
    pub(crate) tools: &'static [&'static str],
    pub(crate) to: &'static [usize],
    pub(crate) mcp: &'static [&'static str],
    pub(crate) end: bool,
}

impl StageDecl {
    /// What `#[derive(Stages)]` generates. Not an API.
    #[doc(hidden)]
    pub const fn __new(
        name: &'static str,
        instruction: &'static str,
        tools: &'static [&'static str],
        to: &'static [usize],
        mcp: &'static [&'static str],
        end: bool,
    ) -> StageDecl {
        StageDecl {
            name,
            instruction,
            tools,
            to,
            mcp,
            end,
        }
    }

    /// The variant's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The stage's instruction: the variant's doc comment.
    pub fn instruction(&self) -> &'static str {
        self.instruction
    }

    /// The `#[tool]`s the model may call in this stage (its `tools(..)` and the enum's
    /// `every(..)`).
    pub fn tools(&self) -> &'static [&'static str] {
        self.tools
    }

    /// The stages this one may hand the call to, by their place in [`Stages::STAGES`].
    pub fn to(&self) -> &'static [usize] {
        self.to
    }

    /// The MCP toolsets whose tools join this stage, by the name each was given.
    pub fn mcp(&self) -> &'static [&'static str] {
        self.mcp
    }

    /// Whether a call may end here (`#[stage(end)]`).
    pub fn is_end(&self) -> bool {
        self.end
    }

    /// Whether this stage may hand the call to the stage at `index`.
    pub fn leads_to(&self, index: usize) -> bool {
        self.to.contains(&index)
    }
}

/// What crosses a handoff into the next stage (`#[transition(context = ...)]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Context {
    /// `keep` (default): the conversation goes on as it is, cut to what the caller heard as
    /// always.
    #[default]
    Keep,
    /// `fresh`: the conversation starts again from one note: the transition's carried note (its
    /// return value), bounded.
    Fresh,
    /// `summary`: the conversation starts again from a summary of what the caller heard, made by
    /// a model request (bounded, cached per handoff), with the carried note after it; if the
    /// summary request fails, the carried note alone, as `fresh`.
    Summary,
}

impl Context {
    /// `keep`, `fresh` or `summary`: what recordings and logs show.
    pub fn name(self) -> &'static str {
        match self {
            Context::Keep => "keep",
            Context::Fresh => "fresh",
            Context::Summary => "summary",
        }
    }
}

/// Where a `#[transition]` tool moves the call, and what crosses ([`ToolDecl::transition`](
/// crate::tools::ToolDecl::transition)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The stage it moves the call to, by its variant's name.
    pub to: &'static str,
    /// What crosses the handoff.
    pub context: Context,
}

/// A brain's stages without their type: what `#[brain(stages = ...)]` hands the voice core.
#[derive(Debug, Clone, Copy)]
pub struct StageTable {
    pub(crate) stages: &'static [StageDecl],
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
}

impl StageTable {
    /// The table of `S`.
    pub fn of<S: Stages>() -> StageTable {
        StageTable {
            stages: S::STAGES,
            type_id: TypeId::of::<S>(),
            type_name: short_type_name::<S>(),
        }
    }

    /// The stages, in declaration order.
    pub fn stages(&self) -> &'static [StageDecl] {
        self.stages
    }

    /// The place of the stage called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// Whether these are the stages of `S`.
    pub fn is<S: Stages>(&self) -> bool {
        self.type_id == TypeId::of::<S>()
    }

    /// The enum's name, without its path.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }
}

/// `S`'s name without its module path.
fn short_type_name<S>() -> &'static str {
    let full = std::any::type_name::<S>();
    full.rsplit("::").next().unwrap_or(full)
}

/// The compile-time checks `#[brain(stages = ...)]` generates (const evaluation: a failed check
/// is a compile error carrying its message).
#[doc(hidden)]
pub mod checks {
    use super::StageDecl;

    /// Whether some stage may hand the call to the stage at `to` (the brain's check of each
    /// transition's target, which panics with its message in its own constant).
    pub const fn enters(stages: &[StageDecl], to: usize) -> bool {
        let mut i = 0;
        while i < stages.len() {
            let mut j = 0;
            while j < stages[i].to.len() {
                if stages[i].to[j] == to {
                    return true;
                }
                j += 1;
            }
            i += 1;
        }
        false
    }
}

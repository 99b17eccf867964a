//! Support for the code that `#[brain]`, `#[derive(Action)]` and `#[derive(AppEvent)]` generate,
//! reached as `::voqalize::__private` (which re-exports everything here). Not a public API.
//!
//! | file | what it holds |
//! |---|---|
//! | `table.rs` | the tool table: `ToolInfo`, `tool_table`, the dispatcher's helpers |
//! | `args.rs` | the argument traits and the compile-time argument-kind check |
//! | `returns.rs` | a tool's result as JSON: `ToolOutput`, `ToolFailure`, the return-type `Probe` |
//! | `actions.rs` | `#[derive(Action)]` and `#[derive(AppEvent)]` |
//! | `tools/private.rs` | the entry points whose bounds compile errors cite (see there) |
//!
//! The traits here exist for their compile errors: each carries a
//! `#[diagnostic::on_unimplemented]` message, and their blanket impls are
//! `#[diagnostic::do_not_recommend]`, so a missing `Deserialize`, `JsonSchema`, `Serialize` or
//! `Display` is reported as one sentence on the user's type.

mod actions;
mod args;
mod returns;
mod table;

pub use crate::stages::checks as stage_checks;
pub use crate::stages::{Context, StageTable, Transition};
pub use crate::tools::private::{PlainKind, ResultKind, declare, parse_args};
pub use crate::typescript::{ActionSchema, action_payload};
pub use actions::*;
pub use args::*;
pub use returns::*;
pub use table::*;

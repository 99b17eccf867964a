//! `voqalize types`: the TypeScript unions of a crate's [`Action`]s and [`AppEvent`]s, for the
//! app's front end.
//!
//! # Cargo feature
//!
//! The generator (`TypeScript`, `TypesError`) is behind the `typescript` feature of the
//! `voqalize` crate, off by default; turn it on in the crate (or the binary) that writes the
//! TypeScript:
//!
//! ```toml
//! [dependencies]
//! voqalize = { version = "0.1", features = ["typescript"] }
//! ```
//!
//! Without the feature this module holds only [`Payloads`] and [`PayloadCollector`], which
//! `#[derive(Action)]` and `#[derive(AppEvent)]` implement on every type whatever the features.
//!
//! # The `voqalize` command
//!
//! A small binary is the crate's `voqalize` command. Every `#[derive(Action)]` and
//! `#[derive(AppEvent)]` type registers itself as it is compiled, so `discover()` finds them all
//! and a type added later cannot be forgotten:
//!
#![cfg_attr(feature = "typescript", doc = "```no_run")]
#![cfg_attr(not(feature = "typescript"), doc = "```ignore")]
//! // src/bin/voqalize.rs
//! use voqalize::prelude::*;
//! use voqalize::typescript::TypeScript;
//! # #[json_type] #[derive(Action)] struct ShowSection { name: String }
//! # #[derive(AppEvent)] enum UiEvent { Tapped { id: u32 } }
//!
//! fn main() -> std::process::ExitCode {
//!     TypeScript::new().discover().main()
//! }
//! ```
//!
//! # Discovery
//!
//! `discover()` adds every derived type linked into the binary, sorted by wire name (actions
//! first, then app events). Types whose `Action` or `AppEvent` impl is written by hand do not
//! register: add them with `.action::<T>()` / `.event::<T>()`, which also pick types one by one
//! when you want only some. A binary whose types live in another crate of yours must link it:
//! `use your_brain_crate as _;` in its main file. Finding nothing at all is an error
//! (`TypesError::NothingDiscovered`) rather than a module with no command and no event, unless
//! `.allow_empty()` says so.
//!
//! ```text
//! cargo run --bin voqalize -- types                       # print to stdout
//! cargo run --bin voqalize -- types --out app/voqalize.ts # write the file
//! cargo run --bin voqalize -- types --out app/voqalize.ts --check   # CI: fail when stale
//! cargo run --bin voqalize -- --help                      # the usage
//! ```
//!
//! The usage and the `--check` failure name the program the way Cargo runs it, from its file name
//! (`--example NAME` when it is an example):
//!
//! ```text
//! voqalize types: app/voqalize.ts is out of date: write it again with `cargo run --bin voqalize -- types --out app/voqalize.ts`
//! ```
//!
//! ## Keeping plain `cargo run` working
//!
//! A second binary next to the brain's `src/main.rs` makes a bare `cargo run` fail ("could not
//! determine which binary to run"): Cargo no longer knows which one to start. Either name the
//! default in `Cargo.toml`,
//!
//! ```toml
//! [package]
//! name = "my-brain"
//! default-run = "my-brain"   # `cargo run` starts src/main.rs; the generator is `--bin voqalize`
//! ```
//!
//! or make the generator an example instead of a binary: `examples/voqalize-types.rs` with the
//! same `main`, run as `cargo run --example voqalize-types -- types --out app/voqalize.ts`. An
//! example is not a binary of the package, so `cargo run` is unaffected, and the `typescript`
//! feature can then be turned on in `[dev-dependencies]` only, leaving it out of the brain's own
//! build:
//!
//! ```toml
//! [dependencies]
//! voqalize = "0.1"
//!
//! [dev-dependencies]
//! voqalize = { version = "0.1", features = ["typescript"] }
//! ```
//!
//! The output mirrors the wire: `Action` is the union of the `data` of every RTVI `ui-command` the
//! brain can send (`{command, payload}`, every payload field present, `null` included), and
//! `AppEvent` the union of the `data` of every `ui-event` it reads (`{event, payload}`, optional
//! fields marked `?`). Payload types and the types they use are exported by name, with their doc
//! comments. The shapes come from each type's JSON Schema: `#[derive(Action)]` needs `JsonSchema`
//! on the action type (`#[json_type]` gives it), `#[derive(AppEvent)]` generates its own.
//!
//! # What the file holds
//!
//! After the payload types and the two unions, each union gets its helpers (shown for `Action`;
//! `AppEvent` gets the same with `Name` for `Command`):
//!
//! | declaration | what it is |
//! | --- | --- |
//! | `ActionCommand` | the union of the wire names |
//! | `ActionOf<"show_section">` | one member of the union, by wire name |
//! | `ACTION_COMMANDS` | every wire name, a `const` array in the order the types were added |
//! | `isActionCommand(name)` | whether a string is one of those names (a type guard) |
//! | `asAction(data)` | a message's `data` as an `Action`, `null` for a command this file does not know |
//! | `isAction.show_section(action)` | a type guard per member |
//! | `makeAction.show_section(payload)` | a constructor per member: `{ command, payload }` |
//!
//! and the file ends with `sendAppEvent(send, event)`, which hands an event to the app's
//! `(event, payload) => void` sender of `ui-event` messages (nothing while that is `null` or
//! `undefined`), and `assertNever(value)`, for the `default` of a `switch` that must handle every
//! command:
//!
//! ```ts
//! function apply(action: Action) {
//!   switch (action.command) {
//!     case "show_section": return showSection(action.payload.name);
//!     default: return assertNever(action); // a new command fails to compile here
//!   }
//! }
//! sendAppEvent(send, makeAppEvent.tapped({ id: 3 }));
//! ```
//!
//! The unions' names are yours to choose:
//! `TypeScript::new().union_names("UiCommand", "UiEvent")` gives `UiCommand`, `UiCommandCommand`,
//! `UI_COMMAND_COMMANDS`, `makeUiCommand`... and `UiEvent`, `UiEventName`, `UI_EVENT_NAMES`,
//! `sendUiEvent`... A name that is not a TypeScript identifier, or a declaration two things
//! would share (a payload type called `Action` under the default names), is an error rather than a
//! broken file. The output depends only on the types and the order they were added, so the
//! `--check` of CI is stable.
//!
//! [`Action`]: crate::actions::Action
//! [`AppEvent`]: crate::actions::AppEvent

use schemars::JsonSchema;
use schemars::generate::SchemaGenerator;
use serde_json::Value;

#[cfg(feature = "typescript")]
mod cli;
#[cfg(feature = "typescript")]
mod emit;
#[cfg(feature = "typescript")]
mod generate;

#[cfg(feature = "typescript")]
pub use generate::{TypeScript, TypesError};

/// The payload shapes of an [`Action`](crate::actions::Action) or
/// [`AppEvent`](crate::actions::AppEvent) type, by wire name. Implemented by
/// `#[derive(Action)]` and `#[derive(AppEvent)]`.
pub trait Payloads {
    /// Adds the JSON Schema of each payload to `out`, by wire name: what `voqalize types` writes
    /// the TypeScript from. A type whose `Action` or `AppEvent` impl is written by hand implements
    /// it with [`action_payload`] for each of its wire names.
    fn payloads(out: &mut PayloadCollector<'_>);
}

/// A type `#[derive(Action)]` or `#[derive(AppEvent)]` registered itself for
/// [`TypeScript::discover`](self#discovery): its wire names and payload shapes. Not a public API.
#[doc(hidden)]
// Read by `TypeScript::discover` only, which the `typescript` feature brings; the derives register
// every type either way.
#[cfg_attr(not(feature = "typescript"), allow(dead_code))]
pub struct Discovered {
    event: bool,
    names: &'static [&'static str],
    payloads: fn(&mut PayloadCollector<'_>),
}

impl Discovered {
    /// An action type.
    pub const fn action(
        names: &'static [&'static str],
        payloads: fn(&mut PayloadCollector<'_>),
    ) -> Self {
        Discovered {
            event: false,
            names,
            payloads,
        }
    }

    /// An app event type.
    pub const fn event(
        names: &'static [&'static str],
        payloads: fn(&mut PayloadCollector<'_>),
    ) -> Self {
        Discovered {
            event: true,
            names,
            payloads,
        }
    }
}

inventory::collect!(Discovered);

// What `#[derive(Action)]`'s generated code names. Defined here, beside `Payloads`, so that the
// compile error for an action without `JsonSchema` names them by their bare names; re-exported
// through `__private` for the generated code.

/// The payload schema of an action, for `voqalize types`: every `schemars::JsonSchema` type
/// (what `#[json_type]` derives) has one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `JsonSchema`, which `#[derive(Action)]` needs",
    label = "`voqalize types` describes the action's payload to the app from its JSON Schema",
    note = "put `#[json_type]` on the type (or derive `schemars::JsonSchema`, schemars 1.x)"
)]
pub trait ActionSchema {
    /// Adds the payload.
    fn add_to(out: &mut PayloadCollector<'_>, name: &'static str);
}

#[diagnostic::do_not_recommend]
impl<T: schemars::JsonSchema> ActionSchema for T {
    fn add_to(out: &mut PayloadCollector<'_>, name: &'static str) {
        out.add::<T>(name);
    }
}

/// Adds the payload schema of `A` under the wire name `name`: what `#[derive(Action)]` writes in
/// [`Payloads::payloads`], and what a hand-written impl writes for each of its wire names.
pub fn action_payload<A: ActionSchema>(out: &mut PayloadCollector<'_>, name: &'static str) {
    A::add_to(out, name);
}

/// Where [`Payloads`] puts its schemas.
pub struct PayloadCollector<'a> {
    generator: &'a mut SchemaGenerator,
    found: Vec<(&'static str, Value)>,
}

impl PayloadCollector<'_> {
    pub(crate) fn add<T: JsonSchema + ?Sized>(&mut self, name: &'static str) {
        let schema = self.generator.subschema_for::<T>().to_value();
        self.found.push((name, schema));
    }
}

#[cfg(all(test, feature = "typescript"))]
mod tests;

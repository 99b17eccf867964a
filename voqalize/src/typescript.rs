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
//! when you want only some.
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
pub use generate::{TypeScript, TypesError};

/// The payload shapes of an [`Action`](crate::actions::Action) or
/// [`AppEvent`](crate::actions::AppEvent) type, by wire name. Implemented by
/// `#[derive(Action)]` and `#[derive(AppEvent)]`.
pub trait Payloads {
    #[doc(hidden)]
    fn __payloads(out: &mut PayloadCollector<'_>);
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

#[doc(hidden)]
/// The payload schema of an action, for `voqalize types`.
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

#[doc(hidden)]
/// Adds an action's payload (used by `#[derive(Action)]`).
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

/// The generator (the `typescript` feature).
#[cfg(feature = "typescript")]
mod generate {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::io::Write;
    use std::path::PathBuf;
    use std::process::ExitCode;

    use schemars::generate::SchemaSettings;
    use serde_json::{Map, Value};

    use super::{PayloadCollector, Payloads};
    use crate::actions::{Action, AppEvent};
    use crate::tools::schema::reference::SchemaRef;

    /// What can go wrong in `voqalize types`.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum TypesError {
        /// Two registered actions share a wire name.
        #[error("two actions are named {0}: the app could not tell them apart")]
        DuplicateAction(String),
        /// Two registered app events share a wire name.
        #[error("two app events are named {0}: the brain could not tell them apart")]
        DuplicateEvent(String),
        /// A name given to [`TypeScript::union_names`] is not a TypeScript identifier, or is a
        /// keyword or built-in type (`string`, `default`...).
        #[error("`{0}` cannot name a union: it is not a TypeScript identifier, or is reserved")]
        BadUnionName(String),
        /// Two declarations of the module would share a name (a payload type named like a union
        /// or one of its helpers, or two union names that overlap).
        #[error(
            "two declarations would be named `{0}`: rename the payload type, or pick other union \
             names with `TypeScript::union_names`"
        )]
        NameTaken(String),
        /// The command line was not understood (the message ends with the usage).
        #[error("{0}")]
        Usage(String),
        /// Reading or writing the output file failed.
        #[error("could not read or write {path}")]
        Io {
            /// The file.
            path: PathBuf,
            /// The failure.
            #[source]
            source: std::io::Error,
        },
        /// `--check`: the file is not what `voqalize types` would write now.
        #[error("{path} is out of date: write it again with `{command}`")]
        Stale {
            /// The file.
            path: PathBuf,
            /// The command that writes it, e.g.
            /// `cargo run --bin voqalize -- types --out app/voqalize.ts`.
            command: String,
        },
    }

    /// How the user runs this program, e.g. `cargo run --bin voqalize --`: named in the usage and
    /// in the `--check` failure.
    pub(super) fn invocation(argv0: Option<&str>) -> String {
        let path = std::path::Path::new(argv0.unwrap_or("voqalize"));
        let name = path
            .file_stem()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("voqalize");
        // Cargo puts examples in `target/<profile>/examples/`.
        let kind = match path.parent().and_then(|p| p.file_name()) {
            Some(dir) if dir == "examples" => "example",
            _ => "bin",
        };
        format!("cargo run --{kind} {name} --")
    }

    fn usage(invocation: &str) -> String {
        format!(
            "usage: {invocation} types [--out FILE [--check]]\n\
             \n\
             Writes the TypeScript of the brain's UI commands and app events.\n\
             \n\
             \x20 (no --out)   print the module to stdout\n\
             \x20 --out FILE   write it to FILE (also -o)\n\
             \x20 --check      with --out: write nothing, fail when FILE is not what would be written\n\
             \x20 --help       print this help (also -h)\n"
        )
    }

    type Collect = fn(&mut PayloadCollector<'_>);
    /// Named schemas (`$defs`), in the order they were found.
    type Defs = Vec<(String, Value)>;

    /// The `voqalize types` command of a crate: the actions and events it writes TypeScript for.
    #[derive(Default, Clone)]
    pub struct TypeScript {
        actions: Vec<(&'static [&'static str], Collect)>,
        events: Vec<(&'static [&'static str], Collect)>,
        /// `cargo run --bin NAME --`, from the program's path ([`TypeScript::main`]).
        invocation: Option<String>,
        /// The names of the two unions, when not `Action` and `AppEvent`.
        union_names: Option<(String, String)>,
    }

    impl std::fmt::Debug for TypeScript {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("TypeScript")
                .field(
                    "actions",
                    &self.actions.iter().map(|a| a.0).collect::<Vec<_>>(),
                )
                .field(
                    "events",
                    &self.events.iter().map(|e| e.0).collect::<Vec<_>>(),
                )
                .finish()
        }
    }

    impl TypeScript {
        /// No actions, no events.
        pub fn new() -> Self {
            TypeScript::default()
        }

        /// Adds an action type.
        #[must_use]
        pub fn action<A: Action + Payloads>(mut self) -> Self {
            self.actions
                .push((std::slice::from_ref(&A::NAME), A::__payloads));
            self
        }

        /// Adds an app event type (all its events).
        #[must_use]
        pub fn event<E: AppEvent + Payloads>(mut self) -> Self {
            self.events.push((E::NAMES, E::__payloads));
            self
        }

        /// Adds every `#[derive(Action)]` and `#[derive(AppEvent)]` type linked into the program,
        /// sorted by wire name, so that a type added later cannot be forgotten. Use it instead of
        /// [`action`](Self::action) / [`event`](Self::event) (a type added both ways is refused
        /// as a duplicate name). Types whose `Action`/`AppEvent` impls are written by hand are not
        /// found: add those with `action`/`event`.
        #[must_use]
        pub fn discover(mut self) -> Self {
            let mut found: Vec<&super::Discovered> =
                inventory::iter::<super::Discovered>.into_iter().collect();
            found.sort_by_key(|d| (d.event, d.names.first().copied()));
            for d in found {
                if d.event {
                    self.events.push((d.names, d.payloads));
                } else {
                    self.actions.push((d.names, d.payloads));
                }
            }
            self
        }

        /// Names the union of UI commands (`Action` unless set) and the union of app events
        /// (`AppEvent`); the helpers' names follow (`UiCommand` gives `UiCommandName`,
        /// `UI_COMMAND_NAMES`, `isUiCommand`, ...).
        #[must_use]
        pub fn union_names(
            mut self,
            actions: impl Into<String>,
            events: impl Into<String>,
        ) -> Self {
            self.union_names = Some((actions.into(), events.into()));
            self
        }

        /// The TypeScript module.
        ///
        /// # Errors
        /// Two actions, or two events, share a wire name; a union name is not an identifier, or
        /// two declarations would share a name.
        pub fn render(&self) -> Result<String, TypesError> {
            let (action_union, event_union) = match &self.union_names {
                Some((a, e)) => (a.as_str(), e.as_str()),
                None => ("Action", "AppEvent"),
            };
            for name in [action_union, event_union] {
                if !is_identifier(name) || RESERVED.contains(&name) {
                    return Err(TypesError::BadUnionName(name.to_owned()));
                }
            }
            let action_side = Side::new(action_union, "command", "Command");
            let event_side = Side::new(event_union, "event", "Name");
            let mut seen = Vec::new();
            for name in self.actions.iter().flat_map(|a| a.0.iter()) {
                if seen.contains(name) {
                    return Err(TypesError::DuplicateAction((*name).to_owned()));
                }
                seen.push(*name);
            }
            seen.clear();
            for name in self.events.iter().flat_map(|e| e.0.iter()) {
                if seen.contains(name) {
                    return Err(TypesError::DuplicateEvent((*name).to_owned()));
                }
                seen.push(*name);
            }

            let (actions, action_defs) = collect(
                &self.actions,
                SchemaSettings::draft2020_12().for_serialize(),
            );
            let (events, event_defs) = collect(
                &self.events,
                SchemaSettings::draft2020_12().for_deserialize(),
            );

            // One namespace of named types; a type the two sides see differently (an `Option` field
            // is always present in an action, optional in an event) gets an `Input` twin.
            let mut defs: Vec<(String, Value, bool)> = Vec::new();
            let mut action_names = BTreeMap::new();
            let mut event_names = BTreeMap::new();
            for (name, schema) in action_defs {
                action_names.insert(name.clone(), name.clone());
                defs.push((name, schema, false));
            }
            for (name, schema) in event_defs {
                if let Some((_, existing, _)) = defs.iter().find(|(n, _, _)| *n == name) {
                    if *existing == schema {
                        event_names.insert(name.clone(), name);
                        continue;
                    }
                    let mut renamed = format!("{name}Input");
                    let mut i = 2;
                    while defs.iter().any(|(n, _, _)| *n == renamed) {
                        renamed = format!("{name}Input{i}");
                        i += 1;
                    }
                    event_names.insert(name, renamed.clone());
                    defs.push((renamed, schema, true));
                } else {
                    event_names.insert(name.clone(), name.clone());
                    defs.push((name, schema, true));
                }
            }

            let mut types: Vec<String> = defs.iter().map(|(n, _, _)| n.clone()).collect();
            types.extend(action_side.type_names());
            types.extend(event_side.type_names());
            let mut values = action_side.value_names();
            values.extend(event_side.value_names());
            values.push("assertNever".into());
            for list in [types, values] {
                for (i, name) in list.iter().enumerate() {
                    if list[..i].contains(name) {
                        return Err(TypesError::NameTaken(name.clone()));
                    }
                }
            }

            let mut out = String::new();
            out.push_str(
            "// Generated by `voqalize types` from the brain's Actions and AppEvents. Do not edit:\n\
             // run the command again after changing them.\n",
        );
            for (name, schema, from_events) in &defs {
                let names = if *from_events {
                    &event_names
                } else {
                    &action_names
                };
                out.push('\n');
                write_def(&mut out, name, schema, names);
            }

            out.push('\n');
            out.push_str(
                "/** A UI command from the brain: the `data` of an RTVI `ui-command` message. */\n",
            );
            write_union(&mut out, action_union, "command", &actions, &action_names);
            out.push('\n');
            out.push_str(
                "/** An event for the brain: the `data` of an RTVI `ui-event` message. */\n",
            );
            write_union(&mut out, event_union, "event", &events, &event_names);
            let _ = write!(
                out,
                "\n/** The wire name of every UI command. */\n\
                 export type {a}Command = {a}[\"command\"];\n\
                 \n\
                 /** The wire name of every app event. */\n\
                 export type {e}Name = {e}[\"event\"];\n",
                a = action_union,
                e = event_union,
            );
            let action_wires: Vec<&str> = actions.iter().map(|(w, _)| *w).collect();
            let event_wires: Vec<&str> = events.iter().map(|(w, _)| *w).collect();
            action_side.write_helpers(&mut out, "UI command", &action_wires);
            event_side.write_helpers(&mut out, "app event", &event_wires);
            let _ = write!(
                out,
                "\n/**\n\
                 \x20* Sends an app event through `send` (called with the event's name and payload, as a\n\
                 \x20* `ui-event` sender is); does nothing while `send` is `null` or `undefined` (no call).\n\
                 \x20*/\n\
                 export function send{e}(\n\
                 \x20 send: ((event: string, payload: unknown) => void) | null | undefined,\n\
                 \x20 event: {e},\n\
                 ): void {{\n\
                 \x20 const data: {{ event: string; payload: unknown }} = event;\n\
                 \x20 send?.(data.event, data.payload);\n\
                 }}\n\
                 \n\
                 /**\n\
                 \x20* The `default` of an exhaustive `switch` on `command` or `event`: it compiles only while\n\
                 \x20* every case is handled. Reached anyway (a value the types do not allow), it throws.\n\
                 \x20*/\n\
                 export function assertNever(value: never): never {{\n\
                 \x20 throw new Error(`unexpected value: ${{JSON.stringify(value)}}`);\n\
                 }}\n",
                e = event_union,
            );
            Ok(out)
        }

        /// The command: `types [--out FILE [--check]]` (the arguments after the program name). Without
        /// `--out` the module goes to `stdout`; with it, to FILE; with `--check`, FILE is compared
        /// instead of written. `--help` (or `-h`, or `help`) anywhere prints the usage to `stdout`.
        ///
        /// # Errors
        /// A usage error, a duplicate name, an I/O error, or a stale file under `--check`.
        pub fn run<I, S>(&self, args: I, stdout: &mut dyn Write) -> Result<(), TypesError>
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            let args: Vec<String> = args.into_iter().map(Into::into).collect();
            let invocation = self.invocation.clone().unwrap_or_else(|| invocation(None));
            let bad = |what: String| TypesError::Usage(format!("{what}\n{}", usage(&invocation)));
            let stdout_error = |source| TypesError::Io {
                path: PathBuf::from("<stdout>"),
                source,
            };
            if args.first().is_some_and(|a| a == "help")
                || args.iter().any(|a| a == "--help" || a == "-h")
            {
                return stdout
                    .write_all(usage(&invocation).as_bytes())
                    .map_err(stdout_error);
            }
            let mut args = args.into_iter();
            match args.next().as_deref() {
                Some("types") => {}
                Some(other) => return Err(bad(format!("unknown command `{other}`"))),
                None => return Err(bad("no command given".into())),
            }
            let mut out_path = None;
            let mut check = false;
            while let Some(arg) = args.next() {
                match arg.as_str() {
                    "--out" | "-o" => match args.next() {
                        Some(p) => out_path = Some(PathBuf::from(p)),
                        None => return Err(bad("--out needs a file".into())),
                    },
                    "--check" => check = true,
                    other => return Err(bad(format!("unknown argument `{other}`"))),
                }
            }
            let module = self.render()?;
            let io = |path: &PathBuf| {
                let path = path.clone();
                move |source| TypesError::Io { path, source }
            };
            match (out_path, check) {
                (None, true) => Err(bad("--check needs --out FILE".into())),
                (None, false) => stdout.write_all(module.as_bytes()).map_err(stdout_error),
                (Some(path), true) => {
                    let current = std::fs::read_to_string(&path).map_err(io(&path))?;
                    if current == module {
                        Ok(())
                    } else {
                        let command = format!("{invocation} types --out {}", path.display());
                        Err(TypesError::Stale { path, command })
                    }
                }
                (Some(path), false) => std::fs::write(&path, module).map_err(io(&path)),
            }
        }

        /// [`run`](Self::run) on the process's arguments and stdout; errors go to stderr. The usage
        /// and the `--check` failure name the program as Cargo runs it (`cargo run --bin NAME --`,
        /// or `--example NAME`), from its path.
        pub fn main(&self) -> ExitCode {
            let mut args = std::env::args();
            let this = TypeScript {
                invocation: Some(invocation(args.next().as_deref())),
                ..self.clone()
            };
            match this.run(args, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("voqalize types: {}", crate::logline::chain(&e));
                    ExitCode::FAILURE
                }
            }
        }
    }

    /// One union's generated names: `Action` with tag `command` gives `ActionCommand` (the
    /// names), `ActionOf<C>`, `ACTION_COMMANDS`, `isActionCommand`, `asAction`, `isAction` (a
    /// guard per member) and `makeAction` (a constructor per member).
    pub(super) struct Side<'a> {
        union: &'a str,
        tag: &'static str,
        /// `Command` or `Name`: the type of the members' wire names is `{union}{suffix}`.
        suffix: &'static str,
    }

    impl Side<'_> {
        pub(super) fn new<'a>(union: &'a str, tag: &'static str, suffix: &'static str) -> Side<'a> {
            Side { union, tag, suffix }
        }

        fn type_names(&self) -> Vec<String> {
            let u = self.union;
            vec![u.into(), format!("{u}{}", self.suffix), format!("{u}Of")]
        }

        fn value_names(&self) -> Vec<String> {
            let u = self.union;
            let mut names = vec![
                self.list_name(),
                format!("is{u}{}", self.suffix),
                format!("as{u}"),
                format!("is{u}"),
                format!("make{u}"),
            ];
            if self.tag == "event" {
                names.push(format!("send{u}"));
            }
            names
        }

        /// `ACTION_COMMANDS`, `APP_EVENT_NAMES`.
        pub(super) fn list_name(&self) -> String {
            let chars: Vec<char> = self.union.chars().collect();
            let mut out = String::new();
            for (i, c) in chars.iter().enumerate() {
                let boundary = c.is_ascii_uppercase()
                    && i > 0
                    && (!chars[i - 1].is_ascii_uppercase()
                        || chars.get(i + 1).is_some_and(char::is_ascii_lowercase));
                if boundary && chars[i - 1] != '_' {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            format!("{out}_{}S", self.suffix.to_ascii_uppercase())
        }

        fn write_helpers(&self, out: &mut String, what: &str, wires: &[&str]) {
            let (u, tag, names) = (
                self.union,
                self.tag,
                format!("{}{}", self.union, self.suffix),
            );
            let var = if tag == "command" { "action" } else { "event" };
            let list = wires
                .iter()
                .map(|w| Value::String((*w).to_owned()).to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(
                out,
                "\n/** The {what} named `K`. */\n\
                 export type {u}Of<K extends {names}> = Extract<{u}, {{ {tag}: K }}>;\n\
                 \n\
                 /** Every {what}'s wire name, in the order the brain lists them. */\n\
                 export const {list_name}: readonly {names}[] = [{list}];\n\
                 \n\
                 /** Whether `name` is the wire name of one of the {what}s this file knows. */\n\
                 export function is{names}(name: unknown): name is {names} {{\n\
                 \x20 return ({list_name} as readonly unknown[]).includes(name);\n\
                 }}\n\
                 \n\
                 /**\n\
                 \x20* A message's `data` typed as `{u}`, or `null` when it is not an object whose `{tag}` is\n\
                 \x20* one this file knows (from a newer brain or app: skip it). Only `{tag}` is looked at.\n\
                 \x20*/\n\
                 export function as{u}(data: unknown): {u} | null {{\n\
                 \x20 if (typeof data !== \"object\" || data === null) return null;\n\
                 \x20 return is{names}((data as {{ {tag}?: unknown }}).{tag}) ? (data as {u}) : null;\n\
                 }}\n\
                 \n\
                 /** A type guard per {what}: `is{u}.NAME({var})` narrows `{var}` to that {what}. */\n\
                 export const is{u}: {{\n\
                 \x20 readonly [K in {names}]: ({var}: {u}) => {var} is {u}Of<K>;\n\
                 }} = {{",
                list_name = self.list_name(),
            );
            if !wires.is_empty() {
                out.push('\n');
            }
            for wire in wires {
                let lit = Value::String((*wire).to_owned()).to_string();
                let key = if is_identifier(wire) {
                    (*wire).to_owned()
                } else {
                    lit.clone()
                };
                let _ = writeln!(
                    out,
                    "  {key}: ({var}): {var} is {u}Of<{lit}> => {var}.{tag} === {lit},"
                );
            }
            let _ = write!(
                out,
                "}};\n\
                 \n\
                 /** A constructor per {what}: `make{u}.NAME(payload)` is that {what}'s message `data`. */\n\
                 export const make{u}: {{\n\
                 \x20 readonly [K in {names}]: (payload: {u}Of<K>[\"payload\"]) => {u}Of<K>;\n\
                 }} = {{"
            );
            if !wires.is_empty() {
                out.push('\n');
            }
            for wire in wires {
                let lit = Value::String((*wire).to_owned()).to_string();
                let key = if is_identifier(wire) {
                    (*wire).to_owned()
                } else {
                    lit.clone()
                };
                let _ = writeln!(out, "  {key}: (payload) => ({{ {tag}: {lit}, payload }}),");
            }
            out.push_str("};\n");
        }
    }

    fn collect(
        list: &[(&'static [&'static str], Collect)],
        settings: SchemaSettings,
    ) -> (Vec<(&'static str, Value)>, Defs) {
        let mut settings = settings;
        settings.meta_schema = None;
        let mut generator = settings.into_generator();
        let mut collector = PayloadCollector {
            generator: &mut generator,
            found: Vec::new(),
        };
        for (_, f) in list {
            f(&mut collector);
        }
        let found = collector.found;
        let defs = generator
            .take_definitions(true)
            .into_iter()
            .collect::<Vec<(String, Value)>>();
        (found, defs)
    }

    fn write_doc(out: &mut String, indent: &str, schema: &Value) {
        let Some(Value::String(doc)) = schema.get("description") else {
            return;
        };
        let doc = doc.replace("*/", "*\\/");
        let lines: Vec<&str> = doc.lines().collect();
        if let [line] = lines[..] {
            let _ = writeln!(out, "{indent}/** {line} */");
        } else {
            let _ = writeln!(out, "{indent}/**");
            for line in lines {
                let _ = writeln!(out, "{indent} * {line}");
            }
            let _ = writeln!(out, "{indent} */");
        }
    }

    fn write_def(out: &mut String, name: &str, schema: &Value, names: &BTreeMap<String, String>) {
        write_doc(out, "", schema);
        let is_plain_object = schema.get("properties").is_some()
            && !["anyOf", "oneOf", "allOf", "additionalProperties", "enum"]
                .iter()
                .any(|k| schema.get(*k).is_some_and(|v| *v != Value::Bool(false)));
        if is_plain_object {
            let _ = write!(out, "export interface {name} ");
            out.push_str(&object(schema, "", names));
            out.push('\n');
        } else {
            let _ = writeln!(out, "export type {name} = {};", ts(schema, "", names));
        }
    }

    fn write_union(
        out: &mut String,
        name: &str,
        tag: &str,
        members: &[(&'static str, Value)],
        names: &BTreeMap<String, String>,
    ) {
        if members.is_empty() {
            let _ = writeln!(out, "export type {name} = never;");
            return;
        }
        let _ = writeln!(out, "export type {name} =");
        for (i, (wire, schema)) in members.iter().enumerate() {
            let end = if i + 1 == members.len() { ";" } else { "" };
            let _ = writeln!(
                out,
                "  | {{ {tag}: {}; payload: {} }}{end}",
                Value::String((*wire).to_owned()),
                ts(schema, "  ", names)
            );
        }
    }

    /// Identifiers that cannot name a type: TypeScript's keywords and built-in types.
    const RESERVED: &[&str] = &[
        "any",
        "bigint",
        "boolean",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "import",
        "in",
        "instanceof",
        "never",
        "new",
        "null",
        "number",
        "object",
        "return",
        "string",
        "super",
        "switch",
        "symbol",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "undefined",
        "unknown",
        "var",
        "void",
        "while",
        "with",
    ];

    fn is_identifier(s: &str) -> bool {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    }

    fn wrap(t: String) -> String {
        if t.contains(' ') && !t.starts_with('{') {
            format!("({t})")
        } else {
            t
        }
    }

    fn union(parts: Vec<String>) -> String {
        let mut unique: Vec<String> = Vec::new();
        for p in parts {
            if !unique.contains(&p) {
                unique.push(p);
            }
        }
        match unique.len() {
            0 => "never".into(),
            _ => unique.join(" | "),
        }
    }

    /// A TypeScript type for `schema`; `indent` is the current line's indentation.
    fn ts(schema: &Value, indent: &str, names: &BTreeMap<String, String>) -> String {
        let m = match schema {
            Value::Bool(true) => return "unknown".into(),
            Value::Bool(false) => return "never".into(),
            Value::Object(m) => m,
            _ => return "unknown".into(),
        };
        if let Some(Value::String(r)) = m.get("$ref") {
            // Named by the definition's own name (the reference escapes `/` and `~`).
            return match SchemaRef::parse(r) {
                Some(SchemaRef::Def { name, .. }) => names.get(&name).cloned().unwrap_or(name),
                _ => "unknown".into(),
            };
        }
        if let Some(c) = m.get("const") {
            return c.to_string();
        }
        if let Some(Value::Array(values)) = m.get("enum") {
            return union(values.iter().map(Value::to_string).collect());
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = m.get(key) {
                return union(branches.iter().map(|b| ts(b, indent, names)).collect());
            }
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            let parts: Vec<String> = all.iter().map(|b| wrap(ts(b, indent, names))).collect();
            return parts.join(" & ");
        }
        let types: Vec<&str> = match m.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if m.contains_key("properties") => vec!["object"],
            _ => return "unknown".into(),
        };
        union(
            types
                .into_iter()
                .map(|t| match t {
                    "string" => "string".to_owned(),
                    "integer" | "number" => "number".to_owned(),
                    "boolean" => "boolean".to_owned(),
                    "null" => "null".to_owned(),
                    "array" => array(m, indent, names),
                    "object" => object(schema, indent, names),
                    _ => "unknown".to_owned(),
                })
                .collect(),
        )
    }

    fn array(m: &Map<String, Value>, indent: &str, names: &BTreeMap<String, String>) -> String {
        if let Some(Value::Array(prefix)) = m.get("prefixItems") {
            let parts: Vec<String> = prefix.iter().map(|p| ts(p, indent, names)).collect();
            return format!("[{}]", parts.join(", "));
        }
        match m.get("items") {
            Some(items @ Value::Object(_)) => format!("{}[]", wrap(ts(items, indent, names))),
            _ => "unknown[]".into(),
        }
    }

    fn object(schema: &Value, indent: &str, names: &BTreeMap<String, String>) -> String {
        let props = match schema.get("properties") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let extra = schema.get("additionalProperties");
        if props.is_empty() {
            // No properties and no `additionalProperties`: an empty struct, serialised as `{}`.
            return match extra {
                None | Some(Value::Bool(false)) => "Record<string, never>".into(),
                Some(v @ Value::Object(_)) => format!("Record<string, {}>", ts(v, indent, names)),
                _ => "Record<string, unknown>".into(),
            };
        }
        let required: Vec<&str> = match schema.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let inner = format!("{indent}  ");
        let mut out = String::from("{\n");
        for (name, p) in &props {
            write_doc(&mut out, &inner, p);
            let key = if is_identifier(name) {
                name.clone()
            } else {
                Value::String(name.clone()).to_string()
            };
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let _ = writeln!(out, "{inner}{key}{optional}: {};", ts(p, &inner, names));
        }
        if let Some(v @ Value::Object(_)) = extra {
            let _ = writeln!(out, "{inner}[key: string]: {};", ts(v, &inner, names));
        }
        let _ = write!(out, "{indent}}}");
        out
    }
}

#[cfg(all(test, feature = "typescript"))]
mod tests {
    use super::*;
    use crate::actions::{Action, AppEvent};
    use serde::{Deserialize, Serialize};

    /// Which part of the screen to show.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum SectionName {
        Today,
        Week,
    }

    /// Put a section in front of the user.
    #[derive(Serialize, JsonSchema)]
    struct ShowSection {
        /// The section.
        name: SectionName,
        note: Option<String>,
    }

    impl Action for ShowSection {
        const NAME: &'static str = "show_section";
    }

    impl Payloads for ShowSection {
        fn __payloads(out: &mut PayloadCollector<'_>) {
            crate::__private::action_payload::<Self>(out, Self::NAME);
        }
    }

    #[derive(Serialize, JsonSchema)]
    struct Logout {}

    impl Action for Logout {
        const NAME: &'static str = "show_section";
    }

    impl Payloads for Logout {
        fn __payloads(out: &mut PayloadCollector<'_>) {
            crate::__private::action_payload::<Self>(out, Self::NAME);
        }
    }

    /// The user tapped a row.
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename = "Tapped")]
    #[allow(dead_code)]
    struct TappedPayload {
        row: u32,
        #[serde(rename = "label-text")]
        label: Option<String>,
        section: SectionName,
        extras: std::collections::BTreeMap<String, Vec<i64>>,
    }

    #[allow(dead_code)]
    enum Ui {
        Tapped(TappedPayload),
    }

    impl AppEvent for Ui {
        const NAMES: &'static [&'static str] = &["tapped"];
        fn from_payload(_: &str, payload: Value) -> Result<Self, serde_json::Error> {
            serde_json::from_value(payload).map(Ui::Tapped)
        }
    }

    impl Payloads for Ui {
        fn __payloads(out: &mut PayloadCollector<'_>) {
            crate::__private::event_payload_schema::<TappedPayload>(out, "tapped");
        }
    }

    /// Checked with `tsc --strict` (and run under Node) when written.
    const EXPECTED: &str = r#"// Generated by `voqalize types` from the brain's Actions and AppEvents. Do not edit:
// run the command again after changing them.

/** Put a section in front of the user. */
export interface ShowSection {
  /** The section. */
  name: SectionName;
  note: string | null;
}

/** Which part of the screen to show. */
export type SectionName = "today" | "week";

/** The user tapped a row. */
export interface Tapped {
  row: number;
  "label-text"?: string | null;
  section: SectionName;
  extras: Record<string, number[]>;
}

/** A UI command from the brain: the `data` of an RTVI `ui-command` message. */
export type Action =
  | { command: "show_section"; payload: ShowSection };

/** An event for the brain: the `data` of an RTVI `ui-event` message. */
export type AppEvent =
  | { event: "tapped"; payload: Tapped };

/** The wire name of every UI command. */
export type ActionCommand = Action["command"];

/** The wire name of every app event. */
export type AppEventName = AppEvent["event"];

/** The UI command named `K`. */
export type ActionOf<K extends ActionCommand> = Extract<Action, { command: K }>;

/** Every UI command's wire name, in the order the brain lists them. */
export const ACTION_COMMANDS: readonly ActionCommand[] = ["show_section"];

/** Whether `name` is the wire name of one of the UI commands this file knows. */
export function isActionCommand(name: unknown): name is ActionCommand {
  return (ACTION_COMMANDS as readonly unknown[]).includes(name);
}

/**
 * A message's `data` typed as `Action`, or `null` when it is not an object whose `command` is
 * one this file knows (from a newer brain or app: skip it). Only `command` is looked at.
 */
export function asAction(data: unknown): Action | null {
  if (typeof data !== "object" || data === null) return null;
  return isActionCommand((data as { command?: unknown }).command) ? (data as Action) : null;
}

/** A type guard per UI command: `isAction.NAME(action)` narrows `action` to that UI command. */
export const isAction: {
  readonly [K in ActionCommand]: (action: Action) => action is ActionOf<K>;
} = {
  show_section: (action): action is ActionOf<"show_section"> => action.command === "show_section",
};

/** A constructor per UI command: `makeAction.NAME(payload)` is that UI command's message `data`. */
export const makeAction: {
  readonly [K in ActionCommand]: (payload: ActionOf<K>["payload"]) => ActionOf<K>;
} = {
  show_section: (payload) => ({ command: "show_section", payload }),
};

/** The app event named `K`. */
export type AppEventOf<K extends AppEventName> = Extract<AppEvent, { event: K }>;

/** Every app event's wire name, in the order the brain lists them. */
export const APP_EVENT_NAMES: readonly AppEventName[] = ["tapped"];

/** Whether `name` is the wire name of one of the app events this file knows. */
export function isAppEventName(name: unknown): name is AppEventName {
  return (APP_EVENT_NAMES as readonly unknown[]).includes(name);
}

/**
 * A message's `data` typed as `AppEvent`, or `null` when it is not an object whose `event` is
 * one this file knows (from a newer brain or app: skip it). Only `event` is looked at.
 */
export function asAppEvent(data: unknown): AppEvent | null {
  if (typeof data !== "object" || data === null) return null;
  return isAppEventName((data as { event?: unknown }).event) ? (data as AppEvent) : null;
}

/** A type guard per app event: `isAppEvent.NAME(event)` narrows `event` to that app event. */
export const isAppEvent: {
  readonly [K in AppEventName]: (event: AppEvent) => event is AppEventOf<K>;
} = {
  tapped: (event): event is AppEventOf<"tapped"> => event.event === "tapped",
};

/** A constructor per app event: `makeAppEvent.NAME(payload)` is that app event's message `data`. */
export const makeAppEvent: {
  readonly [K in AppEventName]: (payload: AppEventOf<K>["payload"]) => AppEventOf<K>;
} = {
  tapped: (payload) => ({ event: "tapped", payload }),
};

/**
 * Sends an app event through `send` (called with the event's name and payload, as a
 * `ui-event` sender is); does nothing while `send` is `null` or `undefined` (no call).
 */
export function sendAppEvent(
  send: ((event: string, payload: unknown) => void) | null | undefined,
  event: AppEvent,
): void {
  const data: { event: string; payload: unknown } = event;
  send?.(data.event, data.payload);
}

/**
 * The `default` of an exhaustive `switch` on `command` or `event`: it compiles only while
 * every case is handled. Reached anyway (a value the types do not allow), it throws.
 */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}
"#;

    /// No members, other union names.
    const EXPECTED_RENAMED_EMPTY: &str = r#"// Generated by `voqalize types` from the brain's Actions and AppEvents. Do not edit:
// run the command again after changing them.

/** A UI command from the brain: the `data` of an RTVI `ui-command` message. */
export type UIAction = never;

/** An event for the brain: the `data` of an RTVI `ui-event` message. */
export type UiEvent = never;

/** The wire name of every UI command. */
export type UIActionCommand = UIAction["command"];

/** The wire name of every app event. */
export type UiEventName = UiEvent["event"];

/** The UI command named `K`. */
export type UIActionOf<K extends UIActionCommand> = Extract<UIAction, { command: K }>;

/** Every UI command's wire name, in the order the brain lists them. */
export const UI_ACTION_COMMANDS: readonly UIActionCommand[] = [];

/** Whether `name` is the wire name of one of the UI commands this file knows. */
export function isUIActionCommand(name: unknown): name is UIActionCommand {
  return (UI_ACTION_COMMANDS as readonly unknown[]).includes(name);
}

/**
 * A message's `data` typed as `UIAction`, or `null` when it is not an object whose `command` is
 * one this file knows (from a newer brain or app: skip it). Only `command` is looked at.
 */
export function asUIAction(data: unknown): UIAction | null {
  if (typeof data !== "object" || data === null) return null;
  return isUIActionCommand((data as { command?: unknown }).command) ? (data as UIAction) : null;
}

/** A type guard per UI command: `isUIAction.NAME(action)` narrows `action` to that UI command. */
export const isUIAction: {
  readonly [K in UIActionCommand]: (action: UIAction) => action is UIActionOf<K>;
} = {};

/** A constructor per UI command: `makeUIAction.NAME(payload)` is that UI command's message `data`. */
export const makeUIAction: {
  readonly [K in UIActionCommand]: (payload: UIActionOf<K>["payload"]) => UIActionOf<K>;
} = {};

/** The app event named `K`. */
export type UiEventOf<K extends UiEventName> = Extract<UiEvent, { event: K }>;

/** Every app event's wire name, in the order the brain lists them. */
export const UI_EVENT_NAMES: readonly UiEventName[] = [];

/** Whether `name` is the wire name of one of the app events this file knows. */
export function isUiEventName(name: unknown): name is UiEventName {
  return (UI_EVENT_NAMES as readonly unknown[]).includes(name);
}

/**
 * A message's `data` typed as `UiEvent`, or `null` when it is not an object whose `event` is
 * one this file knows (from a newer brain or app: skip it). Only `event` is looked at.
 */
export function asUiEvent(data: unknown): UiEvent | null {
  if (typeof data !== "object" || data === null) return null;
  return isUiEventName((data as { event?: unknown }).event) ? (data as UiEvent) : null;
}

/** A type guard per app event: `isUiEvent.NAME(event)` narrows `event` to that app event. */
export const isUiEvent: {
  readonly [K in UiEventName]: (event: UiEvent) => event is UiEventOf<K>;
} = {};

/** A constructor per app event: `makeUiEvent.NAME(payload)` is that app event's message `data`. */
export const makeUiEvent: {
  readonly [K in UiEventName]: (payload: UiEventOf<K>["payload"]) => UiEventOf<K>;
} = {};

/**
 * Sends an app event through `send` (called with the event's name and payload, as a
 * `ui-event` sender is); does nothing while `send` is `null` or `undefined` (no call).
 */
export function sendUiEvent(
  send: ((event: string, payload: unknown) => void) | null | undefined,
  event: UiEvent,
): void {
  const data: { event: string; payload: unknown } = event;
  send?.(data.event, data.payload);
}

/**
 * The `default` of an exhaustive `switch` on `command` or `event`: it compiles only while
 * every case is handled. Reached anyway (a value the types do not allow), it throws.
 */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}
"#;

    #[test]
    fn renders_unions_and_named_payloads() {
        let ts = TypeScript::new().action::<ShowSection>().event::<Ui>();
        assert_eq!(ts.render().unwrap(), EXPECTED);
        assert_eq!(ts.render().unwrap(), EXPECTED, "the same every time");
    }

    #[test]
    fn union_names_rename_the_unions_and_their_helpers() {
        let ts = TypeScript::new().union_names("UIAction", "UiEvent");
        assert_eq!(ts.render().unwrap(), EXPECTED_RENAMED_EMPTY);
    }

    #[test]
    fn list_names_are_screaming_snake_case() {
        use generate::Side;
        for (union, suffix, list) in [
            ("Action", "Command", "ACTION_COMMANDS"),
            ("AppEvent", "Name", "APP_EVENT_NAMES"),
            ("UIAction", "Command", "UI_ACTION_COMMANDS"),
            ("UiEvent", "Name", "UI_EVENT_NAMES"),
            ("HTTPEvent2", "Name", "HTTP_EVENT2_NAMES"),
            ("Ui_Event", "Name", "UI_EVENT_NAMES"),
            ("ui", "Command", "UI_COMMANDS"),
        ] {
            assert_eq!(Side::new(union, "command", suffix).list_name(), list);
        }
    }

    #[derive(Serialize, JsonSchema)]
    struct Open {}

    impl Action for Open {
        const NAME: &'static str = "open-url";
    }

    impl Payloads for Open {
        fn __payloads(out: &mut PayloadCollector<'_>) {
            crate::__private::action_payload::<Self>(out, Self::NAME);
        }
    }

    #[test]
    fn helpers_follow_registration_order_and_quote_odd_names() {
        let out = TypeScript::new()
            .action::<Open>()
            .action::<ShowSection>()
            .render()
            .unwrap();
        for line in [
            "export const ACTION_COMMANDS: readonly ActionCommand[] = [\"open-url\", \"show_section\"];\n",
            "  \"open-url\": (action): action is ActionOf<\"open-url\"> => action.command === \"open-url\",\n  show_section:",
            "  \"open-url\": (payload) => ({ command: \"open-url\", payload }),\n  show_section:",
            "export const APP_EVENT_NAMES: readonly AppEventName[] = [];\n",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
    }

    #[test]
    fn bad_and_clashing_names_are_refused() {
        let name_of = |ts: TypeScript| match ts.render() {
            Err(TypesError::BadUnionName(n) | TypesError::NameTaken(n)) => n,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            name_of(TypeScript::new().union_names("Ui Action", "UiEvent")),
            "Ui Action"
        );
        assert_eq!(name_of(TypeScript::new().union_names("Ui", "")), "");
        assert_eq!(
            name_of(TypeScript::new().union_names("string", "Ui")),
            "string"
        );
        assert_eq!(name_of(TypeScript::new().union_names("Ui", "Ui")), "Ui");
        // `XCommand` would be both the actions' name type and the events' union.
        assert_eq!(
            name_of(TypeScript::new().union_names("X", "XCommand")),
            "XCommand"
        );
        assert_eq!(
            name_of(
                TypeScript::new()
                    .action::<ShowSection>()
                    .union_names("ShowSection", "UiEvent")
            ),
            "ShowSection"
        );

        #[derive(Serialize, JsonSchema)]
        #[serde(rename = "Action")]
        struct Named {}
        impl Action for Named {
            const NAME: &'static str = "named";
        }
        impl Payloads for Named {
            fn __payloads(out: &mut PayloadCollector<'_>) {
                crate::__private::action_payload::<Self>(out, Self::NAME);
            }
        }
        let ts = TypeScript::new().action::<Named>();
        assert_eq!(name_of(ts.clone()), "Action");
        let err = ts.render().unwrap_err().to_string();
        assert!(err.contains("TypeScript::union_names"), "{err}");
        let renamed = ts.union_names("UiCommand", "UiEvent").render().unwrap();
        assert!(
            renamed.contains("export type Action = Record<string, never>;"),
            "{renamed}"
        );
        assert!(
            renamed.contains("  | { command: \"named\"; payload: Action };"),
            "{renamed}"
        );
    }

    #[test]
    fn empty_unions_are_never() {
        let out = TypeScript::new().render().unwrap();
        assert!(out.contains("export type Action = never;"));
        assert!(out.contains("export type AppEvent = never;"));
    }

    #[test]
    fn duplicate_wire_names_are_refused() {
        let ts = TypeScript::new().action::<ShowSection>().action::<Logout>();
        assert!(matches!(ts.render(), Err(TypesError::DuplicateAction(n)) if n == "show_section"));
        let ts = TypeScript::new().event::<Ui>().event::<Ui>();
        assert!(matches!(ts.render(), Err(TypesError::DuplicateEvent(n)) if n == "tapped"));
    }

    #[test]
    fn shared_type_seen_differently_gets_an_input_twin() {
        #[derive(Serialize, Deserialize, JsonSchema)]
        struct Slot {
            at: Option<String>,
        }
        #[derive(Serialize, JsonSchema)]
        struct Offer {
            slot: Slot,
        }
        impl Action for Offer {
            const NAME: &'static str = "offer";
        }
        impl Payloads for Offer {
            fn __payloads(out: &mut PayloadCollector<'_>) {
                crate::__private::action_payload::<Self>(out, Self::NAME);
            }
        }
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Picked {
            slot: Slot,
        }
        struct Ev;
        impl AppEvent for Ev {
            const NAMES: &'static [&'static str] = &["picked"];
            fn from_payload(_: &str, _: Value) -> Result<Self, serde_json::Error> {
                Ok(Ev)
            }
        }
        impl Payloads for Ev {
            fn __payloads(out: &mut PayloadCollector<'_>) {
                crate::__private::event_payload_schema::<Picked>(out, "picked");
            }
        }
        let out = TypeScript::new()
            .action::<Offer>()
            .event::<Ev>()
            .render()
            .unwrap();
        assert!(
            out.contains("export interface Slot {\n  at: string | null;\n}"),
            "{out}"
        );
        assert!(
            out.contains("export interface SlotInput {\n  at?: string | null;\n}"),
            "{out}"
        );
        assert!(
            out.contains("export interface Picked {\n  slot: SlotInput;\n}"),
            "{out}"
        );
        assert!(
            out.contains("export interface Offer {\n  slot: Slot;\n}"),
            "{out}"
        );
    }

    #[test]
    fn command_line() {
        let ts = TypeScript::new().action::<ShowSection>().event::<Ui>();
        let mut stdout = Vec::new();
        ts.run(["types"], &mut stdout).unwrap();
        assert_eq!(String::from_utf8(stdout).unwrap(), EXPECTED);

        let dir = std::env::temp_dir().join(format!("voqalize-types-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("voqalize.ts");
        let file_arg = file.to_str().unwrap().to_owned();
        let mut sink = Vec::new();
        ts.run(["types", "--out", &file_arg], &mut sink).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), EXPECTED);
        ts.run(["types", "--out", &file_arg, "--check"], &mut sink)
            .unwrap();
        std::fs::write(&file, "stale").unwrap();
        let stale = ts.run(["types", "--out", &file_arg, "--check"], &mut sink);
        let Err(stale @ TypesError::Stale { .. }) = stale else {
            panic!("{stale:?}");
        };
        assert_eq!(
            stale.to_string(),
            format!(
                "{file_arg} is out of date: write it again with \
                 `cargo run --bin voqalize -- types --out {file_arg}`"
            )
        );
        assert!(matches!(
            ts.run(["typos"], &mut sink),
            Err(TypesError::Usage(_))
        ));
        assert!(matches!(
            ts.run(["types", "--check"], &mut sink),
            Err(TypesError::Usage(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn help_prints_the_usage() {
        let ts = TypeScript::new().action::<ShowSection>();
        for args in [
            &["--help"][..],
            &["-h"],
            &["help"],
            &["types", "--help"],
            &["types", "--out", "x.ts", "-h"],
        ] {
            let mut stdout = Vec::new();
            ts.run(args.iter().copied(), &mut stdout).unwrap();
            let text = String::from_utf8(stdout).unwrap();
            assert!(
                text.starts_with(
                    "usage: cargo run --bin voqalize -- types [--out FILE [--check]]\n"
                ),
                "{args:?}: {text}"
            );
            assert!(text.contains("--check"), "{text}");
        }
        assert!(!std::path::Path::new("x.ts").exists());
    }

    #[test]
    fn usage_errors_end_with_the_usage() {
        let ts = TypeScript::new();
        let mut sink = Vec::new();
        let err = ts.run(["typos"], &mut sink).unwrap_err().to_string();
        assert!(
            err.starts_with("unknown command `typos`\nusage: cargo run --bin voqalize -- types"),
            "{err}"
        );
        let err = ts.run(Vec::<String>::new(), &mut sink).unwrap_err();
        assert!(
            err.to_string().starts_with("no command given\nusage: "),
            "{err}"
        );
        assert!(sink.is_empty());
    }

    #[test]
    fn the_invocation_is_the_cargo_target() {
        assert_eq!(generate::invocation(None), "cargo run --bin voqalize --");
        assert_eq!(
            generate::invocation(Some("/app/target/debug/voqalize-types")),
            "cargo run --bin voqalize-types --"
        );
        assert_eq!(
            generate::invocation(Some("/app/target/debug/examples/types")),
            "cargo run --example types --"
        );
    }
}

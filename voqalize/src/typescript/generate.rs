//! The generator: the actions and events a crate writes TypeScript for, and the module it writes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::emit::{RESERVED, Side, is_identifier, write_def, write_union};
use super::{PayloadCollector, Payloads};
use crate::actions::{Action, AppEvent};

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
    /// [`TypeScript::discover`] found no derived type at all: the program does not link the
    /// crate that defines them, and the module would say the app has no commands and no events.
    #[error(
        "discovery found no #[derive(Action)] or #[derive(AppEvent)] type: this program does not \
         link the crate that defines them. Add `use your_brain_crate as _;` to its main file (or \
         list the types with .action::<T>() and .event::<T>()); an app with none at all says so \
         with .allow_empty()"
    )]
    NothingDiscovered,
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

type Collect = fn(&mut PayloadCollector<'_>);
/// Named schemas (`$defs`), in the order they were found.
type Defs = Vec<(String, Value)>;

/// The `voqalize types` command of a crate: the actions and events it writes TypeScript for.
#[derive(Default, Clone)]
pub struct TypeScript {
    actions: Vec<(&'static [&'static str], Collect)>,
    events: Vec<(&'static [&'static str], Collect)>,
    /// `cargo run --bin NAME --`, from the program's path ([`TypeScript::main`]).
    pub(super) invocation: Option<String>,
    /// The names of the two unions, when not `Action` and `AppEvent`.
    union_names: Option<(String, String)>,
    /// [`discover`](Self::discover) was called and found nothing.
    found_nothing: bool,
    /// [`allow_empty`](Self::allow_empty): a module with no command and no event is meant.
    allow_empty: bool,
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
            .push((std::slice::from_ref(&A::NAME), A::payloads));
        self
    }

    /// Adds an app event type (all its events).
    #[must_use]
    pub fn event<E: AppEvent + Payloads>(mut self) -> Self {
        self.events.push((E::NAMES, E::payloads));
        self
    }

    /// Adds every `#[derive(Action)]` and `#[derive(AppEvent)]` type linked into the program,
    /// sorted by wire name, so that a type added later cannot be forgotten. Use it instead of
    /// [`action`](Self::action) / [`event`](Self::event) (a type added both ways is refused
    /// as a duplicate name). Types whose `Action`/`AppEvent` impls are written by hand are not
    /// found: add those with `action`/`event`.
    ///
    /// Finding none at all is an error when the module is rendered
    /// ([`TypesError::NothingDiscovered`]): the program does not link the crate that defines the
    /// types (`use your_brain_crate as _;` links it), unless [`allow_empty`](Self::allow_empty)
    /// says the app really has none.
    #[must_use]
    pub fn discover(self) -> Self {
        self.discover_from(inventory::iter::<super::Discovered>.into_iter())
    }

    /// A module with no UI command and no app event is what is meant, found by
    /// [`discover`](Self::discover) or not.
    #[must_use]
    pub fn allow_empty(mut self) -> Self {
        self.allow_empty = true;
        self
    }

    pub(super) fn discover_from<'d>(
        mut self,
        found: impl Iterator<Item = &'d super::Discovered>,
    ) -> Self {
        let mut found: Vec<&super::Discovered> = found.collect();
        self.found_nothing = found.is_empty();
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
    pub fn union_names(mut self, actions: impl Into<String>, events: impl Into<String>) -> Self {
        self.union_names = Some((actions.into(), events.into()));
        self
    }

    /// The TypeScript module.
    ///
    /// # Errors
    /// Two actions, or two events, share a wire name; a union name is not an identifier, or
    /// two declarations would share a name; [`discover`](Self::discover) found nothing and
    /// nothing else was added ([`TypesError::NothingDiscovered`], unless
    /// [`allow_empty`](Self::allow_empty)).
    pub fn render(&self) -> Result<String, TypesError> {
        if self.found_nothing
            && !self.allow_empty
            && self.actions.is_empty()
            && self.events.is_empty()
        {
            return Err(TypesError::NothingDiscovered);
        }
        let (action_union, event_union) = self.checked_union_names()?;
        self.check_wire_names()?;
        let action_side = Side::new(action_union, "command", "Command");
        let event_side = Side::new(event_union, "event", "Name");
        let (actions, action_defs) = collect(
            &self.actions,
            SchemaSettings::draft2020_12().for_serialize(),
        );
        let (events, event_defs) = collect(
            &self.events,
            SchemaSettings::draft2020_12().for_deserialize(),
        );
        let named = Named::merge(action_defs, event_defs);
        named.check(&[&action_side, &event_side])?;

        let mut out = String::new();
        out.push_str(
            "// Generated by `voqalize types` from the brain's Actions and AppEvents. Do not edit:\n\
             // run the command again after changing them.\n",
        );
        for (name, schema, from_events) in &named.defs {
            let names = if *from_events {
                &named.event_names
            } else {
                &named.action_names
            };
            out.push('\n');
            write_def(&mut out, name, schema, names);
        }
        out.push('\n');
        out.push_str(
            "/** A UI command from the brain: the `data` of an RTVI `ui-command` message. */\n",
        );
        write_union(
            &mut out,
            action_union,
            "command",
            &actions,
            &named.action_names,
        );
        out.push('\n');
        out.push_str("/** An event for the brain: the `data` of an RTVI `ui-event` message. */\n");
        write_union(&mut out, event_union, "event", &events, &named.event_names);
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
        write_sender_and_guard(&mut out, event_union);
        Ok(out)
    }

    /// The names of the two unions (`Action` and `AppEvent` unless set), checked.
    fn checked_union_names(&self) -> Result<(&str, &str), TypesError> {
        let (action_union, event_union) = match &self.union_names {
            Some((a, e)) => (a.as_str(), e.as_str()),
            None => ("Action", "AppEvent"),
        };
        for name in [action_union, event_union] {
            if !is_identifier(name) || RESERVED.contains(&name) {
                return Err(TypesError::BadUnionName(name.to_owned()));
            }
        }
        Ok((action_union, event_union))
    }

    /// No two actions, and no two events, share a wire name.
    fn check_wire_names(&self) -> Result<(), TypesError> {
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
        Ok(())
    }
}

/// The module's one namespace of named types: each side's `$defs`, a type the two sides see
/// differently (an `Option` field is always present in an action, optional in an event) given an
/// `Input` twin, and for each side the name each of its `$defs` is declared under.
struct Named {
    /// Name, schema, and whether it came from the events' side.
    defs: Vec<(String, Value, bool)>,
    action_names: BTreeMap<String, String>,
    event_names: BTreeMap<String, String>,
}

impl Named {
    fn merge(action_defs: Defs, event_defs: Defs) -> Named {
        let mut named = Named {
            defs: Vec::new(),
            action_names: BTreeMap::new(),
            event_names: BTreeMap::new(),
        };
        for (name, schema) in action_defs {
            named.action_names.insert(name.clone(), name.clone());
            named.defs.push((name, schema, false));
        }
        for (name, schema) in event_defs {
            let declared = match named.defs.iter().find(|(n, _, _)| *n == name) {
                Some((_, existing, _)) if *existing == schema => {
                    named.event_names.insert(name.clone(), name);
                    continue;
                }
                Some(_) => {
                    let mut renamed = format!("{name}Input");
                    let mut i = 2;
                    while named.defs.iter().any(|(n, _, _)| *n == renamed) {
                        renamed = format!("{name}Input{i}");
                        i += 1;
                    }
                    renamed
                }
                None => name.clone(),
            };
            named.event_names.insert(name, declared.clone());
            named.defs.push((declared, schema, true));
        }
        named
    }

    /// No two declarations of the module share a name: the named types, each side's type and
    /// value names, and `assertNever`.
    fn check(&self, sides: &[&Side<'_>]) -> Result<(), TypesError> {
        let mut types: Vec<String> = self.defs.iter().map(|(n, _, _)| n.clone()).collect();
        let mut values = Vec::new();
        for side in sides {
            types.extend(side.type_names());
            values.extend(side.value_names());
        }
        values.push("assertNever".into());
        for list in [types, values] {
            for (i, name) in list.iter().enumerate() {
                if list[..i].contains(name) {
                    return Err(TypesError::NameTaken(name.clone()));
                }
            }
        }
        Ok(())
    }
}

/// The end of the module: `send<AppEvent>` and `assertNever`.
fn write_sender_and_guard(out: &mut String, event_union: &str) {
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

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
//! Rust has no run-time list of a crate's types, so the crate names them once, in a small binary
//! that is its `voqalize` command:
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
//!     TypeScript::new()
//!         .action::<ShowSection>()
//!         .event::<UiEvent>()
//!         .main()
//! }
//! ```
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
        /// The command line was not understood (the message ends with the usage).
        #[error("{0}")]
        Usage(String),
        /// Reading or writing the output file failed.
        #[error("{path}: {source}")]
        Io {
            /// The file.
            path: PathBuf,
            /// The failure.
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

        /// The TypeScript module.
        ///
        /// # Errors
        /// Two actions, or two events, share a wire name.
        pub fn render(&self) -> Result<String, TypesError> {
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
            write_union(&mut out, "Action", "command", &actions, &action_names);
            out.push('\n');
            out.push_str(
                "/** An event for the brain: the `data` of an RTVI `ui-event` message. */\n",
            );
            write_union(&mut out, "AppEvent", "event", &events, &event_names);
            out.push('\n');
            out.push_str("/** The wire name of every UI command. */\n");
            out.push_str("export type ActionCommand = Action[\"command\"];\n\n");
            out.push_str("/** The wire name of every app event. */\n");
            out.push_str("export type AppEventName = AppEvent[\"event\"];\n");
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
                    eprintln!("voqalize types: {e}");
                    ExitCode::FAILURE
                }
            }
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
"#;

    #[test]
    fn renders_unions_and_named_payloads() {
        let ts = TypeScript::new().action::<ShowSection>().event::<Ui>();
        assert_eq!(ts.render().unwrap(), EXPECTED);
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

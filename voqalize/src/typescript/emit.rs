//! Writing TypeScript: declarations from JSON Schemas, the unions and their helpers.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::tools::schema::reference::SchemaRef;

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

    pub(super) fn type_names(&self) -> Vec<String> {
        let u = self.union;
        vec![u.into(), format!("{u}{}", self.suffix), format!("{u}Of")]
    }

    pub(super) fn value_names(&self) -> Vec<String> {
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

    pub(super) fn write_helpers(&self, out: &mut String, what: &str, wires: &[&str]) {
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

pub(super) fn write_def(
    out: &mut String,
    name: &str,
    schema: &Value,
    names: &BTreeMap<String, String>,
) {
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

pub(super) fn write_union(
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
pub(super) const RESERVED: &[&str] = &[
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

pub(super) fn is_identifier(s: &str) -> bool {
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

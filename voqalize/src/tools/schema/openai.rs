//! Step 3b: OpenAI (Responses and chat completions). Without strict mode the schema stays as
//! step 2 left it; strict mode closes every object, lists every property in `required` (the
//! optional ones accepting `null`), keeps only the keywords and formats it accepts, and reports
//! what it cannot express.

use serde_json::{Map, Value, json};

use super::keywords::{ONE_SCHEMA, SCHEMA_LISTS, has_type, type_of_value};
use super::nullable::make_nullable;

/// Keywords OpenAI's strict mode accepts.
const STRICT_KEYS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];
/// String formats OpenAI's strict mode accepts.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

fn child_path(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}.{name}")
    }
}

/// Rewrites `v` (at the path `at`, empty for the argument itself) and its subschemas for OpenAI;
/// in strict mode, each reason the schema cannot be strict goes to `problems`.
pub(super) fn openai(v: Value, strict: bool, at: &str, problems: &mut Vec<String>) -> Value {
    let shown = if at.is_empty() { "the argument" } else { at };
    let mut m = match v {
        Value::Object(m) => m,
        Value::Bool(true) => {
            if strict {
                problems.push(format!("`{shown}` accepts any JSON value"));
            }
            return json!({});
        }
        other => return other,
    };
    rewrite_children(&mut m, strict, at, problems);
    if !strict {
        return Value::Object(m);
    }
    if let Some(Value::String(f)) = m.get("format")
        && !STRICT_FORMATS.contains(&f.as_str())
    {
        m.remove("format");
    }
    let is_object = has_type(&m, "object") || m.contains_key("properties");
    if is_object && matches!(m.get("anyOf"), Some(Value::Array(b)) if !b.is_empty()) {
        problems.push(format!(
            "`{shown}` has fixed fields beside a choice of shapes; strict mode cannot express it"
        ));
    }
    if matches!(m.get("patternProperties"), Some(Value::Object(p)) if !p.is_empty()) {
        problems.push(open_object(shown));
    }
    if is_object {
        close_object(&mut m, shown, problems);
    }
    m.retain(|k, _| STRICT_KEYS.contains(&k.as_str()));
    if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("$ref") {
        match m.get("enum") {
            Some(values) => {
                let t = enum_type(values);
                m.insert("type".into(), t);
            }
            None => problems.push(format!("`{shown}` accepts any JSON value")),
        }
    }
    Value::Object(m)
}

/// The subschemas: properties at `at.name`, array items at `at[]`, the others at `at`.
fn rewrite_children(
    m: &mut Map<String, Value>,
    strict: bool,
    at: &str,
    problems: &mut Vec<String>,
) {
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            *p = openai(std::mem::take(p), strict, &child_path(at, name), problems);
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(list)) = m.get_mut(*key) {
            for p in list.iter_mut() {
                *p = openai(std::mem::take(p), strict, at, problems);
            }
        }
    }
    for key in ONE_SCHEMA {
        if let Some(p @ Value::Object(_)) = m.get_mut(*key) {
            let sub = if *key == "items" {
                format!("{at}[]")
            } else {
                at.to_owned()
            };
            *p = openai(std::mem::take(p), strict, &sub, problems);
        }
    }
}

fn open_object(shown: &str) -> String {
    format!("`{shown}` is a map (an object with open keys); strict mode allows no open objects")
}

/// Strict mode's object: `additionalProperties: false` (an open one is reported) and every
/// property required, the optional ones made nullable.
fn close_object(m: &mut Map<String, Value>, shown: &str, problems: &mut Vec<String>) {
    match m.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => problems.push(open_object(shown)),
    }
    m.insert("additionalProperties".into(), Value::Bool(false));
    let required: Vec<Value> = match m.get("required") {
        Some(Value::Array(r)) => r.clone(),
        _ => Vec::new(),
    };
    if !matches!(m.get("properties"), Some(Value::Object(_))) {
        m.insert("properties".into(), Value::Object(Map::new()));
    }
    let mut all = Vec::new();
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            if !required.iter().any(|r| r == name.as_str()) {
                *p = make_nullable(std::mem::take(p));
            }
            all.push(json!(name));
        }
    }
    m.insert("required".into(), Value::Array(all));
}

/// The `type` of an untyped `enum`: its values' one type, or the list of their types (`null`
/// when `enum` is not a list).
fn enum_type(values: &Value) -> Value {
    let Value::Array(vals) = values else {
        return Value::Null;
    };
    let mut types: Vec<Value> = Vec::new();
    for t in vals.iter().filter_map(type_of_value) {
        if !types.contains(&json!(t)) {
            types.push(json!(t));
        }
    }
    if types.len() == 1 {
        types.remove(0)
    } else {
        Value::Array(types)
    }
}

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
        problems.push(format!(
            "`{shown}` is a map (an object with open keys); strict mode allows no open objects"
        ));
    }
    if is_object {
        match m.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => problems.push(format!(
                "`{shown}` is a map (an object with open keys); strict mode allows no open objects"
            )),
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
    m.retain(|k, _| STRICT_KEYS.contains(&k.as_str()));
    if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("$ref") {
        if m.contains_key("enum") {
            let t = match m.get("enum") {
                Some(Value::Array(vals)) => {
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
                _ => Value::Null,
            };
            m.insert("type".into(), t);
        } else {
            problems.push(format!("`{shown}` accepts any JSON value"));
        }
    }
    Value::Object(m)
}

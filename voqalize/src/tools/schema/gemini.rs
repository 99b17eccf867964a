//! Step 3a: Gemini's schema subset (the OpenAPI-3.0 subset of function declarations).

use serde_json::{Map, Value, json};

use super::keywords::map_children;
use super::merge::merge_schema;

/// The keys Gemini's schema subset keeps, minus `title`, `default` and `example`, which are
/// dropped too.
const GEMINI_KEYS: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "items",
    "minimum",
    "maximum",
];

fn is_null_schema(v: &Value) -> bool {
    match v.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().all(|t| t == "null"),
        _ => false,
    }
}

/// Rewrites `v` and its subschemas for Gemini. Nullability found anywhere on the way (a null
/// branch, a null type, a null enum value) becomes one `"nullable": true` at the end.
pub(super) fn gemini(v: Value) -> Value {
    let mut m = match v {
        Value::Object(m) => m,
        // `true` or a stray scalar: anything goes; Gemini needs a type.
        _ => return json!({"type": "object"}),
    };
    let mut nullable = m.remove("nullable") == Some(Value::Bool(true));
    nullable |= collapse_null_branches(&mut m);
    map_children(&mut m, &mut gemini);
    nullable |= take_branch_nullability(&mut m);
    nullable |= split_type_list(&mut m);
    nullable |= rewrite_enum(&mut m);
    default_type(&mut m);
    let ty = m.get("type").and_then(Value::as_str).map(str::to_owned);
    drop_what_the_type_excludes(&mut m, ty.as_deref());
    m.retain(|k, _| GEMINI_KEYS.contains(&k.as_str()));
    if nullable {
        mark_nullable(&mut m);
    }
    Value::Object(m)
}

/// `anyOf` with a null branch (an `Option`) collapses before the branches are rewritten, while the
/// null branch is still recognisable. Returns whether a null branch was found.
fn collapse_null_branches(m: &mut Map<String, Value>) -> bool {
    let mut nullable = false;
    while let Some(Value::Array(any)) = m.remove("anyOf") {
        let (nulls, mut rest): (Vec<Value>, Vec<Value>) = any.into_iter().partition(is_null_schema);
        nullable |= !nulls.is_empty();
        match rest.pop() {
            Some(Value::Object(branch)) if rest.is_empty() => {
                // The branch is the target, the schema around it the siblings: its fields merge
                // with the branch's instead of being dropped.
                let outer = std::mem::replace(m, branch);
                merge_schema(m, outer);
            }
            Some(last) => {
                rest.push(last);
                m.insert("anyOf".into(), Value::Array(rest));
                break;
            }
            None => break,
        }
    }
    nullable
}

/// Rewritten branches of an `anyOf` that say `nullable` give it up to the schema around them.
fn take_branch_nullability(m: &mut Map<String, Value>) -> bool {
    let mut nullable = false;
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        for b in branches.iter_mut() {
            if let Value::Object(b) = b
                && b.remove("nullable") == Some(Value::Bool(true))
            {
                nullable = true;
            }
        }
    }
    nullable
}

/// A list of types (Gemini takes one): `null` goes to `nullable`, one other type stays, several
/// become an `anyOf`. A `type` of `null` alone is removed. Returns whether `null` was listed.
fn split_type_list(m: &mut Map<String, Value>) -> bool {
    let mut nullable = false;
    if let Some(Value::Array(types)) = m.get("type").cloned() {
        let mut real: Vec<String> = Vec::new();
        for t in types {
            match t.as_str() {
                Some("null") => nullable = true,
                Some(t) => real.push(t.to_owned()),
                None => {}
            }
        }
        match real.len() {
            0 => {
                m.remove("type");
            }
            1 => {
                m.insert("type".into(), json!(real[0]));
            }
            _ => {
                m.remove("type");
                let branches: Vec<Value> = real.iter().map(|t| json!({ "type": t })).collect();
                m.insert("anyOf".into(), Value::Array(branches));
            }
        }
    }
    if m.get("type") == Some(&json!("null")) {
        m.remove("type");
        nullable = true;
    }
    nullable
}

/// Gemini's enums are strings: every enum becomes a string enum (without `null`), a value that is
/// not a string written as its JSON text (`1`, `2.5`, `true`), so the model keeps the constraint.
/// The dispatcher turns such a string back into the neutral value before the argument is read
/// ([`restore_enum_strings`](crate::tools::dispatch)). Returns whether `null` was a value.
fn rewrite_enum(m: &mut Map<String, Value>) -> bool {
    let Some(Value::Array(values)) = m.remove("enum") else {
        return false;
    };
    let nullable = values.iter().any(Value::is_null);
    let mut present: Vec<Value> = Vec::with_capacity(values.len());
    for v in values {
        let text = match v {
            Value::Null => continue,
            Value::String(s) => Value::String(s),
            other => Value::String(other.to_string()),
        };
        if !present.contains(&text) {
            present.push(text);
        }
    }
    if !present.is_empty() {
        m.insert("type".into(), json!("string"));
        m.insert("enum".into(), Value::Array(present));
    }
    nullable
}

/// Gemini needs a type: guessed from the keywords when the schema has none and is no choice.
fn default_type(m: &mut Map<String, Value>) {
    if !m.contains_key("type") && !m.contains_key("anyOf") {
        let t = if m.contains_key("items") {
            "array"
        } else if m.contains_key("enum") || m.contains_key("pattern") {
            "string"
        } else {
            "object"
        };
        m.insert("type".into(), json!(t));
    }
}

/// Keeps only what applies to the schema's type `ty`: the `date-time` and `enum` formats of a
/// string, the items of an array (strings when unsaid), the properties of an object (and only the
/// required names it has).
fn drop_what_the_type_excludes(m: &mut Map<String, Value>, ty: Option<&str>) {
    if let Some(Value::String(f)) = m.get("format") {
        let keep = ty == Some("string") && (f == "date-time" || f == "enum");
        if !keep {
            m.remove("format");
        }
    }
    if ty == Some("array") {
        match m.get("items") {
            Some(Value::Object(_)) => {}
            _ => {
                m.insert("items".into(), json!({"type": "string"}));
            }
        }
    } else {
        m.remove("items");
        m.remove("minItems");
        m.remove("maxItems");
    }
    if ty == Some("object") {
        let names: Vec<String> = match m.get("properties") {
            Some(Value::Object(p)) => p.keys().cloned().collect(),
            _ => {
                m.remove("properties");
                Vec::new()
            }
        };
        if let Some(Value::Array(req)) = m.get_mut("required") {
            req.retain(|r| r.as_str().is_some_and(|r| names.iter().any(|n| n == r)));
            if req.is_empty() {
                m.remove("required");
            }
        }
    } else {
        m.remove("properties");
        m.remove("required");
        m.remove("minProperties");
        m.remove("maxProperties");
    }
}

/// `"nullable": true` on the schema, or on each branch of its `anyOf`.
fn mark_nullable(m: &mut Map<String, Value>) {
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        for b in branches {
            if let Value::Object(b) = b {
                b.insert("nullable".into(), Value::Bool(true));
            }
        }
    } else {
        m.insert("nullable".into(), Value::Bool(true));
    }
}

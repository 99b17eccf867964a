//! Nulls in OpenAI's strict mode: every property is required, so an optional one accepts `null`
//! instead (and the dispatcher reads that `null` as absent when the field itself does not take
//! it).

use serde_json::{Value, json};

use super::keywords::has_type;

/// Whether a schema already accepts `null`.
pub(crate) fn accepts_null(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => {
            if m.is_empty() || has_type(m, "null") {
                return true;
            }
            if let Some(Value::Array(vals)) = m.get("enum")
                && vals.iter().any(Value::is_null)
            {
                return true;
            }
            ["anyOf", "oneOf"].iter().any(|k| match m.get(*k) {
                Some(Value::Array(bs)) => bs.iter().any(accepts_null),
                _ => false,
            })
        }
        _ => false,
    }
}

/// Lets an optional property be `null` (strict mode lists every property as required).
pub(super) fn make_nullable(v: Value) -> Value {
    if accepts_null(&v) {
        return v;
    }
    let Value::Object(mut m) = v else {
        return v;
    };
    if m.contains_key("$ref") || !m.contains_key("type") && !m.contains_key("anyOf") {
        return json!({ "anyOf": [Value::Object(m), {"type": "null"}] });
    }
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
        return Value::Object(m);
    }
    match m.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            m.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) => ts.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(vals)) = m.get_mut("enum") {
        vals.push(Value::Null);
    }
    Value::Object(m)
}

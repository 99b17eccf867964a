//! What the passes share: which keywords hold subschemas, and small helpers on schema objects.

use serde_json::{Map, Value};

/// Keywords whose value is one schema.
pub(super) const ONE_SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
];
/// Keywords whose value is an array of schemas.
pub(super) const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
pub(super) const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];

/// Applies `f` to every direct subschema of `m` (properties, lists, single schemas, `$defs`).
pub(super) fn map_children(m: &mut Map<String, Value>, f: &mut impl FnMut(Value) -> Value) {
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(props)) = m.get_mut(*key) {
            for v in props.values_mut() {
                *v = f(std::mem::take(v));
            }
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(list)) = m.get_mut(*key) {
            for v in list.iter_mut() {
                *v = f(std::mem::take(v));
            }
        }
    }
    for key in ONE_SCHEMA {
        if let Some(v @ Value::Object(_)) = m.get_mut(*key) {
            *v = f(std::mem::take(v));
        }
    }
    if let Some(Value::Object(defs)) = m.get_mut("$defs") {
        for v in defs.values_mut() {
            *v = f(std::mem::take(v));
        }
    }
}

/// The JSON Schema type of a JSON value.
pub(super) fn type_of_value(v: &Value) -> Option<&'static str> {
    match v {
        Value::String(_) => Some("string"),
        Value::Bool(_) => Some("boolean"),
        Value::Number(n) if n.is_f64() => Some("number"),
        Value::Number(_) => Some("integer"),
        Value::Null => Some("null"),
        Value::Array(_) => Some("array"),
        Value::Object(_) => Some("object"),
    }
}

/// Adds a line to the schema's description.
pub(super) fn append_description(m: &mut Map<String, Value>, text: &str) {
    let joined = match m.get("description") {
        Some(Value::String(d)) if !d.is_empty() => format!("{d}\n{text}"),
        _ => text.to_owned(),
    };
    m.insert("description".into(), Value::String(joined));
}

/// Whether the schema's `type` (a name or a list of names) includes `name`.
pub(crate) fn has_type(m: &Map<String, Value>, name: &str) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    }
}

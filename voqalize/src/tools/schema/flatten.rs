//! Choices of object shapes (what schemars writes for enums with data and `#[serde(flatten)]`
//! enums): fixed fields distributed into every branch, and at the root the branches united into
//! one object.

use serde_json::{Map, Value, json};

use super::keywords::append_description;
use super::merge::unite_object_keys;

/// Whether `v` is one plain object shape (no choice of its own, no reference).
fn is_object_shape(v: &Value) -> bool {
    let Value::Object(m) = v else { return false };
    let object = match m.get("type") {
        Some(Value::String(t)) => t == "object",
        None => m.contains_key("properties"),
        _ => false,
    };
    object
        && !m.contains_key("anyOf")
        && !m.contains_key("$ref")
        && !matches!(m.get("additionalProperties"), Some(Value::Object(_)))
}

/// Fixed fields beside a choice of object shapes (`properties`/`required` beside `anyOf`, what
/// schemars writes for a `#[serde(flatten)]` enum): the fixed fields go into every branch (the
/// schema's own first), and the schema keeps only the choice. Left as it is when a branch is not
/// a plain object (then strict mode reports it).
pub(super) fn distribute_fields(m: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = m.get("anyOf") else {
        return;
    };
    if !(m.contains_key("properties") || m.contains_key("required"))
        || branches.is_empty()
        || !branches.iter().all(is_object_shape)
        || matches!(m.get("type"), Some(t) if t != "object")
        || matches!(m.get("additionalProperties"), Some(Value::Object(_)))
    {
        return;
    }
    let props = match m.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let required = match m.remove("required") {
        Some(Value::Array(r)) => r,
        _ => Vec::new(),
    };
    m.remove("type");
    m.remove("additionalProperties");
    m.remove("minProperties");
    m.remove("maxProperties");
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        for b in branches.iter_mut() {
            let Value::Object(branch) = std::mem::take(b) else {
                continue;
            };
            let mut complete = Map::new();
            complete.insert("type".into(), json!("object"));
            complete.insert("properties".into(), Value::Object(props.clone()));
            complete.insert("required".into(), Value::Array(required.clone()));
            for (k, v) in branch {
                if let Some((k, v)) = unite_object_keys(&mut complete, k, v) {
                    complete.insert(k, v);
                }
            }
            if matches!(complete.get("required"), Some(Value::Array(r)) if r.is_empty()) {
                complete.remove("required");
            }
            *b = Value::Object(complete);
        }
    }
}

/// Two schemas for one field name in different shapes: one string enum when both are, one schema
/// when they are equal, else a choice.
fn unite_field(a: Value, b: Value) -> Value {
    if a == b {
        return a;
    }
    let string_enum = |v: &Value| {
        v.get("type") == Some(&json!("string")) && matches!(v.get("enum"), Some(Value::Array(_)))
    };
    if string_enum(&a) && string_enum(&b) {
        let mut a = a;
        if let (Some(Value::Array(mine)), Some(Value::Array(theirs))) =
            (a.get("enum").cloned(), b.get("enum"))
        {
            let mut all = mine;
            for v in theirs {
                if !all.contains(v) {
                    all.push(v.clone());
                }
            }
            a["enum"] = Value::Array(all);
        }
        return a;
    }
    let mut branches = match a {
        Value::Object(mut m) if m.len() == 1 && matches!(m.get("anyOf"), Some(Value::Array(_))) => {
            match m.remove("anyOf") {
                Some(Value::Array(bs)) => bs,
                _ => Vec::new(),
            }
        }
        other => vec![other],
    };
    if !branches.contains(&b) {
        branches.push(b);
    }
    json!({ "anyOf": branches })
}

/// A root that is a choice of object shapes (after [`distribute_fields`]) becomes one object with
/// every field of every shape; the fields every shape requires stay required. The safe form for
/// every provider: Gemini's schema subset and OpenAI both want an object at the root, and OpenAI
/// forbids a root `anyOf`. The dispatcher still checks the exact shape when it deserialises.
/// Returns how many shapes were united.
pub(super) fn unite_root_choices(root: &mut Value) -> Option<usize> {
    let Value::Object(m) = root else { return None };
    let Some(Value::Array(branches)) = m.get("anyOf") else {
        return None;
    };
    if m.contains_key("properties") || !branches.iter().all(is_object_shape) {
        return None;
    }
    let Some(Value::Array(branches)) = m.remove("anyOf") else {
        return None;
    };
    let count = branches.len();
    let mut props = Map::new();
    let mut required: Option<Vec<Value>> = None;
    let mut notes = Vec::new();
    let mut needs: Vec<(String, Vec<Value>)> = Vec::new();
    let mut untagged: Vec<String> = Vec::new();
    for b in branches {
        let Value::Object(mut b) = b else { continue };
        let mine: Vec<Value> = match b.remove("required") {
            Some(Value::Array(r)) => r,
            _ => Vec::new(),
        };
        // The shape's tag (its one-value fields), to say which fields it needs.
        let tags = shape_tags(&b);
        if tags.is_empty() {
            let names = quoted_names(&mine);
            if !names.is_empty() {
                untagged.push(names.join(" + "));
            }
        } else {
            needs.push((tags.join(", "), mine.clone()));
        }
        required = Some(match required {
            None => mine,
            Some(all) => all.into_iter().filter(|r| mine.contains(r)).collect(),
        });
        if let Some(Value::Object(p)) = b.remove("properties") {
            for (k, v) in p {
                let united = match props.remove(&k) {
                    Some(old) => unite_field(old, v),
                    None => v,
                };
                props.insert(k, united);
            }
        }
        if let Some(Value::String(d)) = b.get("description") {
            notes.push(d.clone());
        }
    }
    let common = required.unwrap_or_default();
    notes.extend(requirement_notes(&untagged, needs, &common));
    m.insert("type".into(), json!("object"));
    m.insert("properties".into(), Value::Object(props));
    if !common.is_empty() {
        m.insert("required".into(), Value::Array(common));
    }
    if !notes.is_empty() {
        append_description(m, &notes.join("\n"));
    }
    Some(count)
}

/// The one-value fields of a shape (its tag), as "`name` = value".
fn shape_tags(shape: &Map<String, Value>) -> Vec<String> {
    match shape.get("properties") {
        Some(Value::Object(p)) => p
            .iter()
            .filter_map(|(k, v)| match v.get("enum") {
                Some(Value::Array(vals)) if vals.len() == 1 => Some(format!("`{k}` = {}", vals[0])),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Field names in backquotes.
fn quoted_names(names: &[Value]) -> Vec<String> {
    names
        .iter()
        .filter_map(|r| r.as_str().map(|r| format!("`{r}`")))
        .collect()
}

/// What the united object's description says about the shapes it stands for: which untagged
/// shapes are alternatives, and which fields each tagged shape needs beyond the `common` ones.
fn requirement_notes(
    untagged: &[String],
    needs: Vec<(String, Vec<Value>)>,
    common: &[Value],
) -> Vec<String> {
    let mut notes = Vec::new();
    if untagged.len() > 1 {
        notes.push(format!(
            "Send the fields of exactly one of these shapes: {}.",
            untagged.join(" | ")
        ));
    }
    for (tag, mine) in needs {
        let extra: Vec<Value> = mine.into_iter().filter(|r| !common.contains(r)).collect();
        let extra = quoted_names(&extra);
        if !extra.is_empty() {
            notes.push(format!("With {tag}: {} required.", extra.join(", ")));
        }
    }
    notes
}

//! Step 2: dialect-independent simplification (see the module above for the rules).

use serde_json::{Map, Value, json};

use super::flatten::distribute_fields;
use super::formats::drop_number_format;
use super::keywords::{append_description, map_children, type_of_value};
use super::merge::unite_object_keys;

/// Simplifies `v` and its subschemas; `bounds`: also drop the `minimum`/`maximum` that only
/// restate an integer type's range (see [`drop_number_format`]).
pub(super) fn simplify(v: Value, bounds: bool) -> Value {
    let Value::Object(mut m) = v else {
        return v;
    };
    tuple_to_items(&mut m);
    map_children(&mut m, &mut |c| simplify(c, bounds));
    if let Some(one_of) = m.remove("oneOf") {
        if m.contains_key("anyOf") {
            m.insert("oneOf".into(), one_of);
        } else {
            m.insert("anyOf".into(), one_of);
        }
    }
    if let Some(Value::Array(all)) = m.remove("allOf") {
        for branch in all {
            let Value::Object(b) = branch else { continue };
            for (k, v) in b {
                if let Some((k, v)) = unite_object_keys(&mut m, k, v)
                    && !m.contains_key(&k)
                {
                    m.insert(k, v);
                }
            }
        }
    }
    if let Some(c) = m.remove("const") {
        if !m.contains_key("type")
            && let Some(t) = type_of_value(&c)
        {
            m.insert("type".into(), json!(t));
        }
        m.entry("enum").or_insert_with(|| Value::Array(vec![c]));
    }
    collapse_string_choices(&mut m);
    distribute_fields(&mut m);
    for key in [
        "$schema",
        "title",
        "$id",
        "$comment",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
    ] {
        m.remove(key);
    }
    drop_number_format(&mut m, bounds);
    Value::Object(m)
}

/// `anyOf` whose branches are all string constants (a unit enum with documented variants)
/// becomes one string enum; the variants' docs go to the description.
fn collapse_string_choices(m: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = m.get("anyOf") else {
        return;
    };
    if branches.is_empty() {
        return;
    }
    let mut values = Vec::new();
    let mut notes = Vec::new();
    for b in branches {
        let Value::Object(b) = b else { return };
        if b.keys()
            .any(|k| !matches!(k.as_str(), "type" | "enum" | "description"))
        {
            return;
        }
        if b.get("type") != Some(&json!("string")) {
            return;
        }
        let Some(Value::Array(vals)) = b.get("enum") else {
            return;
        };
        if vals.is_empty() || !vals.iter().all(Value::is_string) {
            return;
        }
        if let (Some(Value::String(d)), [Value::String(v)]) = (b.get("description"), &vals[..]) {
            notes.push(format!("`{v}`: {d}"));
        }
        values.extend(vals.iter().cloned());
    }
    m.remove("anyOf");
    m.insert("type".into(), json!("string"));
    m.insert("enum".into(), Value::Array(values));
    if !notes.is_empty() {
        append_description(m, &notes.join("\n"));
    }
}

/// Replaces `prefixItems` (a tuple) by one `items` schema: the common one, or an `anyOf`.
fn tuple_to_items(m: &mut Map<String, Value>) {
    if let Some(Value::Array(prefix)) = m.remove("prefixItems")
        && (!m.contains_key("items") || m.get("items") == Some(&Value::Bool(false)))
    {
        let mut distinct: Vec<Value> = Vec::new();
        for p in prefix {
            if !distinct.contains(&p) {
                distinct.push(p);
            }
        }
        let items = match distinct.len() {
            0 => json!({}),
            1 => distinct.pop().unwrap_or_default(),
            _ => json!({ "anyOf": distinct }),
        };
        m.insert("items".into(), items);
    }
}

//! Every node of every rewritten schema, walked and checked against its provider's rules.

use super::*;
use crate::tools::schema::reference::SchemaRef;

/// Visits every schema node (not property-name maps) with its path.
pub(super) fn walk(v: &Value, at: &str, f: &mut dyn FnMut(&str, &serde_json::Map<String, Value>)) {
    let Value::Object(m) = v else {
        return;
    };
    f(at, m);
    for key in ["properties", "patternProperties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = m.get(key) {
            for (name, c) in children {
                walk(c, &format!("{at}/{key}/{name}"), f);
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = m.get(key) {
            for (i, c) in children.iter().enumerate() {
                walk(c, &format!("{at}/{key}/{i}"), f);
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(c) = m.get(key) {
            walk(c, &format!("{at}/{key}"), f);
        }
    }
}

/// Every key anywhere in `v` (keys of property maps excluded).
pub(super) fn keys_anywhere(v: &Value) -> HashSet<String> {
    let mut keys = HashSet::new();
    walk(v, "", &mut |_, m| keys.extend(m.keys().cloned()));
    keys
}

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

pub(super) fn assert_gemini_node(name: &str, at: &str, m: &serde_json::Map<String, Value>) {
    let here = format!("{name} (Gemini) at {at:?}: {}", Value::Object(m.clone()));
    for k in m.keys() {
        assert!(GEMINI_KEYS.contains(&k.as_str()), "{here}: key {k}");
    }
    match m.get("type") {
        Some(Value::String(t)) => assert!(
            ["string", "number", "integer", "boolean", "array", "object"].contains(&t.as_str()),
            "{here}: type {t}"
        ),
        None => assert!(m.contains_key("anyOf"), "{here}: no type"),
        Some(other) => panic!("{here}: type {other}"),
    }
    if let Some(Value::Array(branches)) = m.get("anyOf") {
        for b in branches {
            assert!(
                b.get("type").is_some_and(Value::is_string),
                "{here}: branch without type"
            );
        }
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        assert!(
            values.iter().all(Value::is_string),
            "{here}: non-string enum"
        );
        assert_eq!(m.get("type"), Some(&json!("string")), "{here}");
    }
    if let Some(Value::String(f)) = m.get("format") {
        assert!(f == "date-time" || f == "enum", "{here}: format {f}");
    }
    if m.get("type") == Some(&json!("array")) {
        assert!(
            m.get("items").is_some_and(Value::is_object),
            "{here}: array without items"
        );
    } else {
        assert!(!m.contains_key("items"), "{here}: items on a non-array");
    }
    if let Some(Value::Array(req)) = m.get("required") {
        let props = m.get("properties").and_then(Value::as_object);
        for r in req {
            let r = r.as_str().unwrap();
            assert!(
                props.is_some_and(|p| p.contains_key(r)),
                "{here}: required {r}"
            );
        }
    }
    if m.contains_key("properties") {
        assert_eq!(m.get("type"), Some(&json!("object")), "{here}");
    }
    if let Some(n) = m.get("nullable") {
        assert_eq!(n, &json!(true), "{here}");
    }
}

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

pub(super) fn is_object_node(m: &serde_json::Map<String, Value>) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => m.contains_key("properties"),
    }
}

pub(super) fn assert_strict_node(
    name: &str,
    at: &str,
    m: &serde_json::Map<String, Value>,
    root: &Value,
) {
    let here = format!("{name} (strict) at {at:?}: {}", Value::Object(m.clone()));
    for k in m.keys() {
        assert!(STRICT_KEYS.contains(&k.as_str()), "{here}: key {k}");
    }
    if let Some(Value::String(r)) = m.get("$ref") {
        assert_eq!(m.len(), 1, "{here}: $ref with siblings");
        assert!(ref_target(root, r).is_some(), "{here}: dangling {r}");
        return;
    }
    assert!(
        m.contains_key("type") || m.contains_key("anyOf"),
        "{here}: neither type nor anyOf"
    );
    if is_object_node(m) {
        assert_eq!(
            m.get("additionalProperties"),
            Some(&json!(false)),
            "{here}: additionalProperties"
        );
        let props: Vec<&String> = m["properties"].as_object().unwrap().keys().collect();
        let required: Vec<&str> = m["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(props, required, "{here}: required is not every property");
    }
    if let Some(Value::String(f)) = m.get("format") {
        assert!(
            [
                "date-time",
                "time",
                "date",
                "duration",
                "email",
                "hostname",
                "ipv4",
                "ipv6",
                "uuid"
            ]
            .contains(&f.as_str()),
            "{here}: format {f}"
        );
    }
}

pub(super) fn ref_target<'v>(root: &'v Value, r: &str) -> Option<&'v Value> {
    SchemaRef::parse(r)?.target(root)
}

pub(super) fn assert_openai_node(
    name: &str,
    at: &str,
    m: &serde_json::Map<String, Value>,
    root: &Value,
) {
    let here = format!("{name} (OpenAI) at {at:?}: {}", Value::Object(m.clone()));
    for k in [
        "$schema",
        "title",
        "oneOf",
        "allOf",
        "const",
        "definitions",
        "prefixItems",
    ] {
        assert!(!m.contains_key(k), "{here}: key {k}");
    }
    if let Some(Value::String(r)) = m.get("$ref") {
        assert!(ref_target(root, r).is_some(), "{here}: dangling {r}");
    }
    if let Some(Value::String(f)) = m.get("format") {
        assert!(
            !f.starts_with("int") && !f.starts_with("uint") && f != "double" && f != "float",
            "{here}: format {f}"
        );
    }
}

/// The names of the types that are recursive (the only `$ref`s OpenAI keeps).
pub(super) fn recursive_ref_ok(r: &str) -> bool {
    r == "#" || r == "#/$defs/Tree"
}

#[test]
fn every_node_of_every_rewritten_schema_fits_its_provider() {
    for (name, neutral) in all_examples() {
        for dialect in Dialect::ALL {
            let out = schema::rewrite(&neutral, dialect);
            let root = out.schema.clone();
            assert_eq!(
                root.get("type"),
                Some(&json!("object")),
                "{name} {dialect:?}"
            );
            walk(&root, "", &mut |at, m| {
                match dialect {
                    Dialect::Gemini => assert_gemini_node(name, at, m),
                    Dialect::OpenAi => assert_openai_node(name, at, m, &root),
                    Dialect::OpenAiStrict => {
                        assert_openai_node(name, at, m, &root);
                        if out.strict_problems.is_empty() {
                            assert_strict_node(name, at, m, &root);
                        }
                    }
                }
                if let Some(Value::String(r)) = m.get("$ref") {
                    assert!(dialect != Dialect::Gemini, "{name}: $ref for Gemini");
                    assert!(
                        recursive_ref_ok(r),
                        "{name} {dialect:?}: non-recursive $ref {r}"
                    );
                }
            });
            if let Some(Value::Object(defs)) = root.get("$defs") {
                for (def, schema) in defs {
                    assert!(
                        recursive_ref_ok(&format!("#/$defs/{def}")),
                        "{name}: $defs/{def}"
                    );
                    walk(schema, &format!("$defs/{def}"), &mut |at, m| {
                        assert_openai_node(name, at, m, &root);
                        if dialect == Dialect::OpenAiStrict && out.strict_problems.is_empty() {
                            assert_strict_node(name, at, m, &root);
                        }
                    });
                }
            }
        }
    }
}

#[test]
fn strict_is_refused_only_for_open_objects_and_any_values() {
    let problems = |v: &Value| schema::rewrite(v, Dialect::OpenAiStrict).strict_problems;
    assert!(problems(&neutral::<Query>()).is_empty());
    assert!(problems(&neutral::<Reserve>()).is_empty());
    assert!(problems(&neutral::<Settings>()).is_empty());
    assert!(problems(&neutral::<Tree>()).is_empty());
    let book = problems(&neutral::<BookTable>());
    assert_eq!(book.len(), 1, "{book:?}");
    assert!(book[0].contains("`extras` is a map"), "{book:?}");
    let kitchen = problems(&neutral::<Kitchen>());
    assert!(
        kitchen.iter().any(|p| p.contains("`any` accepts any JSON")),
        "{kitchen:?}"
    );
    assert!(
        kitchen.iter().any(|p| p.contains("`map` is a map")),
        "{kitchen:?}"
    );
}

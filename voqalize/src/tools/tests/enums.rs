//! Regressions: enums with data, flattened enums, defaults inside variants, maps and any values.

use super::providers::{
    assert_gemini_node, assert_openai_node, assert_strict_node, ref_target, walk,
};
use super::*;

/// A booking: a walk-in, or a named guest (an internally tagged newtype variant).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
enum Booking {
    WalkIn,
    Guest(Guest),
}

/// Book.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Book {
    booking: Booking,
    later: Option<Booking>,
}

/// A figure (internally tagged, with a defaulted field in a variant).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
#[allow(dead_code)]
enum Figure {
    Circle {
        r: f64,
        #[serde(default)]
        label: String,
    },
    Square {
        side: u32,
    },
}

/// An externally tagged enum with a defaulted field.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
enum Stroke {
    Line {
        len: u32,
        #[serde(default)]
        width: u32,
    },
    Dot,
}

/// An adjacently tagged enum with a defaulted field.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "t", content = "c")]
#[allow(dead_code)]
enum Brush {
    Line {
        len: u32,
        #[serde(default)]
        width: u32,
    },
    Spray(u8),
}

/// Draw.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Draw {
    figure: Figure,
    stroke: Stroke,
    brush: Brush,
    figures: Vec<Figure>,
    maybe: Option<Figure>,
}

/// Filter: a query beside a flattened enum.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Filter {
    /// What to look for.
    query: String,
    #[serde(flatten)]
    figure: Figure,
}

/// Only a flattened enum.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct OnlyFigure {
    #[serde(flatten)]
    figure: Figure,
}

/// Flattened enums below the root.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Filters {
    first: Filter,
    second: Option<Filter>,
    all: Vec<Filter>,
}

/// A map with integer keys.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Rename {
    names: HashMap<u32, String>,
}

/// Rows of any JSON.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Batch {
    rows: Vec<Value>,
}

fn more_examples() -> Vec<(&'static str, Value)> {
    vec![
        ("Book", neutral::<Book>()),
        ("Draw", neutral::<Draw>()),
        ("Filter", neutral::<Filter>()),
        ("OnlyFigure", neutral::<OnlyFigure>()),
        ("Filters", neutral::<Filters>()),
        ("Rename", neutral::<Rename>()),
        ("Batch", neutral::<Batch>()),
    ]
}

/// Every node of every rewritten schema of the new examples fits its provider, and no boolean
/// schema is left anywhere (`items: true` is a schema too).
#[test]
fn every_node_of_the_enum_flatten_and_map_examples_fits_its_provider() {
    fn no_booleans(v: &Value, at: &str, here: &str) {
        let Value::Object(m) = v else { return };
        for (k, c) in m {
            let child = format!("{at}/{k}");
            match k.as_str() {
                "properties" | "patternProperties" | "$defs" => {
                    for (name, s) in c.as_object().into_iter().flatten() {
                        assert!(!s.is_boolean(), "{here}: boolean schema at {child}/{name}");
                        no_booleans(s, &format!("{child}/{name}"), here);
                    }
                }
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                    for (i, s) in c.as_array().into_iter().flatten().enumerate() {
                        assert!(!s.is_boolean(), "{here}: boolean schema at {child}/{i}");
                        no_booleans(s, &format!("{child}/{i}"), here);
                    }
                }
                "items" | "not" => {
                    assert!(!c.is_boolean(), "{here}: boolean schema at {child}");
                    no_booleans(c, &child, here);
                }
                "additionalProperties" => {
                    // `false` is how strict mode closes an object; `true` would be a schema.
                    assert_ne!(c, &json!(true), "{here}: boolean schema at {child}");
                    no_booleans(c, &child, here);
                }
                _ => {}
            }
        }
    }
    for (name, neutral) in more_examples() {
        for dialect in Dialect::ALL {
            let out = schema::rewrite(&neutral, dialect);
            let root = out.schema.clone();
            let here = format!("{name} {dialect:?}: {root}");
            assert_eq!(root.get("type"), Some(&json!("object")), "{here}");
            if dialect != Dialect::OpenAi {
                no_booleans(&root, "", &here);
            }
            if dialect == Dialect::Gemini {
                let props = root.get("properties").and_then(Value::as_object);
                assert!(props.is_some_and(|p| !p.is_empty()), "{here}: no fields");
            }
            walk(&root, "", &mut |at, m| {
                // A choice between shapes never sits beside fixed fields: each branch is complete.
                if m.contains_key("anyOf") {
                    assert!(
                        !m.contains_key("properties") && !m.contains_key("required"),
                        "{here}: anyOf beside properties at {at:?}"
                    );
                }
                if at.is_empty() && dialect != Dialect::OpenAi {
                    assert!(!m.contains_key("anyOf"), "{here}: anyOf at the root");
                }
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
            });
        }
    }
}

#[test]
fn a_ref_keeps_the_target_fields_beside_its_siblings() {
    let n = neutral::<Book>();
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&n, dialect).schema;
        let branches = s["properties"]["booking"]["anyOf"].as_array().unwrap();
        let guest = branches
            .iter()
            .find(|b| b["properties"]["kind"]["enum"] == json!(["guest"]))
            .unwrap_or_else(|| panic!("{dialect:?}: no guest branch in {s}"));
        let props: Vec<&String> = guest["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            props,
            ["name", "party_size", "kind"],
            "{dialect:?}: {guest}"
        );
        let mut required: Vec<&str> = guest["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["kind", "name", "party_size"], "{dialect:?}");
        assert_eq!(guest["properties"]["name"]["type"], json!("string"));
    }
}

#[test]
fn a_flattened_enum_keeps_every_field_and_strict_falls_back() {
    for (name, n) in [
        ("Filter", neutral::<Filter>()),
        ("OnlyFigure", neutral::<OnlyFigure>()),
    ] {
        // The root: one object with every field of every shape (Gemini and OpenAI take no
        // choice at the root); the fields every shape needs stay required.
        for dialect in [Dialect::Gemini, Dialect::OpenAi] {
            let s = schema::rewrite(&n, dialect).schema;
            let props = s["properties"].as_object().unwrap();
            for field in ["kind", "r", "label", "side"] {
                assert!(
                    props.contains_key(field),
                    "{name} {dialect:?}: {field} in {s}"
                );
            }
            assert!(s["required"].as_array().unwrap().contains(&json!("kind")));
            let mut kinds: Vec<&str> = s["properties"]["kind"]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            kinds.sort_unstable();
            assert_eq!(kinds, ["Circle", "Square"], "{name} {dialect:?}: {s}");
        }
        let problems = schema::rewrite(&n, Dialect::OpenAiStrict).strict_problems;
        assert!(!problems.is_empty(), "{name}: strict claimed");
        let decl = ToolDecl::new(info("filter", 0), Some(n.clone()), None);
        assert_eq!(decl.openai(true)["strict"], json!(false));
        assert!(decl.gemini().get("parameters").is_some(), "{name}");
    }
    // Below the root, each branch is a complete object (and strict is met).
    let n = neutral::<Filters>();
    let out = schema::rewrite(&n, Dialect::OpenAiStrict);
    assert!(out.strict_problems.is_empty(), "{:?}", out.strict_problems);
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&n, dialect).schema;
        for b in s["properties"]["first"]["anyOf"].as_array().unwrap() {
            assert!(b["properties"].get("query").is_some(), "{dialect:?}: {b}");
            assert!(b["properties"].get("kind").is_some(), "{dialect:?}: {b}");
        }
    }
}

#[test]
fn maps_with_other_keys_and_any_values_are_not_strict() {
    let rename = schema::rewrite(&neutral::<Rename>(), Dialect::OpenAiStrict).strict_problems;
    assert!(
        rename.iter().any(|p| p.contains("`names` is a map")),
        "{rename:?}"
    );
    let batch = schema::rewrite(&neutral::<Batch>(), Dialect::OpenAiStrict).strict_problems;
    assert!(
        batch
            .iter()
            .any(|p| p.contains("`rows[]` accepts any JSON")),
        "{batch:?}"
    );
    let loose = schema::rewrite(&neutral::<Batch>(), Dialect::OpenAi).schema;
    assert_eq!(loose["properties"]["rows"]["items"], json!({}));
    let gemini = schema::rewrite(&neutral::<Batch>(), Dialect::Gemini).schema;
    assert_eq!(
        gemini["properties"]["rows"]["items"],
        json!({"type": "object"})
    );
}

/// Sample values shaped by a rewritten schema: `branch` picks among `anyOf` branches and enum
/// values; `nulls` sends `null` wherever the schema allows it, and leaves out what it need not send.
fn sample(s: &Value, root: &Value, branch: usize, nulls: bool, depth: usize) -> Value {
    assert!(depth < 40, "sample too deep: {s}");
    if let Some(Value::String(r)) = s.get("$ref") {
        let target = ref_target(root, r).unwrap().clone();
        return sample(&target, root, branch, nulls, depth + 1);
    }
    if let Some(Value::Array(bs)) = s.get("anyOf") {
        let (null, rest): (Vec<&Value>, Vec<&Value>) = bs
            .iter()
            .partition(|b| b.get("type") == Some(&json!("null")));
        if nulls && !null.is_empty() || rest.is_empty() {
            return Value::Null;
        }
        return sample(rest[branch % rest.len()], root, branch, nulls, depth + 1);
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if nulls && (types.contains(&"null") || s.get("nullable") == Some(&json!(true))) {
        return Value::Null;
    }
    if let Some(Value::Array(vals)) = s.get("enum") {
        let vals: Vec<&Value> = vals.iter().filter(|v| !v.is_null()).collect();
        return vals[branch % vals.len()].clone();
    }
    match types.iter().find(|t| **t != "null").copied() {
        Some("string") => json!("x"),
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => {
            let items = s.get("items").cloned().unwrap_or(json!({}));
            json!([sample(&items, root, branch, nulls, depth + 1)])
        }
        _ => {
            let mut out = serde_json::Map::new();
            let required: Vec<&Value> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().collect())
                .unwrap_or_default();
            for (k, p) in s
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let needed = required.contains(&&json!(k));
                if nulls && !needed {
                    continue;
                }
                out.insert(k.clone(), sample(p, root, branch, nulls, depth + 1));
            }
            Value::Object(out)
        }
    }
}

/// `united_root`: the root is a united choice of shapes (a flattened enum), whose non-strict
/// schema cannot say which fields each shape needs: only complete samples are sent.
fn round_trip<T: serde::de::DeserializeOwned + JsonSchema + std::fmt::Debug>(
    name: &str,
    united_root: bool,
) {
    let n = neutral::<T>();
    let decl = ToolDecl::new(info("t", 0), Some(n.clone()), None);
    for dialect in Dialect::ALL {
        let out = schema::rewrite(&n, dialect);
        if dialect == Dialect::OpenAiStrict && !out.strict_problems.is_empty() {
            continue;
        }
        for nulls in [false, true] {
            if nulls && united_root {
                continue;
            }
            for branch in 0..3 {
                let v = sample(&out.schema, &out.schema, branch, nulls, 0);
                let prepared = dispatch::prepare(&decl, Arguments::Json(v.clone()))
                    .unwrap_or_else(|e| panic!("{name} {dialect:?} {v}: {e}"));
                if let Err(e) = serde_json::from_value::<T>(prepared) {
                    panic!("{name} {dialect:?} nulls={nulls} branch={branch}: {v}: {e}");
                }
            }
        }
    }
}

#[test]
fn schema_shaped_arguments_round_trip_through_the_dispatcher() {
    round_trip::<Transfer>("Transfer", false);
    round_trip::<Reserve>("Reserve", false);
    round_trip::<Query>("Query", false);
    round_trip::<Settings>("Settings", false);
    round_trip::<Book>("Book", false);
    round_trip::<Draw>("Draw", false);
    round_trip::<Filter>("Filter", true);
    round_trip::<OnlyFigure>("OnlyFigure", true);
    round_trip::<Filters>("Filters", false);
}

#[test]
fn strict_null_inside_an_enum_variant_means_absent() {
    let n = neutral::<Draw>();
    let d: Draw = parse(
        &n,
        json!({
            "figure": {"kind": "Circle", "r": 1.0, "label": null},
            "stroke": {"Line": {"len": 3, "width": null}},
            "brush": {"t": "Line", "c": {"len": 3, "width": null}},
            "figures": [{"kind": "Circle", "r": 2.0, "label": null}, {"kind": "Square", "side": 2}],
            "maybe": {"kind": "Circle", "r": 1.0, "label": null},
        }),
    );
    assert!(matches!(d.figure, Figure::Circle { ref label, .. } if label.is_empty()));
    assert!(matches!(d.stroke, Stroke::Line { width: 0, len: 3 }));
    assert!(matches!(d.brush, Brush::Line { width: 0, len: 3 }));
    let f: Filter = parse(
        &neutral::<Filter>(),
        json!({"query": "q", "kind": "Circle", "r": 1.0, "label": null}),
    );
    assert!(matches!(f.figure, Figure::Circle { ref label, .. } if label.is_empty()));
}

#[test]
fn a_long_non_object_argument_is_cut_in_the_error() {
    let decl = ToolDecl::new(info("t", 0), Some(neutral::<Transfer>()), None);
    let long = Value::Array(vec![json!("é-long-value"); 100]);
    let e = dispatch::prepare(&decl, Arguments::Json(long.clone())).unwrap_err();
    assert!(e.message.len() < 300, "{}", e.message);
    assert!(
        e.message
            .ends_with(&format!("... ({} bytes)", long.to_string().len())),
        "{}",
        e.message
    );
    let e = dispatch::prepare(&decl, Arguments::Json(json!([1]))).unwrap_err();
    assert_eq!(e.message, "the arguments must be a JSON object, got [1]");
}

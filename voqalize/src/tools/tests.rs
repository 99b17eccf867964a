//! Schema rewrites over field-faults F01–F06 (every node of every rewritten schema walked) and the
//! dispatcher.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::schema::{self, Dialect};
use super::*;
use crate::private::{self, ToolInfo, ToolRun};

// ---------------------------------------------------------------------------------------------
// Example argument structs.

/// F01.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct BookTable {
    city: String,
    extras: HashMap<String, String>,
}

/// F02.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Transfer {
    department: String,
    note: Option<String>,
    priority: Option<u8>,
}

/// A guest.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Guest {
    /// Who is coming.
    name: String,
    /// How many people.
    party_size: u8,
}

/// F03.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Reserve {
    /// The main guest.
    guest: Guest,
    /// Someone else, if the main guest cannot come.
    alt: Option<Guest>,
}

/// Stand-ins for `url::Url`, `uuid::Uuid` and `chrono::DateTime<Utc>`: the schemas their
/// schemars impls give.
macro_rules! string_with_format {
    ($name:ident, $format:literal) => {
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct $name(String);
        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string", "format": $format})
            }
        }
    };
}
string_with_format!(Url, "uri");
string_with_format!(Uuid, "uuid");
string_with_format!(DateTime, "date-time");
string_with_format!(Email, "email");

/// F04.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct OpenLink {
    link: Url,
    id: Uuid,
    count: u32,
    when: DateTime,
    mail: Email,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Paging {
    size: u32,
}

/// F05.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Query {
    text: String,
    filter: Option<String>,
    page: Paging,
}

/// F06.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Tagged {
    tags: std::option::Option<Vec<String>>,
}

/// A unit enum with a documented variant (schemars writes `oneOf` + `const`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Kind {
    /// The first kind.
    Alpha,
    Beta,
}

/// An internally tagged enum.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(dead_code)]
enum Step {
    Walk { meters: u32 },
    Ride { line: String, stops: Option<u16> },
}

/// An externally tagged enum with data.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
enum Shape {
    Circle(f64),
    Square { side: f64 },
    Nothing,
}

/// A recursive type.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Tree {
    label: String,
    children: Vec<Tree>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Extras {
    note: String,
}

/// Everything else schemars can write.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Kitchen {
    kind: Kind,
    maybe_kind: Option<Kind>,
    steps: Vec<Step>,
    shape: Shape,
    tree: Tree,
    pair: (u8, String),
    any: Value,
    set: HashSet<String>,
    map: BTreeMap<String, Guest>,
    #[serde(rename = "ID")]
    id: i64,
    ratio: f64,
    #[serde(default)]
    count: u32,
    #[serde(default)]
    paging: Option<Paging>,
    guests: Option<Vec<Guest>>,
    unit: (),
    #[serde(flatten)]
    extras: Extras,
}

/// Settings with defaults (optional, not nullable).
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Settings {
    #[serde(default)]
    volume: u8,
    #[serde(default)]
    page: Option<Paging>,
    #[serde(default = "default_label")]
    label: String,
}

fn default_label() -> String {
    "none".into()
}

fn neutral<T: JsonSchema>() -> Value {
    schema::neutral_schema::<T>()
}

fn all_examples() -> Vec<(&'static str, Value)> {
    vec![
        ("BookTable", neutral::<BookTable>()),
        ("Transfer", neutral::<Transfer>()),
        ("Reserve", neutral::<Reserve>()),
        ("OpenLink", neutral::<OpenLink>()),
        ("Query", neutral::<Query>()),
        ("Tagged", neutral::<Tagged>()),
        ("Kitchen", neutral::<Kitchen>()),
        ("Settings", neutral::<Settings>()),
        ("Tree", neutral::<Tree>()),
        ("Guest", neutral::<Guest>()),
        ("empty", schema::empty_parameters()),
    ]
}

// ---------------------------------------------------------------------------------------------
// Walkers.

/// Visits every schema node (not property-name maps) with its path.
fn walk(v: &Value, at: &str, f: &mut dyn FnMut(&str, &serde_json::Map<String, Value>)) {
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
fn keys_anywhere(v: &Value) -> HashSet<String> {
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

fn assert_gemini_node(name: &str, at: &str, m: &serde_json::Map<String, Value>) {
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

fn is_object_node(m: &serde_json::Map<String, Value>) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => m.contains_key("properties"),
    }
}

fn assert_strict_node(name: &str, at: &str, m: &serde_json::Map<String, Value>, root: &Value) {
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

fn ref_target<'v>(root: &'v Value, r: &str) -> Option<&'v Value> {
    if r == "#" {
        return Some(root);
    }
    root.get("$defs")?.get(r.strip_prefix("#/$defs/")?)
}

fn assert_openai_node(name: &str, at: &str, m: &serde_json::Map<String, Value>, root: &Value) {
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
fn recursive_ref_ok(r: &str) -> bool {
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

// ---------------------------------------------------------------------------------------------
// F01–F06, one by one.

#[test]
fn f01_gemini_drops_keys_it_does_not_model_and_openai_keeps_the_object() {
    let n = neutral::<BookTable>();
    let g = schema::rewrite(&n, Dialect::Gemini).schema;
    let keys = keys_anywhere(&g);
    for k in ["$schema", "additionalProperties", "const"] {
        assert!(!keys.contains(k), "{k} in {g}");
    }
    assert_eq!(g["properties"]["extras"], json!({"type": "object"}));
    assert_eq!(g["properties"]["city"], json!({"type": "string"}));

    let o = schema::rewrite(&n, Dialect::OpenAi).schema;
    assert_eq!(
        o["properties"]["extras"],
        json!({"type": "object", "additionalProperties": {"type": "string"}})
    );
    assert_eq!(o["additionalProperties"], json!(false));
    assert!(!keys_anywhere(&o).contains("$schema"));
}

#[test]
fn f02_options_are_nullable_for_gemini_and_null_reads_as_none() {
    let g = schema::rewrite(&neutral::<Transfer>(), Dialect::Gemini).schema;
    assert_eq!(
        g["properties"]["note"],
        json!({"type": "string", "nullable": true})
    );
    assert_eq!(
        g["properties"]["priority"],
        json!({"type": "integer", "nullable": true})
    );
    assert_eq!(g["required"], json!(["department"]));
    let t: Transfer = parse(
        &neutral::<Transfer>(),
        json!({"department": "billing", "note": null}),
    );
    assert_eq!(t.department, "billing");
    assert!(t.note.is_none() && t.priority.is_none());
}

#[test]
fn f03_nested_structs_are_inlined_with_their_docs() {
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&neutral::<Reserve>(), dialect).schema;
        let keys = keys_anywhere(&s);
        for k in ["$ref", "$defs", "definitions"] {
            assert!(!keys.contains(k), "{dialect:?}: {k} in {s}");
        }
        let guest = &s["properties"]["guest"];
        assert_eq!(guest["type"], json!("object"), "{dialect:?} {s}");
        assert_eq!(guest["description"], json!("The main guest."));
        assert_eq!(guest["required"], json!(["name", "party_size"]));
        assert_eq!(
            guest["properties"]["name"]["description"],
            json!("Who is coming.")
        );
        assert_eq!(
            guest["properties"]["party_size"]["description"],
            json!("How many people.")
        );
        let alt = &s["properties"]["alt"];
        match dialect {
            Dialect::Gemini => {
                assert_eq!(alt["type"], json!("object"));
                assert_eq!(alt["nullable"], json!(true));
                assert_eq!(alt["properties"], guest["properties"]);
                assert_eq!(alt["required"], guest["required"]);
                assert_eq!(
                    alt["description"],
                    json!("Someone else, if the main guest cannot come.")
                );
            }
            Dialect::OpenAi | Dialect::OpenAiStrict => {
                let branches = alt["anyOf"].as_array().unwrap();
                assert_eq!(branches.len(), 2, "{alt}");
                assert_eq!(branches[0]["properties"], guest["properties"]);
                assert_eq!(branches[0]["required"], guest["required"]);
                assert_eq!(branches[1], json!({"type": "null"}));
            }
        }
    }
}

#[test]
fn f04_gemini_keeps_only_formats_it_accepts() {
    let g = schema::rewrite(&neutral::<OpenLink>(), Dialect::Gemini).schema;
    let p = &g["properties"];
    assert_eq!(p["link"], json!({"type": "string"}));
    assert_eq!(p["id"], json!({"type": "string"}));
    assert_eq!(p["count"], json!({"type": "integer"}));
    assert_eq!(p["when"], json!({"type": "string", "format": "date-time"}));
    assert_eq!(p["mail"], json!({"type": "string"}));

    let strict = schema::rewrite(&neutral::<OpenLink>(), Dialect::OpenAiStrict).schema;
    let p = &strict["properties"];
    assert_eq!(p["link"], json!({"type": "string"}));
    assert_eq!(p["id"], json!({"type": "string", "format": "uuid"}));
    assert_eq!(p["when"], json!({"type": "string", "format": "date-time"}));
    let loose = schema::rewrite(&neutral::<OpenLink>(), Dialect::OpenAi).schema;
    assert_eq!(
        loose["properties"]["link"],
        json!({"type": "string", "format": "uri"})
    );
    assert_eq!(
        loose["properties"]["count"],
        json!({"type": "integer", "minimum": 0})
    );
}

#[test]
fn f05_strict_mode_is_met_without_making_options_mandatory() {
    let n = neutral::<Query>();
    let strict = schema::rewrite(&n, Dialect::OpenAiStrict);
    assert!(strict.strict_problems.is_empty());
    let s = strict.schema;
    assert_eq!(s["required"], json!(["text", "filter", "page"]));
    assert_eq!(
        s["properties"]["filter"],
        json!({"type": ["string", "null"]})
    );
    assert_eq!(s["additionalProperties"], json!(false));
    assert_eq!(
        s["properties"]["page"]["additionalProperties"],
        json!(false)
    );
    assert_eq!(s["properties"]["page"]["required"], json!(["size"]));
    let q: Query = parse(
        &n,
        json!({"text": "a", "filter": null, "page": {"size": 2}}),
    );
    assert_eq!((q.text.as_str(), q.filter, q.page.size), ("a", None, 2));

    let loose = schema::rewrite(&n, Dialect::OpenAi).schema;
    assert_eq!(loose["required"], json!(["text", "page"]));
    assert!(!keys_anywhere(&loose).contains("additionalProperties"));
}

#[test]
fn f05_strict_null_for_a_defaulted_field_means_absent() {
    let n = neutral::<Settings>();
    let s = schema::rewrite(&n, Dialect::OpenAiStrict).schema;
    assert_eq!(
        s["properties"]["volume"]["type"],
        json!(["integer", "null"])
    );
    assert_eq!(s["properties"]["label"]["type"], json!(["string", "null"]));
    let settings: Settings = parse(&n, json!({"volume": null, "page": null, "label": null}));
    assert_eq!(settings.volume, 0);
    assert!(settings.page.is_none());
    assert_eq!(settings.label, "none");
}

#[test]
fn f06_a_fully_qualified_option_is_still_optional() {
    let n = neutral::<Tagged>();
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&n, dialect).schema;
        let tags = &s["properties"]["tags"];
        assert_eq!(tags["items"], json!({"type": "string"}), "{dialect:?} {s}");
        if dialect != Dialect::OpenAiStrict {
            assert!(s.get("required").is_none_or(|r| r == &json!([])), "{s}");
        }
    }
    let t: Tagged = parse(&n, json!({"tags": null}));
    assert!(t.tags.is_none());
    let t: Tagged = parse(&n, json!({}));
    assert!(t.tags.is_none());
}

#[test]
fn enums_and_recursion() {
    let n = neutral::<Kitchen>();
    let g = schema::rewrite(&n, Dialect::Gemini).schema;
    let p = &g["properties"];
    assert_eq!(p["kind"]["type"], json!("string"));
    let mut kinds: Vec<&str> = p["kind"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["alpha", "beta"]);
    assert!(
        p["kind"]["description"]
            .as_str()
            .unwrap()
            .contains("`alpha`: The first kind.")
    );
    assert_eq!(p["maybe_kind"]["nullable"], json!(true));
    assert_eq!(p["maybe_kind"]["type"], json!("string"));
    // The tagged enum: branches with a one-value enum for the tag.
    let walk_branch = &p["steps"]["items"]["anyOf"][0];
    assert_eq!(
        walk_branch["properties"]["type"],
        json!({"type": "string", "enum": ["walk"]})
    );
    // The recursive type ends in an object for Gemini...
    assert_eq!(
        p["tree"]["properties"]["children"]["items"],
        json!({"type": "object"})
    );
    // ...and keeps one `$defs` entry for OpenAI.
    let o = schema::rewrite(&n, Dialect::OpenAi).schema;
    assert_eq!(
        o["properties"]["tree"]["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Tree"})
    );
    assert_eq!(o["$defs"].as_object().unwrap().len(), 1);
    // A recursive root refers to itself.
    let t = schema::rewrite(&neutral::<Tree>(), Dialect::OpenAiStrict).schema;
    assert_eq!(t["properties"]["children"]["items"], json!({"$ref": "#"}));
    // Flattened fields land in the properties; renamed fields keep their wire name.
    assert!(g["properties"].get("note").is_some());
    assert!(g["properties"].get("ID").is_some());
}

#[test]
fn declarations_per_provider() {
    let with = ToolDecl::new(info("transfer", 0), Some(neutral::<Transfer>()), None);
    let without = ToolDecl::new(info("ping", 1), None, None);
    assert_eq!(
        without.schema(),
        &json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        without.gemini(),
        json!({"name": "ping", "description": "Does ping."})
    );
    assert!(with.gemini()["parameters"]["properties"].is_object());
    let o = with.openai(false);
    assert_eq!(o["type"], json!("function"));
    assert_eq!(o["name"], json!("transfer"));
    assert_eq!(o["strict"], json!(false));
    assert_eq!(o["parameters"]["required"], json!(["department"]));
    let o = with.openai(true);
    assert_eq!(o["strict"], json!(true));
    assert_eq!(
        o["parameters"]["required"],
        json!(["department", "note", "priority"])
    );
    let c = with.chat(true);
    assert_eq!(c["function"]["strict"], json!(true));
    assert_eq!(c["function"]["name"], json!("transfer"));
    assert!(with.chat(false)["function"].get("strict").is_none());
    assert_eq!(
        without.openai(false)["parameters"],
        json!({"type": "object", "properties": {}})
    );
    // A map cannot be strict: the tool goes out strict: false with the loose schema.
    let book = ToolDecl::new(info("book", 2), Some(neutral::<BookTable>()), None);
    let o = book.openai(true);
    assert_eq!(o["strict"], json!(false));
    assert_eq!(o["parameters"], *book.parameters(Dialect::OpenAi));
}

#[test]
fn a_non_struct_argument_is_left_out_of_every_turn() {
    #[derive(Deserialize, JsonSchema)]
    enum Choice {
        A,
        B,
    }
    let decl = private::declare::<Choice>(info("choose", 0));
    assert!(schema::root_problem(decl.schema()).is_some());
    let table: &'static [ToolDecl] = Box::leak(vec![decl].into_boxed_slice());
    assert!(ToolSet::from_table(table, |_| true).is_empty());
    let _ = (Choice::A, Choice::B);
}

fn parse<T: serde::de::DeserializeOwned>(neutral: &Value, arguments: Value) -> T {
    let decl = ToolDecl::new(info("t", 0), Some(neutral.clone()), None);
    let prepared = dispatch::prepare(&decl, Arguments::Json(arguments)).unwrap();
    serde_json::from_value(prepared).unwrap()
}

fn info(name: &'static str, index: usize) -> ToolInfo {
    let description: &'static str = Box::leak(format!("Does {name}.").into_boxed_str());
    ToolInfo {
        name,
        description,
        needs_result_now: false,
        method: Box::leak(format!("Desk::{name}").into_boxed_str()),
        index,
    }
}

// ---------------------------------------------------------------------------------------------
// The dispatcher, on a brain written the way `#[brain]` writes one.

#[derive(Default)]
struct Desk {
    signed_in: AtomicBool,
    runs: AtomicUsize,
}

#[derive(Debug)]
struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused: {}", self.0)
    }
}

#[derive(Serialize)]
struct Booked {
    table: u32,
}

impl Desk {
    async fn transfer(&self, args: Transfer) -> String {
        format!("{}:{:?}", args.department, args.priority)
    }
    async fn reserve(&self, args: Reserve) -> Result<Booked, Refused> {
        if args.guest.party_size > 8 {
            Err(Refused("too many"))
        } else {
            Ok(Booked { table: 7 })
        }
    }
    async fn ping(&self) {}
    async fn boom(&self) -> u32 {
        panic!("kaput")
    }
    async fn slow(&self) -> &'static str {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        "late"
    }
    async fn secret(&self) -> &'static str {
        "42"
    }
}

impl Toolbox for Desk {
    fn tools(&self) -> &'static [ToolDecl] {
        private::tool_table::<Self>(|| {
            vec![
                private::declare::<Transfer>(info("transfer", 0)),
                private::declare::<Reserve>(info("reserve", 1)),
                private::declare_without_args(info("ping", 2)),
                private::declare_without_args(info("boom", 3)),
                private::declare_without_args(info("slow", 4)),
                private::declare_without_args(info("secret", 5)),
            ]
        })
    }

    fn tool_visible(&self, tool: &ToolDecl) -> bool {
        tool.name() != "secret" || self.signed_in.load(Ordering::SeqCst)
    }

    // The borrow in `(&Probe::of(&out)).kind()` picks the conversion (autoref specialisation).
    #[allow(clippy::needless_borrow)]
    fn __run_tool(&self, index: usize, arguments: Value) -> ToolRun<'_> {
        use private::{Probe, ViaPlain as _, ViaResult as _};
        self.runs.fetch_add(1, Ordering::SeqCst);
        match index {
            0 => Box::pin(async move {
                let args = private::parse_args::<Transfer>(arguments)?;
                let out = self.transfer(args).await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            1 => Box::pin(async move {
                let args = private::parse_args::<Reserve>(arguments)?;
                let out = self.reserve(args).await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            2 => Box::pin(async move {
                let out = self.ping().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            3 => Box::pin(async move {
                let out = self.boom().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            4 => Box::pin(async move {
                let out = self.slow().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            5 => Box::pin(async move {
                let out = self.secret().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            _ => private::unknown_index(index),
        }
    }
}

async fn call(desk: &Desk, name: &str, arguments: impl Into<Arguments>) -> ToolOutcome {
    let turn = desk.tools_for_turn();
    desk.call_tool(&turn, name, arguments.into()).await
}

#[tokio::test]
async fn a_call_runs_the_tool_and_returns_its_json() {
    let desk = Desk::default();
    let out = call(
        &desk,
        "transfer",
        json!({"department": "billing", "priority": 3}),
    )
    .await;
    assert_eq!(out.result, Ok(json!("billing:Some(3)")));
    assert_eq!(out.response(), json!({"result": "billing:Some(3)"}));
    let out = call(&desk, "ping", "").await;
    assert_eq!(out.response(), json!({"result": null}));
    let out = call(
        &desk,
        "reserve",
        r#"{"guest": {"name": "Ada", "party_size": 2}, "alt": null}"#,
    )
    .await;
    assert_eq!(out.result, Ok(json!({"table": 7})));
}

#[tokio::test]
async fn gemini_floats_count_as_integers() {
    let desk = Desk::default();
    let out = call(
        &desk,
        "transfer",
        json!({"department": "b", "priority": 3.0}),
    )
    .await;
    assert_eq!(out.result, Ok(json!("b:Some(3)")));
    let out = call(
        &desk,
        "transfer",
        json!({"department": "b", "priority": 3.5}),
    )
    .await;
    assert_eq!(
        out.result.unwrap_err().kind,
        ToolErrorKind::InvalidArguments
    );
}

#[tokio::test]
async fn every_failure_is_an_error_the_model_reads() {
    let desk = Desk::default();

    let out = call(&desk, "nope", "{}").await;
    let e = out.result.clone().unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unknown);
    assert_eq!(
        out.response(),
        json!({"error": "there is no tool named 'nope'"})
    );

    let e = call(
        &desk,
        "reserve",
        json!({"guest": {"name": "A", "party_size": "x"}}),
    )
    .await
    .result
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    assert!(e.message.contains("`guest.party_size`"), "{e}");
    assert!(e.message.contains("expected u8"), "{e}");

    let e = call(&desk, "reserve", json!({})).await.result.unwrap_err();
    assert_eq!(e.message, "invalid arguments: missing field `guest`");

    let e = call(&desk, "transfer", "{not json")
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    assert!(
        e.message.starts_with("the arguments are not valid JSON"),
        "{e}"
    );

    let e = call(&desk, "transfer", json!([1]))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.message, "the arguments must be a JSON object, got [1]");

    let e = call(
        &desk,
        "reserve",
        json!({"guest": {"name": "A", "party_size": 9}}),
    )
    .await
    .result
    .unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ToolErrorKind::Failed, "refused: too many")
    );

    let e = call(&desk, "boom", "{}").await.result.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Panicked);
    assert!(e.message.contains("kaput"), "{e}");

    // The brain is fine afterwards.
    let out = call(&desk, "ping", "{}").await;
    assert!(!out.is_error());
}

#[tokio::test]
async fn a_hidden_tool_cannot_run_even_when_named() {
    let desk = Desk::default();
    let turn = desk.tools_for_turn();
    assert!(!turn.contains("secret"));
    assert_eq!(turn.len(), 5);
    let before = desk.runs.load(Ordering::SeqCst);
    let e = desk
        .call_tool(&turn, "secret", Arguments::Raw("{}".into()))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Hidden);
    assert_eq!(desk.runs.load(Ordering::SeqCst), before);

    // Signing in mid-turn does not change this turn's set; the next turn sees the tool.
    desk.signed_in.store(true, Ordering::SeqCst);
    let e = desk
        .call_tool(&turn, "secret", Arguments::Raw("{}".into()))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Hidden);
    let out = call(&desk, "secret", "{}").await;
    assert_eq!(out.result, Ok(json!("42")));

    // A set built from another table runs nothing.
    let foreign = ToolSet::from_table(
        Box::leak(vec![ToolDecl::new(info("ping", 2), None, None)].into_boxed_slice()),
        |_| true,
    );
    let e = desk
        .call_tool(&foreign, "ping", Arguments::Raw("{}".into()))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Hidden);
}

#[test]
fn the_call_future_is_send_and_the_table_is_built_once() {
    // A brain can be used as a trait object.
    let boxed: Box<dyn Toolbox> = Box::new(Desk::default());
    assert_eq!(boxed.tools_for_turn().len(), 5);
    fn assert_send<T: Send>(_: &T) {}
    let desk = Desk::default();
    let turn = desk.tools_for_turn();
    let fut = desk.call_tool(&turn, "ping", Arguments::Raw(String::new()));
    assert_send(&fut);
    drop(fut);
    assert!(std::ptr::eq(desk.tools(), Desk::default().tools()));
}

/// Captures log lines.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_slow_call_logs_one_warning_and_is_not_cancelled() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let desk = Desk::default();
            let slow = call(&desk, "slow", "{}").await;
            let fast = call(&desk, "ping", "{}").await;
            (slow, fast)
        })
    });
    // Only what is stable under load: the slow call ran to its end, took at least its sleep and was
    // reported over the budget. The measured time is never compared to an upper bound or read
    // digit by digit (a loaded machine makes it anything above 30 ms).
    assert_eq!(out.0.result, Ok(json!("late")));
    assert!(out.0.elapsed.as_millis() >= 30);
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    // The fast call is not judged: under load even it may go over the budget.
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("budget") && l.contains("tool Desk::slow took "))
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("WARN"), "{text}");
    assert!(warnings[0].contains("ms, over the 20ms budget"), "{text}");
    let reported: u64 = warnings[0]
        .split("took ")
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no time in {text}"));
    assert!(reported >= 30, "{text}");
}

// ---------------------------------------------------------------------------------------------
// Rule 4: inside a turn, a tool reaches the session serving it (what `self.session()` reads).

#[derive(Serialize)]
struct ShowSection {
    name: &'static str,
}

impl crate::actions::Action for ShowSection {
    const NAME: &'static str = "show_section";
}

struct Screen;

impl Screen {
    async fn show(&self) -> String {
        let session = private::current_session();
        session.dispatch(&ShowSection { name: "week" }).unwrap();
        session.id().to_owned()
    }
}

impl Toolbox for Screen {
    fn tools(&self) -> &'static [ToolDecl] {
        private::tool_table::<Self>(|| vec![private::declare_without_args(info("show", 0))])
    }

    #[allow(clippy::needless_borrow)]
    fn __run_tool(&self, index: usize, _: Value) -> ToolRun<'_> {
        #[allow(unused_imports)]
        use private::{Probe, ViaPlain as _, ViaResult as _};
        match index {
            0 => Box::pin(async move {
                let out = self.show().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            _ => private::unknown_index(index),
        }
    }
}

impl crate::Brain for Screen {
    async fn on_user_message(
        &self,
        turn: &mut crate::Turn,
        _: crate::wire::UserMessage,
    ) -> crate::BrainResult {
        let tools = self.tools_for_turn();
        let out = self
            .call_tool(&tools, "show", Arguments::Raw(String::new()))
            .await;
        turn.say(&out.response().to_string());
        Ok(())
    }
}

#[tokio::test]
async fn inside_a_turn_a_tool_reaches_the_session_serving_it() {
    let mut v = crate::testing::Voqalize::in_process(|| Screen);
    v.start_silent().await.unwrap();
    let turn = v.user_says("show the week").await.unwrap();
    assert_eq!(turn.text(), r#"{"result":"test-session"}"#);
    // The command went out before the turn's speech, so the turn's record already holds it.
    assert_eq!(
        v.ui_commands(),
        [json!({"command": "show_section", "payload": {"name": "week"}})]
    );
}

#[test]
#[should_panic(expected = "self.session() was called outside a session")]
fn outside_a_session_the_session_is_a_clear_panic() {
    let _ = private::current_session();
}

// ---------------------------------------------------------------------------------------------
// Regressions: enums with data, flattened enums, defaults inside variants, maps and any values.

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

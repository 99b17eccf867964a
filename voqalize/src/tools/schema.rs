//! The neutral parameter schema of a tool and its per-provider rewrites (voice-core.md §3 and the
//! Decisions table).
//!
//! Every rewrite starts from the same neutral schema (schemars, draft 2020-12, deserialize contract,
//! doc comments kept, properties in declaration order) and goes through the same first steps:
//!
//! 1. **Inline** every `$ref` (`#`, `#/$defs/..`, `#/definitions/..`); the reference's siblings
//!    are merged with the target ([`merge_schema`]: `properties` and `required` united, so an
//!    internally tagged newtype variant keeps the wrapped struct's fields beside its tag;
//!    annotations such as `description` and `default` from the siblings). A boolean subschema
//!    `true` becomes `{}`. A reference back into a type that is being
//!    inlined (a recursive type) is the only one left: Gemini gets `{"type":"object"}` there, OpenAI
//!    keeps a `$ref` into a `$defs` that holds just the recursive types.
//! 2. **Simplify**: `oneOf` → `anyOf` (serde's enums have disjoint branches), `allOf` merged,
//!    `const` → a one-value `enum`, an `anyOf` of string constants → one string `enum` (documented
//!    variants are listed in the description), `title`/`$schema`/`$id`/`$comment`/`examples` dropped,
//!    schemars' non-standard number formats (`uint8`, `int64`, `double`...) dropped. Fixed fields
//!    beside a choice of shapes (a struct with a `#[serde(flatten)]` enum: `properties` beside
//!    `anyOf`) are copied into every branch, so each branch is a complete object and the choice
//!    stands alone ([`distribute_fields`]). At the root, where no provider takes a choice (OpenAI
//!    forbids a root `anyOf`; Gemini's OpenAPI subset wants an object), the branches are united
//!    into one object holding every field, with the fields every branch needs required
//!    ([`unite_root_choices`]); strict mode cannot express that and falls back to `strict: false`.
//! 3. The dialect's own pass: [`Dialect::Gemini`], [`Dialect::OpenAi`], [`Dialect::OpenAiStrict`].

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// Which provider a parameter schema is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Gemini function declarations (`parameters`, the OpenAPI-3.0 subset): no `$ref`/`$defs`,
    /// `additionalProperties`, `const`, `title`, `default`, type arrays or non-string enums; an
    /// optional value is `"nullable": true`; only the `date-time` and `enum` formats survive.
    Gemini,
    /// OpenAI Responses and chat completions with `strict: false` (the default): plain JSON
    /// Schema with references inlined.
    OpenAi,
    /// OpenAI Responses and chat completions with `strict: true` (opt-in): every object has
    /// `additionalProperties: false` and lists every property in `required`; an optional property
    /// accepts `null` instead (the dispatcher reads that `null` as "absent").
    OpenAiStrict,
}

impl Dialect {
    #[cfg(test)]
    pub(crate) const ALL: [Dialect; 3] = [Dialect::Gemini, Dialect::OpenAi, Dialect::OpenAiStrict];

    pub(crate) fn index(self) -> usize {
        match self {
            Dialect::Gemini => 0,
            Dialect::OpenAi => 1,
            Dialect::OpenAiStrict => 2,
        }
    }
}

/// The schema of a tool without an argument: an empty parameter object.
pub(crate) fn empty_parameters() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The neutral schema of an argument struct.
pub(crate) fn neutral_schema<T: JsonSchema + ?Sized>() -> Value {
    let mut settings = SchemaSettings::draft2020_12().for_deserialize();
    settings.meta_schema = None;
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(root) = &mut value
        && root.get("type") == Some(&json!("object"))
        && !root.contains_key("properties")
    {
        root.insert("properties".into(), Value::Object(Map::new()));
    }
    value
}

/// Why a neutral schema cannot be a tool's parameter object (the root is not an object). A root
/// that is only a `$ref` (a newtype around a struct) is judged by its target.
pub(crate) fn root_problem(neutral: &Value) -> Option<String> {
    let mut root = neutral;
    for _ in 0..8 {
        let Some(Value::String(reference)) = root.get("$ref") else {
            break;
        };
        let target = match RefKey::parse(reference) {
            Some(RefKey::Def(name)) => ["$defs", "definitions"]
                .iter()
                .find_map(|k| neutral.get(*k).and_then(|d| d.get(&name))),
            _ => None,
        };
        match target {
            Some(t) => root = t,
            None => break,
        }
    }
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => None,
        Some(t) => Some(format!("its schema is of type {t}, not an object")),
        None => Some("its schema is not an object (an enum or an untagged union?)".into()),
    }
}

/// A rewritten schema, and for [`Dialect::OpenAiStrict`] the reasons it cannot be strict.
pub(crate) struct Rewritten {
    pub(crate) schema: Value,
    pub(crate) strict_problems: Vec<String>,
}

/// Rewrites a neutral schema for `dialect`.
pub(crate) fn rewrite(neutral: &Value, dialect: Dialect) -> Rewritten {
    let mut inliner = Inliner::new(neutral, dialect);
    let mut root = inliner.inline_root();
    let mut kept = Map::new();
    let mut i = 0;
    while i < inliner.kept.len() {
        let key = inliner.kept[i].clone();
        i += 1;
        if let RefKey::Def(name) = &key
            && let Some(target) = inliner.defs.get(name).cloned()
        {
            let mut stack = vec![key.clone()];
            let def = inliner.inline(&target, &mut stack);
            kept.insert(name.clone(), def);
        }
    }
    let bounds = dialect == Dialect::Gemini;
    root = simplify(root, bounds);
    let kept: Map<String, Value> = kept
        .into_iter()
        .map(|(k, v)| (k, simplify(v, bounds)))
        .collect();
    let mut problems = Vec::new();
    // One shape united is exact; several are not (strict would accept mixed shapes).
    if let Some(n) = unite_root_choices(&mut root)
        && n > 1
        && dialect == Dialect::OpenAiStrict
    {
        problems.push(format!(
            "the argument is a choice between {n} shapes of object (a `#[serde(flatten)]` enum); \
             strict mode needs one object at the root"
        ));
    }
    let mut schema = match dialect {
        Dialect::Gemini => gemini(root),
        Dialect::OpenAi => openai(root, false, "", &mut problems),
        Dialect::OpenAiStrict => openai(root, true, "", &mut problems),
    };
    if dialect != Dialect::Gemini && !kept.is_empty() {
        let strict = dialect == Dialect::OpenAiStrict;
        let defs: Map<String, Value> = kept
            .into_iter()
            .map(|(k, v)| {
                let at = format!("{k} (recursive)");
                (k, openai(v, strict, &at, &mut problems))
            })
            .collect();
        if let Value::Object(m) = &mut schema {
            m.insert("$defs".into(), Value::Object(defs));
        }
    }
    if dialect == Dialect::OpenAiStrict && schema.get("type") != Some(&json!("object")) {
        problems.push("the parameter schema is not an object".into());
    }
    Rewritten {
        schema,
        strict_problems: problems,
    }
}

// ---------------------------------------------------------------------------------------------
// Step 1: inlining.

#[derive(Debug, Clone, PartialEq, Eq)]
enum RefKey {
    Root,
    Def(String),
}

impl RefKey {
    fn parse(reference: &str) -> Option<RefKey> {
        if reference == "#" {
            return Some(RefKey::Root);
        }
        let name = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"))?;
        Some(RefKey::Def(name.replace("~1", "/").replace("~0", "~")))
    }

    fn canonical(&self) -> String {
        match self {
            RefKey::Root => "#".into(),
            RefKey::Def(name) => format!("#/$defs/{}", name.replace('~', "~0").replace('/', "~1")),
        }
    }
}

struct Inliner<'a> {
    root: &'a Value,
    defs: Map<String, Value>,
    dialect: Dialect,
    /// Recursive definitions that stay as `$defs` (OpenAI only), in discovery order.
    kept: Vec<RefKey>,
}

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
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
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];

impl<'a> Inliner<'a> {
    fn new(root: &'a Value, dialect: Dialect) -> Self {
        let mut defs = Map::new();
        for key in ["definitions", "$defs"] {
            if let Some(Value::Object(d)) = root.get(key) {
                for (k, v) in d {
                    defs.insert(k.clone(), v.clone());
                }
            }
        }
        Inliner {
            root,
            defs,
            dialect,
            kept: Vec::new(),
        }
    }

    fn inline_root(&mut self) -> Value {
        let mut stack = vec![RefKey::Root];
        let root = self.root;
        self.inline(root, &mut stack)
    }

    /// A schema in a position where `true` means "anything".
    fn inline_schema(&mut self, node: &Value, stack: &mut Vec<RefKey>) -> Value {
        match node {
            Value::Bool(true) => json!({}),
            other => self.inline(other, stack),
        }
    }

    fn inline(&mut self, node: &Value, stack: &mut Vec<RefKey>) -> Value {
        let Value::Object(m) = node else {
            return node.clone();
        };
        if let Some(Value::String(reference)) = m.get("$ref") {
            let siblings: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| k.as_str() != "$ref")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let siblings = match self.inline(&Value::Object(siblings), stack) {
                Value::Object(s) => s,
                _ => Map::new(),
            };
            let Some(key) = RefKey::parse(reference) else {
                return Value::Object(siblings);
            };
            let target = match &key {
                RefKey::Root => Some(self.root.clone()),
                RefKey::Def(name) => self.defs.get(name).cloned(),
            };
            let Some(target) = target else {
                return Value::Object(siblings);
            };
            if stack.contains(&key) {
                return self.recursive_ref(key, siblings);
            }
            stack.push(key);
            let inlined = self.inline_schema(&target, stack);
            stack.pop();
            let mut out = match inlined {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            merge_schema(&mut out, siblings);
            return Value::Object(out);
        }
        let mut out = Map::new();
        for (k, v) in m {
            let v = match k.as_str() {
                "$defs" | "definitions" | "$schema" => continue,
                key if SCHEMA_MAPS.contains(&key) => match v {
                    Value::Object(props) => Value::Object(
                        props
                            .iter()
                            .map(|(name, s)| (name.clone(), self.inline_schema(s, stack)))
                            .collect(),
                    ),
                    other => other.clone(),
                },
                key if SCHEMA_LISTS.contains(&key) => match v {
                    Value::Array(list) => {
                        Value::Array(list.iter().map(|s| self.inline_schema(s, stack)).collect())
                    }
                    other => other.clone(),
                },
                // `true` ("anything") becomes `{}`, so the later passes see a schema object
                // (and strict mode reports it); `false` stays (a closed object or tuple).
                key if ONE_SCHEMA.contains(&key) => self.inline_schema(v, stack),
                _ => v.clone(),
            };
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }

    fn recursive_ref(&mut self, key: RefKey, siblings: Map<String, Value>) -> Value {
        let description = siblings.get("description").cloned();
        match self.dialect {
            Dialect::Gemini => {
                let mut out = Map::new();
                out.insert("type".into(), json!("object"));
                if let Some(d) = description {
                    out.insert("description".into(), d);
                }
                Value::Object(out)
            }
            Dialect::OpenAi | Dialect::OpenAiStrict => {
                if !self.kept.contains(&key) {
                    self.kept.push(key.clone());
                }
                let mut out = Map::new();
                out.insert("$ref".into(), json!(key.canonical()));
                // Strict mode allows no sibling beside `$ref`.
                if self.dialect == Dialect::OpenAi
                    && let Some(d) = description
                {
                    out.insert("description".into(), d);
                }
                Value::Object(out)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Step 2: dialect-independent simplification.

/// schemars' format names that are not JSON Schema formats.
fn nonstandard_number_format(format: &str) -> bool {
    matches!(
        format,
        "int" | "uint" | "float" | "double" | "int8" | "int16" | "int32" | "int64" | "int128"
    ) || format.starts_with("uint") && format[4..].chars().all(|c| c.is_ascii_digit())
}

fn map_children(m: &mut Map<String, Value>, f: &mut impl FnMut(Value) -> Value) {
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

fn type_of_value(v: &Value) -> Option<&'static str> {
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

fn append_description(m: &mut Map<String, Value>, text: &str) {
    let joined = match m.get("description") {
        Some(Value::String(d)) if !d.is_empty() => format!("{d}\n{text}"),
        _ => text.to_owned(),
    };
    m.insert("description".into(), Value::String(joined));
}

/// The range schemars states for a Rust integer type beside its format (`uint8` → 0..=255).
fn implied_range(format: &str) -> (Option<i128>, Option<i128>) {
    match format {
        "uint8" => (Some(0), Some(u8::MAX.into())),
        "uint16" => (Some(0), Some(u16::MAX.into())),
        "uint32" => (Some(0), Some(u32::MAX.into())),
        "uint64" => (Some(0), Some(u64::MAX.into())),
        "uint" | "uint128" => (Some(0), None),
        "int8" => (Some(i8::MIN.into()), Some(i8::MAX.into())),
        "int16" => (Some(i16::MIN.into()), Some(i16::MAX.into())),
        "int32" => (Some(i32::MIN.into()), Some(i32::MAX.into())),
        "int64" => (Some(i64::MIN.into()), Some(i64::MAX.into())),
        _ => (None, None),
    }
}

/// `bounds`: also drop the `minimum`/`maximum` that only restate the integer type's range
/// (Gemini: F02 wants `{"type":"integer","nullable":true}` for an `Option<u8>`).
fn simplify(v: Value, bounds: bool) -> Value {
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
    if let Some(Value::String(f)) = m.get("format").cloned()
        && nonstandard_number_format(&f)
    {
        m.remove("format");
        if bounds {
            let (min, max) = implied_range(&f);
            for (key, implied) in [("minimum", min), ("maximum", max)] {
                let stated = m.get(key).and_then(|v| {
                    v.as_i64()
                        .map(i128::from)
                        .or_else(|| v.as_u64().map(i128::from))
                });
                if implied.is_some() && stated == implied {
                    m.remove(key);
                }
            }
        }
    }
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

/// Keys that describe a schema without constraining it: the referring side's win.
const ANNOTATIONS: &[&str] = &[
    "description",
    "default",
    "title",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// Unites `properties` (the first schema of a name wins) and `required` (no repeats) of another
/// schema into `target` when both have them; any other key comes back for the caller to place.
fn unite_object_keys(
    target: &mut Map<String, Value>,
    k: String,
    v: Value,
) -> Option<(String, Value)> {
    match (k.as_str(), target.get_mut(&k), v) {
        ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
            for (pk, pv) in theirs {
                mine.entry(pk).or_insert(pv);
            }
            None
        }
        ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
            for r in theirs {
                if !mine.contains(&r) {
                    mine.push(r);
                }
            }
            None
        }
        (_, _, v) => Some((k, v)),
    }
}

/// Merges `over` (a `$ref`'s siblings, or the schema around a one-branch `anyOf`) into `target`:
/// `properties` united in order (the target's first; a name in both keeps the target's schema),
/// `required` united, annotations from `over`, and any other key from the target unless the
/// target lacks it or only says "anything" (`true`, `{}`).
pub(crate) fn merge_schema(target: &mut Map<String, Value>, over: Map<String, Value>) {
    for (k, v) in over {
        let Some((k, v)) = unite_object_keys(target, k, v) else {
            continue;
        };
        let annotation = ANNOTATIONS.contains(&k.as_str());
        match target.get_mut(&k) {
            Some(mine) => {
                let vague = *mine == Value::Bool(true) || *mine == json!({});
                if annotation || vague {
                    *mine = v;
                }
            }
            None => {
                target.insert(k, v);
            }
        }
    }
}

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
fn distribute_fields(m: &mut Map<String, Value>) {
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
fn unite_root_choices(root: &mut Value) -> Option<usize> {
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
        let tags: Vec<String> = match b.get("properties") {
            Some(Value::Object(p)) => p
                .iter()
                .filter_map(|(k, v)| match v.get("enum") {
                    Some(Value::Array(vals)) if vals.len() == 1 => {
                        Some(format!("`{k}` = {}", vals[0]))
                    }
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        if tags.is_empty() {
            let names: Vec<String> = mine
                .iter()
                .filter_map(|r| r.as_str().map(|r| format!("`{r}`")))
                .collect();
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
    if untagged.len() > 1 {
        notes.push(format!(
            "Send the fields of exactly one of these shapes: {}.",
            untagged.join(" | ")
        ));
    }
    for (tag, mine) in needs {
        let extra: Vec<String> = mine
            .iter()
            .filter(|r| !common.contains(r))
            .filter_map(|r| r.as_str().map(|r| format!("`{r}`")))
            .collect();
        if !extra.is_empty() {
            notes.push(format!("With {tag}: {} required.", extra.join(", ")));
        }
    }
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

// ---------------------------------------------------------------------------------------------
// Step 3a: Gemini.

/// The keys Gemini's schema subset keeps (minus `title`, `default` and `example`, which the
/// Decisions table drops).
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

fn gemini(v: Value) -> Value {
    let mut m = match v {
        Value::Object(m) => m,
        // `true` or a stray scalar: anything goes; Gemini needs a type.
        _ => return json!({"type": "object"}),
    };
    // `anyOf` with a null branch (an `Option`) collapses before the branches are rewritten, while
    // the null branch is still recognisable.
    let mut nullable = m.remove("nullable") == Some(Value::Bool(true));
    while let Some(Value::Array(any)) = m.remove("anyOf") {
        let (nulls, mut rest): (Vec<Value>, Vec<Value>) = any.into_iter().partition(is_null_schema);
        nullable |= !nulls.is_empty();
        match rest.pop() {
            Some(Value::Object(branch)) if rest.is_empty() => {
                // The branch is the target, the schema around it the siblings: its fields merge
                // with the branch's instead of being dropped.
                let outer = std::mem::replace(&mut m, branch);
                merge_schema(&mut m, outer);
            }
            Some(last) => {
                rest.push(last);
                m.insert("anyOf".into(), Value::Array(rest));
                break;
            }
            None => break,
        }
    }
    map_children(&mut m, &mut gemini);
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        for b in branches.iter_mut() {
            if let Value::Object(b) = b
                && b.remove("nullable") == Some(Value::Bool(true))
            {
                nullable = true;
            }
        }
    }

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

    if let Some(Value::Array(values)) = m.remove("enum") {
        nullable |= values.iter().any(Value::is_null);
        let present: Vec<Value> = values.into_iter().filter(|v| !v.is_null()).collect();
        if !present.is_empty() && present.iter().all(Value::is_string) {
            m.insert("type".into(), json!("string"));
            m.insert("enum".into(), Value::Array(present));
        } else if !present.is_empty() {
            if !m.contains_key("type")
                && let Some(t) = present.first().and_then(type_of_value)
            {
                m.insert("type".into(), json!(t));
            }
            let listed: Vec<String> = present.iter().map(Value::to_string).collect();
            append_description(&mut m, &format!("One of: {}.", listed.join(", ")));
        }
    }

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
    let ty = m.get("type").and_then(Value::as_str).map(str::to_owned);

    if let Some(Value::String(f)) = m.get("format") {
        let keep = ty.as_deref() == Some("string") && (f == "date-time" || f == "enum");
        if !keep {
            m.remove("format");
        }
    }
    if ty.as_deref() == Some("array") {
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
    if ty.as_deref() == Some("object") {
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
    m.retain(|k, _| GEMINI_KEYS.contains(&k.as_str()));
    if nullable {
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
    Value::Object(m)
}

// ---------------------------------------------------------------------------------------------
// Step 3b: OpenAI (Responses and chat completions).

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

fn has_type(m: &Map<String, Value>, name: &str) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    }
}

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
fn make_nullable(v: Value) -> Value {
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

fn child_path(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}.{name}")
    }
}

fn openai(v: Value, strict: bool, at: &str, problems: &mut Vec<String>) -> Value {
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

//! The neutral parameter schema of a tool and its per-provider rewrites, one file per pass.
//!
//! Every rewrite starts from the same neutral schema (schemars, draft 2020-12, deserialize contract,
//! doc comments kept, properties in declaration order) and goes through the same first steps:
//!
//! 1. **Inline** ([`inline`]) every `$ref` (`#`, `#/$defs/..`, `#/definitions/..`, parsed by
//!    [`SchemaRef`], the one `$ref` parser); the reference's siblings are merged with the target
//!    ([`merge_schema`]: `properties` and `required` united, so an internally tagged newtype
//!    variant keeps the wrapped struct's fields beside its tag; annotations such as `description`
//!    and `default` from the siblings). A boolean subschema `true` becomes `{}`. A reference back
//!    into a type that is being inlined (a recursive type) is the only one left: Gemini gets
//!    `{"type":"object"}` there, OpenAI keeps a `$ref` into a `$defs` that holds just the
//!    recursive types.
//! 2. **Simplify** ([`mod@simplify`], [`formats`], [`flatten`]): `oneOf` → `anyOf` (serde's enums
//!    have disjoint branches), `allOf` merged, `const` → a one-value `enum`, an `anyOf` of string
//!    constants → one string `enum` (documented variants are listed in the description),
//!    `title`/`$schema`/`$id`/`$comment`/`examples` dropped, schemars' non-standard number formats
//!    (`uint8`, `int64`, `double`...) dropped. Fixed fields beside a choice of shapes (a struct
//!    with a `#[serde(flatten)]` enum: `properties` beside `anyOf`) are copied into every branch,
//!    so each branch is a complete object and the choice stands alone ([`distribute_fields`]). At
//!    the root, where no provider takes a choice (OpenAI forbids a root `anyOf`; Gemini's OpenAPI
//!    subset wants an object), the branches are united into one object holding every field, with
//!    the fields every branch needs required ([`unite_root_choices`]); strict mode cannot express
//!    that and falls back to `strict: false`.
//! 3. The dialect's own pass: [`Dialect::Gemini`] ([`mod@gemini`]), [`Dialect::OpenAi`] and
//!    [`Dialect::OpenAiStrict`] ([`mod@openai`], with [`nullable`]).
//!
//! [`merge_schema`]: merge::merge_schema
//! [`distribute_fields`]: flatten::distribute_fields
//! [`unite_root_choices`]: flatten::unite_root_choices

mod flatten;
mod formats;
mod gemini;
mod inline;
mod keywords;
mod losses;
mod merge;
mod nullable;
mod openai;
pub(crate) mod reference;
mod simplify;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use flatten::unite_root_choices;
use gemini::gemini;
use inline::{Inliner, RefKey};
pub(crate) use keywords::has_type;
pub use losses::SchemaLoss;
pub(crate) use nullable::accepts_null;
use openai::openai;
use reference::SchemaRef;
use simplify::simplify;

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

    /// The provider a declaration in this dialect goes to, for log lines.
    pub(crate) fn provider(self) -> &'static str {
        match self {
            Dialect::Gemini => "Gemini",
            Dialect::OpenAi => "OpenAI",
            Dialect::OpenAiStrict => "OpenAI (strict)",
        }
    }

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
        // A definition of either table, whichever the reference named.
        let target = match SchemaRef::parse(reference) {
            Some(SchemaRef::Def { name, .. }) => ["$defs", "definitions"]
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

/// A rewritten schema, for [`Dialect::OpenAiStrict`] the reasons it cannot be strict, and what
/// the dialect's pass dropped of the neutral schema.
pub(crate) struct Rewritten {
    pub(crate) schema: Value,
    pub(crate) strict_problems: Vec<String>,
    pub(crate) losses: Vec<SchemaLoss>,
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
    let before = root.clone();
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
    let losses = losses::losses(&before, &schema);
    Rewritten {
        schema,
        strict_problems: problems,
        losses,
    }
}

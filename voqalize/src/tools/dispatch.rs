//! Running one tool call: lookup against the turn's set, argument preparation, the call itself
//! (panics caught), timing and logging.

use std::panic::AssertUnwindSafe;
#[cfg(feature = "model")]
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use serde_json::{Map, Value, json};

use super::schema::reference::SchemaRef;
use super::schema::{accepts_null, has_type};
use super::{
    Arguments, TOOL_BUDGET_MS, ToolDecl, ToolError, ToolErrorKind, ToolFuture, ToolOutcome,
    ToolSet, Toolbox,
};
use crate::logline::outside;

pub(crate) fn call<'a, T: Toolbox + ?Sized>(
    brain: &'a T,
    turn: &ToolSet,
    name: &str,
    arguments: Arguments,
) -> ToolFuture<'a> {
    let failed = |kind, message: String| -> ToolFuture<'a> {
        // The caller decides how loud a failure is: the voice core warns once per session and
        // then counts, as a model can call a tool that does not exist sixteen times a reply.
        tracing::debug!("tool {} failed: {}", outside(name), outside(&message));
        let outcome = ToolOutcome {
            result: Err(ToolError::new(kind, message)),
            elapsed: std::time::Duration::ZERO,
        };
        Box::pin(std::future::ready(outcome))
    };
    let Some(decl) = brain.tools().iter().find(|t| t.name == name) else {
        return failed(
            ToolErrorKind::Unknown,
            format!("there is no tool named '{}'", shortened(name)),
        );
    };
    if !turn.holds(decl) {
        return failed(
            ToolErrorKind::Hidden,
            format!("the tool '{}' is not available now", shortened(name)),
        );
    }
    Box::pin(async move {
        let start = Instant::now();
        let result = run(brain, decl, arguments).await;
        let elapsed = start.elapsed();
        // The caller decides how loud a slow call is, as for a failure: the voice core warns
        // once per session and then counts.
        let ms = elapsed.as_secs_f64() * 1000.0;
        if ms > TOOL_BUDGET_MS as f64 {
            tracing::debug!(
                "tool {} took {}ms, over the {TOOL_BUDGET_MS}ms budget",
                decl.method,
                ms.round()
            );
        }
        if let Err(e) = &result {
            tracing::debug!("tool {} failed: {}", decl.name, outside(&e.message));
        }
        ToolOutcome { result, elapsed }
    })
}

async fn run<T: Toolbox + ?Sized>(
    brain: &T,
    decl: &ToolDecl,
    arguments: Arguments,
) -> Result<Value, ToolError> {
    let arguments = if decl.has_arguments {
        prepare(decl, arguments)?
    } else {
        // A tool without an argument ignores whatever the model sent.
        Value::Object(Map::new())
    };
    let super::Origin::Brain { index } = decl.origin else {
        // An added tool is run by its own runner (`call_added`), never by a brain.
        return Err(ToolError::new(
            ToolErrorKind::Unknown,
            format!("there is no tool named '{}' in this brain", decl.name),
        ));
    };
    caught(&decl.name, brain.__run_tool(index, arguments)).await
}

/// Runs a tool's future; a panic in it becomes an error the model reads.
async fn caught(
    name: &str,
    run: impl Future<Output = Result<Value, ToolError>>,
) -> Result<Value, ToolError> {
    match AssertUnwindSafe(run).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(ToolError::new(
            ToolErrorKind::Panicked,
            format!(
                "the tool '{name}' failed unexpectedly: {}",
                crate::recover::panic_message(&*panic)
            ),
        )),
    }
}

/// Runs a call to an added tool (an MCP server's) with its runner: the arguments made a JSON
/// object as for a `#[tool]`, a panic in the runner caught, the run timed. The future holds no
/// brain: it can be a task of its own.
#[cfg(feature = "model")]
pub(crate) async fn call_added(decl: Arc<ToolDecl>, arguments: Arguments) -> ToolOutcome {
    let start = Instant::now();
    let result = match (prepare(&decl, arguments), decl.added_origin()) {
        (Err(e), _) => Err(e),
        (Ok(_), None) => Err(ToolError::new(
            ToolErrorKind::Unknown,
            format!("the tool '{}' has no runner", decl.name),
        )),
        (Ok(arguments), Some(added)) => {
            caught(
                &decl.name,
                added.runner.run(added.remote.clone(), arguments),
            )
            .await
        }
    };
    if let Err(e) = &result {
        tracing::debug!("tool {} failed: {}", decl.method(), outside(&e.message));
    }
    ToolOutcome {
        result,
        elapsed: start.elapsed(),
    }
}

/// Parses the arguments into a JSON object fit for the argument struct.
pub(crate) fn prepare(decl: &ToolDecl, arguments: Arguments) -> Result<Value, ToolError> {
    let invalid = |m: String| ToolError::new(ToolErrorKind::InvalidArguments, m);
    let mut value = match arguments {
        Arguments::Json(v) => v,
        Arguments::Raw(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Arguments::Raw(text) => serde_json::from_str(&text).map_err(|e| {
            invalid(format!(
                "the arguments are not valid JSON: {}",
                shortened(&e.to_string())
            ))
        })?,
    };
    if value.is_null() {
        value = Value::Object(Map::new());
    }
    if !value.is_object() {
        return Err(invalid(format!(
            "the arguments must be a JSON object, got {}",
            shortened(&value.to_string())
        )));
    }
    integral_floats_to_integers(&mut value);
    let root = &decl.schema;
    drop_nulls_for_absent(&mut value, root, root, 0);
    Ok(value)
}

/// At most about 200 bytes of `text` (cut on a character boundary), with the full length in bytes
/// when it was cut: error text the model reads stays short.
pub(crate) fn shortened(text: &str) -> String {
    shortened_to(text, 200)
}

/// At most `keep` bytes of `text` (cut on a character boundary), then `... (N bytes)` with the
/// full length when it was cut.
pub(crate) fn shortened_to(text: &str, keep: usize) -> String {
    if text.len() <= keep {
        return text.to_owned();
    }
    let mut end = keep;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// Gemini sends every number as a float: `5.0` for an integer field. Integral values become
/// integers (floats fields accept integers, so nothing is lost).
pub(crate) fn integral_floats_to_integers(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
                if f.fract() == 0.0 && f.abs() <= EXACT {
                    // The range check above makes the cast exact.
                    #[allow(clippy::cast_possible_truncation)]
                    let i = f as i64;
                    *v = Value::from(i);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(m) => m.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

/// Follows `$ref` (the forms [`SchemaRef`] parses) within `root`.
fn resolve<'s>(schema: &'s Value, root: &'s Value, depth: usize) -> Option<&'s Value> {
    if depth > 32 {
        return None;
    }
    let Some(Value::String(reference)) = schema.get("$ref") else {
        return Some(schema);
    };
    let target = SchemaRef::parse(reference)?.target(root)?;
    resolve(target, root, depth + 1)
}

/// Strict mode makes every property required and lets the optional ones be `null`. For a property
/// that is optional in the argument struct but does not accept `null` itself (a `#[serde(default)]`
/// field), `null` means "absent": the key is removed so serde applies the default. This holds at
/// any depth: in properties, array items, map values, and inside enums (`anyOf`/`oneOf`: the
/// branch the value fits, see [`best_branch`]; `allOf`: every part; a `$ref` and its siblings).
pub(crate) fn drop_nulls_for_absent(value: &mut Value, schema: &Value, root: &Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let Value::Object(node) = schema else {
        return;
    };
    if let Some(Value::String(_)) = node.get("$ref") {
        if let Some(target) = resolve(schema, root, 0)
            && !std::ptr::eq(target, schema)
        {
            drop_nulls_for_absent(value, target, root, depth + 1);
        }
        // The reference's siblings (an internally tagged variant's tag) constrain too.
        if node.len() > 1 {
            let siblings: Map<String, Value> = node
                .iter()
                .filter(|(k, _)| k.as_str() != "$ref")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            drop_nulls_for_absent(value, &Value::Object(siblings), root, depth + 1);
        }
        return;
    }
    if let Some(Value::Array(parts)) = node.get("allOf") {
        for part in parts {
            drop_nulls_for_absent(value, part, root, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get(key)
            && !value.is_null()
            && let Some(branch) = best_branch(value, branches, root)
        {
            drop_nulls_for_absent(value, branch, root, depth + 1);
        }
    }
    match value {
        Value::Object(obj) => {
            let empty = Map::new();
            let props = match node.get("properties") {
                Some(Value::Object(p)) => p,
                _ => &empty,
            };
            let required: Vec<&str> = match node.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            obj.retain(|k, v| {
                let Some(p) = props.get(k) else { return true };
                !(v.is_null()
                    && !required.contains(&k.as_str())
                    && !resolve(p, root, 0).is_some_and(accepts_null))
            });
            let others = node.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in obj.iter_mut() {
                if let Some(p) = props.get(k) {
                    drop_nulls_for_absent(v, p, root, depth + 1);
                } else if let Some(a) = others {
                    drop_nulls_for_absent(v, a, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let prefix = match node.get("prefixItems") {
                Some(Value::Array(p)) => &p[..],
                _ => &[],
            };
            let rest = node.get("items").filter(|i| i.is_object());
            for (i, v) in items.iter_mut().enumerate() {
                if let Some(s) = prefix.get(i).or(rest) {
                    drop_nulls_for_absent(v, s, root, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// For a provider whose enums are strings (Gemini, docs/protocol.md §6.15): the model sends the
/// JSON text of a value the neutral schema lists (`"2"` for the `2` of an integer enum, `"true"`),
/// and this turns each such string back into that value before the argument struct reads it, at
/// any depth (properties, items, map values, every branch of a choice, `$ref`s). A string the
/// enum lists as a string stays one.
#[cfg(feature = "model")]
pub(crate) fn restore_enum_strings(decl: &ToolDecl, arguments: Arguments) -> Arguments {
    let mut value = match arguments {
        Arguments::Json(v) => v,
        Arguments::Raw(text) => match serde_json::from_str(&text) {
            Ok(v) => v,
            // `prepare` reports what is wrong with it.
            Err(_) => return Arguments::Raw(text),
        },
    };
    restore_strings(&mut value, &decl.schema, &decl.schema, 0);
    Arguments::Json(value)
}

/// One step of [`restore_enum_strings`]: `true` when `value` (a string) was turned back.
#[cfg(feature = "model")]
fn restore_strings(value: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > 64 {
        return false;
    }
    let Value::Object(node) = schema else {
        return false;
    };
    if let Value::String(text) = value {
        let listed = node
            .get("enum")
            .and_then(Value::as_array)
            .map(Vec::as_slice);
        let constant = node.get("const").map(std::slice::from_ref);
        for values in [listed, constant].into_iter().flatten() {
            if values.iter().any(|v| v.as_str() == Some(text.as_str())) {
                return false;
            }
            if let Some(v) = values
                .iter()
                .find(|v| !v.is_string() && v.to_string() == *text)
            {
                *value = v.clone();
                return true;
            }
        }
    }
    let mut restored = false;
    if node.contains_key("$ref")
        && let Some(target) = resolve(schema, root, 0)
        && !std::ptr::eq(target, schema)
    {
        restored |= restore_strings(value, target, root, depth + 1);
    }
    if let Some(Value::Array(parts)) = node.get("allOf") {
        for part in parts {
            restored |= restore_strings(value, part, root, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = node.get(key) else {
            continue;
        };
        if value.is_string() {
            // A scalar fits any branch: the first that lists it decides.
            for b in branches {
                if restore_strings(value, b, root, depth + 1) {
                    return true;
                }
            }
        } else if let Some(b) = best_branch(value, branches, root) {
            restored |= restore_strings(value, b, root, depth + 1);
        }
    }
    match value {
        Value::Object(obj) => {
            let props = node.get("properties").and_then(Value::as_object);
            let others = node.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in obj.iter_mut() {
                if let Some(p) = props.and_then(|p| p.get(k)).or(others) {
                    restored |= restore_strings(v, p, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let prefix = match node.get("prefixItems") {
                Some(Value::Array(p)) => &p[..],
                _ => &[],
            };
            let rest = node.get("items").filter(|i| i.is_object());
            for (i, v) in items.iter_mut().enumerate() {
                if let Some(s) = prefix.get(i).or(rest) {
                    restored |= restore_strings(v, s, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    restored
}

/// What an object schema says about an object's keys, `$ref`s, `allOf` parts and siblings
/// included: the properties and the required names.
fn object_view<'s>(
    schema: &'s Value,
    root: &'s Value,
    depth: usize,
    props: &mut Vec<(&'s str, &'s Value)>,
    required: &mut Vec<&'s str>,
) {
    if depth > 16 {
        return;
    }
    let Value::Object(node) = schema else { return };
    if node.contains_key("$ref")
        && let Some(target) = resolve(schema, root, 0)
        && !std::ptr::eq(target, schema)
    {
        object_view(target, root, depth + 1, props, required);
    }
    if let Some(Value::Object(p)) = node.get("properties") {
        props.extend(p.iter().map(|(k, v)| (k.as_str(), v)));
    }
    if let Some(Value::Array(r)) = node.get("required") {
        required.extend(r.iter().filter_map(Value::as_str));
    }
    if let Some(Value::Array(parts)) = node.get("allOf") {
        for part in parts {
            object_view(part, root, depth + 1, props, required);
        }
    }
}

/// The one value a schema allows, if it allows one (`const`, a one-value `enum`).
fn only_value<'s>(schema: &'s Value, root: &'s Value) -> Option<&'s Value> {
    let s = resolve(schema, root, 0)?;
    if let Some(c) = s.get("const") {
        return Some(c);
    }
    match s.get("enum") {
        Some(Value::Array(vals)) if vals.len() == 1 => vals.first(),
        _ => None,
    }
}

/// The branch of an `anyOf`/`oneOf` that `value` fits best: among the branches whose tags (one-value
/// properties) match and whose required keys are present, the one that knows most of the value's
/// keys. Branches of another JSON type never fit.
fn best_branch<'s>(value: &Value, branches: &'s [Value], root: &'s Value) -> Option<&'s Value> {
    let mut best: Option<(usize, &'s Value)> = None;
    for b in branches {
        let Some(resolved) = resolve(b, root, 0) else {
            continue;
        };
        let score = match value {
            Value::Object(obj) => {
                let mut props = Vec::new();
                let mut required = Vec::new();
                object_view(b, root, 0, &mut props, &mut required);
                let is_object = props.len() + required.len() > 0
                    || resolved.get("type") == Some(&json!("object"))
                    || resolved.get("anyOf").is_some()
                    || resolved.get("oneOf").is_some();
                if !is_object || required.iter().any(|r| !obj.contains_key(*r)) {
                    continue;
                }
                let tags_match =
                    props
                        .iter()
                        .all(|(k, p)| match (only_value(p, root), obj.get(*k)) {
                            (Some(want), Some(got)) => want == got,
                            _ => true,
                        });
                if !tags_match {
                    continue;
                }
                1 + obj
                    .keys()
                    .filter(|k| props.iter().any(|(name, _)| name == k))
                    .count()
            }
            Value::Array(_) => {
                if !type_allows(resolved, "array") {
                    continue;
                }
                1
            }
            _ => 1,
        };
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, b));
        }
    }
    best.map(|(_, b)| b)
}

/// Whether a schema lets a value of JSON type `name` through (a schema without `type` does).
fn type_allows(schema: &Value, name: &str) -> bool {
    match schema.as_object() {
        Some(m) => !m.contains_key("type") || has_type(m, name),
        None => true,
    }
}

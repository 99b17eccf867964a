//! Running one tool call: lookup against the turn's set, argument preparation, the call itself
//! (panics caught), timing and logging.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures_util::FutureExt;
use serde_json::{Map, Value};

use super::schema::accepts_null;
use super::{
    Arguments, TOOL_BUDGET_MS, ToolDecl, ToolError, ToolErrorKind, ToolFuture, ToolOutcome,
    ToolSet, Toolbox,
};

pub(crate) fn call<'a, T: Toolbox + ?Sized>(
    brain: &'a T,
    turn: &ToolSet,
    name: &str,
    arguments: Arguments,
) -> ToolFuture<'a> {
    let failed = |kind, message: String| -> ToolFuture<'a> {
        tracing::warn!("tool {name} failed: {message}");
        let outcome = ToolOutcome {
            result: Err(ToolError::new(kind, message)),
            elapsed: std::time::Duration::ZERO,
        };
        Box::pin(std::future::ready(outcome))
    };
    let Some(decl) = brain.tools().iter().find(|t| t.name == name) else {
        return failed(
            ToolErrorKind::Unknown,
            format!("there is no tool named '{name}'"),
        );
    };
    if !turn.holds(decl) {
        return failed(
            ToolErrorKind::Hidden,
            format!("the tool '{name}' is not available now"),
        );
    }
    Box::pin(async move {
        let start = Instant::now();
        let result = run(brain, decl, arguments).await;
        let elapsed = start.elapsed();
        let ms = elapsed.as_secs_f64() * 1000.0;
        if ms > TOOL_BUDGET_MS as f64 {
            tracing::warn!(
                "tool {} took {}ms, over the {TOOL_BUDGET_MS}ms budget; the user waited for it",
                decl.method,
                ms.round()
            );
        }
        if let Err(e) = &result {
            tracing::warn!("tool {} failed: {}", decl.name, e.message);
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
    match AssertUnwindSafe(brain.__run_tool(decl.index, arguments))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(panic) => Err(ToolError::new(
            ToolErrorKind::Panicked,
            format!(
                "the tool '{}' failed unexpectedly: {}",
                decl.name,
                panic_message(&*panic)
            ),
        )),
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "a panic without a message"
    }
}

/// Parses the arguments into a JSON object fit for the argument struct.
pub(crate) fn prepare(decl: &ToolDecl, arguments: Arguments) -> Result<Value, ToolError> {
    let invalid = |m: String| ToolError::new(ToolErrorKind::InvalidArguments, m);
    let mut value = match arguments {
        Arguments::Json(v) => v,
        Arguments::Raw(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Arguments::Raw(text) => serde_json::from_str(&text)
            .map_err(|e| invalid(format!("the arguments are not valid JSON: {e}")))?,
    };
    if value.is_null() {
        value = Value::Object(Map::new());
    }
    if !value.is_object() {
        return Err(invalid(format!(
            "the arguments must be a JSON object, got {value}"
        )));
    }
    integral_floats_to_integers(&mut value);
    let root = &decl.schema;
    drop_nulls_for_absent(&mut value, root, root, 0);
    Ok(value)
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

/// Follows `$ref` (`#`, `#/$defs/..`, `#/definitions/..`) within `root`.
fn resolve<'s>(schema: &'s Value, root: &'s Value, depth: usize) -> Option<&'s Value> {
    if depth > 32 {
        return None;
    }
    let Some(Value::String(reference)) = schema.get("$ref") else {
        return Some(schema);
    };
    let target = if reference == "#" {
        root
    } else {
        let name = reference
            .strip_prefix("#/$defs/")
            .map(|n| ("$defs", n))
            .or_else(|| {
                reference
                    .strip_prefix("#/definitions/")
                    .map(|n| ("definitions", n))
            })?;
        root.get(name.0)?
            .get(name.1.replace("~1", "/").replace("~0", "~"))?
    };
    resolve(target, root, depth + 1)
}

/// Strict mode makes every property required and lets the optional ones be `null`. For a property
/// that is optional in the argument struct but does not accept `null` itself (a `#[serde(default)]`
/// field), `null` means "absent": the key is removed so serde applies the default.
pub(crate) fn drop_nulls_for_absent(value: &mut Value, schema: &Value, root: &Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let Some(schema) = resolve(schema, root, 0) else {
        return;
    };
    match value {
        Value::Object(obj) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            let required: Vec<&str> = match schema.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            obj.retain(|k, v| {
                let Some(p) = props.get(k) else { return true };
                !(v.is_null()
                    && !required.contains(&k.as_str())
                    && !resolve(p, root, 0).is_some_and(accepts_null))
            });
            for (k, v) in obj.iter_mut() {
                if let Some(p) = props.get(k) {
                    drop_nulls_for_absent(v, non_null_branch(p, root), root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for v in items {
                    drop_nulls_for_absent(v, non_null_branch(item, root), root, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// For `anyOf: [T, null]` (an `Option` of a named type), the `T` branch.
fn non_null_branch<'s>(schema: &'s Value, root: &'s Value) -> &'s Value {
    let Some(resolved) = resolve(schema, root, 0) else {
        return schema;
    };
    if let Some(Value::Array(branches)) = resolved.get("anyOf") {
        let rest: Vec<&Value> = branches
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if let [only] = rest[..] {
            return only;
        }
    }
    resolved
}

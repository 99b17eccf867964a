//! Gemini's streamed function-call arguments: one call spread over several `functionCall` parts.
//!
//! Vertex AI with `streamFunctionCallArguments` (and proxies passing its stream on) sends a call
//! in pieces (docs/protocol.md §6.15): the first part names it (and may carry whole `args`) with
//! `willContinue: true`; the parts after it carry no name, only `partialArgs`, each a JSON path
//! (RFC 9535, the subset `$`, `.name`, `['name']`, `["name"]`, `[index]`) with one scalar
//! (`stringValue`, `numberValue`, `boolValue`, `nullValue`); a string fragment marked
//! `willContinue` is continued by the next fragment for the same path. The call is complete at
//! its first part without `willContinue` (an empty `functionCall: {}` will do).
//!
//! [`Assembly`] holds one such call until it is complete, within a byte budget: past it, the
//! fragments are no longer applied and the call is marked too large, so the core refuses it
//! as it refuses any call past `max_argument_bytes`.

use serde_json::{Map, Value};

use super::history::{Call, Part, json_text_bytes};
use crate::tools::Arguments;

/// One streamed call being put together.
#[derive(Debug)]
pub(crate) struct Assembly {
    /// The call's name, from its first part.
    pub(crate) name: String,
    /// The call's id, from the first part that gave one.
    pub(crate) id: Option<String>,
    /// The arguments so far (an object).
    pub(crate) args: Map<String, Value>,
    /// The first part without its `functionCall` (a `thoughtSignature`...), replayed with it.
    pub(crate) rest: Map<String, Value>,
    /// The path whose string the next fragment continues.
    continuing: Option<String>,
    /// Bytes of paths and values applied so far.
    bytes: usize,
    /// The most bytes applied; a fragment past them is dropped and the call is too large.
    budget: usize,
    /// Set once a fragment was dropped for the budget, or did not fit the arguments' shape.
    pub(crate) spoiled: Option<&'static str>,
}

/// Why a call's fragments were dropped past its budget (the other reasons are shapes).
const PAST_BUDGET: &str = "past the argument budget";

impl Assembly {
    /// Starts a call named `name` whose arguments may take `budget` bytes.
    pub(crate) fn new(name: String, budget: usize) -> Self {
        Assembly {
            name,
            id: None,
            args: Map::new(),
            rest: Map::new(),
            continuing: None,
            bytes: 0,
            budget,
            spoiled: None,
        }
    }

    /// Merges whole `args` sent with a part (keys of later parts win). The first `args` are moved
    /// in as they are: a whole call's arguments are already bounded by what one part may take, and
    /// the core measures every complete call against `max_argument_bytes`; only what is merged
    /// onto them is counted against the budget.
    pub(crate) fn merge_args(&mut self, args: Map<String, Value>) {
        if self.args.is_empty() {
            self.args = args;
            return;
        }
        for (k, v) in args {
            self.bytes = self.bytes.saturating_add(k.len() + 4 + json_text_bytes(&v));
            if self.bytes > self.budget {
                self.spoiled = Some(PAST_BUDGET);
                return;
            }
            self.args.insert(k, v);
        }
    }

    /// Applies one `partialArgs` entry.
    pub(crate) fn apply(&mut self, fragment: &Value) {
        if self.spoiled.is_some() {
            return;
        }
        let Some(path) = fragment.get("jsonPath").and_then(Value::as_str) else {
            self.spoiled = Some("a partial argument without its jsonPath");
            return;
        };
        let continues = fragment.get("willContinue").and_then(Value::as_bool) == Some(true);
        let value = if let Some(s) = fragment.get("stringValue").and_then(Value::as_str) {
            Value::String(s.to_owned())
        } else if let Some(n) = fragment.get("numberValue").filter(|n| n.is_number()) {
            n.clone()
        } else if let Some(b) = fragment.get("boolValue").filter(|b| b.is_boolean()) {
            b.clone()
        } else if fragment.get("nullValue").is_some() {
            Value::Null
        } else if continues {
            // A fragment that only says more is coming for this path.
            self.continuing = Some(path.to_owned());
            return;
        } else {
            self.spoiled = Some("a partial argument without a value");
            return;
        };
        self.bytes = self
            .bytes
            .saturating_add(path.len() + value.as_str().map_or(8, str::len));
        if self.bytes > self.budget {
            self.spoiled = Some(PAST_BUDGET);
            return;
        }
        let Some(steps) = parse_path(path) else {
            self.spoiled = Some("a jsonPath this SDK does not read");
            return;
        };
        let append = self.continuing.as_deref() == Some(path);
        self.continuing = continues.then(|| path.to_owned());
        let mut root = Value::Object(std::mem::take(&mut self.args));
        if !set(&mut root, &steps, value, append) {
            self.spoiled = Some("a partial argument that does not fit the arguments so far");
        }
        if let Value::Object(m) = root {
            self.args = m;
        }
    }

    /// The complete call. Its arguments are the assembled object; a call whose fragments passed
    /// the budget gets arguments just over it, so the core refuses it as it refuses any call past
    /// `max_argument_bytes` (the budget); one whose fragments did not fit together gets text
    /// that is not JSON, saying why, so the model reads an error result.
    pub(crate) fn into_part(self) -> Part {
        let arguments = match self.spoiled {
            None => Arguments::Json(Value::Object(self.args)),
            // More than `budget` bytes were read to get here: this takes no more than that.
            Some(PAST_BUDGET) => Arguments::Raw(" ".repeat(self.budget.saturating_add(1))),
            Some(why) => Arguments::Raw(format!("(streamed arguments: {why})")),
        };
        let raw = if self.rest.is_empty() {
            Value::Null
        } else {
            Value::Object(self.rest)
        };
        Part::Call {
            call: Call {
                id: self.id,
                name: self.name,
                arguments,
            },
            raw,
        }
    }
}

/// One step of a JSON path.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `$.a.b[0]['c d']` → its steps; `None` for anything else (`..`, wildcards, filters).
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if key.is_empty() || key == "*" {
                return None;
            }
            steps.push(Step::Key(key.to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let quote = r.chars().next()?;
            if quote == '\'' || quote == '"' {
                let body = &r[1..];
                let end = body.find(quote)?;
                steps.push(Step::Key(body[..end].to_owned()));
                rest = body[end + 1..].strip_prefix(']')?;
            } else {
                let end = r.find(']')?;
                steps.push(Step::Index(r[..end].parse().ok()?));
                rest = &r[end + 1..];
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The most array slots a path may open at once (a hostile index must not allocate gigabytes).
const MAX_INDEX: usize = 4096;

/// Sets (or, with `append`, extends the string at) `steps` in `node`, making the objects and
/// arrays on the way. `false` when a step meets a value of another shape.
fn set(node: &mut Value, steps: &[Step], value: Value, append: bool) -> bool {
    let Some((step, rest)) = steps.split_first() else {
        match (append, &mut *node, &value) {
            (true, Value::String(held), Value::String(more)) => held.push_str(more),
            (true, _, _) => return false,
            (false, _, _) => *node = value,
        }
        return true;
    };
    let fresh = || match rest.first() {
        Some(Step::Index(_)) => Value::Array(Vec::new()),
        _ => Value::Object(Map::new()),
    };
    match (step, node) {
        (Step::Key(k), Value::Object(m)) => {
            let child = m.entry(k.clone()).or_insert_with(fresh);
            if child.is_null() && !rest.is_empty() {
                *child = fresh();
            }
            set(child, rest, value, append)
        }
        (Step::Index(i), Value::Array(items)) => {
            if *i > MAX_INDEX {
                return false;
            }
            while items.len() <= *i {
                items.push(Value::Null);
            }
            if items[*i].is_null() && !rest.is_empty() {
                items[*i] = fresh();
            }
            set(&mut items[*i], rest, value, append)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_of_the_documented_forms_are_read_and_others_refused() {
        assert_eq!(
            parse_path("$.a['c d'][1][\"e\"]"),
            Some(vec![
                Step::Key("a".into()),
                Step::Key("c d".into()),
                Step::Index(1),
                Step::Key("e".into()),
            ])
        );
        assert_eq!(parse_path("$"), Some(vec![]));
        for bad in ["a.b", "$..a", "$.*", "$[x]", "$['a'", "$.a[1"] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn fragments_build_nested_values_and_continue_strings() {
        let mut a = Assembly::new("f".into(), 1 << 20);
        a.merge_args(
            json!({"existing": "v"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        for f in [
            json!({"jsonPath": "$.a.b", "numberValue": 1.0}),
            json!({"jsonPath": "$['c d'][1]", "boolValue": true}),
            json!({"jsonPath": "$[\"e\"][0].f", "nullValue": "NULL_VALUE"}),
            json!({"jsonPath": "$.s", "stringValue": "hel", "willContinue": true}),
            json!({"jsonPath": "$.s", "stringValue": "lo"}),
        ] {
            a.apply(&f);
        }
        assert_eq!(a.spoiled, None);
        assert_eq!(
            Value::Object(a.args.clone()),
            json!({"existing": "v", "a": {"b": 1.0}, "c d": [null, true], "e": [{"f": null}], "s": "hello"})
        );
        // Not continued: the next value replaces.
        a.apply(&json!({"jsonPath": "$.s", "stringValue": "x"}));
        assert_eq!(a.args["s"], json!("x"));
    }

    #[test]
    fn a_fragment_of_another_shape_or_past_the_budget_spoils_the_call() {
        let mut a = Assembly::new("f".into(), 1 << 20);
        a.apply(&json!({"jsonPath": "$.a.b", "stringValue": "x"}));
        a.apply(&json!({"jsonPath": "$.a[0]", "stringValue": "y"}));
        assert!(a.spoiled.is_some());

        let mut a = Assembly::new("f".into(), 64);
        for _ in 0..10 {
            a.apply(&json!({"jsonPath": "$.s", "stringValue": "0123456789", "willContinue": true}));
        }
        assert_eq!(a.spoiled, Some(PAST_BUDGET));
        assert!(a.args["s"].as_str().is_some_and(|s| s.len() <= 64));

        let mut a = Assembly::new("f".into(), 1 << 20);
        a.apply(&json!({"jsonPath": "$.a[999999999]", "boolValue": true}));
        assert!(a.spoiled.is_some());
    }
}

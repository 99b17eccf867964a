//! What a provider's schema rewrite drops or weakens of the neutral schema: found by walking the
//! schema before the dialect's own pass and the one it produced side by side, so no rewrite
//! drops a constraint without it being listed ([`SchemaLoss`]).

use std::fmt;

use serde_json::Value;

/// One constraint of a tool's neutral parameter schema that a provider's declaration does not
/// carry: the model is not told it, so it may send a value the argument struct refuses (the
/// tool then answers with an argument error the model can read).
///
/// Listed by [`ToolDecl::losses`](crate::tools::ToolDecl::losses) and logged once per tool and
/// provider when the tool is first declared to it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaLoss {
    /// Where, as a path of property names (`guest.name`; `[]` for an array's items, `{}` for a
    /// map's values, `|2` for the third branch of a choice); empty for the parameter object.
    pub at: String,
    /// What the provider's declaration lacks: the JSON Schema keyword and its value, such as
    /// `exclusiveMinimum: 0` or `additionalProperties` (a map's value type).
    pub lost: String,
}

impl fmt::Display for SchemaLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            write!(f, "{}", self.lost)
        } else {
            write!(f, "{}: {}", self.at, self.lost)
        }
    }
}

/// Keywords that constrain a value, and what losing each one means when it is not plain.
const CONSTRAINTS: &[(&str, &str)] = &[
    (
        "additionalProperties",
        "a map's value type, or that no other field is allowed",
    ),
    ("patternProperties", "the fields a map may have"),
    ("propertyNames", "the names a map's keys may have"),
    ("minProperties", ""),
    ("maxProperties", ""),
    ("minimum", ""),
    ("maximum", ""),
    ("exclusiveMinimum", ""),
    ("exclusiveMaximum", ""),
    ("multipleOf", ""),
    ("minLength", ""),
    ("maxLength", ""),
    ("pattern", ""),
    ("format", ""),
    ("enum", ""),
    ("const", ""),
    ("minItems", ""),
    ("maxItems", ""),
    ("uniqueItems", ""),
    ("prefixItems", "the shape of each position of a tuple"),
    ("contains", ""),
    ("not", ""),
    ("if", ""),
    ("dependentRequired", ""),
    ("dependentSchemas", ""),
];

/// The constraints `before` holds that `after` (its rewrite for one provider) lost, at any depth.
pub(super) fn losses(before: &Value, after: &Value) -> Vec<SchemaLoss> {
    let mut out = Vec::new();
    walk(before, after, "", 0, &mut out);
    out
}

fn walk(before: &Value, after: &Value, at: &str, depth: usize, out: &mut Vec<SchemaLoss>) {
    if depth > 64 {
        return;
    }
    let (Value::Object(b), Value::Object(a)) = (before, after) else {
        return;
    };
    for (key, meaning) in CONSTRAINTS {
        let Some(value) = b.get(*key) else { continue };
        // A boolean `additionalProperties: true` (or an empty schema) constrains nothing.
        if matches!(value, Value::Bool(true)) || value.as_object().is_some_and(|o| o.is_empty()) {
            continue;
        }
        let kept = match (*key, a.get(*key)) {
            (_, Some(v)) if v == value => true,
            // An enum written as the strings of its values (Gemini) is read back exactly.
            ("enum", Some(Value::Array(strings))) => {
                strings.len()
                    == value
                        .as_array()
                        .map_or(0, |v| v.iter().filter(|x| !x.is_null()).count())
            }
            // A `const` becomes a one-value enum.
            ("const", Some(_)) => false,
            ("const", None) => a
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| e.len() == 1),
            _ => false,
        };
        if !kept {
            let shown = clip(&value.to_string());
            let lost = if meaning.is_empty() {
                format!("{key}: {shown}")
            } else {
                format!("{key} ({meaning})")
            };
            out.push(SchemaLoss {
                at: at.to_owned(),
                lost,
            });
        }
    }
    if let (Some(Value::Object(bp)), Some(Value::Object(ap))) =
        (b.get("properties"), a.get("properties"))
    {
        for (name, schema) in bp {
            if let Some(rewritten) = ap.get(name) {
                walk(schema, rewritten, &join(at, name), depth + 1, out);
            }
        }
    }
    if let (Some(bi), Some(ai)) = (b.get("items"), a.get("items")) {
        walk(bi, ai, &join(at, "[]"), depth + 1, out);
    }
    if let (Some(ba), Some(aa)) = (b.get("additionalProperties"), a.get("additionalProperties")) {
        walk(ba, aa, &join(at, "{}"), depth + 1, out);
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(bb)) = b.get(key) else {
            continue;
        };
        let Some(Value::Array(ab)) = a.get("anyOf") else {
            // An optional value collapsed into its one branch (Gemini's `nullable`).
            let real: Vec<&Value> = bb
                .iter()
                .filter(|x| x.get("type") != Some(&Value::from("null")))
                .collect();
            if let [only] = real.as_slice() {
                walk(only, after, at, depth + 1, out);
            }
            continue;
        };
        if bb.len() == ab.len() {
            for (i, (x, y)) in bb.iter().zip(ab).enumerate() {
                walk(x, y, &format!("{at}|{i}"), depth + 1, out);
            }
        }
    }
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}.{name}")
    }
}

/// A keyword's value, short enough for a log line.
fn clip(text: &str) -> String {
    crate::tools::dispatch::shortened_to(text, 80)
}

//! Merging one schema into another: a `$ref`'s siblings into its target, the parts of an `allOf`,
//! the schema around a one-branch `anyOf`.

use serde_json::{Map, Value, json};

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
pub(super) fn unite_object_keys(
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

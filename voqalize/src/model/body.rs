//! A request body as a tree that borrows from the history: what a layer builds for each request,
//! serialised straight to bytes.
//!
//! A request replays the whole conversation: every text, every part the provider sent. Built as
//! `serde_json::Value`s, each string was copied and each key hashed into a map, then the tree was
//! serialised and dropped: a fifth of a model-backed turn's instructions at nine turns of history.
//! A [`Json`] holds references to the history's strings and provider JSON instead, so building it
//! allocates one `Vec` for each object or array it makes up; what a layer must reshape (a user
//! entry's lines joined, a tool result as JSON text, a run of text parts made one message) is
//! still made for the request.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// A JSON value borrowed, where it can be, from what the request replays.
#[derive(Debug)]
pub(crate) enum Json<'a> {
    /// A string.
    Str(&'a str),
    /// `true` or `false`.
    Bool(bool),
    /// JSON as held (a provider's part, a call's arguments, a tool's result).
    Value(&'a Value),
    /// JSON made for this request.
    Owned(Value),
    /// An object's entries, in order. Its keys are distinct: what a layer sets over a provider's
    /// object replaces that object's entry in place ([`over`](Self::over), as `Map::insert` does),
    /// and a layer's options cannot name a key the layer sets (refused when it is built).
    Object(Vec<(&'a str, Json<'a>)>),
    /// An array's items, in order.
    Array(Vec<Json<'a>>),
}

impl<'a> Json<'a> {
    /// The entries of `base` (an object; anything else counts as `{}`), with each of `set`
    /// replacing the entry of its key where it is, or appended after them in `set`'s order if
    /// `base` has no such key: the order `Map::insert` on a clone of `base` gives, without the
    /// clone.
    pub(crate) fn over(base: &'a Value, set: Vec<(&'a str, Json<'a>)>) -> Vec<(&'a str, Json<'a>)> {
        let map = match base {
            Value::Object(map) => Some(map),
            _ => None,
        };
        Json::over_map(map, set)
    }

    /// The entries of `map`, each value borrowed: a layer's extra top-level options.
    pub(crate) fn entries(
        map: &'a Map<String, Value>,
    ) -> impl Iterator<Item = (&'a str, Json<'a>)> + 'a {
        map.iter().map(|(k, v)| (k.as_str(), Json::Value(v)))
    }

    /// [`over`](Self::over), for a map (`None` counts as `{}`).
    pub(crate) fn over_map(
        base: Option<&'a Map<String, Value>>,
        set: Vec<(&'a str, Json<'a>)>,
    ) -> Vec<(&'a str, Json<'a>)> {
        let base_len = base.map_or(0, Map::len);
        let mut set: Vec<Option<(&'a str, Json<'a>)>> = set.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(base_len + set.len());
        for (key, value) in base.into_iter().flatten() {
            let replaced = set
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|(k, _)| *k == key.as_str()))
                .and_then(Option::take);
            out.push(replaced.unwrap_or((key.as_str(), Json::Value(value))));
        }
        out.extend(set.into_iter().flatten());
        out
    }
}

impl<'a> From<std::borrow::Cow<'a, str>> for Json<'a> {
    /// A text borrowed, or made for this request.
    fn from(text: std::borrow::Cow<'a, str>) -> Self {
        match text {
            std::borrow::Cow::Borrowed(text) => Json::Str(text),
            std::borrow::Cow::Owned(text) => Json::Owned(Value::String(text)),
        }
    }
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Str(text) => serializer.serialize_str(text),
            Json::Bool(flag) => serializer.serialize_bool(*flag),
            Json::Value(value) => value.serialize(serializer),
            Json::Owned(value) => value.serialize(serializer),
            Json::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            Json::Array(items) => serializer.collect_seq(items),
        }
    }
}

/// Serialises a request body (a `Value` or a [`Json`]), straight to bytes: `to_string` goes
/// through `fmt`, a call per token, several times the work on a body of kilobytes.
///
/// # Errors
/// Never for JSON, whose keys are strings; the type's error is kept for the callers to report.
pub(crate) fn body_bytes(body: &impl Serialize) -> Result<bytes::Bytes, serde_json::Error> {
    serde_json::to_vec(body).map(bytes::Bytes::from)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn over_replaces_in_place_and_appends_the_rest_as_insert_does() {
        let base = json!({"thoughtSignature": "c2ln", "text": "", "extra": 1});
        let entries = Json::over(
            &base,
            vec![("text", Json::Str("hello")), ("more", Json::Str("x"))],
        );
        let mut expected = base.as_object().cloned().unwrap_or_default();
        expected.insert("text".into(), json!("hello"));
        expected.insert("more".into(), json!("x"));
        let bytes = serde_json::to_vec(&Json::Object(entries)).unwrap();
        assert_eq!(bytes, serde_json::to_vec(&expected).unwrap().as_slice());
    }

    #[test]
    fn over_a_non_object_is_over_nothing() {
        let entries = Json::over(&Value::Null, vec![("text", Json::Str("a\"b"))]);
        assert_eq!(
            serde_json::to_vec(&Json::Object(entries)).unwrap(),
            br#"{"text":"a\"b"}"#
        );
    }

    #[test]
    fn serialises_as_the_value_it_stands_for() {
        let raw = json!({"a": [1, 2.5, null], "b": {"c": "\u{1}"}});
        let tree = Json::Array(vec![
            Json::Value(&raw),
            Json::Owned(json!({})),
            Json::Object(vec![("k", Json::Array(vec![])), ("t", Json::Bool(true))]),
        ]);
        let expected = json!([raw, {}, {"k": [], "t": true}]);
        assert_eq!(
            serde_json::to_vec(&tree).unwrap(),
            serde_json::to_vec(&expected).unwrap()
        );
    }
}

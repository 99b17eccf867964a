//! Reading a provider's JSON within a budget of memory (docs/protocol.md §6.14).
//!
//! A megabyte of tiny JSON values (`[{"a":0},{"a":0},…]`) takes some sixty megabytes parsed, and
//! tens of milliseconds to build and drop: what a response may keep is bounded in memory, so what
//! is read to find it out must be too. [`Within`] builds a value while it fits a budget counted
//! as [`json_bytes`] counts what a value holds; past it the rest of the value is read through
//! (cheaply, nothing kept) and the value is not kept at all, so the caller sees that it did not
//! fit and the parse goes on after it.

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::error::{StreamError, malformed};
use super::history::{ENTRY_BYTES, LIST_BYTES, OBJECT_BYTES, json_bytes};

/// A JSON value read within the bytes `left` holds, which it spends: `Some(value)` when it fits,
/// `None` (and `left` at 0) when it does not.
pub(crate) struct Within<'b>(pub &'b mut usize);

impl Within<'_> {
    /// Spends `bytes` of the budget; false (and the budget gone) when they are not there.
    fn spend(&mut self, bytes: usize) -> bool {
        match self.0.checked_sub(bytes) {
            Some(left) => {
                *self.0 = left;
                true
            }
            None => {
                *self.0 = 0;
                false
            }
        }
    }

    /// A string, when its bytes fit.
    fn string(mut self, text: impl Into<String> + AsRef<str>) -> Option<Value> {
        self.spend(text.as_ref().len())
            .then(|| Value::String(text.into()))
    }
}

/// Reads the rest of a list through, keeping nothing.
fn skip_items<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Value>, A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(None)
}

/// Reads the rest of an object through, keeping nothing.
fn skip_entries<'de, A: MapAccess<'de>>(mut map: A) -> Result<Option<Value>, A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(None)
}

impl<'de> DeserializeSeed<'de> for Within<'_> {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Within<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(Value::Bool(v)))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(Value::from(v)))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(Value::from(v)))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // JSON has no NaN nor infinity, so this is never null.
        Ok(Some(Value::from(v)))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.string(v))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(self.string(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
        if !self.spend(LIST_BYTES) {
            return skip_items(seq);
        }
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Within(&mut *self.0))? {
            match item {
                Some(item) if self.spend(std::mem::size_of::<Value>()) => items.push(item),
                _ => return skip_items(seq),
            }
        }
        Ok(Some(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        if !self.spend(OBJECT_BYTES) {
            return skip_entries(map);
        }
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if !self.spend(ENTRY_BYTES + key.len()) {
                map.next_value::<IgnoredAny>()?;
                return skip_entries(map);
            }
            match map.next_value_seed(Within(&mut *self.0))? {
                Some(value) => {
                    object.insert(key, value);
                }
                None => return skip_entries(map),
            }
        }
        Ok(Some(Value::Object(object)))
    }
}

/// A value read within the bytes it holds, as [`Within`] reads it (`Err`; `Err(None)` when it
/// does not fit), except that an object holding nothing but a non-empty `text` string gives that
/// string (`Ok`) and is never built as an object: most parts of a streamed answer are that, and a
/// map per part is an index table, an entry list and a key, hashed, for one string. The budget is
/// spent as [`Within`] spends it.
pub(crate) struct TextOrValue<'b>(pub &'b mut usize);

impl<'de> DeserializeSeed<'de> for TextOrValue<'_> {
    type Value = Result<String, Option<Value>>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextOrValue<'_> {
    type Value = Result<String, Option<Value>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        text_or_object(map, self.0)
    }

    // Anything else, as [`Within`] reads it.
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Within(self.0).visit_unit().map(Err)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Within(self.0).visit_bool(v).map(Err)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Within(self.0).visit_i64(v).map(Err)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Within(self.0).visit_u64(v).map(Err)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Within(self.0).visit_f64(v).map(Err)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Within(self.0).visit_str(v).map(Err)
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Within(self.0).visit_string(v).map(Err)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Within(self.0).visit_seq(seq).map(Err)
    }
}

/// An object's key, not allocated when it is `text` (`None`): the one key a text part has.
struct TextKey;

impl<'de> DeserializeSeed<'de> for TextKey {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TextKey {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok((key != "text").then(|| key.to_owned()))
    }

    fn visit_string<E>(self, key: String) -> Result<Self::Value, E> {
        Ok((key != "text").then_some(key))
    }
}

/// An object read as [`TextOrValue`] reads it.
fn text_or_object<'de, A: MapAccess<'de>>(
    mut map: A,
    left: &mut usize,
) -> Result<Result<String, Option<Value>>, A::Error> {
    let mut within = Within(left);
    if !within.spend(OBJECT_BYTES) {
        return skip_entries(map).map(Err);
    }
    let mut object = Map::new();
    // A first entry `text`, held back while it may be the only one.
    let mut text: Option<String> = None;
    while let Some(key) = map.next_key_seed(TextKey)? {
        let key_len = key.as_ref().map_or("text".len(), String::len);
        if !within.spend(ENTRY_BYTES + key_len) {
            map.next_value::<IgnoredAny>()?;
            return skip_entries(map).map(Err);
        }
        let Some(value) = map.next_value_seed(Within(&mut *within.0))? else {
            return skip_entries(map).map(Err);
        };
        match (key, value) {
            (None, Value::String(t)) if object.is_empty() && text.is_none() && !t.is_empty() => {
                text = Some(t);
            }
            (key, value) => {
                if let Some(t) = text.take() {
                    object.insert("text".to_owned(), Value::String(t));
                }
                object.insert(key.unwrap_or_else(|| "text".to_owned()), value);
            }
        }
    }
    Ok(match text {
        Some(text) => Ok(text),
        None => Err(Some(Value::Object(object))),
    })
}

/// One event's JSON, read within `budget` bytes of memory as [`json_bytes`] counts them: `None`
/// when it would take more (it is then read through, never held).
///
/// # Errors
/// JSON that does not parse ([`StreamError::Malformed`]).
pub(crate) fn parse_within(
    provider: &str,
    data: &str,
    budget: usize,
) -> Result<Option<Value>, StreamError> {
    let mut de = serde_json::Deserializer::from_str(data);
    let mut left = budget;
    let value = Within(&mut left)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| malformed(provider, e))?;
    debug_assert!(value.as_ref().is_none_or(|v| json_bytes(v) <= budget));
    Ok(value)
}

/// Reads the value at hand within `left`, from any deserializer (a field of an event the layer
/// walks itself).
pub(crate) fn value_within<'de, D: serde::Deserializer<'de>>(
    d: D,
    left: &mut usize,
) -> Result<Option<Value>, D::Error> {
    Within(left).deserialize(d)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_value_that_fits_is_read_whole_and_costs_what_json_bytes_counts() {
        let value = json!({"a": [1, "two", {"b": null}], "c": true, "d": 2.5});
        let text = value.to_string();
        let cost = json_bytes(&value);
        assert_eq!(parse_within("p", &text, cost).unwrap(), Some(value.clone()));
        assert_eq!(parse_within("p", &text, cost - 1).unwrap(), None);
        let mut left = cost + 10;
        let mut de = serde_json::Deserializer::from_str(&text);
        assert_eq!(value_within(&mut de, &mut left).unwrap(), Some(value));
        assert_eq!(left, 10);
    }

    #[test]
    fn a_megabyte_of_tiny_objects_is_read_through_and_not_held() {
        let text = json!({"x": vec![json!({"a": 0}); 120_000], "after": 1}).to_string();
        assert_eq!(parse_within("p", &text, 64 * 1024).unwrap(), None);
        // Broken JSON is still an error, past the budget or not.
        assert!(parse_within("p", &text[..text.len() - 1], 64).is_err());
        assert!(parse_within("p", "[1, 2", 1 << 20).is_err());
    }

    /// Reads `text` with [`TextOrValue`] and with [`Within`], and checks they agree.
    fn both_ways(text: &str, budget: usize) -> Result<String, Option<Value>> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut left = budget;
        let ours = TextOrValue(&mut left).deserialize(&mut de).unwrap();
        let theirs = parse_within("p", text, budget).unwrap();
        match &ours {
            Ok(t) => assert_eq!(theirs, Some(serde_json::json!({ "text": t }))),
            Err(value) => assert_eq!(*value, theirs),
        }
        let mut within_left = budget;
        let mut de = serde_json::Deserializer::from_str(text);
        Within(&mut within_left).deserialize(&mut de).unwrap();
        assert_eq!(left, within_left, "the same budget spent");
        ours
    }

    #[test]
    fn a_lone_text_is_read_as_its_string_and_anything_else_as_within_reads_it() {
        let big = 1 << 20;
        assert_eq!(both_ways(r#"{"text":"hi"}"#, big), Ok("hi".to_owned()));
        for text in [
            r#"{"text":""}"#,
            r#"{"text":"hi","thoughtSignature":"s"}"#,
            r#"{"thought":true,"text":"hi"}"#,
            r#"{"text":"a","text":"b"}"#,
            r#"{"text":1}"#,
            r#"{}"#,
            r#""text""#,
            r#"["text"]"#,
            "null",
        ] {
            assert!(both_ways(text, big).is_err(), "{text}");
        }
        // Past the budget: not kept, whichever way.
        assert_eq!(both_ways(r#"{"text":"hello"}"#, 10), Err(None));
    }

    #[test]
    fn an_item_past_the_budget_drops_the_whole_value() {
        let text = json!(["a".repeat(100), "b".repeat(100)]).to_string();
        let first_only = LIST_BYTES + 100 + std::mem::size_of::<Value>() + 50;
        assert_eq!(parse_within("p", &text, first_only).unwrap(), None);
    }
}

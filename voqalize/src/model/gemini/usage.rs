//! `usageMetadata` read into its counts as it is parsed. Gemini sends it with every event of a
//! stream; read as a JSON object, each event built a map (a hash table, a string for each key)
//! only to take four numbers out of it.

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
#[cfg(test)]
use serde_json::Value;

use super::scalar::{Count, Scalar};
use crate::model::history::Usage;

/// The counts read, in this order: prompt, cached, candidates (the output, thoughts excluded),
/// thoughts.
const KEYS: [&str; 4] = [
    "promptTokenCount",
    "cachedContentTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
];

/// The usage of the counts read: cached and reasoning read as 0 when the prompt count is given
/// without them; output is `candidatesTokenCount`, absent until the end.
fn of_counts([input, cached, output, thoughts]: [Option<u64>; 4]) -> Usage {
    let zero_if_prompt = |v: Option<u64>| v.or(input.map(|_| 0));
    Usage {
        input,
        cached_input: zero_if_prompt(cached),
        cache_write: None,
        output,
        reasoning: zero_if_prompt(thoughts),
    }
}

/// `usageMetadata` → [`Usage`], read from a JSON value by [`UsageSeed`], the decoder's own path.
#[cfg(test)]
pub(super) fn usage(meta: &Value) -> Usage {
    UsageSeed
        .deserialize(meta)
        .unwrap_or_else(|e| panic!("usageMetadata {meta} read: {e}"))
}

/// `usageMetadata` → [`Usage`] as it is parsed: a count is a non-negative integer, anything else
/// (or another shape than an object) counts as absent; a key given twice counts its last value,
/// as a JSON object keeps it. Holds nothing of what it reads through.
pub(super) struct UsageSeed;

impl<'de> DeserializeSeed<'de> for UsageSeed {
    type Value = Usage;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Usage, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UsageSeed {
    type Value = Usage;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("usageMetadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Usage, A::Error> {
        let mut counts = [None; 4];
        while let Some(key) = map.next_key_seed(CountKey)? {
            match key {
                Some(at) => counts[at] = map.next_value_seed(Scalar::<Count>::of())?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(of_counts(counts))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Usage, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(of_counts([None; 4]))
    }

    fn visit_unit<E>(self) -> Result<Usage, E> {
        Ok(of_counts([None; 4]))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Usage, E> {
        Ok(of_counts([None; 4]))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Usage, E> {
        Ok(of_counts([None; 4]))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Usage, E> {
        Ok(of_counts([None; 4]))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Usage, E> {
        Ok(of_counts([None; 4]))
    }

    fn visit_str<E>(self, _: &str) -> Result<Usage, E> {
        Ok(of_counts([None; 4]))
    }
}

/// A key of `usageMetadata`: its place in [`KEYS`], or `None` for any other key (not allocated).
struct CountKey;

impl<'de> DeserializeSeed<'de> for CountKey {
    type Value = Option<usize>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for CountKey {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(KEYS.iter().position(|k| *k == key))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::render::count;

    /// The counts of `meta` read from its JSON object, as every other layer reads its counts.
    fn of_object(meta: &Value) -> Usage {
        of_counts(KEYS.map(|key| count(meta, &[key])))
    }

    #[test]
    fn counts_read_as_they_are_parsed_are_the_counts_of_the_object() {
        let texts = [
            r#"{"promptTokenCount": 80, "candidatesTokenCount": 2, "totalTokenCount": 82}"#,
            r#"{"promptTokenCount": 33}"#,
            r#"{"promptTokenCount": 33, "cachedContentTokenCount": 7, "thoughtsTokenCount": 9,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 33}]}"#,
            r#"{"candidatesTokenCount": -1, "promptTokenCount": 1.5, "thoughtsTokenCount": "9"}"#,
            r#"{"promptTokenCount": 1, "promptTokenCount": 2}"#,
            r#"{"promptTokenCount": {"a": [1, 2]}, "candidatesTokenCount": [3]}"#,
            r#"{"promptTokenCount": 18446744073709551615}"#,
            "{}",
            "null",
            "7",
            "[1, 2]",
            r#""text""#,
            "true",
        ];
        for text in texts {
            let value: Value = serde_json::from_str(text).expect("JSON");
            let mut de = serde_json::Deserializer::from_str(text);
            let read = UsageSeed.deserialize(&mut de).expect("read");
            assert_eq!(read, of_object(&value), "{text}");
        }
        assert_eq!(of_object(&json!({})), Usage::default());
    }
}

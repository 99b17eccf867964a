//! A string field read straight into a label (`responseId`, sent with every event): no JSON
//! value built for it first.

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::model::history::label_of;

/// A string, kept as a label ([`label_of`]: cut to its bound); any other shape is `None`, read
/// through.
pub(super) struct LabelSeed;

impl<'de> DeserializeSeed<'de> for LabelSeed {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LabelSeed {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a label")
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Some(label_of(text)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::model::history::label;

    #[test]
    fn a_label_read_as_it_is_parsed_is_the_label_of_the_value() {
        let long = format!("\"{}\"", "é".repeat(400));
        let texts = [
            r#""resp-1""#,
            r#""a\"b\u00e9""#,
            &long,
            "null",
            "7",
            "[1]",
            r#"{"a": "b"}"#,
        ];
        for text in texts {
            let value: Value = serde_json::from_str(text).expect("JSON");
            let mut de = serde_json::Deserializer::from_str(text);
            assert_eq!(
                LabelSeed.deserialize(&mut de).expect("read"),
                label(&value),
                "{text}"
            );
        }
    }
}

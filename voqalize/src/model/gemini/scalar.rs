//! One JSON scalar read as it is parsed, of the kind its field takes (a token count, a label):
//! any other shape reads as absent and is read through, never built. Gemini sends these fields
//! with every event; read as JSON values first, each built a value (and a copy) to be dropped.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::model::history::label_of;

/// What a field takes, and what it makes of it.
pub(super) trait Kind {
    /// What the field is read as.
    type Out;
    /// The field, for a parse error's message.
    const EXPECTING: &'static str;
    /// A string, if the field takes one.
    fn of_str(_: &str) -> Option<Self::Out> {
        None
    }
    /// A non-negative integer, if the field takes one.
    fn of_u64(_: u64) -> Option<Self::Out> {
        None
    }
}

/// A token count: a non-negative integer.
pub(super) struct Count;

impl Kind for Count {
    type Out = u64;
    const EXPECTING: &'static str = "a token count";

    fn of_u64(v: u64) -> Option<u64> {
        Some(v)
    }
}

/// A label: a string, cut to its bound ([`label_of`]).
pub(super) struct Label;

impl Kind for Label {
    type Out = String;
    const EXPECTING: &'static str = "a label";

    fn of_str(text: &str) -> Option<String> {
        Some(label_of(text))
    }
}

/// Reads one field of kind `K`: `Some` when it has that kind's shape.
pub(super) struct Scalar<K>(PhantomData<K>);

impl<K> Scalar<K> {
    pub(super) const fn of() -> Self {
        Scalar(PhantomData)
    }
}

impl<'de, K: Kind> DeserializeSeed<'de> for Scalar<K> {
    type Value = Option<K::Out>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, K: Kind> Visitor<'de> for Scalar<K> {
    type Value = Option<K::Out>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(K::EXPECTING)
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(K::of_str(text))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(K::of_u64(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(u64::try_from(v).ok().and_then(K::of_u64))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
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
            let read = Scalar::<Label>::of().deserialize(&mut de).expect("read");
            assert_eq!(read, label(&value), "{text}");
        }
    }
}

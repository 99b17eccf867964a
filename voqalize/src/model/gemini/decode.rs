//! Decoding a Gemini stream: one chunk per `data:` event, parts moved out of the event as it is
//! read, never copied.

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::model::history::{Chunk, Kept, Part, label, label_of, stop_text};
use crate::model::layer::{DecodeLimits, Decoder, StreamError};
use crate::model::partial_args::Assembly;
use crate::model::render::{error_message, malformed, malformed_shape, provider_error};
use crate::model::sse::SseItem;
use crate::model::within::{TextOrValue, value_within};

use super::request::is_empty_part;
use super::scalar::{Label, Scalar};
use super::usage::UsageSeed;
use super::{MALFORMED_REASONS, PROVIDER};

/// Decodes a `streamGenerateContent?alt=sse` stream: one chunk per `data:` event. One event can
/// hold any number of parts; it decodes none after the call past `max_calls`, nor after the part
/// that took the response past `max_parts` or `max_kept_bytes` (the core cuts the response there).
/// Parts are moved out of the event, never copied.
#[derive(Debug)]
pub(crate) struct GeminiDecoder {
    limits: DecodeLimits,
    calls: usize,
    /// A call streamed over several parts (`willContinue`), until its last part.
    streaming: Option<Assembly>,
    /// What the response decoded so far would keep in the history.
    kept: Kept,
    done: bool,
}

impl GeminiDecoder {
    pub(crate) fn new(limits: DecodeLimits) -> Self {
        GeminiDecoder {
            limits,
            calls: 0,
            streaming: None,
            kept: Kept::default(),
            done: false,
        }
    }

    /// A part that is a text and nothing else (not empty): it closes a streamed call, as any part
    /// that is not a call does, and is spoken and kept with no raw part beside it.
    fn text(&mut self, text: String, parts: &mut Vec<Part>) {
        if let Some(open) = self.streaming.take() {
            self.keep(open.into_part(), parts);
        }
        self.keep(
            Part::Text {
                text,
                raw: Value::Null,
                trimmed: false,
            },
            parts,
        );
    }

    /// Counts a decoded part against the bounds and hands it on.
    fn keep(&mut self, part: Part, parts: &mut Vec<Part>) {
        self.calls += usize::from(matches!(part, Part::Call { .. }));
        self.kept = self.kept.with(&part);
        parts.push(part);
    }

    /// One response part → what it completes: nothing while a streamed call is still open, the
    /// call before it too when a new call closes one.
    fn decode(&mut self, part: Value, parts: &mut Vec<Part>) -> Result<(), StreamError> {
        let Value::Object(mut obj) = part else {
            return Err(malformed_shape(PROVIDER, "a part is not a JSON object"));
        };
        match obj.shift_remove("functionCall") {
            None | Some(Value::Null) => {}
            Some(Value::Object(fc)) => return self.call(fc, obj, parts),
            Some(_) => {
                return Err(malformed_shape(PROVIDER, "a functionCall is not an object"));
            }
        }
        // A part that is not a call closes a streamed one.
        if let Some(open) = self.streaming.take() {
            self.keep(open.into_part(), parts);
        }
        if let Some(part) = decode_other(obj) {
            self.keep(part, parts);
        }
        Ok(())
    }

    /// A `functionCall` part (`fc`, beside the rest of its part): a whole call, or a piece of one
    /// streamed over several parts (docs/protocol.md §6.15, [`Assembly`]).
    fn call(
        &mut self,
        mut fc: Map<String, Value>,
        rest: Map<String, Value>,
        parts: &mut Vec<Part>,
    ) -> Result<(), StreamError> {
        let name = match fc.shift_remove("name") {
            Some(Value::String(n)) if !n.is_empty() => Some(n),
            _ => None,
        };
        let id = match fc.shift_remove("id") {
            Some(Value::String(id)) => Some(id),
            _ => None,
        };
        let continues = fc.shift_remove("willContinue").and_then(|v| v.as_bool()) == Some(true);
        let fragments = fc.shift_remove("partialArgs");
        let args = fc.shift_remove("args");
        // A named part starts a call, closing any open one (unless it repeats that call's id).
        let same_call = match (&self.streaming, &id) {
            (Some(open), Some(id)) => open.id.as_deref() == Some(id.as_str()),
            (Some(_), None) => name.is_none(),
            (None, _) => false,
        };
        if !same_call && let Some(open) = self.streaming.take() {
            self.keep(open.into_part(), parts);
        }
        let mut call = match self.streaming.take() {
            Some(open) => open,
            None => {
                let Some(name) = name else {
                    return Err(malformed_shape(PROVIDER, "a functionCall has no name"));
                };
                let mut call = Assembly::new(name, self.limits.max_argument_bytes);
                // The rest of the first part (its `thoughtSignature`, other keys of the call) is
                // replayed as sent; the streaming flags never are.
                call.rest = rest;
                if !fc.is_empty() {
                    call.rest.insert("functionCall".into(), Value::Object(fc));
                }
                call
            }
        };
        if call.id.is_none() {
            call.id = id;
        }
        match args {
            None | Some(Value::Null) => {}
            Some(Value::Object(a)) => call.merge_args(a),
            Some(_) => call.spoiled = Some("its args are not an object"),
        }
        if let Some(Value::Array(fragments)) = fragments {
            for f in &fragments {
                call.apply(f);
            }
        }
        if continues {
            self.streaming = Some(call);
        } else {
            self.keep(call.into_part(), parts);
        }
        Ok(())
    }

    /// Whether a part decoded now would be past a bound the core already cut the response at.
    fn past_bounds(&self) -> bool {
        self.calls > self.limits.max_calls || self.limits.passed(self.kept)
    }

    fn chunk(&mut self, data: &str) -> Result<Vec<Chunk>, StreamError> {
        // Gemini sends no `[DONE]`; a proxy in front of it may.
        if data.trim().is_empty() || data.trim() == "[DONE]" {
            return Ok(Vec::new());
        }
        let mut event = Reading::new(self);
        let mut de = serde_json::Deserializer::from_str(data);
        let read = EventSeed(&mut event)
            .deserialize(&mut de)
            .and_then(|()| de.end());
        let Reading {
            mut chunk,
            error,
            failed,
            object,
            candidates,
            blocked,
            ..
        } = event;
        if let Some(failed) = failed {
            return Err(failed);
        }
        read.map_err(|e| malformed(PROVIDER, e))?;
        if !object {
            return Err(malformed_shape(
                PROVIDER,
                "a stream chunk is not a JSON object",
            ));
        }
        if let Some(error) = error {
            return Err(provider_error(PROVIDER, error_message(&error)));
        }
        // A blocked prompt: no candidates, a block reason. A silent turn, not an error.
        if !candidates && blocked {
            chunk.finished = true;
        }
        if chunk.finished {
            self.done = true;
            // A streamed call the candidate finished without closing is as complete as it will
            // be when it finished with `STOP`; any other finish (`MAX_TOKENS`...) cut it off.
            if let Some(open) = self.streaming.take() {
                if chunk.abnormal_stop.is_some() {
                    chunk.cut_call = Some(open.into_part());
                } else {
                    self.keep(open.into_part(), &mut chunk.parts);
                }
            }
        }
        Ok(vec![chunk])
    }
}

/// One event being read, straight from its text: parts are decoded as they are read, within the
/// decoder's bounds, so that a part past them is read through without ever being built (a
/// megabyte of tiny parts would take some sixty megabytes, and tens of milliseconds, as JSON).
/// Every other field is read within the same budget; keys the decoder does not read are skipped.
struct Reading<'d> {
    decoder: &'d mut GeminiDecoder,
    chunk: Chunk,
    /// The event's `error`, when it had one.
    error: Option<Value>,
    /// A part that is not what Gemini documents.
    failed: Option<StreamError>,
    /// The event is a JSON object (anything else is malformed).
    object: bool,
    /// Its `candidates` list holds one at least.
    candidates: bool,
    /// It carries a `promptFeedback.blockReason`.
    blocked: bool,
}

impl<'d> Reading<'d> {
    fn new(decoder: &'d mut GeminiDecoder) -> Self {
        Reading {
            decoder,
            chunk: Chunk::default(),
            error: None,
            failed: None,
            object: false,
            candidates: false,
            blocked: false,
        }
    }

    /// A field the decoder reads whole (`error`, `usageMetadata`, a finish reason...), within
    /// what a response may keep; `None` when it would take more (it is then read through).
    fn field<'de, A: MapAccess<'de>>(&self, map: &mut A) -> Result<Option<Value>, A::Error> {
        let mut left = self.decoder.limits.max_kept_bytes;
        map.next_value_seed(WithinSeed(&mut left))
    }

    /// The next part of a candidate's content: decoded and counted, or read through once the
    /// response is past a bound.
    fn part<'de, A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        if self.decoder.past_bounds() || self.chunk.too_big {
            return Ok(seq.next_element::<IgnoredAny>()?.is_some());
        }
        let limits = self.decoder.limits;
        // A part that alone would take the response past what it may keep is not built.
        let mut left = limits
            .max_kept_bytes
            .saturating_sub(self.decoder.kept.bytes)
            .saturating_add(1);
        let Some(value) = seq.next_element_seed(TextOrValue(&mut left))? else {
            return Ok(false);
        };
        let value = match value {
            // A text part, and nothing else: decoded as [`GeminiDecoder::decode`] would.
            Ok(text) => {
                self.decoder.text(text, &mut self.chunk.parts);
                return Ok(true);
            }
            Err(Some(value)) => value,
            Err(None) => {
                self.chunk.too_big = true;
                return Ok(true);
            }
        };
        match self.decoder.decode(value, &mut self.chunk.parts) {
            Ok(()) => Ok(true),
            Err(e) => {
                self.failed = Some(e);
                Err(serde::de::Error::custom("a part Gemini does not document"))
            }
        }
    }
}

/// A JSON value within a budget, as a seed for a field or an item (see [`value_within`]).
struct WithinSeed<'b>(&'b mut usize);

impl<'de> DeserializeSeed<'de> for WithinSeed<'_> {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        value_within(d, self.0)
    }
}

/// An object's key, matched against the names a visitor reads without being allocated: the name
/// it is, or `None` for any other key.
struct KeyOf(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeyOf {
    type Value = Option<&'static str>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyOf {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().copied().find(|name| *name == key))
    }
}

/// The visits of a shape the reader does not expect: read through and left, as a field Gemini
/// does not send would be (`candidates` that is not a list, a candidate that is not an object).
macro_rules! read_other_shapes_through {
    () => {
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
    };
    (lists) => {
        read_other_shapes_through!();
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(())
        }
    };
    (objects) => {
        read_other_shapes_through!();
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(())
        }
    };
}

/// Declares a seed over a [`Reading`] that is its own visitor, deserialized with
/// `deserialize_any`.
macro_rules! reading_seed {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        struct $name<'r, 'd>(&'r mut Reading<'d>);

        impl<'de> DeserializeSeed<'de> for $name<'_, '_> {
            type Value = ();

            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_any(self)
            }
        }

        impl $name<'_, '_> {
            fn expected(f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($what)
            }
        }
    };
}

reading_seed!(
    /// The event: `candidates`, `error`, `usageMetadata`, `promptFeedback`; the rest skipped.
    EventSeed,
    "a Gemini stream chunk"
);
reading_seed!(
    /// `candidates`: each one read.
    CandidatesSeed,
    "a list of candidates"
);
reading_seed!(
    /// One candidate: its content's parts, then its `finishReason`.
    CandidateSeed,
    "a candidate"
);
reading_seed!(
    /// A candidate's `content`: its `parts`.
    ContentSeed,
    "a content"
);
reading_seed!(
    /// A content's `parts`: each decoded, within the bounds.
    PartsSeed,
    "a list of parts"
);

impl<'de> Visitor<'de> for EventSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(lists);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let r = self.0;
        r.object = true;
        const KEYS: &[&str] = &[
            "candidates",
            "error",
            "usageMetadata",
            "responseId",
            "promptFeedback",
        ];
        while let Some(key) = map.next_key_seed(KeyOf(KEYS))? {
            match key.unwrap_or_default() {
                "candidates" => map.next_value_seed(CandidatesSeed(&mut *r))?,
                "error" => {
                    let error = r.field(&mut map)?;
                    r.error = Some(error.unwrap_or_else(|| "an error too large to read".into()));
                }
                "usageMetadata" => r.chunk.usage = Some(map.next_value_seed(UsageSeed)?),
                "responseId" => r.chunk.response_id = map.next_value_seed(Scalar::<Label>::of())?,
                "promptFeedback" => {
                    let feedback = r.field(&mut map)?.unwrap_or_default();
                    r.blocked = feedback.get("blockReason").is_some_and(|b| !b.is_null());
                    if r.blocked {
                        let reason = match &feedback["blockReason"] {
                            Value::String(reason) => label_of(reason),
                            other => label_of(&other.to_string()),
                        };
                        r.chunk.abnormal_stop = stop_text(
                            &format!("prompt blocked: {reason}"),
                            feedback["blockReasonMessage"].as_str(),
                        );
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for CandidatesSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(objects);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(CandidateSeed(&mut *self.0))?
            .is_some()
        {
            self.0.candidates = true;
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for CandidateSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(lists);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let r = self.0;
        let (mut reason, mut message) = (Value::Null, Value::Null);
        const KEYS: &[&str] = &["content", "finishReason", "finishMessage"];
        while let Some(key) = map.next_key_seed(KeyOf(KEYS))? {
            match key.unwrap_or_default() {
                "content" => map.next_value_seed(ContentSeed(&mut *r))?,
                "finishReason" => reason = r.field(&mut map)?.unwrap_or_default(),
                "finishMessage" => message = r.field(&mut map)?.unwrap_or_default(),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // The finish applies after the candidate's parts, wherever it stood in the object.
        if !reason.is_null() {
            r.chunk.finished = true;
            r.chunk.finish_reason = label(&reason);
            // Any finish but `STOP` (`MAX_TOKENS`, `SAFETY`, `RECITATION`, `BLOCKLIST`,
            // `MALFORMED_FUNCTION_CALL`...) is not a normal end.
            if reason.as_str() != Some("STOP") {
                let reason = match &reason {
                    Value::String(reason) => label_of(reason),
                    other => label_of(&other.to_string()),
                };
                r.chunk.abnormal_stop = stop_text(&reason, message.as_str());
            }
            if reason
                .as_str()
                .is_some_and(|reason| MALFORMED_REASONS.contains(&reason))
            {
                r.chunk.malformed = true;
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for ContentSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(lists);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key_seed(KeyOf(&["parts"]))? {
            if key.is_some() {
                map.next_value_seed(PartsSeed(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for PartsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(objects);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while self.0.part(&mut seq)? {}
        Ok(())
    }
}

/// A response part that is not a call, moved into a thought, text, or something kept for replay.
/// `None` for a part with nothing in it (an empty text without a signature).
fn decode_other(mut obj: Map<String, Value>) -> Option<Part> {
    if obj.get("thought").and_then(Value::as_bool) == Some(true) {
        return Some(Part::Thought {
            raw: Value::Object(obj),
        });
    }
    // The text is moved out. Text alone needs no raw; text with a signature keeps the rest of
    // the part, its `text` key left empty in its place (rendering writes the text back there).
    let signed = obj.len() > 1;
    let text = match obj.get_mut("text") {
        Some(Value::String(text)) if !text.is_empty() => std::mem::take(text),
        _ => {
            let part = Value::Object(obj);
            return (!is_empty_part(&part)).then_some(Part::Other { raw: part });
        }
    };
    let raw = if signed {
        Value::Object(obj)
    } else {
        Value::Null
    };
    Some(Part::Text {
        text,
        raw,
        trimmed: false,
    })
}

impl Decoder for GeminiDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.chunk(&event.data),
            SseItem::Bare(body) => self.chunk(&body),
        }
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(StreamError::Truncated {
                provider: PROVIDER.into(),
                expected: "finishReason",
            })
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

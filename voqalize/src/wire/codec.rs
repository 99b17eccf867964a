//! Bytes ⇄ [`Frame`]: one protobuf `Envelope` per frame, with the SDK's mapping rules on top of plain
//! protobuf (docs/protocol.md §1.5). No input can make the decoder panic: every failure is a [`WireError`].

use prost::Message;
use serde_json::{Map, Value};

use super::catalog::{Language, Voice};
use super::config::{Config, IdleConfig, LanguageChoice, SttConfig, TtsConfig, VoiceChoice};
use super::frames::{
    Capabilities, Capability, ErrorCode, ErrorFrame, Frame, Response, Rtvi, RtviType, SessionStart,
    TurnStep, UserIdle, UserMessage,
};
use crate::proto;
use crate::proto::envelope::Body;

/// A frame that could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The bytes are not a valid `Envelope`, or a known body broke a mapping rule (bad JSON in
    /// `init` or RTVI `data`, RTVI type 0, an unknown Voice/Language number, a Request with no op,
    /// a Config that fails validation).
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// A `SessionStart` whose `init` is not the JSON text of an object. Kept apart from
    /// `Malformed` because the session answers it (docs/protocol.md §7 D3).
    #[error("malformed frame: {why}")]
    BadInit {
        /// The SessionStart's session id.
        session_id: String,
        /// What was wrong.
        why: String,
    },
    /// Strict decoding only: the envelope had no body this build knows (empty, or a newer peer's).
    #[error("envelope with no known body")]
    NoKnownBody,
}

fn malformed(why: impl Into<String>) -> WireError {
    WireError::Malformed(why.into())
}

/// Encodes one frame as the bytes of one `Envelope`.
///
/// Encoding is deterministic: fields in number order, `counts` sorted by key, capabilities sorted
/// and packed. JSON text (`init`, RTVI `data`) is written compactly; peers parse it.
pub fn encode(frame: &Frame) -> Vec<u8> {
    // A spoken turn is mostly chunks: encoded from the frame as it is, its text not copied into
    // an owned message first.
    match frame {
        Frame::SpeechChunk { speech_id, text } => return encode_chunk(*speech_id, text),
        // A model-backed turn reports a step or more: written from the frame, not cloned into
        // a message (its names and counts).
        Frame::TurnStep(step) => return encode_turn_step(step),
        _ => {}
    }
    proto::Envelope {
        body: Some(to_body(frame)),
    }
    .encode_to_vec()
}

/// The bytes of `Envelope { speech_chunk: SpeechChunk { speech_id, text } }`, as prost writes
/// them (proto3: a field at its default is left out; the oneof member is always written).
fn encode_chunk(speech_id: u64, text: &str) -> Vec<u8> {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
    let id_len = if speech_id == 0 {
        0
    } else {
        key_len(1) + encoded_len_varint(speech_id)
    };
    let text_len = if text.is_empty() {
        0
    } else {
        key_len(2) + encoded_len_varint(text.len() as u64) + text.len()
    };
    let body = id_len + text_len;
    let mut buf = Vec::with_capacity(key_len(8) + encoded_len_varint(body as u64) + body);
    encode_key(8, WireType::LengthDelimited, &mut buf);
    encode_varint(body as u64, &mut buf);
    if speech_id != 0 {
        encode_key(1, WireType::Varint, &mut buf);
        encode_varint(speech_id, &mut buf);
    }
    if !text.is_empty() {
        encode_key(2, WireType::LengthDelimited, &mut buf);
        encode_varint(text.len() as u64, &mut buf);
        buf.extend_from_slice(text.as_bytes());
    }
    buf
}

/// The bytes of `Envelope { turn_step: TurnStep { .. } }`, as prost writes them (proto3: a field
/// at its default is left out, `first_output_ms` is written whenever it is set, `counts` in key
/// order).
fn encode_turn_step(t: &TurnStep) -> Vec<u8> {
    use prost::encoding::{
        WireType, btree_map, encode_key, encode_varint, encoded_len_varint, key_len, string,
        uint32, uint64,
    };
    let names = [(2, &t.kind), (3, &t.name), (4, &t.provider)];
    let times = [(5, t.start_ms), (6, t.duration_ms)];
    let mut body = 0;
    if t.turn_id != 0 {
        body += uint64::encoded_len(1, &t.turn_id);
    }
    for (tag, name) in names.iter().filter(|(_, n)| !n.is_empty()) {
        body += string::encoded_len(*tag, name);
    }
    for (tag, ms) in times.iter().filter(|(_, ms)| *ms != 0) {
        body += uint32::encoded_len(*tag, ms);
    }
    if let Some(ms) = &t.first_output_ms {
        body += uint32::encoded_len(7, ms);
    }
    body += btree_map::encoded_len(string::encoded_len, uint64::encoded_len, 8, &t.counts);
    let mut buf = Vec::with_capacity(key_len(16) + encoded_len_varint(body as u64) + body);
    encode_key(16, WireType::LengthDelimited, &mut buf);
    encode_varint(body as u64, &mut buf);
    if t.turn_id != 0 {
        uint64::encode(1, &t.turn_id, &mut buf);
    }
    for (tag, name) in names.iter().filter(|(_, n)| !n.is_empty()) {
        string::encode(*tag, name, &mut buf);
    }
    for (tag, ms) in times.iter().filter(|(_, ms)| *ms != 0) {
        uint32::encode(*tag, ms, &mut buf);
    }
    if let Some(ms) = &t.first_output_ms {
        uint32::encode(7, ms, &mut buf);
    }
    btree_map::encode(
        |tag, key, buf: &mut Vec<u8>| string::encode(tag, key, buf),
        string::encoded_len,
        |tag, count, buf: &mut Vec<u8>| uint64::encode(tag, count, buf),
        uint64::encoded_len,
        8,
        &t.counts,
        &mut buf,
    );
    buf
}

/// Decodes leniently, as the session read loops do: an envelope with no body, or with a body this
/// build does not know, gives `Ok(None)` (the caller logs and skips it).
///
/// # Errors
/// [`WireError::Malformed`] for bytes that are not protobuf, and for a known body that breaks a
/// mapping rule.
pub fn decode(bytes: &[u8]) -> Result<Option<Frame>, WireError> {
    decode_limited(bytes, usize::MAX)
}

/// [`decode`] with the JSON text fields (`SessionStart.init`, RTVI `data`) limited to `max_json`
/// bytes, checked before anything is parsed: parsed JSON can take tens of times its text's size,
/// so a peer must not choose how much a frame costs. The session's reader decodes this way.
///
/// # Errors
/// As [`decode`]; a field over the limit is [`WireError::BadInit`] for `init` (the session is
/// refused) and [`WireError::Malformed`] for RTVI data (the frame is skipped).
pub fn decode_limited(bytes: &[u8], max_json: usize) -> Result<Option<Frame>, WireError> {
    let envelope =
        proto::Envelope::decode(bytes).map_err(|e| malformed(format!("not an Envelope: {e}")))?;
    match &envelope.body {
        Some(Body::SessionStart(s)) if s.init.len() > max_json => {
            return Err(WireError::BadInit {
                session_id: s.session_id.clone(),
                why: format!(
                    "SessionStart.init is {} bytes, over the limit of {max_json}",
                    s.init.len()
                ),
            });
        }
        Some(Body::Rtvi(r)) if r.data.len() > max_json => {
            return Err(malformed(format!(
                "RTVI data is {} bytes, over the limit of {max_json}",
                r.data.len()
            )));
        }
        _ => {}
    }
    envelope.body.map(from_body).transpose()
}

/// Decodes strictly: like [`decode`], but an envelope with no known body is an error.
///
/// # Errors
/// [`WireError::NoKnownBody`] besides the errors of [`decode`].
pub fn decode_strict(bytes: &[u8]) -> Result<Frame, WireError> {
    decode(bytes)?.ok_or(WireError::NoKnownBody)
}

fn json_text(value: &Value) -> String {
    // Serialising a `Value` cannot fail: its map keys are strings.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

fn to_body(frame: &Frame) -> Body {
    match frame {
        Frame::SessionStart(s) => Body::SessionStart(proto::SessionStart {
            session_id: s.session_id.clone(),
            turn_id: s.turn_id,
            init: json_text(&Value::Object(s.init.clone())),
            wire_version: s.wire_version,
            capabilities: s.capabilities.iter().map(|c| c.number()).collect(),
        }),
        Frame::UserMessage(m) => Body::UserMessage(proto::UserMessage {
            turn_id: m.turn_id,
            text: m.text.clone(),
        }),
        Frame::UserIdle(i) => Body::UserIdle(proto::UserIdle {
            turn_id: i.turn_id,
            level: i.level,
            idle_ms: i.idle_ms,
        }),
        Frame::Interruption { through_turn } => Body::Interruption(proto::Interruption {
            through_turn: *through_turn,
        }),
        Frame::Finalize {
            speech_id,
            heard_text,
        } => Body::Finalize(proto::Finalize {
            speech_id: *speech_id,
            heard_text: heard_text.clone(),
        }),
        Frame::Response(r) => Body::Response(response_to_proto(r)),
        Frame::SpeechStart { speech_id, turn_id } => Body::SpeechStart(proto::SpeechStart {
            speech_id: *speech_id,
            turn_id: *turn_id,
        }),
        Frame::SpeechChunk { speech_id, text } => Body::SpeechChunk(proto::SpeechChunk {
            speech_id: *speech_id,
            text: text.clone(),
        }),
        Frame::SpeechEnd { speech_id } => Body::SpeechEnd(proto::SpeechEnd {
            speech_id: *speech_id,
        }),
        Frame::SpeechCancel { speech_id } => Body::SpeechCancel(proto::SpeechCancel {
            speech_id: *speech_id,
        }),
        Frame::Request {
            request_id,
            configure,
        } => Body::Request(proto::Request {
            request_id: *request_id,
            op: Some(proto::request::Op::Configure(config_to_proto(configure))),
        }),
        Frame::Rtvi(r) => Body::Rtvi(proto::RtviFrame {
            r#type: r.kind.number(),
            data: r.data.as_ref().map_or_else(|| "null".to_owned(), json_text),
            id: r.id.clone(),
            turn_id: r.turn_id,
        }),
        Frame::End => Body::End(proto::End {}),
        Frame::Cancel { reason } => Body::Cancel(proto::Cancel {
            reason: reason.clone().unwrap_or_default(),
        }),
        Frame::Error(e) => Body::Error(proto::Error {
            code: e.code.number(),
            message: e.message.clone(),
            fatal: e.fatal,
        }),
        Frame::TurnStep(t) => Body::TurnStep(turn_step_to_proto(t)),
    }
}

fn response_to_proto(r: &Response) -> proto::Response {
    proto::Response {
        request_id: r.request_id,
        status: if r.accepted {
            proto::Status::Accepted as i32
        } else {
            proto::Status::Rejected as i32
        },
        detail: r.detail.clone(),
        code: r.code.map_or(0, ErrorCode::number),
    }
}

fn turn_step_to_proto(t: &TurnStep) -> proto::TurnStep {
    proto::TurnStep {
        turn_id: t.turn_id,
        kind: t.kind.clone(),
        name: t.name.clone(),
        provider: t.provider.clone(),
        start_ms: t.start_ms,
        duration_ms: t.duration_ms,
        first_output_ms: t.first_output_ms,
        counts: t.counts.clone(),
    }
}

#[allow(deprecated)] // the catalog fields are deprecated on the wire but still carried
fn config_to_proto(c: &Config) -> proto::Config {
    proto::Config {
        tts: c.tts().map(|t| {
            let mut out = proto::TtsConfig::default();
            match &t.voice {
                Some(VoiceChoice::Catalog(v)) => out.voice = Some(v.number()),
                Some(VoiceChoice::Id(s)) => out.voice_id = Some(s.clone()),
                None => {}
            }
            match &t.language {
                Some(LanguageChoice::Catalog(l)) => out.language = Some(l.number()),
                Some(LanguageChoice::Tag(s)) => out.language_tag = Some(s.clone()),
                None => {}
            }
            out
        }),
        stt: c.stt().map(|s| {
            let mut out = proto::SttConfig {
                patience: s.patience,
                ..Default::default()
            };
            match &s.language {
                Some(LanguageChoice::Catalog(l)) => out.language = Some(l.number()),
                Some(LanguageChoice::Tag(t)) => out.language_tag = Some(t.clone()),
                None => {}
            }
            out
        }),
        idle: c.idle().map(|i| proto::IdleConfig {
            timeout_ms: i.timeout_ms,
        }),
    }
}

fn parse_json(text: &str, what: &str) -> Result<Value, WireError> {
    serde_json::from_str(text).map_err(|e| malformed(format!("{what} is not JSON: {e}")))
}

fn from_body(body: Body) -> Result<Frame, WireError> {
    Ok(match body {
        Body::SessionStart(s) => session_start(s)?,
        Body::UserMessage(m) => Frame::UserMessage(UserMessage {
            turn_id: m.turn_id,
            text: m.text,
        }),
        Body::UserIdle(i) => Frame::UserIdle(UserIdle {
            turn_id: i.turn_id,
            level: i.level,
            idle_ms: i.idle_ms,
        }),
        Body::Interruption(i) => Frame::Interruption {
            through_turn: i.through_turn,
        },
        Body::Finalize(f) => Frame::Finalize {
            speech_id: f.speech_id,
            heard_text: f.heard_text,
        },
        Body::Response(r) => Frame::Response(Response {
            request_id: r.request_id,
            accepted: r.status == proto::Status::Accepted as i32,
            detail: r.detail,
            code: (r.code != 0).then(|| ErrorCode::from_number(r.code)),
        }),
        Body::SpeechStart(s) => Frame::SpeechStart {
            speech_id: s.speech_id,
            turn_id: s.turn_id,
        },
        Body::SpeechChunk(c) => Frame::SpeechChunk {
            speech_id: c.speech_id,
            text: c.text,
        },
        Body::SpeechEnd(e) => Frame::SpeechEnd {
            speech_id: e.speech_id,
        },
        Body::SpeechCancel(c) => Frame::SpeechCancel {
            speech_id: c.speech_id,
        },
        Body::Request(r) => match r.op {
            Some(proto::request::Op::Configure(c)) => Frame::Request {
                request_id: r.request_id,
                configure: config_from_proto(c)?,
            },
            None => return Err(malformed("Request names no op")),
        },
        Body::Rtvi(r) => rtvi(r)?,
        Body::End(_) => Frame::End,
        Body::Cancel(c) => Frame::Cancel {
            reason: (!c.reason.is_empty()).then_some(c.reason),
        },
        Body::Error(e) => Frame::Error(ErrorFrame {
            code: ErrorCode::from_number(e.code),
            message: e.message,
            fatal: e.fatal,
        }),
        Body::TurnStep(t) => Frame::TurnStep(TurnStep {
            turn_id: t.turn_id,
            kind: t.kind,
            name: t.name,
            provider: t.provider,
            start_ms: t.start_ms,
            duration_ms: t.duration_ms,
            first_output_ms: t.first_output_ms,
            counts: t.counts,
        }),
    })
}

/// A `SessionStart`: its `init` must be empty or a JSON object; capabilities this SDK does not
/// know are left out.
fn session_start(s: proto::SessionStart) -> Result<Frame, WireError> {
    let init = if s.init.is_empty() {
        Map::new()
    } else {
        let why = match serde_json::from_str::<Value>(&s.init) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(other) => Err(format!(
                "SessionStart.init must be a JSON object, got {}",
                json_kind(&other)
            )),
            Err(e) => Err(format!("SessionStart.init is not JSON: {e}")),
        };
        why.map_err(|why| WireError::BadInit {
            session_id: s.session_id.clone(),
            why,
        })?
    };
    let capabilities: Capabilities = s
        .capabilities
        .iter()
        .filter_map(|n| Capability::from_number(*n))
        .collect();
    Ok(Frame::SessionStart(SessionStart {
        session_id: s.session_id,
        turn_id: s.turn_id,
        init,
        wire_version: s.wire_version,
        capabilities,
    }))
}

/// An RTVI frame: its type must be known, its data empty, JSON `null` or any JSON value.
fn rtvi(r: proto::RtviFrame) -> Result<Frame, WireError> {
    let kind = RtviType::from_number(r.r#type)
        .ok_or_else(|| malformed(format!("RTVI type {} is not known", r.r#type)))?;
    let data = if r.data.is_empty() {
        None
    } else {
        match parse_json(&r.data, "RTVI data")? {
            Value::Null => None,
            v => Some(v),
        }
    };
    Ok(Frame::Rtvi(Rtvi {
        kind,
        data,
        id: r.id,
        turn_id: r.turn_id,
    }))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn voice(n: i32) -> Result<Voice, WireError> {
    Voice::from_number(n).ok_or_else(|| malformed(format!("Voice {n} is not known")))
}

fn language(n: i32) -> Result<Language, WireError> {
    Language::from_number(n).ok_or_else(|| malformed(format!("Language {n} is not known")))
}

/// Rebuilds a Config with the same validation as [`Config::new`]; a string field wins over the
/// enum field when both are present.
#[allow(deprecated)]
fn config_from_proto(c: proto::Config) -> Result<Config, WireError> {
    let tts = c
        .tts
        .map(|t| -> Result<TtsConfig, WireError> {
            Ok(TtsConfig {
                voice: match (t.voice_id, t.voice) {
                    (Some(s), _) => Some(VoiceChoice::Id(s)),
                    (None, Some(n)) => Some(VoiceChoice::Catalog(voice(n)?)),
                    (None, None) => None,
                },
                language: match (t.language_tag, t.language) {
                    (Some(s), _) => Some(LanguageChoice::Tag(s)),
                    (None, Some(n)) => Some(LanguageChoice::Catalog(language(n)?)),
                    (None, None) => None,
                },
            })
        })
        .transpose()?;
    let stt = c
        .stt
        .map(|s| -> Result<SttConfig, WireError> {
            Ok(SttConfig {
                language: match (s.language_tag, s.language) {
                    (Some(t), _) => Some(LanguageChoice::Tag(t)),
                    (None, Some(n)) => Some(LanguageChoice::Catalog(language(n)?)),
                    (None, None) => None,
                },
                patience: s.patience,
            })
        })
        .transpose()?;
    let idle = c.idle.map(|i| IdleConfig {
        timeout_ms: i.timeout_ms,
    });
    Config::new(tts, stt, idle).map_err(|e| malformed(format!("Request.configure: {e}")))
}

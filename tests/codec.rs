//! The wire codec against the spec: every golden vector of docs/protocol.md §1.6 byte for byte, the codec
//! rules of docs/protocol.md §1.5, the further vectors of docs/protocol.md §1.6, `Config` validation (docs/protocol.md §4.9, case
//! 46), the Language/Voice catalogs (docs/protocol.md §1.4), and a deterministic no-panic / round-trip property
//! check over random and mutated inputs.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use prost::Message;
use serde_json::{Map, Value, json};
use voqalize::proto;
use voqalize::wire::{
    Capabilities, Capability, Config, ConfigError, ErrorCode, ErrorFrame, Frame, IdleConfig,
    Language, LanguageChoice, Response, Rtvi, RtviType, SessionStart, SttConfig, TtsConfig,
    TurnStep, UserIdle, UserMessage, Voice, VoiceChoice, WireError, decode, decode_strict, encode,
};

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

/// Hex to bytes; spaces are ignored so examples can be pasted as written in the specs.
fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn caps(list: &[Capability]) -> Capabilities {
    list.iter().copied().collect()
}

fn env(body: proto::envelope::Body) -> Vec<u8> {
    proto::Envelope { body: Some(body) }.encode_to_vec()
}

fn decoded(bytes: &[u8]) -> Frame {
    match decode(bytes) {
        Ok(Some(f)) => f,
        other => panic!("{} did not decode to a frame: {other:?}", hex(bytes)),
    }
}

fn session_start(sid: &str, turn: u64, v: u32, c: &[Capability]) -> Frame {
    Frame::SessionStart(
        SessionStart::new(sid.to_owned(), turn)
            .with_wire_version(v)
            .with_capabilities(caps(c)),
    )
}

fn config(tts: Option<TtsConfig>, stt: Option<SttConfig>, idle: Option<IdleConfig>) -> Config {
    Config::new(tts, stt, idle).expect("valid config")
}

/// The golden vectors of docs/protocol.md §1.6 whose bytes contain no Python-formatted JSON, so that our
/// encoding must match them exactly.
fn exact_golden_vectors() -> Vec<(&'static str, Frame, &'static str)> {
    let mut counts = BTreeMap::new();
    counts.insert("output_tokens".to_owned(), 3);
    counts.insert("input_tokens".to_owned(), 7);
    vec![
        (
            "SessionStart{s1,1,{},3,{TURN_STEPS,SPEECH_CANCEL}}",
            session_start(
                "s1",
                1,
                3,
                &[Capability::TurnSteps, Capability::SpeechCancel],
            ),
            "0a100a02733110011a027b7d20032a020103",
        ),
        (
            "SessionStart{s,1,{},2}",
            session_start("s", 1, 2, &[]),
            "0a0b0a017310011a027b7d2002",
        ),
        (
            "UserMessage{2,hi}",
            Frame::UserMessage(UserMessage::new(2, "hi")),
            "1206080212026869",
        ),
        (
            "UserIdle{3,1,30000}",
            Frame::UserIdle(UserIdle::new(3, 1, 30000)),
            "1a080803100118b0ea01",
        ),
        (
            "Interruption{2}",
            Frame::Interruption { through_turn: 2 },
            "22020802",
        ),
        (
            "Finalize{1,Hello}",
            Frame::Finalize {
                speech_id: 1,
                heard_text: "Hello".into(),
            },
            "2a090801120548656c6c6f",
        ),
        (
            "SpeechStart{1,1}",
            Frame::SpeechStart {
                speech_id: 1,
                turn_id: 1,
            },
            "3a0408011001",
        ),
        (
            "SpeechChunk{1,Hi}",
            Frame::SpeechChunk {
                speech_id: 1,
                text: "Hi".into(),
            },
            "4206080112024869",
        ),
        (
            "SpeechEnd{1}",
            Frame::SpeechEnd { speech_id: 1 },
            "4a020801",
        ),
        (
            "SpeechCancel{1}",
            Frame::SpeechCancel { speech_id: 1 },
            "7a020801",
        ),
        (
            "TurnStep{2,model,m,p,5,10,Some(0),counts}",
            Frame::TurnStep(TurnStep {
                turn_id: 2,
                kind: "model".into(),
                name: "m".into(),
                provider: "p".into(),
                start_ms: 5,
                duration_ms: 10,
                first_output_ms: Some(0),
                counts,
            }),
            "82013a080212056d6f64656c1a016d2201702805300a380042100a0c696e7075745f746f6b656e73100742110a0d6f75747075745f746f6b656e731003",
        ),
        (
            "TurnStep{2,tool,t,0,0}",
            Frame::TurnStep(TurnStep {
                turn_id: 2,
                kind: "tool".into(),
                name: "t".into(),
                ..TurnStep::default()
            }),
            "82010b08021204746f6f6c1a0174",
        ),
        (
            "Request{1,configure{}}",
            Frame::Request {
                request_id: 1,
                configure: Config::default(),
            },
            "520408011200",
        ),
        (
            "Request{2,stt{TA,patience 0},tts{GAURI,TA}}",
            Frame::Request {
                request_id: 2,
                configure: config(
                    Some(TtsConfig {
                        voice: Some(VoiceChoice::Catalog(Voice::OmnivoiceGauri)),
                        language: Some(LanguageChoice::Catalog(Language::Ta)),
                    }),
                    Some(SttConfig {
                        language: Some(LanguageChoice::Catalog(Language::Ta)),
                        patience: Some(0),
                    }),
                    None,
                ),
            },
            "52100802120c0a0408011015120408151000",
        ),
        (
            "Request{3,strings}",
            Frame::Request {
                request_id: 3,
                configure: config(
                    Some(TtsConfig {
                        voice: Some(VoiceChoice::Id("omnivoice/gauri".into())),
                        language: Some(LanguageChoice::Tag("hi".into())),
                    }),
                    Some(SttConfig {
                        language: Some(LanguageChoice::Tag("en-IN".into())),
                        patience: None,
                    }),
                    None,
                ),
            },
            "5224080312200a151a0f6f6d6e69766f6963652f67617572692202686912071a05656e2d494e",
        ),
        (
            "Request{4,idle{0}}",
            Frame::Request {
                request_id: 4,
                configure: config(
                    None,
                    None,
                    Some(IdleConfig {
                        timeout_ms: Some(0),
                    }),
                ),
            },
            "5208080412041a020800",
        ),
        (
            "Request{5,idle{}}",
            Frame::Request {
                request_id: 5,
                configure: config(None, None, Some(IdleConfig::default())),
            },
            "5206080512021a00",
        ),
        (
            "Request{6,tts{KOKORO_AVA}}",
            Frame::Request {
                request_id: 6,
                configure: config(
                    Some(TtsConfig {
                        voice: Some(VoiceChoice::Catalog(Voice::KokoroAva)),
                        language: None,
                    }),
                    None,
                    None,
                ),
            },
            "5208080612040a020803",
        ),
        (
            "Response{1,accepted}",
            Frame::Response(Response::new(1, true, String::new(), None)),
            "320408011001",
        ),
        (
            "Response{1,rejected,no,UNSUPPORTED_LANGUAGE}",
            Frame::Response(Response::new(
                1,
                false,
                "no",
                Some(ErrorCode::UnsupportedLanguage),
            )),
            "320a080110021a026e6f2007",
        ),
        (
            "RTVI{server-message,null,id abc}",
            Frame::Rtvi(Rtvi {
                kind: RtviType::ServerMessage,
                data: None,
                id: Some("abc".into()),
                turn_id: None,
            }),
            "5a0d080112046e756c6c1a03616263",
        ),
        ("End", Frame::End, "6200"),
        ("Cancel{}", Frame::Cancel { reason: None }, "6a00"),
        (
            "Cancel{bye}",
            Frame::Cancel {
                reason: Some("bye".into()),
            },
            "6a050a03627965",
        ),
        (
            "Error{WIRE_VERSION,m,fatal}",
            Frame::Error(ErrorFrame {
                code: ErrorCode::WireVersion,
                message: "m".into(),
                fatal: true,
            }),
            "7207080212016d1801",
        ),
        (
            "Error{UNKNOWN,'',false}",
            Frame::Error(ErrorFrame {
                code: ErrorCode::Unknown,
                message: String::new(),
                fatal: false,
            }),
            "7200",
        ),
        (
            "Error{INTERNAL,greet failed: nope,fatal}",
            Frame::Error(ErrorFrame {
                code: ErrorCode::Internal,
                message: "greet failed: nope".into(),
                fatal: true,
            }),
            "7218080512126772656574206661696c65643a206e6f70651801",
        ),
    ]
}

/// The golden RTVI ui-command vector: its `data` was written by Python's `json.dumps` (spaces after
/// `:` and `,`), so only the JSON is compared semantically.
const GOLDEN_UI_COMMAND: &str = "5a3a080412347b22636f6d6d616e64223a20226f70656e5f70616e656c222c20227061796c6f6164223a207b22666f6f223a2022626172227d7d2002";

fn ui_command_frame() -> Frame {
    Frame::Rtvi(Rtvi {
        kind: RtviType::UiCommand,
        data: Some(json!({"command": "open_panel", "payload": {"foo": "bar"}})),
        id: None,
        turn_id: Some(2),
    })
}

// ---------------------------------------------------------------------------------------------
// docs/protocol.md §1.6 golden vectors and the §1.5 rules
// ---------------------------------------------------------------------------------------------

#[test]
fn case_01_every_exact_golden_vector_encodes_and_decodes_byte_for_byte() {
    let vectors = exact_golden_vectors();
    assert_eq!(vectors.len(), 27);
    for (name, frame, golden) in vectors {
        assert_eq!(hex(&encode(&frame)), golden, "encode {name}");
        let bytes = unhex(golden);
        assert_eq!(decode(&bytes), Ok(Some(frame.clone())), "decode {name}");
        assert_eq!(decode_strict(&bytes), Ok(frame), "decode_strict {name}");
    }
}

#[test]
fn case_01_golden_ui_command_with_python_json_compares_semantically() {
    let golden = unhex(GOLDEN_UI_COMMAND);
    let expected = ui_command_frame();

    // The Python bytes decode to exactly the expected frame.
    assert_eq!(decode(&golden), Ok(Some(expected.clone())));

    // Our bytes: every non-JSON byte as in the golden vector, the JSON compact.
    let ours = encode(&expected);
    let compact = r#"{"command":"open_panel","payload":{"foo":"bar"}}"#;
    // type 4, data (compact JSON), turn_id 2
    let body = format!(
        "0804 12{:02x}{} 2002",
        compact.len(),
        hex(compact.as_bytes())
    );
    let want = hex(&unhex(&format!("5a{:02x} {body}", unhex(&body).len())));
    assert_eq!(hex(&ours), want);

    // Field by field against the golden envelope, JSON semantically.
    let golden_env = proto::Envelope::decode(golden.as_slice()).expect("golden envelope");
    let our_env = proto::Envelope::decode(ours.as_slice()).expect("our envelope");
    let (Some(proto::envelope::Body::Rtvi(g)), Some(proto::envelope::Body::Rtvi(o))) =
        (golden_env.body, our_env.body)
    else {
        panic!("both must be RTVI frames");
    };
    assert_eq!(
        (o.r#type, o.id.clone(), o.turn_id),
        (g.r#type, g.id.clone(), g.turn_id)
    );
    assert_eq!(
        serde_json::from_str::<Value>(&o.data).expect("our data"),
        serde_json::from_str::<Value>(&g.data).expect("golden data"),
    );
    assert_ne!(
        o.data, g.data,
        "the golden JSON has Python spacing, ours is compact"
    );

    // And it round-trips.
    assert_eq!(decode(&ours), Ok(Some(expected)));
}

#[test]
fn case_01_golden_relay_framed_end() {
    let framed = unhex("12345678123456781234567812345678 6200");
    let (prefix, envelope) = framed.split_at(16);
    assert_eq!(hex(prefix), "12345678123456781234567812345678");
    assert_eq!(decode(envelope), Ok(Some(Frame::End)));
    let mut ours = prefix.to_vec();
    ours.extend(encode(&Frame::End));
    assert_eq!(ours, framed);
}

#[test]
fn case_02_status_unspecified_reads_as_rejected() {
    assert_eq!(
        decode(&unhex("32020801")),
        Ok(Some(Frame::Response(Response::new(
            1,
            false,
            String::new(),
            None
        ))))
    );
}

#[test]
fn case_03_error_codes_zero_and_unknown() {
    let error_code = |bytes: &str| match decoded(&unhex(bytes)) {
        Frame::Error(e) => e.code,
        other => panic!("not an Error: {other:?}"),
    };
    let response_code = |bytes: &str| match decoded(&unhex(bytes)) {
        Frame::Response(r) => r.code,
        other => panic!("not a Response: {other:?}"),
    };
    // Error with code 0 (absent, and written explicitly) and 99.
    assert_eq!(error_code("7200"), ErrorCode::Unknown);
    assert_eq!(error_code("72020800"), ErrorCode::Unknown);
    assert_eq!(error_code("72020863"), ErrorCode::Unknown);
    assert_eq!(error_code("72020805"), ErrorCode::Internal);
    // Response with code 99, 0 (absent and explicit), and a known one.
    assert_eq!(response_code("3204080120 63"), Some(ErrorCode::Unknown));
    assert_eq!(response_code("3202 0801"), None);
    assert_eq!(response_code("3204 0801 2000"), None);
    assert_eq!(
        response_code("3204 0801 2008"),
        Some(ErrorCode::InvalidRequest)
    );
    // UNKNOWN encodes as 0, i.e. the field is absent.
    assert_eq!(
        hex(&encode(&Frame::Error(ErrorFrame {
            code: ErrorCode::Unknown,
            message: "x".into(),
            fatal: true,
        }))),
        "7205120178 1801".replace(' ', "")
    );
}

#[test]
fn case_04_unknown_capabilities_are_dropped() {
    let packed = env(proto::envelope::Body::SessionStart(proto::SessionStart {
        session_id: "s".into(),
        turn_id: 1,
        init: String::new(),
        wire_version: 3,
        capabilities: vec![1, 7, 3],
    }));
    assert_eq!(hex(&packed), "0a0c0a0173100120032a03010703");
    // An empty init text reads as {}.
    let expected = Frame::SessionStart(
        SessionStart::new("s", 1)
            .with_wire_version(3)
            .with_capabilities(caps(&[Capability::SpeechCancel, Capability::TurnSteps])),
    );
    assert_eq!(decode(&packed), Ok(Some(expected.clone())));
    // The same list unpacked (field 5 as three varints) and with 0 in it decodes the same.
    let unpacked = unhex("0a0f 0a0173 1001 2003 2801 2807 2803 2800");
    assert_eq!(decode(&unpacked), Ok(Some(expected)));
}

#[test]
fn case_05_unknown_field_and_empty_bytes_skip_leniently_and_fail_strictly() {
    for bytes in [unhex("9a0600"), Vec::new()] {
        assert_eq!(decode(&bytes), Ok(None), "lenient {}", hex(&bytes));
        assert_eq!(
            decode_strict(&bytes),
            Err(WireError::NoKnownBody),
            "strict {}",
            hex(&bytes)
        );
    }
    // A newer peer's body (Envelope field 17, an empty message) is skipped the same way.
    assert_eq!(decode(&unhex("8a0100")), Ok(None));
    assert_eq!(decode_strict(&unhex("8a0100")), Err(WireError::NoKnownBody));
}

#[test]
#[allow(deprecated)] // the deprecated catalog fields are part of the cases
fn case_06_known_bodies_that_break_a_rule_are_malformed_even_leniently() {
    use proto::envelope::Body;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "Request with no op",
            env(Body::Request(proto::Request {
                request_id: 1,
                op: None,
            })),
        ),
        (
            "RTVI type 0",
            env(Body::Rtvi(proto::RtviFrame {
                r#type: 0,
                data: "null".into(),
                id: None,
                turn_id: None,
            })),
        ),
        (
            "RTVI type 11 (unknown)",
            env(Body::Rtvi(proto::RtviFrame {
                r#type: 11,
                data: "{}".into(),
                id: None,
                turn_id: None,
            })),
        ),
        (
            "RTVI data not json",
            env(Body::Rtvi(proto::RtviFrame {
                r#type: 4,
                data: "not json".into(),
                id: None,
                turn_id: None,
            })),
        ),
        (
            "TtsConfig voice 99",
            env(Body::Request(proto::Request {
                request_id: 1,
                op: Some(proto::request::Op::Configure(proto::Config {
                    tts: Some(proto::TtsConfig {
                        voice: Some(99),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
            })),
        ),
        (
            "TtsConfig language without stt language",
            env(Body::Request(proto::Request {
                request_id: 1,
                op: Some(proto::request::Op::Configure(proto::Config {
                    tts: Some(proto::TtsConfig {
                        language: Some(21),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
            })),
        ),
        (
            "SttConfig language 99",
            env(Body::Request(proto::Request {
                request_id: 1,
                op: Some(proto::request::Op::Configure(proto::Config {
                    tts: Some(proto::TtsConfig {
                        language: Some(21),
                        ..Default::default()
                    }),
                    stt: Some(proto::SttConfig {
                        language: Some(99),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
            })),
        ),
        (
            "SttConfig patience 11",
            env(Body::Request(proto::Request {
                request_id: 1,
                op: Some(proto::request::Op::Configure(proto::Config {
                    stt: Some(proto::SttConfig {
                        patience: Some(11),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
            })),
        ),
        ("not protobuf", unhex("ffffffff")),
        ("truncated", unhex("1206080212")),
        ("invalid utf-8 text", unhex("120608021202c328")),
    ];
    for (name, bytes) in cases {
        let lenient = decode(&bytes);
        assert!(
            matches!(lenient, Err(WireError::Malformed(_))),
            "{name}: lenient gave {lenient:?}"
        );
        assert_eq!(decode_strict(&bytes).err(), lenient.err(), "{name}: strict");
    }

    // SessionStart init "x" (not JSON) and "[1]" (JSON, not an object) are BadInit, naming the
    // session.
    for init in ["x", "[1]"] {
        let bytes = env(Body::SessionStart(proto::SessionStart {
            session_id: "s9".into(),
            turn_id: 1,
            init: init.into(),
            wire_version: 3,
            capabilities: vec![],
        }));
        match decode(&bytes) {
            Err(WireError::BadInit { session_id, why }) => {
                assert_eq!(session_id, "s9");
                assert!(why.contains("init"), "{why}");
            }
            other => panic!("init {init:?}: {other:?}"),
        }
        assert!(matches!(
            decode_strict(&bytes),
            Err(WireError::BadInit { .. })
        ));
    }
}

#[test]
#[allow(deprecated)]
fn case_07_string_voice_wins_over_catalog_voice() {
    let bytes = env(proto::envelope::Body::Request(proto::Request {
        request_id: 7,
        op: Some(proto::request::Op::Configure(proto::Config {
            tts: Some(proto::TtsConfig {
                voice: Some(1),
                voice_id: Some("x/y".into()),
                language: Some(7),
                language_tag: Some("or".into()),
            }),
            stt: Some(proto::SttConfig {
                language: Some(1),
                language_tag: Some("hi".into()),
                patience: None,
            }),
            idle: None,
        })),
    }));
    let Frame::Request {
        request_id,
        configure,
    } = decoded(&bytes)
    else {
        panic!("not a Request");
    };
    assert_eq!(request_id, 7);
    let tts = configure.tts().expect("tts");
    assert_eq!(tts.voice, Some(VoiceChoice::Id("x/y".into())));
    assert_eq!(tts.language, Some(LanguageChoice::Tag("or".into())));
    let stt = configure.stt().expect("stt");
    assert_eq!(stt.language, Some(LanguageChoice::Tag("hi".into())));
    assert!(configure.idle().is_none());
}

#[test]
fn case_08_rtvi_no_data() {
    for data in ["", "null", " null "] {
        let bytes = env(proto::envelope::Body::Rtvi(proto::RtviFrame {
            r#type: 6,
            data: data.into(),
            id: None,
            turn_id: None,
        }));
        assert_eq!(
            decode(&bytes),
            Ok(Some(Frame::Rtvi(Rtvi {
                kind: RtviType::ClientMessage,
                data: None,
                id: None,
                turn_id: None,
            }))),
            "data {data:?}"
        );
    }
    let ours = encode(&Frame::Rtvi(Rtvi {
        kind: RtviType::ServerResponse,
        data: None,
        id: None,
        turn_id: None,
    }));
    assert_eq!(hex(&ours), "5a0808021204 6e756c6c".replace(' ', ""));
    // Data present but JSON `false`/`0` is data, not "no data".
    let bytes = env(proto::envelope::Body::Rtvi(proto::RtviFrame {
        r#type: 8,
        data: "false".into(),
        id: Some("i".into()),
        turn_id: None,
    }));
    let Frame::Rtvi(r) = decoded(&bytes) else {
        panic!("not RTVI")
    };
    assert_eq!((r.data, r.id), (Some(Value::Bool(false)), Some("i".into())));
}

#[test]
fn case_09_turn_step_first_output_presence_and_sorted_counts() {
    let mut step = TurnStep {
        turn_id: 2,
        kind: "tool".into(),
        name: "t".into(),
        first_output_ms: Some(0),
        ..TurnStep::default()
    };
    assert_eq!(
        hex(&encode(&Frame::TurnStep(step.clone()))),
        "82010d08021204746f6f6c1a01743800"
    );
    step.first_output_ms = None;
    assert_eq!(
        hex(&encode(&Frame::TurnStep(step.clone()))),
        "82010b08021204746f6f6c1a0174"
    );

    // Presence survives decoding: Some(0) and None stay apart.
    let zero = unhex("82010d08021204746f6f6c1a01743800");
    let Frame::TurnStep(t) = decoded(&zero) else {
        panic!("not a TurnStep")
    };
    assert_eq!(t.first_output_ms, Some(0));
    let Frame::TurnStep(t) = decoded(&unhex("82010b08021204746f6f6c1a0174")) else {
        panic!("not a TurnStep")
    };
    assert_eq!(t.first_output_ms, None);

    // counts: input_tokens is written before output_tokens whatever the insertion order.
    step.counts.insert("output_tokens".into(), 3);
    step.counts.insert("input_tokens".into(), 7);
    let bytes = hex(&encode(&Frame::TurnStep(step)));
    let input = bytes.find(&hex(b"input_tokens")).expect("input_tokens");
    let output = bytes.find(&hex(b"output_tokens")).expect("output_tokens");
    assert!(input < output, "{bytes}");
    assert!(
        bytes.ends_with(
            "42100a0c696e7075745f746f6b656e73100742110a0d6f75747075745f746f6b656e731003"
        )
    );
}

#[test]
fn case_10_capabilities_are_packed_and_sorted() {
    for order in [
        [Capability::TurnSteps, Capability::SpeechCancel],
        [Capability::SpeechCancel, Capability::TurnSteps],
    ] {
        let bytes = hex(&encode(&session_start("s1", 1, 3, &order)));
        assert!(bytes.ends_with("2a020103"), "{bytes}");
    }
    let all = hex(&encode(&session_start(
        "s",
        1,
        3,
        &[
            Capability::TurnSteps,
            Capability::StringConfig,
            Capability::SpeechCancel,
        ],
    )));
    assert!(all.ends_with("2a03010203"), "{all}");
    // No capabilities: field 5 absent.
    assert_eq!(
        hex(&encode(&session_start("s", 1, 2, &[]))),
        "0a0b0a017310011a027b7d2002"
    );
}

// ---------------------------------------------------------------------------------------------
// docs/protocol.md §1.6 further vectors
// ---------------------------------------------------------------------------------------------

/// `SpeechChunk`s are encoded without building the protobuf message: the bytes are prost's, at
/// every edge (an id or a text at its default, varint lengths of one to three bytes, any UTF-8).
#[test]
fn turn_steps_encode_as_prost_encodes_them() {
    let names = ["", "model", "é日本語🙂", &"x".repeat(200)];
    let counts: [BTreeMap<String, u64>; 3] = [
        BTreeMap::new(),
        BTreeMap::from([("input_tokens".to_owned(), 812), ("zero".to_owned(), 0)]),
        (0..40)
            .map(|i| (format!("count_{i}"), u64::MAX - i))
            .chain([(String::new(), 7)])
            .collect(),
    ];
    for (i, counts) in counts.iter().enumerate() {
        for (j, name) in names.iter().enumerate() {
            let step = TurnStep {
                turn_id: [0, 1, u64::MAX][(i + j) % 3],
                kind: names[(j + 1) % names.len()].to_owned(),
                name: (*name).to_owned(),
                provider: names[(j + 2) % names.len()].to_owned(),
                start_ms: [0, 128, u32::MAX][j % 3],
                duration_ms: [0, 5, 300_000][(i + 1) % 3],
                first_output_ms: [None, Some(0), Some(1234)][(i + j) % 3],
                counts: counts.clone(),
            };
            let prost = proto::Envelope {
                body: Some(proto::envelope::Body::TurnStep(proto::TurnStep {
                    turn_id: step.turn_id,
                    kind: step.kind.clone(),
                    name: step.name.clone(),
                    provider: step.provider.clone(),
                    start_ms: step.start_ms,
                    duration_ms: step.duration_ms,
                    first_output_ms: step.first_output_ms,
                    counts: step.counts.clone(),
                })),
            }
            .encode_to_vec();
            let frame = Frame::TurnStep(step);
            assert_eq!(encode(&frame), prost, "{frame:?}");
            assert_eq!(decode(&prost).unwrap(), Some(frame));
        }
    }
}

#[test]
fn chunks_encode_as_prost_encodes_them() {
    let texts = [
        String::new(),
        "hello".to_owned(),
        "é日本語🙂".to_owned(),
        "x".repeat(127),
        "x".repeat(128),
        "x".repeat(20_000),
    ];
    for speech_id in [0, 1, 127, 128, u64::from(u32::MAX), u64::MAX] {
        for text in &texts {
            let frame = Frame::SpeechChunk {
                speech_id,
                text: text.clone(),
            };
            let prost = proto::Envelope {
                body: Some(proto::envelope::Body::SpeechChunk(proto::SpeechChunk {
                    speech_id,
                    text: text.clone(),
                })),
            }
            .encode_to_vec();
            assert_eq!(
                encode(&frame),
                prost,
                "speech {speech_id}, {} bytes",
                text.len()
            );
            assert_eq!(decode(&prost).unwrap(), Some(frame));
        }
    }
}

#[test]
fn conformance_byte_examples() {
    let sid = "conf-0123456789ab";
    let conf_ss = format!(
        "0a20 0a11 {} 1001 1a027b7d 2003 2a03010203",
        hex(sid.as_bytes())
    );
    let examples: Vec<(Frame, String)> = vec![
        (
            Frame::SpeechStart {
                speech_id: 1,
                turn_id: 1,
            },
            "3a 04 08 01 10 01".into(),
        ),
        (
            Frame::SpeechChunk {
                speech_id: 1,
                text: "hello".into(),
            },
            "42 09 08 01 12 05 68 65 6c 6c 6f".into(),
        ),
        (Frame::SpeechEnd { speech_id: 1 }, "4a 02 08 01".into()),
        (Frame::SpeechCancel { speech_id: 2 }, "7a 02 08 02".into()),
        (
            Frame::Interruption { through_turn: 2 },
            "22 02 08 02".into(),
        ),
        (
            Frame::Finalize {
                speech_id: 2,
                heard_text: String::new(),
            },
            "2a 02 08 02".into(),
        ),
        (
            Frame::UserIdle(UserIdle::new(2, 2, 30000)),
            "1a 08 08 02 10 02 18 b0 ea 01".into(),
        ),
        (
            session_start(
                sid,
                1,
                3,
                &[
                    Capability::SpeechCancel,
                    Capability::StringConfig,
                    Capability::TurnSteps,
                ],
            ),
            conf_ss,
        ),
    ];
    for (frame, want) in examples {
        let want = unhex(&want);
        assert_eq!(encode(&frame), want, "encode {frame:?}");
        assert_eq!(decode(&want), Ok(Some(frame)));
    }
}

// ---------------------------------------------------------------------------------------------
// Config validation (docs/protocol.md §4.9)
// ---------------------------------------------------------------------------------------------

#[test]
fn case_46_config_validation() {
    // One language leg.
    let err = Config::builder()
        .tts_language(Language::Ta)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::OneLanguageLeg {
            set: "tts.language",
            missing: "stt.language"
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("tts.language") && text.contains("stt.language") && text.contains("set both"),
        "{text}"
    );
    assert_eq!(
        Config::builder().stt_language("ta").build().unwrap_err(),
        ConfigError::OneLanguageLeg {
            set: "stt.language",
            missing: "tts.language"
        }
    );

    // Patience is a 0..=10 scale.
    let err = Config::builder().patience(11).build().unwrap_err();
    assert_eq!(err, ConfigError::Patience(11));
    let text = err.to_string();
    assert!(
        text.contains("not milliseconds") && text.contains('7'),
        "{text}"
    );
    assert_eq!(
        Config::builder().patience(1500).build().unwrap_err(),
        ConfigError::Patience(1500)
    );
    assert_eq!(
        Config::builder()
            .patience(10)
            .build()
            .unwrap()
            .stt()
            .unwrap()
            .patience,
        Some(10)
    );
    assert_eq!(
        Config::builder()
            .patience(0)
            .build()
            .unwrap()
            .stt()
            .unwrap()
            .patience,
        Some(0)
    );

    // Blank strings.
    assert_eq!(
        Config::builder().voice("  ").build().unwrap_err(),
        ConfigError::EmptyString { field: "tts.voice" }
    );
    assert_eq!(
        Config::builder().voice("").build().unwrap_err(),
        ConfigError::EmptyString { field: "tts.voice" }
    );
    assert_eq!(
        Config::builder()
            .stt_language("ta")
            .tts_language(" \t")
            .build()
            .unwrap_err(),
        ConfigError::EmptyString {
            field: "tts.language"
        }
    );
    assert_eq!(
        Config::builder()
            .stt_language("")
            .tts_language("ta")
            .build()
            .unwrap_err(),
        ConfigError::EmptyString {
            field: "stt.language"
        }
    );
    assert!(
        Config::builder()
            .voice("  ")
            .build()
            .unwrap_err()
            .to_string()
            .contains("empty string")
    );

    // Valid shapes: the two legs may differ; voice alone; idle 0.
    let c = Config::builder()
        .stt_language("or")
        .tts_language(Language::Hi)
        .voice(Voice::OmnivoiceGauri)
        .idle_timeout_ms(0)
        .build()
        .unwrap();
    assert!(c.needs_string_config());
    assert_eq!(
        c.stt().unwrap().language,
        Some(LanguageChoice::Tag("or".into()))
    );
    assert_eq!(
        c.tts().unwrap().language,
        Some(LanguageChoice::Catalog(Language::Hi))
    );
    assert_eq!(c.idle().unwrap().timeout_ms, Some(0));
    let catalog_only = Config::builder()
        .language(Language::Ta)
        .voice(Voice::OmnivoiceGauri)
        .build()
        .unwrap();
    assert!(!catalog_only.needs_string_config());
    assert!(
        Config::builder()
            .voice("omnivoice/gauri")
            .build()
            .unwrap()
            .needs_string_config()
    );

    // The same rules apply through Config::new.
    assert_eq!(
        Config::new(
            None,
            Some(SttConfig {
                language: None,
                patience: Some(11)
            }),
            None
        ),
        Err(ConfigError::Patience(11))
    );
}

// ---------------------------------------------------------------------------------------------
// Language / Voice catalogs (docs/protocol.md §1.4)
// ---------------------------------------------------------------------------------------------

const LANGUAGES: [(i32, &str); 23] = [
    (1, "en"),
    (2, "as"),
    (3, "bn"),
    (4, "brx"),
    (5, "doi"),
    (6, "gu"),
    (7, "hi"),
    (8, "kn"),
    (9, "kok"),
    (10, "ks"),
    (11, "mai"),
    (12, "ml"),
    (13, "mni"),
    (14, "mr"),
    (15, "ne"),
    (16, "or"),
    (17, "pa"),
    (18, "sa"),
    (19, "sat"),
    (20, "sd"),
    (21, "ta"),
    (22, "te"),
    (23, "ur"),
];

const VOICES: [&str; 40] = [
    "omnivoice/gauri",
    "omnivoice/gaurav",
    "kokoro/ava",
    "kokoro/sarah",
    "kokoro/noah",
    "kokoro/leo",
    "kokoro/emma",
    "kokoro/oliver",
    "omnivoice/gautam",
    "omnivoice/gayatri",
    "omnivoice/emily",
    "omnivoice/jasmine",
    "omnivoice/sofia",
    "omnivoice/madison",
    "omnivoice/aaliyah",
    "omnivoice/ryan",
    "omnivoice/marcus",
    "omnivoice/daniel",
    "omnivoice/tyler",
    "omnivoice/jordan",
    "omnivoice/freya",
    "omnivoice/chiara",
    "omnivoice/elodie",
    "omnivoice/amara",
    "omnivoice/kasia",
    "omnivoice/lukas",
    "omnivoice/javier",
    "omnivoice/oliverbennett",
    "omnivoice/samuel",
    "omnivoice/andrei",
    "omnivoice/ananya",
    "omnivoice/meera",
    "omnivoice/priya",
    "omnivoice/riya",
    "omnivoice/kavya",
    "omnivoice/arjun",
    "omnivoice/karthik",
    "omnivoice/rohan",
    "omnivoice/aditya",
    "omnivoice/nikhil",
];

#[test]
fn catalogs_match_wire_md_1_4() {
    assert_eq!(Language::ALL.len(), 23);
    assert_eq!(Voice::ALL.len(), 40);

    // Spot checks by name.
    assert_eq!((Language::En.number(), Language::En.iso_code()), (1, "en"));
    assert_eq!(
        (Language::Mni.number(), Language::Mni.iso_code()),
        (13, "mni")
    );
    assert_eq!((Language::Or.number(), Language::Or.iso_code()), (16, "or"));
    assert_eq!((Language::Ta.number(), Language::Ta.iso_code()), (21, "ta"));
    assert_eq!((Language::Ur.number(), Language::Ur.iso_code()), (23, "ur"));
    assert_eq!(
        (
            Voice::OmnivoiceGauri.number(),
            Voice::OmnivoiceGauri.voice_id()
        ),
        (1, "omnivoice/gauri")
    );
    assert_eq!(
        (Voice::KokoroAva.number(), Voice::KokoroAva.voice_id()),
        (3, "kokoro/ava")
    );
    assert_eq!(
        (Voice::KokoroOliver.number(), Voice::KokoroOliver.voice_id()),
        (8, "kokoro/oliver")
    );
    assert_eq!(
        (
            Voice::OmnivoiceOliverbennett.number(),
            Voice::OmnivoiceOliverbennett.voice_id()
        ),
        (28, "omnivoice/oliverbennett")
    );
    assert_eq!(
        (
            Voice::OmnivoiceNikhil.number(),
            Voice::OmnivoiceNikhil.voice_id()
        ),
        (40, "omnivoice/nikhil")
    );

    // The whole tables, in wire-number order, both directions.
    for (i, (n, iso)) in LANGUAGES.iter().enumerate() {
        let l = Language::ALL[i];
        assert_eq!((l.number(), l.iso_code()), (*n, *iso));
        assert_eq!(Language::from_number(*n), Some(l));
        assert_eq!(Language::from_iso_code(iso), Some(l));
    }
    for (i, id) in VOICES.iter().enumerate() {
        let v = Voice::ALL[i];
        let n = i32::try_from(i).unwrap() + 1;
        assert_eq!((v.number(), v.voice_id()), (n, *id));
        assert_eq!(Voice::from_number(n), Some(v));
        assert_eq!(Voice::from_voice_id(id), Some(v));
    }
    for n in [0, 24, -1, 99] {
        assert_eq!(Language::from_number(n), None, "{n}");
    }
    for n in [0, 41, -1, 99] {
        assert_eq!(Voice::from_number(n), None, "{n}");
    }
    assert_eq!(Language::from_iso_code("xx"), None);
    assert_eq!(Voice::from_voice_id("omnivoice/nobody"), None);
}

// ---------------------------------------------------------------------------------------------
// Deterministic fuzzing: no input panics; whatever decodes re-encodes and decodes to itself.
// ---------------------------------------------------------------------------------------------

/// xorshift64*: small, deterministic, good enough to shake a decoder.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("fits")
    }
    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn text(&mut self) -> String {
        const ALPHABET: [&str; 12] = [
            "a", "b", "z", " ", "-", "/", "é", "日", "\"", "\\", "{", "0",
        ];
        (0..self.below(8))
            .map(|_| ALPHABET[self.below(ALPHABET.len())])
            .collect()
    }
    fn word(&mut self) -> String {
        let mut s = self.text();
        s.push('w'); // never blank
        s
    }
    fn small(&mut self) -> u64 {
        match self.below(4) {
            0 => 0,
            1 => self.next() % 300,
            2 => self.next() % (1 << 35),
            _ => self.next(),
        }
    }
    fn small32(&mut self) -> u32 {
        u32::try_from(self.small() % (u64::from(u32::MAX) + 1)).expect("fits")
    }
    fn json(&mut self, depth: u32) -> Value {
        match self.below(if depth == 0 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => Value::Bool(self.chance(2)),
            2 => json!(self.small()),
            3 => json!(-i64::try_from(self.small() % 1_000_000).expect("fits")),
            4 => Value::String(self.text()),
            5 => Value::Array((0..self.below(3)).map(|_| self.json(depth - 1)).collect()),
            _ => Value::Object(self.object(depth - 1)),
        }
    }
    fn object(&mut self, depth: u32) -> Map<String, Value> {
        (0..self.below(4))
            .map(|_| (self.text(), self.json(depth)))
            .collect()
    }
    fn language(&mut self) -> LanguageChoice {
        if self.chance(2) {
            LanguageChoice::Catalog(Language::ALL[self.below(Language::ALL.len())])
        } else {
            LanguageChoice::Tag(self.word())
        }
    }
    fn error_code(&mut self) -> ErrorCode {
        ErrorCode::from_number(i32::try_from(self.below(10)).expect("fits"))
    }
    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        if self.chance(2) { Some(f(self)) } else { None }
    }

    /// A random valid frame of any kind.
    fn frame(&mut self) -> Frame {
        match self.below(16) {
            0 => Frame::SessionStart(
                SessionStart::new(self.text(), self.small())
                    .with_init(self.object(2))
                    .with_wire_version(self.small32())
                    .with_capabilities(
                        (0..self.below(4))
                            .filter_map(|_| {
                                Capability::from_number(i32::try_from(self.below(4)).expect("fits"))
                            })
                            .collect(),
                    ),
            ),
            1 => Frame::UserMessage(UserMessage::new(self.small(), self.text())),
            2 => Frame::UserIdle(UserIdle::new(self.small(), self.small32(), self.small32())),
            3 => Frame::Interruption {
                through_turn: self.small(),
            },
            4 => Frame::Finalize {
                speech_id: self.small(),
                heard_text: self.text(),
            },
            5 => Frame::Response(Response::new(
                self.small(),
                self.chance(2),
                self.text(),
                // `Some(Unknown)` encodes as 0, which reads back as `None` (docs/protocol.md §1.5).
                self.opt(|r| r.error_code())
                    .filter(|c| *c != ErrorCode::Unknown),
            )),
            6 => Frame::SpeechStart {
                speech_id: self.small(),
                turn_id: self.small(),
            },
            7 => Frame::SpeechChunk {
                speech_id: self.small(),
                text: self.text(),
            },
            8 => Frame::SpeechEnd {
                speech_id: self.small(),
            },
            9 => {
                let legs = self.chance(2);
                let tts = self.opt(|r| TtsConfig {
                    voice: r.opt(|r| {
                        if r.chance(2) {
                            VoiceChoice::Catalog(Voice::ALL[r.below(Voice::ALL.len())])
                        } else {
                            VoiceChoice::Id(r.word())
                        }
                    }),
                    language: None,
                });
                let stt = self.opt(|r| SttConfig {
                    language: None,
                    patience: r.opt(|r| u32::try_from(r.below(11)).expect("fits")),
                });
                let (mut tts, mut stt) = (tts, stt);
                if legs {
                    tts.get_or_insert_with(TtsConfig::default).language = Some(self.language());
                    stt.get_or_insert_with(SttConfig::default).language = Some(self.language());
                }
                let idle = self.opt(|r| IdleConfig {
                    timeout_ms: r.opt(Rng::small32),
                });
                Frame::Request {
                    request_id: self.small(),
                    configure: config(tts, stt, idle),
                }
            }
            10 => Frame::Rtvi(Rtvi {
                kind: RtviType::ALL[self.below(RtviType::ALL.len())],
                data: self.opt(|r| r.json(2)).filter(|v| !v.is_null()),
                id: self.opt(Rng::text),
                turn_id: self.opt(Rng::small),
            }),
            11 => Frame::End,
            12 => Frame::Cancel {
                reason: self.opt(Rng::word),
            },
            13 => Frame::Error(ErrorFrame {
                code: self.error_code(),
                message: self.text(),
                fatal: self.chance(2),
            }),
            14 => Frame::SpeechCancel {
                speech_id: self.small(),
            },
            _ => Frame::TurnStep(TurnStep {
                turn_id: self.small(),
                kind: self.text(),
                name: self.text(),
                provider: self.text(),
                start_ms: self.small32(),
                duration_ms: self.small32(),
                first_output_ms: self.opt(Rng::small32),
                counts: (0..self.below(4))
                    .map(|_| (self.text(), self.small()))
                    .collect(),
            }),
        }
    }
}

/// Every golden and example byte string, as seeds for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = exact_golden_vectors()
        .into_iter()
        .map(|(_, _, h)| unhex(h))
        .collect();
    seeds.push(unhex(GOLDEN_UI_COMMAND));
    seeds.push(unhex("9a0600"));
    seeds.push(unhex("32020801"));
    seeds.push(unhex("0a0c0a0173100120032a03010703"));
    seeds
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = seeds[rng.below(seeds.len())].clone();
    // Mostly one edit, so that many inputs still reach the frame mappings; sometimes a few.
    let edits = if rng.chance(4) { 2 + rng.below(3) } else { 1 };
    for _ in 0..edits {
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.byte();
            }
            2 => {
                let i = rng.below(b.len() + 1);
                b.insert(i, rng.byte());
            }
            3 if !b.is_empty() => {
                let i = rng.below(b.len());
                b.remove(i);
            }
            4 => {
                let n = rng.below(b.len() + 1);
                b.truncate(n);
            }
            5 => {
                // Append another whole envelope: the last oneof member wins.
                b.extend_from_slice(&seeds[rng.below(seeds.len())]);
            }
            _ if b.len() > 1 => {
                // Rewrite a length byte (the second byte of most envelopes).
                b[1] = u8::try_from(rng.below(0x80)).expect("fits");
            }
            _ => {}
        }
    }
    b
}

/// Decodes `bytes` both ways without panicking, checks the two paths agree, and for a decodable
/// frame checks the round trip. Returns whether a frame came out.
fn check_input(bytes: &[u8]) -> bool {
    let outcome = catch_unwind(AssertUnwindSafe(|| (decode(bytes), decode_strict(bytes))));
    let Ok((lenient, strict)) = outcome else {
        panic!("decoding panicked on {}", hex(bytes));
    };
    match (&lenient, &strict) {
        (Ok(Some(f)), Ok(g)) => assert_eq!(f, g, "{}", hex(bytes)),
        (Ok(None), Err(WireError::NoKnownBody)) => {}
        (Err(e), Err(g)) => assert_eq!(e, g, "{}", hex(bytes)),
        _ => panic!(
            "lenient {lenient:?} and strict {strict:?} disagree on {}",
            hex(bytes)
        ),
    }
    let Ok(Some(frame)) = lenient else {
        return false;
    };
    let again = encode(&frame);
    let redecoded = decode(&again)
        .unwrap_or_else(|e| panic!("re-encoded {} of {} fails: {e}", hex(&again), hex(bytes)));
    let Some(redecoded) = redecoded else {
        panic!("re-encoded frame has no body: {}", hex(&again));
    };
    // docs/protocol.md §1.5: a Response code this build does not know reads as `Some(Unknown)`, and
    // `Unknown` is written as 0, which reads back as "no code". That is the only lossy mapping.
    let expected = match frame {
        Frame::Response(mut r) if r.code == Some(ErrorCode::Unknown) => {
            r.code = None;
            Frame::Response(r)
        }
        f => f,
    };
    assert_eq!(redecoded, expected, "round trip of {}", hex(bytes));
    // Encoding is deterministic and stable from here on.
    assert_eq!(encode(&redecoded), again, "re-encoding of {}", hex(bytes));
    true
}

#[test]
fn fuzz_decode_never_panics_and_decodable_frames_round_trip() {
    let seeds = seeds();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut decodable, mut total) = (0usize, 0usize);
    for i in 0..20_000 {
        let input = match i % 4 {
            // Pure noise, short and long.
            0 => (0..rng.below(48)).map(|_| rng.byte()).collect(),
            // A plausible envelope tag and length, then noise.
            1 => {
                let field = u8::try_from(rng.below(16) + 1).expect("fits");
                let body: Vec<u8> = (0..rng.below(24)).map(|_| rng.byte()).collect();
                let mut b = if field < 16 {
                    vec![(field << 3) | 2]
                } else {
                    vec![0x82, 0x01]
                };
                b.push(u8::try_from(body.len()).expect("fits"));
                b.extend(body);
                b
            }
            // Mutated goldens.
            _ => mutate(&mut rng, &seeds),
        };
        total += 1;
        if check_input(&input) {
            decodable += 1;
        }
    }
    assert_eq!(total, 20_000);
    // The corpus must reach the frame mappings, not just the protobuf parser.
    assert!(
        decodable > 1_500,
        "only {decodable} of {total} inputs decoded"
    );
}

#[test]
fn fuzz_random_valid_frames_round_trip() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut kinds = BTreeSet::new();
    for _ in 0..3_000 {
        let frame = rng.frame();
        kinds.insert(frame.name());
        let bytes = encode(&frame);
        assert_eq!(
            decode(&bytes),
            Ok(Some(frame.clone())),
            "{frame:?} as {}",
            hex(&bytes)
        );
        assert_eq!(decode_strict(&bytes), Ok(frame));
        // And each encoding is a good seed: its mutations must not panic either.
        let mutated = mutate(&mut rng, &[bytes]);
        check_input(&mutated);
    }
    assert_eq!(kinds.len(), 16, "{kinds:?}");
}

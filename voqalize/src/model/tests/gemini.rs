//! Gemini: request bodies compared as JSON, captured streams decoded, construction checks.

use serde_json::{Value, json};

use super::usage::usage;
use super::*;
use crate::model::history::ToolChoice;
use crate::model::history::{Call, Chunk, Entry, Kept, Part, Usage};
use crate::model::sse::SseItem;
use crate::model::test_support::*;
use crate::tools::Arguments;
use crate::tools::ToolSet;

fn layer() -> Gemini {
    Gemini::builder("k-123").build().unwrap()
}

fn decode(items: &[&str]) -> Vec<Chunk> {
    let mut d = GeminiDecoder::new(DecodeLimits::UNBOUNDED);
    let mut out = Vec::new();
    for i in items {
        out.extend(d.item(data(i)).unwrap());
    }
    assert!(d.done(), "no terminal event");
    out.extend(d.end().unwrap());
    out
}

fn usage_of(input: u64, cached: u64, output: Option<u64>, reasoning: u64) -> Option<Usage> {
    Some(Usage {
        input: Some(input),
        cached_input: Some(cached),
        cache_write: None,
        output,
        reasoning: Some(reasoning),
    })
}

/// The second turn of a booking conversation, as history: user, model (text + signed call),
/// results, user.
fn booking_history() -> Vec<Entry> {
    let call_raw = json!({
        "functionCall": {"id": "c1", "name": "open_booking",
                         "args": {"city": "Paris", "nights": 2}},
        "thoughtSignature": "c2lnMQ=="});
    vec![
        user(1, "book Paris"),
        model(
            2,
            vec![
                text("Opening it"),
                call(
                    Some("c1"),
                    "open_booking",
                    Arguments::Json(json!({"city": "Paris", "nights": 2})),
                    call_raw,
                ),
            ],
        ),
        results(
            3,
            vec![result(Some("c1"), "open_booking", json!({"result": "ok"}))],
        ),
        user(4, "thanks"),
    ]
}

#[test]
fn captured_second_turn_body() {
    let tools = tools();
    let history = booking_history();
    let req = layer()
        .build(&spec(
            Some("Be brief."),
            &history,
            &tools,
            &ToolChoice::None,
        ))
        .unwrap();
    // The documented camelCase `thinkingLevel` (the Python SDK writes `thinking_level`; the API
    // accepts both). Arguments are flat: the argument struct is the parameter object.
    let expected = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "book Paris"}]},
            {"role": "model", "parts": [
                {"text": "Opening it"},
                {"functionCall": {"id": "c1", "name": "open_booking",
                                  "args": {"city": "Paris", "nights": 2}},
                 "thoughtSignature": "c2lnMQ=="}]},
            {"role": "user", "parts": [{"functionResponse": {
                "id": "c1", "name": "open_booking", "response": {"result": "ok"}}}]},
            {"role": "user", "parts": [{"text": "thanks"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": tools.gemini()}],
        "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "MINIMAL"}}
    });
    assert_eq!(body(&req), expected);
    assert_eq!(tools.gemini().len(), 2);
    assert_eq!(
        tools.gemini()[1],
        json!({"name": "show_help", "description": "Show help."})
    );
}

#[test]
fn case60_url_headers_and_wire_shape() {
    let tools = tools();
    let history = booking_history();
    let req = layer()
        .build(&spec(
            Some("Be brief."),
            &history,
            &tools,
            &ToolChoice::Auto,
        ))
        .unwrap();
    assert_eq!(
        req.url,
        "https://generativelanguage.googleapis.com/v1/models/gemini-3.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(header(&req, "x-goog-api-key"), Some("k-123"));
    assert_eq!(header(&req, "content-type"), Some("application/json"));
    assert_eq!(header(&req, "authorization"), None);
    let b = body(&req);
    assert_eq!(b["systemInstruction"]["role"], "user");
    assert_eq!(b["tools"].as_array().unwrap().len(), 1);
    assert_eq!(b.get("toolConfig"), None, "auto sends no toolConfig");
    assert_eq!(
        b["contents"][1]["parts"][1]["thoughtSignature"], "c2lnMQ==",
        "signature replayed on its part"
    );
    assert_eq!(b["contents"][2]["parts"][0]["functionResponse"]["id"], "c1");
    assert_eq!(
        b["contents"][2]["parts"][0]["functionResponse"]["name"],
        "open_booking"
    );
}

#[test]
fn case15_only_is_any_with_the_allowed_name() {
    let tools = tools();
    let history = [user(1, "help")];
    let choice = ToolChoice::only("show_help");
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &choice))
            .unwrap(),
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["show_help"]}})
    );
    // Tools stay declared in every mode.
    assert_eq!(b["tools"][0]["functionDeclarations"], json!(tools.gemini()));
    assert_eq!(b.get("systemInstruction"), None);
}

#[test]
fn only_an_undeclared_tool_is_a_build_error() {
    let tools = tools();
    let history = [user(1, "x")];
    let err = layer()
        .build(&spec(None, &history, &tools, &ToolChoice::only("nope")))
        .unwrap_err();
    assert!(matches!(err, StreamError::Unbuildable { .. }), "{err}");
}

#[test]
fn case19_no_tools_sends_no_tools_nor_tool_config() {
    let empty = ToolSet::empty();
    let history = [user(1, "hi")];
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        let b = body(
            &layer()
                .build(&spec(Some("  "), &history, &empty, &choice))
                .unwrap(),
        );
        assert_eq!(
            b,
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                   "generationConfig": {"thinkingConfig": {"thinkingLevel": "MINIMAL"}}})
        );
    }
}

#[test]
fn note_goes_last_merged_with_a_trailing_user_turn() {
    let tools = tools();
    let history = [user(1, "hi"), model(2, vec![text("Hello.")])];
    let mut s = spec(None, &history, &tools, &ToolChoice::Auto);
    s.note = Some("Call the tool properly.");
    let b = body(&layer().build(&s).unwrap());
    assert_eq!(
        b["contents"][2],
        json!({"role": "user", "parts": [{"text": "Call the tool properly."}]})
    );
    let history = [user(1, "hi")];
    let mut s = spec(None, &history, &tools, &ToolChoice::Auto);
    s.note = Some("note");
    let b = body(&layer().build(&s).unwrap());
    assert_eq!(
        b["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}, {"text": "note"}]}])
    );
}

#[test]
fn decode_captured_stream() {
    let chunks = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"Opening"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-3.5-flash","responseId":"r1"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":" it now."}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-3.5-flash","responseId":"r1"}"#,
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"id":"c1","name":"open_booking","args":{"city":"Paris","nights":2}},"thoughtSignature":"c2lnMQ=="}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":14,"thoughtsTokenCount":7,"cachedContentTokenCount":64,"totalTokenCount":141},"modelVersion":"gemini-3.5-flash","responseId":"r1"}"#,
    ]);
    assert_eq!(
        chunks,
        vec![
            Chunk {
                parts: vec![text("Opening")],
                usage: usage_of(120, 0, None, 0),
                response_id: Some("r1".into()),
                ..Chunk::default()
            },
            Chunk {
                parts: vec![text(" it now.")],
                usage: usage_of(120, 0, None, 0),
                response_id: Some("r1".into()),
                ..Chunk::default()
            },
            Chunk {
                parts: vec![call(
                    Some("c1"),
                    "open_booking",
                    Arguments::Json(json!({"city": "Paris", "nights": 2})),
                    // The rest of the part: what the call holds is rendered from it.
                    json!({"thoughtSignature": "c2lnMQ=="}),
                )],
                finished: true,
                malformed: false,
                usage: usage_of(120, 64, Some(14), 7),
                too_big: false,
                response_id: Some("r1".into()),
                finish_reason: Some("STOP".into()),
                abnormal_stop: None,
                cut_call: None,
            },
        ]
    );
}

#[test]
fn call_without_id_or_args() {
    let chunks = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"show_help"}}],"role":"model"},"finishReason":"STOP"}]}"#,
    ]);
    assert_eq!(
        chunks[0].parts,
        vec![call(
            None,
            "show_help",
            Arguments::Json(json!({})),
            Value::Null
        )]
    );
    assert_eq!(chunks[0].usage, None);
    // Replayed without an id (its arguments as the empty object they were read as), answered
    // without one.
    let history = [
        user(1, "help"),
        model(2, chunks[0].parts.clone()),
        results(
            3,
            vec![result(None, "show_help", json!({"result": "shown"}))],
        ),
    ];
    let tools = tools();
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"][1],
        json!({"role": "model", "parts": [{"functionCall": {"name": "show_help", "args": {}}}]})
    );
    assert_eq!(
        b["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {
            "name": "show_help", "response": {"result": "shown"}}}]})
    );
}

#[test]
fn malformed_function_call_finish() {
    for reason in ["MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE"] {
        let chunks = decode(&[&format!(
            r#"{{"candidates":[{{"finishReason":"{reason}","index":0}}],"usageMetadata":{{"promptTokenCount":60,"totalTokenCount":60}}}}"#
        )]);
        assert_eq!(
            chunks,
            vec![Chunk {
                parts: vec![],
                finished: true,
                malformed: true,
                usage: usage_of(60, 0, None, 0),
                too_big: false,
                response_id: None,
                finish_reason: Some(reason.into()),
                abnormal_stop: Some(reason.into()),
                cut_call: None,
            }]
        );
    }
}

#[test]
fn case56_safety_and_unknown_finishes_end_the_response_and_are_named() {
    for reason in ["SAFETY", "MAX_TOKENS", "SOMETHING_NEW"] {
        let chunks = decode(&[&format!(
            r#"{{"candidates":[{{"finishReason":"{reason}","index":0}}]}}"#
        )]);
        assert_eq!(
            chunks,
            vec![Chunk {
                finished: true,
                finish_reason: Some(reason.into()),
                abnormal_stop: Some(reason.into()),
                ..Chunk::default()
            }]
        );
    }
    // With the finish's message, when it gives one; `STOP` is a normal end, whatever it says.
    let chunks = decode(&[
        r#"{"candidates":[{"finishReason":"RECITATION","finishMessage":"Cited.","index":0}]}"#,
    ]);
    assert_eq!(
        chunks[0].abnormal_stop.as_deref(),
        Some("RECITATION (Cited.)")
    );
    let chunks = decode(&[
        r#"{"candidates":[{"finishReason":"STOP","finishMessage":"Model generated function call(s).","index":0}]}"#,
    ]);
    assert_eq!(chunks[0].abnormal_stop, None);
}

#[test]
fn case56_blocked_prompt_is_a_silent_finish_named_as_blocked() {
    let chunks = decode(&[
        r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}"#,
    ]);
    assert_eq!(
        chunks,
        vec![Chunk {
            finished: true,
            usage: usage_of(9, 0, None, 0),
            abnormal_stop: Some("prompt blocked: SAFETY".into()),
            ..Chunk::default()
        }]
    );
}

#[test]
fn case61_usage() {
    let u = usage(&json!({"promptTokenCount": 80, "candidatesTokenCount": 2,
                          "thoughtsTokenCount": 7, "cachedContentTokenCount": 64}));
    assert_eq!(
        u.counts(),
        vec![
            ("input_tokens", 80),
            ("cached_input_tokens", 64),
            ("output_tokens", 2),
            ("reasoning_tokens", 7)
        ]
    );
    let u = usage(&json!({"promptTokenCount": 33}));
    assert_eq!(
        u.counts(),
        vec![
            ("input_tokens", 33),
            ("cached_input_tokens", 0),
            ("reasoning_tokens", 0)
        ]
    );
    assert_eq!(usage(&json!({})), Usage::default());
}

#[test]
fn error_chunk_and_bare_error_body_are_provider_errors() {
    let mut d = GeminiDecoder::new(DecodeLimits::UNBOUNDED);
    let err = d
        .item(data(
            r#"{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}"#,
        ))
        .unwrap_err();
    match err {
        StreamError::Provider { provider, message } => {
            assert_eq!(provider, "google");
            assert_eq!(message, "overloaded (UNAVAILABLE, 503)");
        }
        other => panic!("{other:?}"),
    }
    let err = GeminiDecoder::new(DecodeLimits::UNBOUNDED)
        .item(SseItem::Bare(
            r#"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}"#
                .into(),
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Request contains an invalid argument. (INVALID_ARGUMENT, 400)"),
        "{err}"
    );
}

#[test]
fn unparseable_chunk_is_malformed() {
    for bad in [
        "{not json",
        "[1,2]",
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{}}]}}]}"#,
    ] {
        let err = GeminiDecoder::new(DecodeLimits::UNBOUNDED)
            .item(data(bad))
            .unwrap_err();
        assert!(matches!(err, StreamError::Malformed { .. }), "{bad}: {err}");
    }
}

#[test]
fn truncated_without_finish_reason() {
    let mut d = GeminiDecoder::new(DecodeLimits::UNBOUNDED);
    d.item(data(
        r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}"#,
    ))
    .unwrap();
    assert!(!d.done());
    assert!(d.item(data("[DONE]")).unwrap().is_empty());
    match d.end().unwrap_err() {
        StreamError::Truncated { provider, expected } => {
            assert_eq!((provider.as_str(), expected), ("google", "finishReason"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn f08_thought_parts_never_text_signature_kept() {
    let chunks = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"Weighing options...","thought":true},{"text":"Your order ships tomorrow."},{"text":"","thoughtSignature":"c2lnLTE="}],"role":"model"},"finishReason":"STOP"}]}"#,
    ]);
    let parts = &chunks[0].parts;
    assert_eq!(
        parts,
        &vec![
            Part::Thought {
                raw: json!({"text": "Weighing options...", "thought": true})
            },
            text("Your order ships tomorrow."),
            Part::Other {
                raw: json!({"text": "", "thoughtSignature": "c2lnLTE="})
            },
        ]
    );
    let spoken: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(spoken, ["Your order ships tomorrow."]);
    // Replayed: the thought verbatim, the text, the signature on its empty part.
    let history = [user(1, "when?"), model(2, parts.clone())];
    let tools = ToolSet::empty();
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"][1]["parts"],
        json!([{"text": "Weighing options...", "thought": true},
               {"text": "Your order ships tomorrow."},
               {"text": "", "thoughtSignature": "c2lnLTE="}])
    );
}

#[test]
fn signed_text_part_keeps_its_signature_when_trimmed() {
    let chunks = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"One, two, three.","thoughtSignature":"U0lH"}]},"finishReason":"STOP"}]}"#,
    ]);
    let Part::Text { raw, .. } = &chunks[0].parts[0] else {
        panic!("{:?}", chunks[0].parts)
    };
    let heard = Part::Text {
        text: "One, two,".into(),
        raw: raw.clone(),
        trimmed: true,
    };
    let history = [user(1, "count"), model(2, vec![heard])];
    let tools = ToolSet::empty();
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"][1]["parts"],
        json!([{"text": "One, two,", "thoughtSignature": "U0lH"}])
    );
}

#[test]
fn an_empty_text_part_is_not_kept() {
    let chunks = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"text":""},{"text":"Hi."}]},"finishReason":"STOP"}]}"#,
    ]);
    assert_eq!(chunks[0].parts, vec![text("Hi.")]);
}

#[test]
fn f11_no_empty_model_turn_or_text_part() {
    let history = [
        user(1, "Hi, what's your name?"),
        model(2, vec![trimmed("")]),
        user(3, "Please come again?"),
    ];
    let tools = ToolSet::empty();
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    // The empty model turn is gone; the two user turns merge so turns still alternate.
    assert_eq!(
        b["contents"],
        json!([{"role": "user", "parts": [
            {"text": "Hi, what's your name?"}, {"text": "Please come again?"}]}])
    );
    let history = [user(1, "Hi"), model(2, vec![])];
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"],
        json!([{"role": "user", "parts": [{"text": "Hi"}]}])
    );
}

fn weather_call(id: &str, city: &str, signature: Option<&str>) -> Part {
    let mut raw =
        json!({"functionCall": {"id": id, "name": "get_weather", "args": {"city": city}}});
    if let Some(s) = signature {
        raw["thoughtSignature"] = json!(s);
    }
    call(
        Some(id),
        "get_weather",
        Arguments::Json(json!({"city": city})),
        raw,
    )
}

#[test]
fn f14_parallel_calls_answered_in_one_content() {
    let tools = ToolSet::empty();
    // (a) both finish: one user content, two responses in call order.
    let history = [
        user(1, "weather in Oslo and Bergen?"),
        model(
            2,
            vec![
                weather_call("w1", "Oslo", Some("T3Nsbw==")),
                weather_call("w2", "Bergen", None),
            ],
        ),
        results(
            3,
            vec![
                result(Some("w1"), "get_weather", json!({"result": "sun"})),
                result(Some("w2"), "get_weather", json!({"result": "rain"})),
            ],
        ),
    ];
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"][1]["parts"],
        json!([
            {"functionCall": {"id": "w1", "name": "get_weather", "args": {"city": "Oslo"}},
             "thoughtSignature": "T3Nsbw=="},
            {"functionCall": {"id": "w2", "name": "get_weather", "args": {"city": "Bergen"}}}])
    );
    assert_eq!(
        b["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"id": "w1", "name": "get_weather", "response": {"result": "sun"}}},
            {"functionResponse": {"id": "w2", "name": "get_weather", "response": {"result": "rain"}}}]})
    );
    assert_eq!(b["contents"].as_array().unwrap().len(), 3);
    // (b) Bergen cut: the core removed it; Oslo keeps its signature and its one response.
    let history = [
        user(1, "weather in Oslo and Bergen?"),
        model(2, vec![weather_call("w1", "Oslo", Some("T3Nsbw=="))]),
        results(
            3,
            vec![result(Some("w1"), "get_weather", json!({"result": "sun"}))],
        ),
    ];
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"][1]["parts"],
        json!([{"functionCall": {"id": "w1", "name": "get_weather", "args": {"city": "Oslo"}},
                "thoughtSignature": "T3Nsbw=="}])
    );
    assert_eq!(
        b["contents"][2]["parts"].as_array().unwrap().len(),
        1,
        "one response per remaining call"
    );
}

#[test]
fn a_result_outside_a_results_turn_is_a_build_error() {
    let tools = ToolSet::empty();
    let history = [model(
        1,
        vec![Part::Result(result(None, "x", json!({"result": 1})))],
    )];
    let err = layer()
        .build(&spec(None, &history, &tools, &ToolChoice::Auto))
        .unwrap_err();
    assert!(matches!(err, StreamError::Unbuildable { .. }));
}

// ---------------------------------------------------------------------------------------------
// Construction.

fn env(vars: &'static [(&'static str, &'static str)]) -> GeminiBuilder {
    Gemini::from_lookup(|k| {
        Ok(vars
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string()))
    })
}

#[test]
fn from_env_reads_the_documented_variables() {
    let g = env(&[("GEMINI_API_KEY", "g2")]).build().unwrap();
    assert_eq!(
        g.inner.endpoint.headers[0],
        ("x-goog-api-key".to_owned(), "g2".to_owned())
    );
    assert_eq!(g.model(), "gemini-3.5-flash");
    assert_eq!(g.base_url(), "https://generativelanguage.googleapis.com");
    let g = env(&[
        ("GOOGLE_API_KEY", "g1"),
        ("GEMINI_API_KEY", "g2"),
        ("VOQAL_GEMINI_MODEL", "gemini-3.7-flash"),
        ("GOOGLE_GEMINI_BASE_URL", "http://localhost:8080/proxy/"),
        ("GOOGLE_GENAI_API_VERSION", "v1beta"),
    ])
    .build()
    .unwrap();
    assert_eq!(
        g.inner.endpoint.headers[0],
        ("x-goog-api-key".to_owned(), "g1".to_owned())
    );
    assert_eq!(
        g.inner.endpoint.url,
        "http://localhost:8080/proxy/v1beta/models/gemini-3.7-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(g.base_url(), "http://localhost:8080/proxy");
    assert!(matches!(
        env(&[]).build().unwrap_err(),
        LayerError::MissingKey {
            provider: "google",
            ..
        }
    ));
    let failing = Gemini::from_lookup(|var| {
        Err(LayerError::Env {
            var,
            source: std::env::VarError::NotPresent,
        })
    });
    let err = failing.build().unwrap_err();
    assert!(matches!(
        err,
        LayerError::Env {
            var: "GOOGLE_API_KEY",
            ..
        }
    ));
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn construction_checks() {
    let bad_url = Gemini::builder("k")
        .base_url("ftp://x")
        .build()
        .unwrap_err();
    assert!(matches!(bad_url, LayerError::BadUrl { .. }), "{bad_url}");
    assert!(Gemini::builder("k").base_url("https://").build().is_err());
    assert!(
        Gemini::builder("k")
            .base_url("https://h/p?q=1")
            .build()
            .is_err()
    );
    assert!(matches!(
        Gemini::builder("").build().unwrap_err(),
        LayerError::BadHeader { .. }
    ));
    assert!(Gemini::builder("k\n").build().is_err());
    assert!(matches!(
        Gemini::builder("k").model("a/b").build().unwrap_err(),
        LayerError::BadModel { .. }
    ));
    assert!(Gemini::builder("k").model("").build().is_err());
    assert_eq!(
        Gemini::builder("k")
            .model("models/gemini-x")
            .build()
            .unwrap()
            .model(),
        "gemini-x"
    );
    assert!(Gemini::builder("k").api_version("v1/../x").build().is_err());
    assert!(
        Gemini::builder("k")
            .thinking_level(Some("very low"))
            .build()
            .is_err()
    );
    // The key never shows in Debug.
    let g = Gemini::builder("secret-key").build().unwrap();
    assert!(!format!("{g:?}").contains("secret-key"));
    assert!(!format!("{:?}", Gemini::builder("secret-key")).contains("secret-key"));
}

#[test]
fn options_reserved_merged_and_clashing() {
    for key in [
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "tool_config",
    ] {
        let err = Gemini::builder("k")
            .option(key, json!({}))
            .build()
            .unwrap_err();
        assert!(
            matches!(&err, LayerError::ReservedOption { key: k, .. } if k == key),
            "{err}"
        );
    }
    let clash = Gemini::builder("k")
        .option(
            "generationConfig",
            json!({"thinkingConfig": {"thinkingBudget": 0}}),
        )
        .build()
        .unwrap_err();
    assert!(matches!(clash, LayerError::OptionClash { .. }), "{clash}");
    assert!(matches!(
        Gemini::builder("k")
            .option("generationConfig", json!(3))
            .build()
            .unwrap_err(),
        LayerError::BadOption { .. }
    ));
    let g = Gemini::builder("k")
        .option("generationConfig", json!({"temperature": 0.2}))
        .option("generationConfig", json!({"maxOutputTokens": 200}))
        .option("safetySettings", json!([]))
        .thinking_level(Some("LOW"))
        .build()
        .unwrap();
    let history = [user(1, "hi")];
    let tools = ToolSet::empty();
    let b = body(
        &g.build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["generationConfig"],
        json!({"temperature": 0.2, "maxOutputTokens": 200,
               "thinkingConfig": {"thinkingLevel": "LOW"}})
    );
    assert_eq!(b["safetySettings"], json!([]));
    // No thinking level: the user's own thinking config goes through.
    let g = Gemini::builder("k")
        .thinking_level(None)
        .option(
            "generationConfig",
            json!({"thinkingConfig": {"thinkingBudget": 0}}),
        )
        .build()
        .unwrap();
    let b = body(
        &g.build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["generationConfig"],
        json!({"thinkingConfig": {"thinkingBudget": 0}})
    );
    let g = Gemini::builder("k").thinking_level(None).build().unwrap();
    let b = body(
        &g.build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b.get("generationConfig"), None::<&Value>);
}

#[test]
fn layer_is_cheap_to_clone_and_reports_itself() {
    let t = Timeouts {
        connect: std::time::Duration::from_secs(3),
        ..Timeouts::default()
    };
    let g = Gemini::builder("k").timeouts(t).build().unwrap();
    assert_eq!(g.timeouts().connect, t.connect);
    assert!(matches!(
        Gemini::builder("k")
            .option("generation_config", json!({}))
            .build()
            .unwrap_err(),
        LayerError::BadOption { .. }
    ));
    let g = layer();
    let h = g.clone();
    assert!(std::sync::Arc::ptr_eq(&g.inner, &h.inner));
    assert_eq!(g.provider(), "google");
    assert_eq!(g.timeouts().connect, Timeouts::default().connect);
    let d = g.decoder(DecodeLimits::UNBOUNDED);
    assert!(!d.done());
}

#[test]
fn one_event_of_ten_thousand_calls_hands_on_one_past_the_bound() {
    let parts: Vec<Value> = (0..10_000)
        .map(|i| json!({"functionCall": {"id": format!("c{i}"), "name": "show_help"}}))
        .collect();
    let event = json!({"candidates": [{"content": {"parts": parts, "role": "model"},
        "finishReason": "STOP"}]});
    let limits = DecodeLimits {
        max_calls: 16,
        max_argument_bytes: 1000,
        ..DecodeLimits::UNBOUNDED
    };
    let mut d = GeminiDecoder::new(limits);
    let chunks = d.item(data(&event.to_string())).unwrap();
    assert_eq!(chunks[0].parts.len(), 17);
    assert!(chunks[0].finished);
}

#[test]
fn one_event_of_tiny_parts_hands_on_one_past_max_parts_and_joins_plain_text() {
    let mut parts = vec![json!({"text": "Hi"}), json!({"text": " there."})];
    parts.extend((0..10_000).map(|_| json!({"a": 0})));
    let event = json!({"candidates": [{"content": {"parts": parts, "role": "model"},
        "finishReason": "STOP"}]});
    let limits = DecodeLimits {
        max_parts: 8,
        ..DecodeLimits::UNBOUNDED
    };
    let mut d = GeminiDecoder::new(limits);
    let chunks = d.item(data(&event.to_string())).unwrap();
    // The two texts join into one kept part; with eight unknown parts that is nine, one past the
    // bound, and nothing after it is decoded.
    assert_eq!(chunks[0].parts.len(), 2 + 8);
    assert!(chunks[0].finished);
    let bytes = DecodeLimits {
        max_kept_bytes: 4096,
        ..DecodeLimits::UNBOUNDED
    };
    let mut d = GeminiDecoder::new(bytes);
    let chunks = d.item(data(&event.to_string())).unwrap();
    let kept = chunks[0]
        .parts
        .iter()
        .fold(Kept::default(), |kept, p| kept.with(p));
    // The part that would pass the bytes is never built: the chunk says it was left unread.
    assert!(kept.bytes <= 4096 && chunks[0].parts.len() < 20, "{kept:?}");
    assert!(chunks[0].too_big && chunks[0].finished);
    // One part too big to build: unread, and what came before it stays.
    let event = json!({"candidates": [{"content": {"parts": [{"text": "Hi."},
        {"x": vec![json!({"a": 0}); 20_000]}], "role": "model"}, "finishReason": "STOP"}]});
    let mut d = GeminiDecoder::new(bytes);
    let chunks = d.item(data(&event.to_string())).unwrap();
    assert_eq!(chunks[0].parts, [text("Hi.")]);
    assert!(chunks[0].too_big);
}

#[test]
fn a_call_is_rendered_from_what_the_core_holds_with_its_signature() {
    let chunks = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"id":"c1","name":"open_booking","args":{"city":"Paris"}},"thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP"}]}"#,
    ]);
    let Part::Call { call, raw } = chunks[0].parts[0].clone() else {
        panic!("a call")
    };
    assert_eq!(raw, json!({"thoughtSignature": "c2ln"}));
    // The core refused it: no arguments; the signature is still replayed on its part.
    let refused = Part::Call {
        call: Call {
            arguments: Arguments::Raw("{}".into()),
            ..call
        },
        raw,
    };
    let history = [user(1, "go"), model(2, vec![refused])];
    let tools = tools();
    let b = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(
        b["contents"][1]["parts"][0],
        json!({"functionCall": {"id": "c1", "name": "open_booking", "args": {}},
               "thoughtSignature": "c2ln"})
    );
}

//! OpenAI Responses: request bodies compared as JSON, captured streams decoded, construction
//! checks.

use serde_json::{Value, json};

use super::decode::usage;
use super::*;
use crate::model::history::{Chunk, Entry, Part, ToolChoice, Usage};
use crate::model::sse::SseItem;
use crate::model::test_support::*;
use crate::tools::Arguments;
use crate::tools::ToolSet;

fn layer() -> OpenAi {
    OpenAi::builder("sk-1", "gpt-6-sol").build().unwrap()
}

fn reasoning_item(id: &str, encrypted: Option<&str>) -> Part {
    let mut raw = json!({"id": id, "summary": [], "type": "reasoning"});
    if let Some(e) = encrypted {
        raw["encrypted_content"] = json!(e);
    }
    Part::Thought { raw }
}

/// A call as the core holds it after a refusal or as made by another layer: no item kept.
fn fc(call_id: &str, name: &str, arguments: &str) -> Part {
    call(
        Some(call_id),
        name,
        Arguments::Raw(arguments.into()),
        Value::Null,
    )
}

/// A call as the decoder hands it on: the call, and its item as received (`fc_…` id included).
fn fc_item(id: &str, call_id: &str, name: &str, arguments: &str) -> Part {
    call(
        Some(call_id),
        name,
        Arguments::Raw(arguments.into()),
        json!({"id": id, "type": "function_call", "arguments": arguments, "call_id": call_id, "name": name}),
    )
}

/// The `message` item the decoder keeps of a reply whose text came as deltas.
fn message_item(id: &str, text: &str) -> Part {
    Part::Other {
        raw: json!({"type": "message", "id": id, "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}),
    }
}

fn input_of(layer: &OpenAi, history: &[Entry]) -> Value {
    let tools = ToolSet::empty();
    body(
        &layer
            .build(&spec(None, history, &tools, &ToolChoice::Auto))
            .unwrap(),
    )["input"]
        .clone()
}

fn decode(items: &[(&str, &str)]) -> Vec<Chunk> {
    let mut d = OpenAiDecoder::new(usize::MAX);
    let mut out = Vec::new();
    for (name, data) in items {
        out.extend(d.item(named(name, data)).unwrap());
    }
    assert!(d.done(), "no terminal event");
    out.extend(d.end().unwrap());
    out
}

#[test]
fn captured_second_turn_body() {
    let tools = tools();
    let history = [
        user(1, "book Paris"),
        model(
            2,
            vec![
                reasoning_item("rs_1", Some("gAAAAenc")),
                text("Opening it"),
                message_item("msg_1", "Opening it"),
                fc("call_A", "open_booking", r#"{"city":"Paris"}"#),
            ],
        ),
        results(
            3,
            vec![result(
                Some("call_A"),
                "open_booking",
                json!({"result": "ok"}),
            )],
        ),
        user(4, "thanks"),
    ];
    let l = OpenAi::builder("sk-1", "gpt-6-sol")
        .reasoning("low")
        .build()
        .unwrap();
    let req = l
        .build(&spec(
            Some("Be brief."),
            &history,
            &tools,
            &ToolChoice::Auto,
        ))
        .unwrap();
    let expected = json!({
        "model": "gpt-6-sol", "stream": true, "store": false, "instructions": "Be brief.",
        "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"],
        "input": [
            {"role": "user", "content": "book Paris"},
            {"id": "rs_1", "summary": [], "type": "reasoning", "encrypted_content": "gAAAAenc"},
            {"type": "message", "id": "msg_1", "role": "assistant",
             "content": [{"type": "output_text", "text": "Opening it", "annotations": []}]},
            {"type": "function_call", "call_id": "call_A", "name": "open_booking",
             "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_A", "output": "{\"result\":\"ok\"}"},
            {"role": "user", "content": "thanks"}],
        "tool_choice": "auto",
        "tools": tools.openai(false),
    });
    assert_eq!(body(&req), expected);
    assert_eq!(tools.openai(false)[1]["strict"], json!(false));
}

#[test]
fn case62_url_headers_store_and_tools() {
    let l = OpenAi::builder("sk-1", "gpt-6-sol")
        .organization("org-1")
        .project("proj-1")
        .build()
        .unwrap();
    let tools = tools();
    let history = [user(1, "hi")];
    let req = l
        .build(&spec(Some("sys"), &history, &tools, &ToolChoice::Auto))
        .unwrap();
    assert_eq!(req.url, "https://api.openai.com/v1/responses");
    assert_eq!(header(&req, "authorization"), Some("Bearer sk-1"));
    assert_eq!(header(&req, "openai-organization"), Some("org-1"));
    assert_eq!(header(&req, "openai-project"), Some("proj-1"));
    let b = body(&req);
    assert_eq!(b["store"], json!(false));
    assert_eq!(b.get("previous_response_id"), None);
    assert_eq!(b["instructions"], "sys");
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["name"], "open_booking");
    assert_eq!(b["tools"][0]["strict"], json!(false));
    assert_eq!(b.get("reasoning"), None, "no reasoning unless asked");
    assert_eq!(b.get("include"), None);
    let req = layer()
        .build(&spec(None, &history, &tools, &ToolChoice::Auto))
        .unwrap();
    assert_eq!(header(&req, "openai-organization"), None);
    // Strict is passed to the declarations.
    let strict = OpenAi::builder("k", "m").strict(true).build().unwrap();
    let b = body(
        &strict
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b["tools"], json!(tools.openai(true)));
}

#[test]
fn case15_choices() {
    let tools = tools();
    let history = [user(1, "help")];
    let b = |choice: ToolChoice| {
        body(
            &layer()
                .build(&spec(None, &history, &tools, &choice))
                .unwrap(),
        )
    };
    assert_eq!(
        b(ToolChoice::only("show_help"))["tool_choice"],
        json!({"type": "function", "name": "show_help"})
    );
    assert_eq!(b(ToolChoice::None)["tool_choice"], json!("none"));
    assert_eq!(b(ToolChoice::None)["tools"], json!(tools.openai(false)));
    assert!(
        layer()
            .build(&spec(None, &history, &tools, &ToolChoice::only("nope")))
            .is_err()
    );
}

#[test]
fn case19_no_tools_body_keys() {
    let empty = ToolSet::empty();
    let history = [user(1, "hi")];
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        let b = body(
            &layer()
                .build(&spec(Some("sys"), &history, &empty, &choice))
                .unwrap(),
        );
        let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["model", "instructions", "input", "stream", "store"]);
    }
    // A blank instruction is left out.
    let b = body(
        &layer()
            .build(&spec(Some(" \n"), &history, &empty, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b.get("instructions"), None);
}

#[test]
fn case63_input_rendering() {
    let l = layer();
    // A reasoning-only model turn sends nothing; a trailing reasoning item is dropped.
    let history = [
        user(1, "a"),
        model(2, vec![reasoning_item("rs_0", Some("e0"))]),
        user(3, "b"),
        model(
            4,
            vec![
                text("One"),
                text(" two"),
                reasoning_item("rs_1", Some("e1")),
            ],
        ),
    ];
    assert_eq!(
        input_of(&l, &history),
        json!([
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "One two"}])
    );
    // text / call / text stays in order.
    let history = [
        user(1, "a"),
        model(
            2,
            vec![
                text("Before"),
                fc("call_1", "show_help", ""),
                text("after"),
                text("."),
            ],
        ),
        results(
            3,
            vec![result(Some("call_1"), "show_help", json!({"result": null}))],
        ),
    ];
    assert_eq!(
        input_of(&l, &history),
        json!([
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "Before"},
            {"type": "function_call", "call_id": "call_1", "name": "show_help", "arguments": "{}"},
            {"role": "assistant", "content": "after."},
            {"type": "function_call_output", "call_id": "call_1", "output": "{\"result\":null}"}])
    );
}

#[test]
fn reasoning_without_encrypted_content_is_never_replayed() {
    let history = [
        user(1, "a"),
        model(2, vec![reasoning_item("rs_1", None), text("Hi.")]),
    ];
    assert_eq!(
        input_of(&layer(), &history),
        json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "Hi."}])
    );
}

#[test]
fn reasoning_before_trimmed_text_is_dropped() {
    let history = [
        user(1, "count"),
        model(
            2,
            vec![reasoning_item("rs_1", Some("enc")), trimmed("One, two,")],
        ),
        user(3, "stop"),
    ];
    assert_eq!(
        input_of(&layer(), &history),
        json!([
            {"role": "user", "content": "count"},
            {"role": "assistant", "content": "One, two,"},
            {"role": "user", "content": "stop"}])
    );
    // Unheard text (nothing left) before a call: the reasoning goes with it, the call stays.
    let history = [
        user(1, "go"),
        model(
            2,
            vec![
                reasoning_item("rs_1", Some("enc")),
                trimmed(""),
                fc("call_1", "show_help", "{}"),
            ],
        ),
        results(
            3,
            vec![result(Some("call_1"), "show_help", json!({"result": "ok"}))],
        ),
    ];
    let input = input_of(&layer(), &history);
    assert_eq!(input[1]["type"], "function_call");
    assert_eq!(input.as_array().unwrap().len(), 3);
}

#[test]
fn f13_function_call_replayed_by_call_id_and_orphan_reasoning_dropped() {
    // The tool was cut: the core removed the call; its reasoning item now ends the turn.
    let history = [
        user(1, "what time is it?"),
        model(2, vec![reasoning_item("rs_1", Some("enc"))]),
        user(3, "and the weather?"),
    ];
    let input = input_of(&layer(), &history);
    assert_eq!(
        input,
        json!([
            {"role": "user", "content": "what time is it?"},
            {"role": "user", "content": "and the weather?"}])
    );
    // A result exists: the call follows its reasoning as it was made, so both go back verbatim
    // (the call with its item id); the result is matched by call_id.
    let mut d = OpenAiDecoder::new(usize::MAX);
    let chunks = d
        .item(named(
            "response.output_item.done",
            r#"{"type":"response.output_item.done","sequence_number":5,"output_index":1,"item":{"id":"fc_9","type":"function_call","status":"completed","arguments":"{}","call_id":"call_9","name":"get_current_time"}}"#,
        ))
        .unwrap();
    let history = [
        user(1, "what time is it?"),
        model(
            2,
            vec![
                reasoning_item("rs_1", Some("enc")),
                chunks[0].parts[0].clone(),
            ],
        ),
        results(
            3,
            vec![result(
                Some("call_9"),
                "get_current_time",
                json!({"result": "12:00"}),
            )],
        ),
    ];
    let input = input_of(&layer(), &history);
    assert_eq!(input[1]["id"], "rs_1");
    assert_eq!(
        input[2],
        json!({"id": "fc_9", "type": "function_call", "call_id": "call_9",
               "name": "get_current_time", "arguments": "{}"})
    );
    assert_eq!(input[3]["call_id"], "call_9");
}

#[test]
fn results_and_calls_need_ids() {
    let history = [
        user(1, "a"),
        model(
            2,
            vec![call(
                None,
                "show_help",
                Arguments::Raw("{}".into()),
                Value::Null,
            )],
        ),
    ];
    let tools = ToolSet::empty();
    let err = layer()
        .build(&spec(None, &history, &tools, &ToolChoice::Auto))
        .unwrap_err();
    assert!(matches!(err, StreamError::Unbuildable { .. }), "{err}");
    let history = [results(1, vec![result(None, "x", json!({"result": 1}))])];
    assert!(
        layer()
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .is_err()
    );
}

#[test]
fn note_is_a_last_user_message() {
    let tools = ToolSet::empty();
    let history = [user(1, "a")];
    let mut s = spec(None, &history, &tools, &ToolChoice::Auto);
    s.note = Some("Use the tool.");
    let b = body(&layer().build(&s).unwrap());
    assert_eq!(
        b["input"],
        json!([{"role": "user", "content": "a"}, {"role": "user", "content": "Use the tool."}])
    );
}

#[test]
fn decode_captured_stream() {
    let chunks = decode(&[
        (
            "response.created",
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1"}}"#,
        ),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAAAenc","status":"completed","content":null}}"#,
        ),
        (
            "response.output_text.delta",
            r#"{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Opening","logprobs":[]}"#,
        ),
        (
            "response.output_text.delta",
            r#"{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"","logprobs":[]}"#,
        ),
        (
            "response.function_call_arguments.delta",
            r#"{"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_1","output_index":2,"delta":"{\"city\":"}"#,
        ),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","sequence_number":14,"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"city\":\"Paris\"}","call_id":"call_A","name":"open_booking"}}"#,
        ),
        (
            "response.completed",
            r#"{"type":"response.completed","sequence_number":15,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-6-sol","output":[],"usage":{"input_tokens":200,"input_tokens_details":{"cached_tokens":128,"cache_write_tokens":0},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":240}}}"#,
        ),
    ]);
    assert_eq!(
        chunks,
        vec![
            Chunk {
                parts: vec![reasoning_item("rs_1", Some("gAAAAenc"))],
                ..Chunk::default()
            },
            Chunk {
                parts: vec![text("Opening")],
                ..Chunk::default()
            },
            Chunk {
                parts: vec![fc_item(
                    "fc_1",
                    "call_A",
                    "open_booking",
                    r#"{"city":"Paris"}"#
                )],
                ..Chunk::default()
            },
            Chunk {
                finished: true,
                usage: Some(Usage {
                    input: Some(200),
                    cached_input: Some(128),
                    cache_write: Some(0),
                    output: Some(28),
                    reasoning: Some(12),
                }),
                response_id: Some("resp_1".into()),
                finish_reason: Some("completed".into()),
                ..Chunk::default()
            },
        ]
    );
}

#[test]
fn refusals_are_spoken() {
    let mut d = OpenAiDecoder::new(usize::MAX);
    let chunks = d
        .item(named(
            "response.refusal.delta",
            r#"{"type":"response.refusal.delta","sequence_number":2,"delta":"I can't help with that."}"#,
        ))
        .unwrap();
    assert_eq!(chunks[0].parts, vec![text("I can't help with that.")]);
}

#[test]
fn case57_incomplete_is_a_finish_with_usage_named_as_incomplete() {
    let chunks = decode(&[(
        "response.incomplete",
        r#"{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":50,"output_tokens":10,"output_tokens_details":{"reasoning_tokens":0}}}}"#,
    )]);
    assert_eq!(
        chunks,
        vec![Chunk {
            finished: true,
            usage: Some(Usage {
                input: Some(50),
                output: Some(10),
                reasoning: Some(0),
                ..Usage::default()
            }),
            // The reason it is incomplete says more than its status.
            response_id: Some("resp_1".into()),
            finish_reason: Some("max_output_tokens".into()),
            abnormal_stop: Some("incomplete (max_output_tokens)".into()),
            ..Chunk::default()
        }]
    );
}

#[test]
fn case58_failed_and_error_events_are_provider_errors() {
    let err = OpenAiDecoder::new(usize::MAX)
        .item(named(
            "response.failed",
            r#"{"type":"response.failed","sequence_number":9,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The server had an error"}}}"#,
        ))
        .unwrap_err();
    match err {
        StreamError::Provider { provider, message } => {
            assert_eq!(provider, "openai");
            assert_eq!(
                message,
                "response failed: The server had an error (server_error)"
            );
        }
        other => panic!("{other:?}"),
    }
    let err = OpenAiDecoder::new(usize::MAX)
        .item(named(
            "error",
            r#"{"type":"error","sequence_number":1,"code":"rate_limit_exceeded","message":"Rate limit reached","param":null}"#,
        ))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "openai reported an error: stream error: Rate limit reached (rate_limit_exceeded)"
    );
    let err = OpenAiDecoder::new(usize::MAX)
        .item(SseItem::Bare(
            r#"{"error":{"message":"bad","type":"invalid_request_error","param":"tools[0].parameters","code":"invalid_function_parameters"}}"#.into(),
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("bad (invalid_request_error, invalid_function_parameters)")
    );
}

#[test]
fn case64_usage_counts() {
    let u = usage(&json!({"input_tokens": 200,
        "input_tokens_details": {"cached_tokens": 128, "cache_write_tokens": 0},
        "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 12}}));
    assert_eq!(
        u.counts(),
        vec![
            ("input_tokens", 200),
            ("cached_input_tokens", 128),
            ("cache_write_tokens", 0),
            ("output_tokens", 28),
            ("reasoning_tokens", 12)
        ]
    );
}

#[test]
fn truncated_done_and_malformed() {
    let mut d = OpenAiDecoder::new(usize::MAX);
    d.item(named(
        "response.output_text.delta",
        r#"{"type":"response.output_text.delta","delta":"Hi"}"#,
    ))
    .unwrap();
    assert!(d.item(data("[DONE]")).unwrap().is_empty());
    assert!(!d.done());
    match d.end().unwrap_err() {
        StreamError::Truncated { expected, .. } => assert_eq!(expected, "response.completed"),
        other => panic!("{other:?}"),
    }
    // [DONE] after the completion is tolerated.
    let chunks = decode(&[
        (
            "response.completed",
            r#"{"type":"response.completed","response":{"usage":null}}"#,
        ),
        ("", "[DONE]"),
    ]);
    assert_eq!(
        chunks,
        vec![Chunk {
            finished: true,
            ..Chunk::default()
        }]
    );
    for bad in [
        "{oops",
        r#"{"type":"response.output_item.done","item":{"type":"function_call","name":"x"}}"#,
    ] {
        let err = OpenAiDecoder::new(usize::MAX).item(data(bad)).unwrap_err();
        assert!(matches!(err, StreamError::Malformed { .. }), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Construction.

fn env(model: &str, vars: &'static [(&'static str, &'static str)]) -> OpenAiBuilder {
    OpenAi::from_lookup(model.to_owned(), |k| {
        Ok(vars
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string()))
    })
}

#[test]
fn from_env_reads_the_documented_variables() {
    let l = env(
        "gpt-6-sol",
        &[
            ("OPENAI_API_KEY", "sk-env"),
            ("OPENAI_BASE_URL", "http://localhost:4000/v1/"),
            ("OPENAI_ORG_ID", "org-9"),
            ("OPENAI_PROJECT_ID", "proj-9"),
        ],
    )
    .build()
    .unwrap();
    assert_eq!(l.inner.endpoint.url, "http://localhost:4000/v1/responses");
    assert_eq!(l.base_url(), "http://localhost:4000/v1");
    assert_eq!(l.model(), "gpt-6-sol");
    assert_eq!(l.provider(), "openai");
    assert!(
        l.inner
            .endpoint
            .headers
            .contains(&("authorization".into(), "Bearer sk-env".into()))
    );
    assert!(
        l.inner
            .endpoint
            .headers
            .contains(&("openai-project".into(), "proj-9".into()))
    );
    assert!(matches!(
        env("m", &[]).build().unwrap_err(),
        LayerError::MissingKey {
            provider: "openai",
            vars: "OPENAI_API_KEY"
        }
    ));
    assert!(!format!("{l:?}").contains("sk-env"));
}

#[test]
fn construction_checks_and_options() {
    for key in RESERVED {
        let err = OpenAi::builder("k", "m")
            .option(*key, json!(true))
            .build()
            .unwrap_err();
        assert!(matches!(err, LayerError::ReservedOption { .. }), "{err}");
    }
    let clash = OpenAi::builder("k", "m")
        .reasoning("low")
        .option("reasoning", json!({"effort": "high"}))
        .build()
        .unwrap_err();
    assert!(matches!(clash, LayerError::OptionClash { .. }), "{clash}");
    assert!(matches!(
        OpenAi::builder("k", "").build().unwrap_err(),
        LayerError::BadModel { .. }
    ));
    assert!(matches!(
        OpenAi::builder("k", "m")
            .base_url("api.openai.com")
            .build()
            .unwrap_err(),
        LayerError::BadUrl { .. }
    ));
    assert!(
        OpenAi::builder("k", "m")
            .reasoning("very high")
            .build()
            .is_err()
    );
    assert!(
        OpenAi::builder("k", "m")
            .organization("o\r\n")
            .build()
            .is_err()
    );
    // Options go out as given, without touching the SDK's keys.
    let l = OpenAi::builder("k", "m")
        .option("temperature", json!(0.3))
        .option("reasoning", json!({"effort": "none"}))
        .build()
        .unwrap();
    let history = [user(1, "hi")];
    let tools = ToolSet::empty();
    let b = body(
        &l.build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b["temperature"], json!(0.3));
    assert_eq!(b["reasoning"], json!({"effort": "none"}));
    assert_eq!(b["store"], json!(false));
    assert_eq!(b["stream"], json!(true));
    assert_eq!(b.get("include"), None);
}

#[test]
fn an_event_too_big_to_hold_is_left_unread_and_says_so() {
    let mut d = OpenAiDecoder::new(64 * 1024);
    let junk = json!({"type": "response.output_item.done", "item": {"type": "reasoning",
        "id": "rs_1", "summary": vec![json!({"a": 0}); 120_000]}});
    let chunks = d
        .item(named("response.output_item.done", &junk.to_string()))
        .unwrap();
    assert_eq!(
        chunks,
        [Chunk {
            too_big: true,
            ..Chunk::default()
        }]
    );
}

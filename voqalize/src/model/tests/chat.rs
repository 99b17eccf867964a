//! Chat completions: request bodies compared as JSON, streams assembled, construction checks.

use serde_json::{Value, json};

use super::decode::usage;
use super::*;
use crate::model::history::{Chunk, Entry, Part, ToolChoice, Usage};
use crate::model::sse::SseItem;
use crate::model::test_support::*;
use crate::tools::Arguments;
use crate::tools::ToolSet;

fn layer(model: &str) -> Chat {
    Chat::builder("https://llm.example/v1", model)
        .api_key("sk-chat")
        .build()
        .unwrap()
}

/// A call as the decoder hands it on: everything in the call, no raw.
fn tc(id: &str, name: &str, arguments: &str) -> Part {
    call(
        Some(id),
        name,
        Arguments::Raw(arguments.into()),
        Value::Null,
    )
}

fn messages_of(l: &Chat, instruction: Option<&str>, history: &[Entry]) -> Value {
    let tools = ToolSet::empty();
    body(
        &l.build(&spec(instruction, history, &tools, &ToolChoice::Auto))
            .unwrap(),
    )["messages"]
        .clone()
}

/// Feeds `data:` events, then ends the stream; returns every chunk.
fn decode(events: &[&str]) -> Vec<Chunk> {
    let mut d = ChatDecoder::new("openai", DecodeLimits::UNBOUNDED);
    let mut out = Vec::new();
    for e in events {
        out.extend(d.item(data(e)).unwrap());
    }
    out.extend(d.end().unwrap());
    assert!(d.done());
    out
}

fn delta(delta: Value) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x",
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    .to_string()
}

fn finish(reason: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
}

fn calls(chunk: &Chunk) -> Vec<(String, String, String)> {
    chunk
        .parts
        .iter()
        .map(|p| match p {
            Part::Call { call, .. } => (
                call.id.clone().unwrap(),
                call.name.clone(),
                match &call.arguments {
                    Arguments::Raw(s) => s.clone(),
                    Arguments::Json(v) => v.to_string(),
                },
            ),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn captured_body() {
    let tools = tools();
    let history = [
        user(1, "book"),
        model(
            2,
            vec![
                text("Opening it"),
                tc("call_X", "open_booking", r#"{"city":"Paris"}"#),
                tc("call_Y", "show_help", "{}"),
            ],
        ),
        results(
            3,
            vec![
                result(Some("call_X"), "open_booking", json!({"result": "ok"})),
                result(Some("call_Y"), "show_help", json!({"result": "shown"})),
            ],
        ),
    ];
    let l = Chat::builder("https://llm.example/v1", "gpt-x")
        .api_key("sk-chat")
        .reasoning_effort("low")
        .build()
        .unwrap();
    let req = l
        .build(&spec(
            Some("sys"),
            &history,
            &tools,
            &ToolChoice::only("show_help"),
        ))
        .unwrap();
    assert_eq!(req.url, "https://llm.example/v1/chat/completions");
    assert_eq!(header(&req, "authorization"), Some("Bearer sk-chat"));
    let expected = json!({
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "book"},
            {"role": "assistant", "content": "Opening it", "tool_calls": [
                {"id": "call_X", "type": "function",
                 "function": {"name": "open_booking", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_Y", "type": "function",
                 "function": {"name": "show_help", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_X", "content": "{\"result\":\"ok\"}"},
            {"role": "tool", "tool_call_id": "call_Y", "content": "{\"result\":\"shown\"}"}],
        "tools": tools.chat(false),
        "tool_choice": {"type": "function", "function": {"name": "show_help"}},
        "reasoning_effort": "low",
        "stream": true,
        "stream_options": {"include_usage": true}
    });
    assert_eq!(body(&req), expected);
    assert_eq!(tools.chat(false)[0]["function"].get("strict"), None);
}

#[test]
fn case15_and_none_choices() {
    let tools = tools();
    let history = [user(1, "x")];
    let l = layer("gpt-x");
    let b = |c: ToolChoice| body(&l.build(&spec(None, &history, &tools, &c)).unwrap());
    assert_eq!(
        b(ToolChoice::only("show_help"))["tool_choice"],
        json!({"type": "function", "function": {"name": "show_help"}})
    );
    assert_eq!(b(ToolChoice::None)["tool_choice"], json!("none"));
    assert_eq!(b(ToolChoice::None)["tools"], json!(tools.chat(false)));
    assert_eq!(b(ToolChoice::Auto)["tool_choice"], json!("auto"));
    assert!(
        l.build(&spec(None, &history, &tools, &ToolChoice::only("nope")))
            .is_err()
    );
}

#[test]
fn case18_responses_route_filters_tools_and_requires() {
    let tools = tools();
    let history = [user(1, "x")];
    let l = layer("openai/responses/gpt-6-sol");
    let b = body(
        &l.build(&spec(
            None,
            &history,
            &tools,
            &ToolChoice::only("show_help"),
        ))
        .unwrap(),
    );
    assert_eq!(b["tools"], json!(tools_named("show_help").chat(false)));
    assert_eq!(b["tool_choice"], json!("required"));
    assert_eq!(b["model"], "openai/responses/gpt-6-sol");
    // Auto on the same route is the usual shape.
    let b = body(
        &l.build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b["tools"], json!(tools.chat(false)));
    assert_eq!(b["tool_choice"], json!("auto"));
}

#[test]
fn case19_no_tools_no_tool_keys() {
    let empty = ToolSet::empty();
    let history = [user(1, "hi")];
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        let b = body(
            &layer("gpt-x")
                .build(&spec(Some("sys"), &history, &empty, &choice))
                .unwrap(),
        );
        let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["model", "messages", "stream", "stream_options"]);
    }
}

#[test]
fn case66_messages() {
    let history = [
        user(1, "book"),
        model(
            2,
            vec![
                Part::Thought {
                    raw: json!({"type": "reasoning"}),
                },
                text("Before "),
                tc("call_1", "show_help", ""),
                text("after."),
            ],
        ),
        results(
            3,
            vec![result(Some("call_1"), "show_help", json!({"result": null}))],
        ),
    ];
    assert_eq!(
        messages_of(&layer("gpt-x"), Some(""), &history),
        json!([
            {"role": "user", "content": "book"},
            {"role": "assistant", "content": "Before after.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "show_help", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"result\":null}"}])
    );
}

#[test]
fn f11_no_empty_assistant_message() {
    let history = [
        user(1, "Hi, what's your name?"),
        model(2, vec![trimmed("")]),
        user(3, "Please come again?"),
    ];
    assert_eq!(
        messages_of(&layer("gpt-x"), None, &history),
        json!([
            {"role": "user", "content": "Hi, what's your name?"},
            {"role": "user", "content": "Please come again?"}])
    );
    // Unheard text before a call: content null, the call kept.
    let history = [
        user(1, "help"),
        model(2, vec![trimmed(""), tc("call_1", "show_help", "{}")]),
        results(
            3,
            vec![result(Some("call_1"), "show_help", json!({"result": "ok"}))],
        ),
    ];
    let m = messages_of(&layer("gpt-x"), None, &history);
    assert_eq!(m[1]["content"], Value::Null);
    assert_eq!(m[1]["tool_calls"][0]["id"], "call_1");
    // Text only: no tool_calls key.
    let history = [user(1, "hi"), model(2, vec![text("Hello.")])];
    assert_eq!(
        messages_of(&layer("gpt-x"), None, &history)[1],
        json!({"role": "assistant", "content": "Hello."})
    );
}

#[test]
fn results_need_call_ids_and_note_goes_last() {
    let tools = ToolSet::empty();
    let history = [results(1, vec![result(None, "x", json!({"result": 1}))])];
    let err = layer("gpt-x")
        .build(&spec(None, &history, &tools, &ToolChoice::Auto))
        .unwrap_err();
    assert!(matches!(err, StreamError::Unbuildable { .. }), "{err}");
    let history = [user(1, "a")];
    let mut s = spec(None, &history, &tools, &ToolChoice::Auto);
    s.note = Some("again");
    assert_eq!(
        body(&layer("gpt-x").build(&s).unwrap())["messages"][1],
        json!({"role": "user", "content": "again"})
    );
}

#[test]
fn case65_captured_stream() {
    let events = [
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"Opening"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_X","type":"function","function":{"name":"open_booking","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":30,"total_tokens":130,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":10}}}"#,
    ];
    let mut d = ChatDecoder::new("openai", DecodeLimits::UNBOUNDED);
    let mut chunks = Vec::new();
    for e in events {
        chunks.extend(d.item(data(e)).unwrap());
    }
    // Text came at once; no call before the stream's end.
    assert_eq!(
        chunks,
        vec![Chunk {
            parts: vec![text("Opening")],
            ..Chunk::default()
        }]
    );
    assert!(!d.done());
    let last = d.item(data("[DONE]")).unwrap();
    assert!(d.done());
    assert_eq!(
        last,
        vec![Chunk {
            parts: vec![tc("call_X", "open_booking", r#"{"city":"Paris"}"#)],
            finished: true,
            malformed: false,
            usage: Some(Usage {
                input: Some(100),
                cached_input: Some(64),
                cache_write: None,
                output: Some(20),
                reasoning: Some(10),
            }),
            too_big: false,
            response_id: Some("chatcmpl-1".into()),
            finish_reason: Some("tool_calls".into()),
            abnormal_stop: None,
            cut_call: None,
        }]
    );
    assert!(d.end().unwrap().is_empty());
}

#[test]
fn case65_missing_id_and_arguments() {
    let chunks = decode(&[
        &delta(json!({"tool_calls": [{"index": 0, "function": {"name": "show_help"}}]})),
        &finish("tool_calls"),
        "[DONE]",
    ]);
    assert_eq!(
        calls(&chunks[0]),
        [("call_0".into(), "show_help".into(), "{}".into())]
    );
    assert_eq!(chunks[0].usage, None);
}

#[test]
fn arguments_given_as_an_object_are_reserialised() {
    let chunks = decode(&[
        &delta(json!({"tool_calls": [{"index": 0, "id": "c1",
            "function": {"name": "open_booking", "arguments": {"city": "Oslo"}}}]})),
        &finish("tool_calls"),
    ]);
    assert_eq!(
        calls(&chunks[0]),
        [(
            "c1".into(),
            "open_booking".into(),
            r#"{"city":"Oslo"}"#.into()
        )]
    );
}

#[test]
fn f07_parallel_fragments_not_glued() {
    // Interleaved on indexes 0 and 1.
    let chunks = decode(&[
        &delta(
            json!({"tool_calls": [{"index": 0, "id": "call_A", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"ci"}}]}),
        ),
        &delta(
            json!({"tool_calls": [{"index": 1, "id": "call_B", "type": "function",
            "function": {"name": "get_time", "arguments": "{\"tz\":"}}]}),
        ),
        &delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\":\"Oslo\"}"}}]})),
        &delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": "\"UTC\"}"}}]})),
        &finish("tool_calls"),
        "[DONE]",
    ]);
    assert_eq!(
        calls(&chunks[0]),
        [
            (
                "call_A".into(),
                "get_weather".into(),
                r#"{"city":"Oslo"}"#.into()
            ),
            ("call_B".into(), "get_time".into(), r#"{"tz":"UTC"}"#.into()),
        ]
    );
    // Two calls both on index 0, with different ids.
    let chunks = decode(&[
        &delta(json!({"tool_calls": [{"index": 0, "id": "call_A",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]})),
        &delta(json!({"tool_calls": [{"index": 0, "id": "call_B",
            "function": {"name": "get_time", "arguments": "{\"tz\""}}]})),
        &delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": ":\"UTC\"}"}}]})),
        &finish("tool_calls"),
        "[DONE]",
    ]);
    assert_eq!(
        calls(&chunks[0]),
        [
            (
                "call_A".into(),
                "get_weather".into(),
                r#"{"city":"Oslo"}"#.into()
            ),
            ("call_B".into(), "get_time".into(), r#"{"tz":"UTC"}"#.into()),
        ]
    );
    // An id repeated on every fragment is one call.
    let chunks = decode(&[
        &delta(json!({"tool_calls": [{"index": 0, "id": "call_A",
            "function": {"name": "get_weather", "arguments": "{\"city\":"}}]})),
        &delta(json!({"tool_calls": [{"index": 0, "id": "call_A",
            "function": {"arguments": "\"Oslo\"}"}}]})),
        &finish("tool_calls"),
    ]);
    assert_eq!(calls(&chunks[0]).len(), 1);
    assert_eq!(calls(&chunks[0])[0].2, r#"{"city":"Oslo"}"#);
}

#[test]
fn calls_sorted_by_index() {
    let chunks = decode(&[
        &delta(json!({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "second"}}]})),
        &delta(json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "first"}}]})),
        &finish("stop"),
        "[DONE]",
    ]);
    let names: Vec<String> = calls(&chunks[0]).into_iter().map(|c| c.1).collect();
    assert_eq!(names, ["first", "second"]);
}

#[test]
fn text_only_stream_finishes_without_calls() {
    let chunks = decode(&[
        &delta(json!({"content": "Hi"})),
        &delta(json!({"content": " there."})),
        &finish("stop"),
        "[DONE]",
    ]);
    assert_eq!(
        chunks,
        vec![
            Chunk {
                parts: vec![text("Hi")],
                ..Chunk::default()
            },
            Chunk {
                parts: vec![text(" there.")],
                ..Chunk::default()
            },
            // The completion's id and why it finished, for the request's span.
            Chunk {
                finished: true,
                response_id: Some("chatcmpl-1".into()),
                finish_reason: Some("stop".into()),
                ..Chunk::default()
            },
        ]
    );
}

#[test]
fn a_stream_without_finish_reason_is_truncated_unless_it_said_done() {
    // `[DONE]` ends a response on its own (a recorded Novita stream never sets finish_reason).
    let mut d = ChatDecoder::new("anthropic", DecodeLimits::UNBOUNDED);
    d.item(data(&delta(json!({"content": "Hi"})))).unwrap();
    let chunks = d.item(data("[DONE]")).unwrap();
    assert!(chunks.iter().any(|c| c.finished), "{chunks:?}");
    // Neither: the stream was cut.
    let mut d = ChatDecoder::new("", DecodeLimits::UNBOUNDED);
    d.item(data(&delta(json!({"content": "Hi"})))).unwrap();
    let err = d.end().unwrap_err();
    assert!(matches!(err, StreamError::Truncated { .. }));
    assert!(err.to_string().contains("chat completions"), "{err}");
    // A finish_reason then a closed stream without [DONE]: the end delivers the calls.
    let mut d = ChatDecoder::new("openai", DecodeLimits::UNBOUNDED);
    d.item(data(&delta(
        json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "show_help"}}]}),
    )))
    .unwrap();
    d.item(data(&finish("tool_calls"))).unwrap();
    let end = d.end().unwrap();
    assert!(end[0].finished);
    assert_eq!(calls(&end[0]).len(), 1);
}

#[test]
fn malformed_and_error_chunks() {
    for bad in ["{nope", "[]", r#"{"choices": 3}"#] {
        let err = ChatDecoder::new("openai", DecodeLimits::UNBOUNDED)
            .item(data(bad))
            .unwrap_err();
        assert!(matches!(err, StreamError::Malformed { .. }), "{bad}: {err}");
    }
    let err = ChatDecoder::new("groq", DecodeLimits::UNBOUNDED)
        .item(data(
            r#"{"error":{"message":"overloaded","type":"server_error","code":503}}"#,
        ))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "groq reported an error: overloaded (server_error, 503)"
    );
    let err = ChatDecoder::new("openai", DecodeLimits::UNBOUNDED)
        .item(SseItem::Bare(r#"{"error":{"message":"bad key"}}"#.into()))
        .unwrap_err();
    assert!(matches!(err, StreamError::Provider { .. }));
}

#[test]
fn usage_fields() {
    let u = usage(
        &json!({"prompt_tokens": 10, "completion_tokens": 5, "cache_creation_input_tokens": 3}),
        false,
    );
    assert_eq!(
        u,
        Usage {
            input: Some(10),
            cached_input: None,
            cache_write: Some(3),
            output: Some(5),
            reasoning: None,
        }
    );
    let u = usage(
        &json!({"prompt_tokens": 10, "completion_tokens": 5,
                "prompt_tokens_details": {"cache_creation_tokens": 4}}),
        false,
    );
    assert_eq!(u.cache_write, Some(4));
    // The last usage seen wins.
    let chunks = decode(&[
        &json!({"choices": [], "usage": {"prompt_tokens": 1}}).to_string(),
        &finish("stop"),
        &json!({"choices": [], "usage": {"prompt_tokens": 2}}).to_string(),
        "[DONE]",
    ]);
    assert_eq!(chunks[0].usage.unwrap().input, Some(2));
}

#[test]
fn case67_provider_from_route() {
    for (model, company) in [
        ("gemini/x", "google"),
        ("vertex_ai/x", "google"),
        ("azure/x", "microsoft"),
        ("bedrock/x", "amazon"),
        ("openai/responses/x", "openai"),
        ("anthropic/claude-haiku-5-5", "anthropic"),
        ("groq/llama", "groq"),
        ("gpt-4o", ""),
    ] {
        assert_eq!(route_company(model), company, "{model}");
        assert_eq!(layer(model).provider(), company, "{model}");
    }
    let l = Chat::builder("http://localhost:11434/v1", "llama3")
        .provider("ollama")
        .build()
        .unwrap();
    assert_eq!(l.provider(), "ollama");
}

// ---------------------------------------------------------------------------------------------
// Construction.

#[test]
fn construction_checks_and_options() {
    // No key: no Authorization header (local servers).
    let l = Chat::builder("http://localhost:8000/v1/", "qwen3")
        .build()
        .unwrap();
    let history = [user(1, "hi")];
    let tools = ToolSet::empty();
    let req = l
        .build(&spec(None, &history, &tools, &ToolChoice::Auto))
        .unwrap();
    assert_eq!(header(&req, "authorization"), None);
    assert_eq!(req.url, "http://localhost:8000/v1/chat/completions");
    assert_eq!(l.base_url(), "http://localhost:8000/v1");
    for key in RESERVED {
        let err = Chat::builder("http://h", "m")
            .option(*key, json!(1))
            .build()
            .unwrap_err();
        assert!(matches!(err, LayerError::ReservedOption { .. }), "{err}");
    }
    let clash = Chat::builder("http://h", "m")
        .reasoning_effort("low")
        .option("reasoning_effort", json!("high"))
        .build()
        .unwrap_err();
    assert!(matches!(clash, LayerError::OptionClash { .. }));
    assert!(Chat::builder("localhost:8000", "m").build().is_err());
    assert!(Chat::builder("http://h", " ").build().is_err());
    assert!(
        Chat::builder("http://h", "m")
            .api_key("a\tb")
            .build()
            .is_err()
    );
    let l = Chat::builder("http://h", "m")
        .api_key("sk-secret")
        .option("temperature", json!(0))
        .option("reasoning_effort", json!("minimal"))
        .build()
        .unwrap();
    assert!(!format!("{l:?}").contains("sk-secret"));
    let b = body(
        &l.build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b["temperature"], json!(0));
    assert_eq!(b["reasoning_effort"], json!("minimal"));
    assert_eq!(b["stream"], json!(true));
}

#[test]
fn from_env_reads_the_openai_variables() {
    let vars: &[(&str, &str)] = &[
        ("OPENAI_API_KEY", "sk-env"),
        ("OPENAI_BASE_URL", "https://router.example/api/v1"),
    ];
    let l = Chat::from_lookup("anthropic/claude", |k| {
        Ok(vars
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string()))
    })
    .build()
    .unwrap();
    assert_eq!(
        l.inner.endpoint.url,
        "https://router.example/api/v1/chat/completions"
    );
    assert!(
        l.inner
            .endpoint
            .headers
            .contains(&("authorization".into(), "Bearer sk-env".into()))
    );
    let l = Chat::from_lookup("gpt-x", |_| Ok(None)).build().unwrap();
    assert_eq!(
        l.inner.endpoint.url,
        "https://api.openai.com/v1/chat/completions"
    );
    assert!(
        !l.inner
            .endpoint
            .headers
            .iter()
            .any(|(k, _)| k == "authorization")
    );
    let strict = Chat::builder("http://h", "m").strict(true).build().unwrap();
    let tools = tools();
    let history = [user(1, "hi")];
    let b = body(
        &strict
            .build(&spec(None, &history, &tools, &ToolChoice::Auto))
            .unwrap(),
    );
    assert_eq!(b["tools"], json!(tools.chat(true)));
}

/// What one `tool_calls` fragment on `index` carries.
fn fragment(index: usize, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
    let mut f = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        f["id"] = json!(id);
    }
    if let Some(name) = name {
        f["function"]["name"] = json!(name);
    }
    delta(json!({"tool_calls": [f]}))
}

#[test]
fn assembled_arguments_stop_one_past_the_bound() {
    let limits = DecodeLimits {
        max_calls: 4,
        max_argument_bytes: 1000,
        ..DecodeLimits::UNBOUNDED
    };
    let mut d = ChatDecoder::new("openai", limits);
    d.item(data(&fragment(0, Some("call_a"), Some("x"), "{\"v\":\"")))
        .unwrap();
    // A thousand fragments of a hundred bytes: 100 KB sent, a kilobyte and a byte kept.
    let piece = "é".repeat(50);
    for _ in 0..1000 {
        d.item(data(&fragment(0, None, None, &piece))).unwrap();
    }
    d.item(data(&finish("tool_calls"))).unwrap();
    let chunks = d.item(data("[DONE]")).unwrap();
    let assembled = calls(&chunks[0]);
    let kept = assembled[0].2.len();
    assert!(
        (1001..=1002).contains(&kept),
        "{kept} bytes kept: one past the bound, on a character boundary"
    );
}

#[test]
fn calls_past_the_bound_are_not_assembled() {
    let limits = DecodeLimits {
        max_calls: 3,
        max_argument_bytes: 1000,
        ..DecodeLimits::UNBOUNDED
    };
    let mut d = ChatDecoder::new("openai", limits);
    for i in 0..10_000 {
        let id = format!("call_{i}");
        d.item(data(&fragment(i, Some(&id), Some("x"), "{}")))
            .unwrap();
    }
    d.item(data(&finish("tool_calls"))).unwrap();
    let chunks = d.item(data("[DONE]")).unwrap();
    let ids: Vec<String> = calls(&chunks[0]).into_iter().map(|c| c.0).collect();
    assert_eq!(ids, ["call_0", "call_1", "call_2", "call_3"]);
}

#[test]
fn an_event_too_big_to_hold_is_left_unread_and_says_so() {
    let limits = DecodeLimits {
        max_kept_bytes: 64 * 1024,
        ..DecodeLimits::UNBOUNDED
    };
    let mut d = ChatDecoder::new("openai", limits);
    let junk = json!({"choices": [{"index": 0, "delta": {"content": "Hi."}}],
        "junk": vec![json!({"a": 0}); 120_000]});
    let chunks = d.item(data(&junk.to_string())).unwrap();
    assert_eq!(
        chunks,
        [Chunk {
            too_big: true,
            ..Chunk::default()
        }]
    );
}

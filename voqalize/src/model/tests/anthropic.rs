//! Anthropic Messages: request bodies compared as JSON, streams decoded, construction checks.

use serde_json::{Value, json};

use super::*;
use crate::model::history::{Chunk, Entry, Part, ToolChoice, Usage};
use crate::model::test_support::*;
use crate::tools::{Arguments, ToolSet};

fn layer() -> Anthropic {
    Anthropic::builder("sk-ant", "claude-test").build().unwrap()
}

fn body_of(l: &Anthropic, instruction: Option<&str>, history: &[Entry], tools: &ToolSet) -> Value {
    body(
        &l.build(&spec(instruction, history, tools, &ToolChoice::Auto))
            .unwrap(),
    )
}

/// Feeds `data:` events (the decoder reads the type from the data), then ends the stream.
fn decode(events: &[Value]) -> Vec<Chunk> {
    let mut d = AnthropicDecoder::new(DecodeLimits::UNBOUNDED);
    let mut out = Vec::new();
    for e in events {
        out.extend(d.item(data(&e.to_string())).unwrap());
    }
    out.extend(d.end().unwrap());
    assert!(d.done());
    out
}

fn parts(chunks: &[Chunk]) -> Vec<Part> {
    chunks.iter().flat_map(|c| c.parts.clone()).collect()
}

fn start(input: u64, read: u64, write: u64) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": input, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write, "output_tokens": 1}}})
}

fn block(index: u64, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u64, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn stop(index: u64) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn end(reason: &str, output: u64) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
            "usage": {"output_tokens": output}}),
        json!({"type": "message_stop"}),
    ]
}

#[test]
fn the_request_carries_cache_marks_tools_and_the_conversation_in_blocks() {
    let tools = tools();
    let history = [
        user(1, "book Paris"),
        model(
            2,
            vec![
                Part::Thought {
                    raw: json!({"type": "thinking", "thinking": "Book it.", "signature": "c2ln"}),
                },
                text("Opening it."),
                call(
                    Some("toolu_1"),
                    "open_booking",
                    Arguments::Raw(r#"{"city":"Paris"}"#.into()),
                    Value::Null,
                ),
            ],
        ),
        results(
            3,
            vec![result(
                Some("toolu_1"),
                "open_booking",
                json!({"error": "closed"}),
            )],
        ),
        user(4, "thanks"),
    ];
    let l = layer();
    let req = l
        .build(&spec(
            Some("Be brief."),
            &history,
            &tools,
            &ToolChoice::Auto,
        ))
        .unwrap();
    assert_eq!(req.url, "https://api.anthropic.com/v1/messages");
    assert_eq!(header(&req, "x-api-key"), Some("sk-ant"));
    assert_eq!(header(&req, "anthropic-version"), Some("2023-06-01"));
    let b = body(&req);
    assert_eq!(b["model"], "claude-test");
    assert_eq!(b["max_tokens"], 2048);
    assert_eq!(b["stream"], true);
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(b["tools"][0]["name"], "open_booking");
    assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    assert!(
        b["tools"][1].get("cache_control").is_none(),
        "the system mark covers the tools"
    );
    assert_eq!(b["tool_choice"], json!({"type": "auto"}));
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "book Paris"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Book it.", "signature": "c2ln"},
                {"type": "text", "text": "Opening it."},
                {"type": "tool_use", "id": "toolu_1", "name": "open_booking", "input": {"city": "Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": "{\"error\":\"closed\"}", "is_error": true},
                {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}
            ]}
        ]),
        "the result and the next words share one user message, the result first"
    );
}

#[test]
fn thinking_goes_with_the_text_heard_truth_cut_and_a_greeting_gets_a_user_turn_first() {
    let history = [
        model(
            1,
            vec![
                Part::Thought {
                    raw: json!({"type": "thinking", "thinking": "Greet.", "signature": "c2ln"}),
                },
                trimmed("Hello"),
            ],
        ),
        user(2, "hi"),
    ];
    let b = body_of(&layer(), None, &history, &ToolSet::empty());
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": request::CALL_STARTED}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
            {"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
            ]}
        ])
    );
    assert!(b.get("system").is_none() && b.get("tools").is_none());
}

#[test]
fn a_thought_that_ends_the_conversation_is_marked_over_its_own_keys_or_left_if_not_an_object() {
    let thought = json!({"type": "thinking", "thinking": "Hm.", "signature": "c2ln"});
    let history = [
        user(1, "hi"),
        model(
            2,
            vec![Part::Thought {
                raw: thought.clone(),
            }],
        ),
    ];
    let b = body_of(&layer(), None, &history, &ToolSet::empty());
    let mut marked = thought;
    marked["cache_control"] = json!({"type": "ephemeral"});
    assert_eq!(b["messages"][1]["content"], json!([marked]));
    // Only a hand-built history holds a block that is not an object: it goes as it is, unmarked
    // (it used to panic the turn).
    let odd = [
        user(1, "hi"),
        model(2, vec![Part::Thought { raw: json!("odd") }]),
    ];
    let b = body_of(&layer(), None, &odd, &ToolSet::empty());
    assert_eq!(b["messages"][1]["content"], json!(["odd"]));
}

#[test]
fn caching_off_sends_no_marks_and_the_last_tool_is_marked_without_a_system_prompt() {
    let tools = tools();
    let history = [user(1, "hi")];
    let b = body_of(&layer(), None, &history, &tools);
    assert_eq!(b["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
    let off = Anthropic::builder("k", "m")
        .prompt_caching(false)
        .build()
        .unwrap();
    let text = body_of(&off, Some("Be brief."), &history, &tools).to_string();
    assert!(!text.contains("cache_control"), "{text}");
}

#[test]
fn a_named_tool_choice_and_thinking_are_sent_as_the_api_names_them() {
    let tools = tools();
    let l = Anthropic::builder("k", "m").thinking(1024).build().unwrap();
    let choice = ToolChoice::only("show_help");
    let b = body(
        &l.build(&spec(None, &[user(1, "help")], &tools, &choice))
            .unwrap(),
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "tool", "name": "show_help"})
    );
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    let none = body(
        &l.build(&spec(None, &[user(1, "help")], &tools, &ToolChoice::None))
            .unwrap(),
    );
    assert_eq!(none["tool_choice"], json!({"type": "none"}));
    let missing = ToolChoice::only("nope");
    assert!(l.build(&spec(None, &[], &tools, &missing)).is_err());
}

#[test]
fn text_streams_calls_complete_at_their_stop_and_usage_counts_the_cache() {
    let [md, ms] = end("tool_use", 42);
    let chunks = decode(&[
        start(10, 100, 20),
        block(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Opening"})),
        json!({"type": "ping"}),
        delta(0, json!({"type": "text_delta", "text": " it."})),
        stop(0),
        block(
            1,
            json!({"type": "tool_use", "id": "toolu_1", "name": "open_booking", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "ris\"}"}),
        ),
        stop(1),
        block(
            2,
            json!({"type": "tool_use", "id": "toolu_2", "name": "show_help", "input": {}}),
        ),
        stop(2),
        md,
        ms,
    ]);
    assert_eq!(
        parts(&chunks),
        [
            text("Opening"),
            text(" it."),
            call(
                Some("toolu_1"),
                "open_booking",
                Arguments::Raw("{\"city\": \"Paris\"}".into()),
                Value::Null
            ),
            call(
                Some("toolu_2"),
                "show_help",
                Arguments::Raw("{}".into()),
                Value::Null
            ),
        ]
    );
    let last = chunks.last().unwrap();
    assert!(last.finished && !last.malformed);
    let usage = Usage {
        input: Some(130),
        cached_input: Some(100),
        cache_write: Some(20),
        output: Some(42),
        reasoning: None,
    };
    assert_eq!(last.usage, Some(usage));
}

#[test]
fn thinking_is_kept_whole_with_its_signature_and_never_spoken() {
    let [md, ms] = end("end_turn", 9);
    let chunks = decode(&[
        start(5, 0, 0),
        block(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "Say "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "hi."})),
        delta(0, json!({"type": "signature_delta", "signature": "EqQB"})),
        stop(0),
        block(1, json!({"type": "redacted_thinking", "data": "ZW5j"})),
        stop(1),
        block(2, json!({"type": "text", "text": ""})),
        delta(2, json!({"type": "text_delta", "text": "Hi."})),
        stop(2),
        md,
        ms,
    ]);
    assert_eq!(
        parts(&chunks),
        [
            Part::Thought {
                raw: json!({"type": "thinking", "thinking": "Say hi.", "signature": "EqQB"})
            },
            Part::Thought {
                raw: json!({"type": "redacted_thinking", "data": "ZW5j"})
            },
            text("Hi."),
        ]
    );
}

#[test]
fn an_error_event_is_the_providers_error_and_a_stream_without_message_stop_is_cut() {
    let mut d = AnthropicDecoder::new(DecodeLimits::UNBOUNDED);
    let e =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let err = d.item(data(&e.to_string())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "anthropic reported an error: Overloaded (overloaded_error)"
    );
    let mut d = AnthropicDecoder::new(DecodeLimits::UNBOUNDED);
    d.item(data(&start(1, 0, 0).to_string())).unwrap();
    assert!(matches!(d.end(), Err(StreamError::Truncated { .. })));
    let mut d = AnthropicDecoder::new(DecodeLimits::UNBOUNDED);
    let stray = delta(0, json!({"type": "text_delta", "text": "x"}));
    assert!(matches!(
        d.item(data(&stray.to_string())),
        Err(StreamError::Malformed { .. })
    ));
}

#[test]
fn what_a_decoder_holds_stays_within_its_limits() {
    let mut limits = DecodeLimits::UNBOUNDED;
    limits.max_argument_bytes = 8;
    limits.max_calls = 1;
    // Room for any one event held parsed (about 1.5 kB each), not for 3 kB of thinking.
    limits.max_kept_bytes = 2000;
    let mut d = AnthropicDecoder::new(limits);
    let mut out = Vec::new();
    let mut feed = |e: Value| out.extend(d.item(data(&e.to_string())).unwrap());
    for i in 0..3 {
        feed(block(
            i,
            json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "f"}),
        ));
        for _ in 0..50 {
            feed(delta(
                i,
                json!({"type": "input_json_delta", "partial_json": "{\"a\":1}"}),
            ));
        }
        feed(stop(i));
    }
    feed(block(3, json!({"type": "thinking", "thinking": ""})));
    for _ in 0..300 {
        feed(delta(
            3,
            json!({"type": "thinking_delta", "thinking": "0123456789"}),
        ));
    }
    let calls: Vec<usize> = out
        .iter()
        .flat_map(|c| &c.parts)
        .filter_map(|p| match p {
            Part::Call { call, .. } => match &call.arguments {
                Arguments::Raw(s) => Some(s.len()),
                Arguments::Json(_) => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [9, 9],
        "max_calls + 1 calls, max_argument_bytes + 1 bytes each"
    );
    assert_eq!(
        out.iter().filter(|c| c.too_big).count(),
        1,
        "the thinking block is cut once"
    );
}

#[test]
fn construction_checks_every_setting() {
    assert!(matches!(
        Anthropic::builder("", "m").build(),
        Err(LayerError::BadHeader { .. })
    ));
    assert!(matches!(
        Anthropic::builder("k", "m").thinking(512).build(),
        Err(LayerError::BadSetting { .. })
    ));
    assert!(matches!(
        Anthropic::builder("k", "m")
            .thinking(4096)
            .max_tokens(2048)
            .build(),
        Err(LayerError::BadSetting { .. })
    ));
    assert!(matches!(
        Anthropic::builder("k", "m")
            .option("max_tokens", json!(5))
            .build(),
        Err(LayerError::ReservedOption { .. })
    ));
    assert!(matches!(
        Anthropic::builder("k", "m")
            .base_url("api.anthropic.com")
            .build(),
        Err(LayerError::BadUrl { .. })
    ));
    let l = Anthropic::builder("k", "m")
        .base_url("http://127.0.0.1:9/")
        .option("temperature", json!(0.2))
        .build()
        .unwrap();
    let b = body_of(&l, None, &[user(1, "hi")], &ToolSet::empty());
    assert_eq!(b["temperature"], 0.2);
    assert_eq!(
        l.build(&spec(None, &[], &ToolSet::empty(), &ToolChoice::Auto))
            .unwrap()
            .url,
        "http://127.0.0.1:9/v1/messages"
    );
}

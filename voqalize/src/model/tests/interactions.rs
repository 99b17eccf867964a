//! Gemini Interactions: request bodies compared as JSON, streams decoded, construction checks.

use serde_json::{Value, json};

use super::*;
use crate::model::history::{Chunk, Part, ToolChoice, Usage};
use crate::model::test_support::*;
use crate::tools::{Arguments, ToolSet};

fn layer() -> Interactions {
    Interactions::builder("AIza-test")
        .model("gemini-test")
        .build()
        .unwrap()
}

fn decode(events: &[Value]) -> Vec<Chunk> {
    let mut d = InteractionsDecoder::new(DecodeLimits::UNBOUNDED);
    let mut out = Vec::new();
    for e in events {
        out.extend(d.item(data(&e.to_string())).unwrap());
    }
    out.extend(d.end().unwrap());
    assert!(d.done());
    out
}

fn ev(kind: &str, mut body: Value) -> Value {
    body["event_type"] = json!(kind);
    body
}

#[test]
fn the_request_is_the_whole_context_as_typed_steps_and_stateless() {
    let tools = tools();
    let history = [
        user(1, "book Paris"),
        model(
            2,
            vec![
                Part::Thought {
                    raw: json!({"type": "thought", "signature": "c2ln"}),
                },
                text("Opening it."),
                call(
                    Some("k1"),
                    "open_booking",
                    Arguments::Raw(r#"{"city":"Paris"}"#.into()),
                    Value::Null,
                ),
                text("Done."),
            ],
        ),
        results(
            3,
            vec![result(Some("k1"), "open_booking", json!({"result": "ok"}))],
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
    assert_eq!(
        req.url,
        "https://generativelanguage.googleapis.com/v1beta/interactions"
    );
    assert_eq!(header(&req, "x-goog-api-key"), Some("AIza-test"));
    let b = body(&req);
    assert_eq!(b["model"], "gemini-test");
    assert_eq!(b["system_instruction"], "Be brief.");
    assert_eq!(
        (b["stream"].clone(), b["store"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(
        b["generation_config"],
        json!({"thinking_level": "minimal", "tool_choice": "auto"})
    );
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["name"], "open_booking");
    assert_eq!(b["tools"][0]["parameters"]["type"], "object");
    assert_eq!(
        b["input"],
        json!([
            {"type": "user_input", "content": [{"type": "text", "text": "book Paris"}]},
            {"type": "thought", "signature": "c2ln"},
            {"type": "model_output", "content": [{"type": "text", "text": "Opening it."}]},
            {"type": "function_call", "id": "k1", "name": "open_booking", "arguments": {"city": "Paris"}},
            {"type": "model_output", "content": [{"type": "text", "text": "Done."}]},
            {"type": "function_result", "call_id": "k1", "name": "open_booking",
                "result": "{\"result\":\"ok\"}"},
            {"type": "user_input", "content": [{"type": "text", "text": "thanks"}]}
        ])
    );
}

#[test]
fn a_cut_response_drops_its_thought_and_choices_are_the_apis() {
    let history = [
        user(1, "hi"),
        model(
            2,
            vec![
                Part::Thought {
                    raw: json!({"type": "thought", "signature": "c2ln"}),
                },
                trimmed("Hel"),
            ],
        ),
    ];
    let tools = tools();
    let only = ToolChoice::only("show_help");
    let b = body(&layer().build(&spec(None, &history, &tools, &only)).unwrap());
    assert_eq!(
        b["input"][1],
        json!({"type": "model_output", "content": [{"type": "text", "text": "Hel"}]})
    );
    assert_eq!(b["input"].as_array().unwrap().len(), 2);
    assert_eq!(
        b["generation_config"]["tool_choice"],
        json!({"allowed_tools": {"mode": "any", "tools": ["show_help"]}})
    );
    let none = body(
        &layer()
            .build(&spec(None, &history, &tools, &ToolChoice::None))
            .unwrap(),
    );
    assert_eq!(none["generation_config"]["tool_choice"], "none");
    let quiet = Interactions::builder("k")
        .thinking_level(None)
        .build()
        .unwrap();
    let b = body(
        &quiet
            .build(&spec(None, &history, &ToolSet::empty(), &ToolChoice::Auto))
            .unwrap(),
    );
    assert!(
        b.get("generation_config").is_none() && b.get("tools").is_none(),
        "{b}"
    );
}

#[test]
fn words_stream_as_they_come_and_calls_and_thoughts_complete_at_their_stop() {
    let chunks = decode(&[
        ev(
            "interaction.created",
            json!({"interaction": {"id": "", "status": "in_progress"}}),
        ),
        ev(
            "interaction.status_update",
            json!({"interaction_id": "", "status": "in_progress"}),
        ),
        ev(
            "step.start",
            json!({"index": 0, "step": {"type": "thought"}}),
        ),
        ev(
            "step.delta",
            json!({"index": 0, "delta": {"type": "thought_summary",
            "content": {"type": "text", "text": "Plan."}}}),
        ),
        ev(
            "step.delta",
            json!({"index": 0, "delta": {"type": "thought_signature", "signature": "CiQB"}}),
        ),
        ev("step.stop", json!({"index": 0})),
        ev(
            "step.start",
            json!({"index": 1, "step": {"type": "model_output"}}),
        ),
        ev(
            "step.delta",
            json!({"index": 1, "delta": {"type": "text", "text": "Open"}}),
        ),
        ev(
            "step.delta",
            json!({"index": 1, "delta": {"type": "text", "text": "ing."}}),
        ),
        ev("step.stop", json!({"index": 1})),
        ev(
            "step.start",
            json!({"index": 2, "step": {"type": "function_call", "id": "61nz",
            "name": "open_booking", "arguments": {}, "signature": ""}}),
        ),
        ev(
            "step.delta",
            json!({"index": 2, "delta": {"type": "arguments_delta", "arguments": "{\"city\":"}}),
        ),
        ev(
            "step.delta",
            json!({"index": 2, "delta": {"type": "arguments_delta", "arguments": "\"Paris\"}"}}),
        ),
        ev("step.stop", json!({"index": 2})),
        ev(
            "interaction.completed",
            json!({"interaction": {"id": "", "status": "requires_action",
            "usage": {"total_input_tokens": 53, "total_cached_tokens": 0, "total_output_tokens": 15,
                "total_thought_tokens": 65, "total_tokens": 133}}}),
        ),
    ]);
    let parts: Vec<Part> = chunks.iter().flat_map(|c| c.parts.clone()).collect();
    assert_eq!(
        parts,
        [
            Part::Thought {
                raw: json!({"type": "thought", "signature": "CiQB",
                    "summary": [{"type": "text", "text": "Plan."}]})
            },
            text("Open"),
            text("ing."),
            call(
                Some("61nz"),
                "open_booking",
                Arguments::Raw("{\"city\":\"Paris\"}".into()),
                Value::Null
            ),
        ]
    );
    let last = chunks.last().unwrap();
    assert!(last.finished);
    assert_eq!(
        last.usage,
        Some(Usage {
            input: Some(53),
            cached_input: Some(0),
            cache_write: None,
            output: Some(15),
            reasoning: Some(65),
        })
    );
}

#[test]
fn a_step_cut_before_its_first_delta_leaves_nothing_and_errors_are_the_providers() {
    let mut d = InteractionsDecoder::new(DecodeLimits::UNBOUNDED);
    let start = ev(
        "step.start",
        json!({"index": 0, "step": {"type": "model_output"}}),
    );
    assert!(d.item(data(&start.to_string())).unwrap().is_empty());
    assert!(matches!(d.end(), Err(StreamError::Truncated { .. })));
    let mut d = InteractionsDecoder::new(DecodeLimits::UNBOUNDED);
    let e = ev(
        "error",
        json!({"error": {"code": "gateway_timeout",
        "message": "Deadline expired before operation could complete."}}),
    );
    assert_eq!(
        d.item(data(&e.to_string())).unwrap_err().to_string(),
        "google reported an error: Deadline expired before operation could complete. (gateway_timeout)"
    );
    let mut d = InteractionsDecoder::new(DecodeLimits::UNBOUNDED);
    let done = d.item(data("[DONE]")).unwrap();
    assert!(done[0].finished && d.done());
}

#[test]
fn construction_checks_every_setting() {
    assert!(matches!(
        Interactions::builder("").build(),
        Err(LayerError::BadHeader { .. })
    ));
    assert!(matches!(
        Interactions::builder("k")
            .option("store", json!(true))
            .build(),
        Err(LayerError::ReservedOption { .. })
    ));
    assert!(matches!(
        Interactions::builder("k")
            .thinking_level(Some("very high"))
            .build(),
        Err(LayerError::BadSetting { .. })
    ));
    let l = Interactions::builder("k")
        .bearer(|| "tok".into())
        .build()
        .unwrap();
    let req = l
        .build(&spec(
            None,
            &[user(1, "hi")],
            &ToolSet::empty(),
            &ToolChoice::Auto,
        ))
        .unwrap();
    assert_eq!(header(&req, "authorization"), Some("Bearer tok"));
    assert_eq!(header(&req, "x-goog-api-key"), None);
}

//! How each layer's decoder says a response ended: a stop that was not a normal end
//! ([`Chunk::abnormal_stop`]) and a call that stop cut off ([`Chunk::cut_call`]), read from the
//! events each provider documents and records (docs/protocol.md §6.2, §6.4).

use serde_json::{Value, json};

use super::layer::{DecodeLimits, Decoder, Layer};
use super::test_support::{data, named};
use super::{Anthropic, Chat, Gemini, Interactions, OpenAi};
use crate::model::history::{Chunk, Part, Usage};

/// Every chunk `decoder` makes of `events` (each with its `event:` name when given), then of
/// the stream's end.
fn decode(mut decoder: Box<dyn Decoder>, events: &[(Option<&str>, String)]) -> Vec<Chunk> {
    let mut out = Vec::new();
    for (name, event) in events {
        let item = match name {
            Some(name) => named(name, event),
            None => data(event),
        };
        out.extend(decoder.item(item).unwrap());
    }
    out.extend(decoder.end().unwrap());
    assert!(decoder.done());
    out
}

fn anthropic(events: &[Value]) -> Vec<Chunk> {
    let layer = Anthropic::builder("k", "claude-test").build().unwrap();
    let events: Vec<_> = events.iter().map(|e| (None, e.to_string())).collect();
    decode(layer.decoder(DecodeLimits::UNBOUNDED), &events)
}

fn gemini(events: &[&str]) -> Vec<Chunk> {
    let layer = Gemini::builder("k").build().unwrap();
    let events: Vec<_> = events.iter().map(|e| (None, (*e).to_owned())).collect();
    decode(layer.decoder(DecodeLimits::UNBOUNDED), &events)
}

fn chat(events: &[&str]) -> Vec<Chunk> {
    let layer = Chat::builder("http://127.0.0.1:9/v1", "m").build().unwrap();
    let events: Vec<_> = events.iter().map(|e| (None, (*e).to_owned())).collect();
    decode(layer.decoder(DecodeLimits::UNBOUNDED), &events)
}

fn responses(events: &[Value]) -> Vec<Chunk> {
    let layer = OpenAi::builder("k", "gpt-test").build().unwrap();
    let events: Vec<_> = events
        .iter()
        .map(|e| (e["type"].as_str(), e.to_string()))
        .collect();
    decode(layer.decoder(DecodeLimits::UNBOUNDED), &events)
}

fn interactions(events: &[Value]) -> Vec<Chunk> {
    let layer = Interactions::builder("k").build().unwrap();
    let events: Vec<_> = events.iter().map(|e| (None, e.to_string())).collect();
    decode(layer.decoder(DecodeLimits::UNBOUNDED), &events)
}

/// The name of the call `part` is, if it is one.
fn call_name(part: Option<&Part>) -> Option<&str> {
    match part {
        Some(Part::Call { call, .. }) => Some(&call.name),
        _ => None,
    }
}

fn calls(chunks: &[Chunk]) -> Vec<&str> {
    chunks
        .iter()
        .flat_map(|c| c.parts.iter())
        .filter_map(|p| call_name(Some(p)))
        .collect()
}

fn cut_calls(chunks: &[Chunk]) -> Vec<&str> {
    chunks
        .iter()
        .filter_map(|c| call_name(c.cut_call.as_ref()))
        .collect()
}

fn stops(chunks: &[Chunk]) -> Vec<&str> {
    chunks
        .iter()
        .filter_map(|c| c.abnormal_stop.as_deref())
        .collect()
}

fn message_start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})
}

fn tool_use(index: u64, name: &str) -> Value {
    json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": format!("toolu_{index}"), "name": name,
            "input": {}}})
}

fn message_end(delta: Value) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]
}

#[test]
fn anthropic_a_block_still_open_at_the_stop_is_cut_off_and_the_stop_named_with_its_details() {
    let [delta, stop] = message_end(json!({"stop_reason": "max_tokens", "stop_details": null}));
    let chunks = anthropic(&[
        message_start(),
        tool_use(0, "show_help"),
        json!({"type": "content_block_stop", "index": 0}),
        tool_use(1, "open_booking"),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Par"}}),
        delta,
        stop,
    ]);
    assert_eq!(calls(&chunks), ["show_help"]);
    assert_eq!(cut_calls(&chunks), ["open_booking"]);
    assert_eq!(stops(&chunks), ["max_tokens"]);

    let refusal = json!({"stop_reason": "refusal", "stop_details": {"type": "refusal",
        "category": "cyber", "explanation": "Blocked under the policy."}});
    for (delta, said) in [
        (refusal, Some("refusal (cyber: Blocked under the policy.)")),
        (
            json!({"stop_reason": "refusal", "stop_details": {"type": "refusal",
                "category": null, "explanation": null}}),
            Some("refusal"),
        ),
        (json!({"stop_reason": "pause_turn"}), Some("pause_turn")),
        (
            json!({"stop_reason": "end_turn", "stop_details": null}),
            None,
        ),
        (json!({"stop_reason": "tool_use"}), None),
        (json!({"stop_reason": "stop_sequence"}), None),
    ] {
        let [delta, stop] = message_end(delta);
        let chunks = anthropic(&[message_start(), delta, stop]);
        assert_eq!(stops(&chunks).first().copied(), said);
        assert!(cut_calls(&chunks).is_empty());
    }
    // A megabyte of explanation is not copied whole.
    let [delta, stop] = message_end(json!({"stop_reason": "refusal", "stop_details": {
        "category": "bio", "explanation": "é".repeat(1_000_000)}}));
    let chunks = anthropic(&[message_start(), delta, stop]);
    let said = stops(&chunks)[0];
    assert!(
        said.len() <= 256 && said.starts_with("refusal (bio: é"),
        "{said}"
    );
}

#[test]
fn gemini_a_streamed_call_open_at_a_finish_but_stop_is_cut_off() {
    let open = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"open_booking","willContinue":true}}]}}]}"#;
    let piece = |finish: &str| {
        format!(
            r#"{{"candidates":[{{"content":{{"role":"model","parts":[{{"functionCall":{{"partialArgs":[{{"jsonPath":"$.city","stringValue":"Par","willContinue":true}}],"willContinue":true}}}}]}},"finishReason":"{finish}"}}]}}"#
        )
    };
    let cut = gemini(&[open, &piece("MAX_TOKENS")]);
    assert_eq!(calls(&cut), Vec::<&str>::new());
    assert_eq!(cut_calls(&cut), ["open_booking"]);
    assert_eq!(stops(&cut), ["MAX_TOKENS"]);
    // At `STOP` it is as complete as it will be (docs/protocol.md §6.15).
    let whole = gemini(&[open, &piece("STOP")]);
    assert_eq!(calls(&whole), ["open_booking"]);
    assert!(cut_calls(&whole).is_empty() && stops(&whole).is_empty());
}

#[test]
fn chat_the_call_being_written_at_a_finish_but_a_normal_one_is_cut_off() {
    let fragment = |index: u64, id: &str, name: &str, arguments: &str| {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id,
            "type": "function", "function": {"name": name, "arguments": arguments}}]},
            "finish_reason": null}]})
        .to_string()
    };
    let finish = |reason: &str| {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
    };
    let first = fragment(0, "call_a", "show_help", "{}");
    let second = fragment(1, "call_b", "open_booking", "{\"city\": \"Pa");
    for reason in ["length", "content_filter", "insufficient_system_resource"] {
        let chunks = chat(&[&first, &second, &finish(reason)]);
        assert_eq!(calls(&chunks), ["show_help"], "{reason}");
        assert_eq!(cut_calls(&chunks), ["open_booking"], "{reason}");
        assert_eq!(stops(&chunks), [reason]);
    }
    for reason in ["tool_calls", "stop", "eos_token"] {
        let chunks = chat(&[&first, &second, &finish(reason)]);
        assert_eq!(calls(&chunks), ["show_help", "open_booking"], "{reason}");
        assert!(cut_calls(&chunks).is_empty() && stops(&chunks).is_empty());
    }
    // `[DONE]` without a finish reason is a normal end (docs/protocol.md §6.15).
    let chunks = chat(&[&first, "[DONE]"]);
    assert_eq!(calls(&chunks), ["show_help"]);
    assert!(stops(&chunks).is_empty());
}

#[test]
fn responses_an_incomplete_item_is_cut_off_and_an_incomplete_response_named() {
    let item = |status: Option<&str>| {
        let mut item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": "show_help", "arguments": ""});
        if let Some(status) = status {
            item["status"] = json!(status);
        }
        json!({"type": "response.output_item.done", "output_index": 0, "item": item})
    };
    let end = |status: &str, reason: Option<&str>| {
        let details = reason.map_or(Value::Null, |r| json!({"reason": r}));
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        json!({"type": kind, "response": {"id": "resp_1", "status": status,
            "incomplete_details": details, "output": []}})
    };
    let chunks = responses(&[
        item(Some("incomplete")),
        end("incomplete", Some("max_output_tokens")),
    ]);
    assert!(calls(&chunks).is_empty());
    assert_eq!(cut_calls(&chunks), ["show_help"]);
    assert_eq!(stops(&chunks), ["incomplete (max_output_tokens)"]);
    let chunks = responses(&[item(None), end("incomplete", Some("content_filter"))]);
    assert_eq!(
        calls(&chunks),
        ["show_help"],
        "a server that sends no status"
    );
    assert_eq!(stops(&chunks), ["incomplete (content_filter)"]);
    let chunks = responses(&[item(Some("completed")), end("completed", None)]);
    assert_eq!(calls(&chunks), ["show_help"]);
    assert!(cut_calls(&chunks).is_empty() && stops(&chunks).is_empty());
}

#[test]
fn interactions_a_step_still_open_at_the_end_is_cut_off_and_the_status_named() {
    let start = |index: u64, name: &str| {
        json!({"event_type": "step.start", "index": index, "step": {"type": "function_call",
            "id": format!("c{index}"), "name": name, "arguments": {"city": "Paris"}}})
    };
    let completed = |status: &str| {
        json!({"event_type": "interaction.completed",
            "interaction": {"id": "v1_1", "status": status}})
    };
    let chunks = interactions(&[
        start(0, "show_help"),
        json!({"event_type": "step.stop", "index": 0}),
        start(1, "open_booking"),
        completed("incomplete"),
    ]);
    assert_eq!(calls(&chunks), ["show_help"]);
    assert_eq!(cut_calls(&chunks), ["open_booking"]);
    assert_eq!(stops(&chunks), ["incomplete"]);
    for status in ["completed", "requires_action"] {
        let chunks = interactions(&[
            start(0, "show_help"),
            json!({"event_type": "step.stop", "index": 0}),
            completed(status),
        ]);
        assert_eq!(calls(&chunks), ["show_help"]);
        assert!(cut_calls(&chunks).is_empty() && stops(&chunks).is_empty());
    }
}

#[test]
fn a_count_past_the_bound_is_left_out_and_billed_output_never_overflows() {
    let usage = Usage {
        input: Some(12),
        output: Some(u64::MAX - 615),
        reasoning: Some(1000),
        ..Usage::default()
    };
    assert_eq!(usage.billed_output(), Some(u64::MAX));
    let (bounded, over) = usage.bounded();
    assert_eq!(over, Some(("output_tokens", u64::MAX - 615)));
    assert_eq!(bounded.output, None);
    assert_eq!((bounded.input, bounded.reasoning), (Some(12), Some(1000)));
    let (same, over) = Usage {
        input: Some(Usage::MAX_COUNT),
        ..Usage::default()
    }
    .bounded();
    assert_eq!((same.input, over), (Some(Usage::MAX_COUNT), None));
}

//! Writing a scripted reply as each built-in provider's stream events, one [`StreamWriter`] per
//! provider.

use serde_json::{Value, json};

use crate::wire_format::StreamWriter;

/// Anthropic Messages: `message_start`, then one content block per text run, thinking or call
/// (a call's input in two `input_json_delta` fragments), then `message_delta` and `message_stop`.
#[derive(Default)]
pub(super) struct AnthropicWriter {
    started: bool,
    blocks: u64,
    text_open: bool,
    calls: usize,
}

fn anthropic_event(data: &Value) -> String {
    let kind = data["type"].as_str().unwrap_or_default();
    format!("event: {kind}\ndata: {data}\n\n")
}

impl AnthropicWriter {
    /// `message_start` before the first block, and the stop of an open text block when the next
    /// step is not more of its text.
    fn next(&mut self, more_text: bool) -> Vec<String> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(anthropic_event(
                &json!({"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "claude-test", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 1}}}),
            ));
        }
        if self.text_open && !more_text {
            self.text_open = false;
            out.push(self.stop());
        }
        out
    }

    fn start(&mut self, block: &Value) -> String {
        self.blocks += 1;
        anthropic_event(
            &json!({"type": "content_block_start", "index": self.blocks - 1, "content_block": block}),
        )
    }

    fn delta(&self, delta: &Value) -> String {
        anthropic_event(
            &json!({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}),
        )
    }

    fn stop(&self) -> String {
        anthropic_event(&json!({"type": "content_block_stop", "index": self.blocks - 1}))
    }
}

impl StreamWriter for AnthropicWriter {
    fn text(&mut self, text: &str) -> Vec<String> {
        let mut out = self.next(true);
        if !self.text_open {
            self.text_open = true;
            out.push(self.start(&json!({"type": "text", "text": ""})));
        }
        out.push(self.delta(&json!({"type": "text_delta", "text": text})));
        out
    }

    fn thought(&mut self, text: &str) -> Vec<String> {
        let mut out = self.next(false);
        out.push(self.start(&json!({"type": "thinking", "thinking": "", "signature": ""})));
        out.push(self.delta(&json!({"type": "thinking_delta", "thinking": text})));
        out.push(self.delta(&json!({"type": "signature_delta", "signature": "EqQBc2ln"})));
        out.push(self.stop());
        out
    }

    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String> {
        let mut out = self.next(false);
        self.calls += 1;
        out.push(self.start(&json!({"type": "tool_use", "id": id, "name": name, "input": {}})));
        let text = arguments.to_string();
        let mut half = text.len() / 2;
        while !text.is_char_boundary(half) {
            half += 1;
        }
        for piece in [&text[..half], &text[half..]] {
            out.push(self.delta(&json!({"type": "input_json_delta", "partial_json": piece})));
        }
        out.push(self.stop());
        out
    }

    fn finish(&mut self, _malformed: bool, usage: Option<(u64, u64)>) -> Vec<String> {
        let mut out = self.next(false);
        let reason = if self.calls > 0 {
            "tool_use"
        } else {
            "end_turn"
        };
        let usage = usage.map_or_else(
            || json!({"output_tokens": 1}),
            |(i, o)| json!({"input_tokens": i, "output_tokens": o}),
        );
        out.push(anthropic_event(&json!({"type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": usage})));
        out.push(anthropic_event(&json!({"type": "message_stop"})));
        out
    }

    fn error(&mut self, message: &str) -> Vec<String> {
        let mut out = self.next(false);
        out.push(anthropic_event(&json!({"type": "error",
            "error": {"type": "overloaded_error", "message": message}})));
        out
    }

    fn keep_alive(&mut self) -> String {
        "event: ping\ndata: {\"type\": \"ping\"}\n\n".to_owned()
    }
}

/// Gemini Interactions: `interaction.created` and a status update, then one bracketed step per
/// text run, thought or call (a call's arguments in two `arguments_delta` fragments), then
/// `interaction.completed` and `[DONE]`.
#[derive(Default)]
pub(super) struct InteractionsWriter {
    started: bool,
    steps: u64,
    output_open: bool,
}

fn interactions_event(kind: &str, mut data: Value) -> String {
    data["event_type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n")
}

impl InteractionsWriter {
    /// The opening events before the first step, and the stop of an open `model_output` step
    /// when the next step is not more of its words.
    fn next(&mut self, more_text: bool) -> Vec<String> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(interactions_event(
                "interaction.created",
                json!({"interaction": {"id": "", "status": "in_progress", "object": "interaction"}}),
            ));
            out.push(interactions_event(
                "interaction.status_update",
                json!({"interaction_id": "", "status": "in_progress"}),
            ));
        }
        if self.output_open && !more_text {
            self.output_open = false;
            out.push(self.stop());
        }
        out
    }

    fn start(&mut self, step: Value) -> String {
        self.steps += 1;
        interactions_event("step.start", json!({"index": self.steps - 1, "step": step}))
    }

    fn delta(&self, delta: Value) -> String {
        interactions_event(
            "step.delta",
            json!({"index": self.steps - 1, "delta": delta}),
        )
    }

    fn stop(&self) -> String {
        interactions_event("step.stop", json!({"index": self.steps - 1}))
    }
}

impl StreamWriter for InteractionsWriter {
    fn text(&mut self, text: &str) -> Vec<String> {
        let mut out = self.next(true);
        if !self.output_open {
            self.output_open = true;
            out.push(self.start(json!({"type": "model_output"})));
        }
        out.push(self.delta(json!({"text": text, "type": "text"})));
        out
    }

    fn thought(&mut self, text: &str) -> Vec<String> {
        let mut out = self.next(false);
        out.push(self.start(json!({"type": "thought"})));
        out.push(
            self.delta(
                json!({"content": {"text": text, "type": "text"}, "type": "thought_summary"}),
            ),
        );
        out.push(self.delta(json!({"signature": "CiQBc2ln", "type": "thought_signature"})));
        out.push(self.stop());
        out
    }

    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String> {
        let mut out = self.next(false);
        out.push(self.start(
            json!({"id": id, "signature": "", "type": "function_call", "name": name, "arguments": {}}),
        ));
        let text = arguments.to_string();
        let mut half = text.len() / 2;
        while !text.is_char_boundary(half) {
            half += 1;
        }
        for piece in [&text[..half], &text[half..]] {
            out.push(self.delta(json!({"arguments": piece, "type": "arguments_delta"})));
        }
        out.push(self.stop());
        out
    }

    fn finish(&mut self, _malformed: bool, usage: Option<(u64, u64)>) -> Vec<String> {
        let mut out = self.next(false);
        let mut interaction = json!({"id": "", "status": "completed", "object": "interaction"});
        if let Some((i, o)) = usage {
            interaction["usage"] = json!({"total_input_tokens": i, "total_cached_tokens": 0,
                "total_output_tokens": o, "total_thought_tokens": 0, "total_tool_use_tokens": 0,
                "total_tokens": i + o});
        }
        out.push(interactions_event(
            "interaction.completed",
            json!({ "interaction": interaction }),
        ));
        out.push("event: done\ndata: [DONE]\n\n".to_owned());
        out
    }

    fn error(&mut self, message: &str) -> Vec<String> {
        let mut out = self.next(false);
        out.push(interactions_event(
            "error",
            json!({"error": {"code": "service_unavailable", "message": message}}),
        ));
        out
    }

    fn keep_alive(&mut self) -> String {
        interactions_event(
            "interaction.status_update",
            json!({"interaction_id": "", "status": "in_progress"}),
        )
    }
}

/// Gemini: every step is one `data:` chunk of one candidate.
pub(super) struct GeminiWriter;

fn gemini_chunk(parts: Value) -> String {
    let c = json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]});
    format!("data: {c}\r\n\r\n")
}

impl StreamWriter for GeminiWriter {
    fn text(&mut self, text: &str) -> Vec<String> {
        vec![gemini_chunk(json!([{ "text": text }]))]
    }

    fn thought(&mut self, text: &str) -> Vec<String> {
        vec![gemini_chunk(json!([{"text": text, "thought": true}]))]
    }

    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String> {
        vec![gemini_chunk(
            json!([{"functionCall": {"id": id, "name": name, "args": arguments}}]),
        )]
    }

    fn finish(&mut self, malformed: bool, usage: Option<(u64, u64)>) -> Vec<String> {
        let reason = if malformed {
            "MALFORMED_FUNCTION_CALL"
        } else {
            "STOP"
        };
        // Real streams carry the response's id on every chunk; the stand-in on its last.
        let mut c = json!({"candidates": [{"finishReason": reason, "index": 0}],
            "responseId": "stand-in-response"});
        if let Some((input, output)) = usage {
            c["usageMetadata"] = json!({"promptTokenCount": input,
                "candidatesTokenCount": output, "totalTokenCount": input + output});
        }
        vec![format!("data: {c}\r\n\r\n")]
    }

    fn error(&mut self, message: &str) -> Vec<String> {
        let e = json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}});
        vec![format!("data: {e}\r\n\r\n")]
    }

    fn keep_alive(&mut self) -> String {
        "data: {\"candidates\": []}\r\n\r\n".to_owned()
    }
}

/// OpenAI Responses: named events; text deltas belong to a message item, closed by its
/// `response.output_item.done` before the next item, as OpenAI streams it.
#[derive(Default)]
pub(super) struct OpenAiWriter {
    seq: u64,
    calls: usize,
    /// The message whose text deltas are being written (its number and text so far).
    message: Option<(usize, String)>,
    messages: usize,
}

fn openai_event(kind: &str, data: &Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

impl OpenAiWriter {
    /// The next sequence number, and the `done` event of an open message when the next item is
    /// not more of its text.
    fn next(&mut self, more_text: bool) -> (u64, Vec<String>) {
        self.seq += 1;
        let seq = self.seq;
        let mut out = Vec::new();
        if !more_text && let Some((n, text)) = self.message.take() {
            out.push(openai_event(
                "response.output_item.done",
                &json!({"type": "response.output_item.done", "sequence_number": seq, "output_index": 0,
                    "item": {"id": format!("msg_{n}"), "type": "message", "status": "completed",
                        "role": "assistant", "content": [{"type": "output_text", "text": text,
                            "annotations": [], "logprobs": []}]}}),
            ));
        }
        (seq, out)
    }
}

impl StreamWriter for OpenAiWriter {
    fn text(&mut self, text: &str) -> Vec<String> {
        let (seq, mut out) = self.next(true);
        let n = match &mut self.message {
            Some((n, so_far)) => {
                so_far.push_str(text);
                *n
            }
            None => {
                self.messages += 1;
                self.message = Some((self.messages, text.to_owned()));
                self.messages
            }
        };
        out.push(openai_event(
            "response.output_text.delta",
            &json!({"type": "response.output_text.delta", "sequence_number": seq,
                "item_id": format!("msg_{n}"), "output_index": 0, "content_index": 0,
                "delta": text}),
        ));
        out
    }

    fn thought(&mut self, _text: &str) -> Vec<String> {
        let (seq, mut out) = self.next(false);
        out.push(openai_event(
            "response.output_item.done",
            &json!({"type": "response.output_item.done", "sequence_number": seq, "output_index": 0,
                "item": {"id": format!("rs_{seq}"), "type": "reasoning", "summary": [],
                    "encrypted_content": "gAAAAenc", "status": "completed"}}),
        ));
        out
    }

    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String> {
        let (seq, mut out) = self.next(false);
        self.calls += 1;
        out.push(openai_event(
            "response.output_item.done",
            &json!({"type": "response.output_item.done", "sequence_number": seq, "output_index": 1,
                "item": {"id": format!("fc_{}", self.calls), "type": "function_call",
                    "status": "completed", "arguments": arguments.to_string(), "call_id": id,
                    "name": name}}),
        ));
        out
    }

    fn finish(&mut self, _malformed: bool, usage: Option<(u64, u64)>) -> Vec<String> {
        let (seq, mut out) = self.next(false);
        let usage = usage.map_or(Value::Null, |(i, o)| {
            json!({"input_tokens": i, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": o, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": i + o})
        });
        out.push(openai_event(
            "response.completed",
            &json!({"type": "response.completed", "sequence_number": seq,
                "response": {"id": "resp_1", "status": "completed", "output": [], "usage": usage}}),
        ));
        out
    }

    fn error(&mut self, message: &str) -> Vec<String> {
        let (seq, mut out) = self.next(false);
        out.push(openai_event(
            "error",
            &json!({"type": "error", "sequence_number": seq, "code": "server_error",
                "message": message, "param": null}),
        ));
        out
    }

    fn keep_alive(&mut self) -> String {
        "event: keepalive\ndata: {\"type\": \"keepalive\"}\n\n".to_owned()
    }
}

/// Chat completions: `data:` chunks of one choice; calls whole in one fragment each.
#[derive(Default)]
pub(super) struct ChatWriter {
    calls: usize,
}

fn chat_chunk(delta: &Value, finish: &Value) -> String {
    let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

impl StreamWriter for ChatWriter {
    fn text(&mut self, text: &str) -> Vec<String> {
        vec![chat_chunk(&json!({ "content": text }), &Value::Null)]
    }

    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String> {
        let index = self.calls;
        self.calls += 1;
        vec![chat_chunk(
            &json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]}),
            &Value::Null,
        )]
    }

    fn finish(&mut self, _malformed: bool, usage: Option<(u64, u64)>) -> Vec<String> {
        let reason = if self.calls > 0 { "tool_calls" } else { "stop" };
        let mut out = vec![chat_chunk(&json!({}), &json!(reason))];
        if let Some((i, o)) = usage {
            let u = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [], "usage": {"prompt_tokens": i,
                    "completion_tokens": o, "total_tokens": i + o}});
            out.push(format!("data: {u}\n\n"));
        }
        out.push("data: [DONE]\n\n".to_owned());
        out
    }

    fn error(&mut self, message: &str) -> Vec<String> {
        let e = json!({"error": {"message": message, "type": "server_error", "code": 500}});
        vec![format!("data: {e}\n\n")]
    }

    fn keep_alive(&mut self) -> String {
        "data: {\"id\": \"chatcmpl-1\", \"choices\": []}\n\n".to_owned()
    }
}

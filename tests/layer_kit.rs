//! The layer conformance kit (`voqalize_testing::LayerKit`) against the three built-in layers,
//! and against a layer written here, outside the crate, with the public API only: what a team
//! plugging in its own provider writes.

use std::time::Duration;

use serde_json::{Value, json};
use voqalize::model::layer::{
    Call, Chunk, DecodeLimits, Decoder, HttpRequest, Layer, Part, RequestSpec, Role, SseItem,
    StreamError, Timeouts, ToolChoice, Usage, error_message, parse_event,
};
use voqalize::tools::{Arguments, Dialect};
use voqalize_testing::{LayerKit, Provider, ReadBack, Recorded, Said, StreamWriter, WireFormat};

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(5),
    }
}

/// The kit against a built-in layer, named `model`.
async fn built_in(provider: Provider, model: &str) {
    let model = model.to_owned();
    LayerKit::new(provider, move |base| {
        crate::support::layer(provider, base, &model, timeouts())
    })
    .check()
    .await;
}

#[tokio::test]
async fn the_gemini_layer_passes_the_kit() {
    built_in(Provider::Gemini, "gemini-test").await;
}

#[tokio::test]
async fn the_openai_layer_passes_the_kit() {
    built_in(Provider::OpenAi, "gpt-test").await;
}

#[tokio::test]
async fn the_chat_layer_passes_the_kit() {
    built_in(Provider::Chat, "openai/gpt-test").await;
}

#[tokio::test]
async fn the_anthropic_layer_passes_the_kit() {
    built_in(Provider::Anthropic, "claude-test").await;
}

#[tokio::test]
async fn the_interactions_layer_passes_the_kit() {
    built_in(Provider::Interactions, "gemini-test").await;
}

// ---- Acme: a provider the SDK does not know, its layer and its stand-in written here ----
//
// Request: `POST {base}/stream` with `{"model", "system", "tools": [{"name", "description",
// "parameters"}], "tool_choice", "messages": [{"role": "user"|"model", "text"} | {"role":
// "model", "call": {"id", "name", "args"}} | {"role": "tool", "id", "output"}]}`.
// Stream: `data:` events `{"type": "text"|"thinking", "text"}`, `{"type": "call", "id", "name",
// "args"}`, `{"type": "error", "message"}`, ended by `{"type": "done", "usage": {"in", "out"}}`.

struct Acme {
    url: String,
    /// A bug on purpose: results are left out of the request.
    forget_results: bool,
}

impl Layer for Acme {
    fn provider(&self) -> &str {
        "acme"
    }

    fn model(&self) -> &str {
        "acme-voice-1"
    }

    fn base_url(&self) -> &str {
        &self.url
    }

    fn timeouts(&self) -> Timeouts {
        timeouts()
    }

    fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError> {
        let mut messages = Vec::new();
        for entry in spec.history {
            for part in &entry.parts {
                let message = match (entry.role, part) {
                    (Role::Model, Part::Text { text, .. }) if !text.is_empty() => {
                        json!({"role": "model", "text": text})
                    }
                    (Role::Model, Part::Call { call, .. }) => {
                        let args = match &call.arguments {
                            Arguments::Json(v) => v.clone(),
                            Arguments::Raw(s) => serde_json::from_str(s).unwrap_or(json!({})),
                        };
                        json!({"role": "model", "call": {"id": call.id, "name": call.name, "args": args}})
                    }
                    (Role::Results, Part::Result(r)) if !self.forget_results => {
                        json!({"role": "tool", "id": r.call_id, "output": r.response.to_string()})
                    }
                    (Role::User, Part::Text { text, .. }) => json!({"role": "user", "text": text}),
                    _ => continue,
                };
                messages.push(message);
            }
        }
        if let Some(note) = spec.note {
            messages.push(json!({"role": "user", "text": note}));
        }
        let tools: Vec<Value> = spec
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name(), "description": t.description(),
                    "parameters": t.parameters(Dialect::OpenAi)})
            })
            .collect();
        let choice = match spec.choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Only(name) if spec.tools.contains(name) => json!({"only": name}),
            ToolChoice::Only(name) => {
                return Err(StreamError::unbuildable(
                    "acme",
                    format!("no tool {name:?}"),
                ));
            }
        };
        let body = json!({"model": self.model(), "system": spec.instruction, "tools": tools,
            "tool_choice": choice, "messages": messages});
        let headers = vec![("authorization".to_owned(), "Bearer acme-key".to_owned())];
        Ok(HttpRequest::json(
            format!("{}/stream", self.url),
            headers,
            &body,
        ))
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(AcmeDecoder {
            limits,
            done: false,
        })
    }
}

struct AcmeDecoder {
    limits: DecodeLimits,
    done: bool,
}

impl Decoder for AcmeDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        let SseItem::Event(event) = item else {
            return Err(StreamError::malformed(
                "acme",
                "a bare body where events belong",
            ));
        };
        let Some(data) = parse_event("acme", &event.data, self.limits.max_kept_bytes)? else {
            return Ok(vec![Chunk::cut()]);
        };
        let text = || data["text"].as_str().unwrap_or_default().to_owned();
        let parts = match data["type"].as_str() {
            Some("text") => vec![Part::text(text())],
            Some("thinking") => vec![Part::Thought { raw: data.clone() }],
            Some("call") => {
                let call = Call::new(
                    data["id"].as_str().map(str::to_owned),
                    data["name"].as_str().unwrap_or_default(),
                    Arguments::Json(data["args"].clone()),
                );
                vec![Part::Call {
                    call,
                    raw: Value::Null,
                }]
            }
            Some("error") => return Err(StreamError::provider("acme", error_message(&data))),
            Some("done") => {
                self.done = true;
                let mut usage = Usage::default();
                usage.input = data["usage"]["in"].as_u64();
                usage.output = data["usage"]["out"].as_u64();
                return Ok(vec![Chunk::new(Vec::new()).ending(false).with_usage(usage)]);
            }
            _ => Vec::new(),
        };
        Ok(vec![Chunk::new(parts)])
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(StreamError::truncated("acme", "done event"))
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

/// The stand-in speaking Acme.
struct AcmeWire;

struct AcmeWriter;

fn acme(event: Value) -> Vec<String> {
    vec![format!("data: {event}\n\n")]
}

impl StreamWriter for AcmeWriter {
    fn text(&mut self, text: &str) -> Vec<String> {
        acme(json!({"type": "text", "text": text}))
    }

    fn thought(&mut self, text: &str) -> Vec<String> {
        acme(json!({"type": "thinking", "text": text}))
    }

    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String> {
        acme(json!({"type": "call", "id": id, "name": name, "args": arguments}))
    }

    fn finish(&mut self, _malformed: bool, usage: Option<(u64, u64)>) -> Vec<String> {
        let usage = usage.map(|(i, o)| json!({"in": i, "out": o}));
        acme(json!({"type": "done", "usage": usage}))
    }

    fn error(&mut self, message: &str) -> Vec<String> {
        acme(json!({"type": "error", "message": message}))
    }

    fn keep_alive(&mut self) -> String {
        "data: {\"type\": \"ping\"}\n\n".to_owned()
    }
}

impl WireFormat for AcmeWire {
    fn writer(&self) -> Box<dyn StreamWriter> {
        Box::new(AcmeWriter)
    }

    fn error_body(&self, message: &str) -> Value {
        json!({"message": message, "type": "invalid_request"})
    }

    fn read(&self, request: &Recorded) -> ReadBack {
        let body = &request.body;
        let mut back = ReadBack {
            instruction: body["system"].as_str().map(str::to_owned),
            tools: body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect(),
            said: Vec::new(),
        };
        for m in body["messages"].as_array().into_iter().flatten() {
            let text = || m["text"].as_str().unwrap_or_default().to_owned();
            back.said.push(match (m["role"].as_str(), m.get("call")) {
                (Some("model"), Some(call)) => Said::Call {
                    id: call["id"].as_str().map(str::to_owned),
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: call["args"].clone(),
                },
                (Some("model"), None) => Said::Model(text()),
                (Some("tool"), _) => Said::Result {
                    id: m["id"].as_str().map(str::to_owned),
                    output: m["output"].as_str().unwrap_or_default().to_owned(),
                },
                _ => Said::User(text()),
            });
        }
        back
    }
}

#[tokio::test]
async fn a_layer_written_outside_the_crate_passes_the_kit() {
    LayerKit::new(AcmeWire, |base| Acme {
        url: base.to_owned(),
        forget_results: false,
    })
    .check()
    .await;
}

/// The kit can fail: a layer that leaves results out of its requests fails exactly the cases
/// that read a request after a call was answered.
#[tokio::test]
async fn a_layer_that_forgets_results_fails_the_kit_where_it_should() {
    let report = LayerKit::new(AcmeWire, |base| Acme {
        url: base.to_owned(),
        forget_results: true,
    })
    .run()
    .await;
    let failed: Vec<&str> = report.failed.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        failed,
        [
            "calls_mid_stream",
            "result_read_at_once",
            "cancelled_call_is_answered"
        ],
        "{report:?}"
    );
    assert!(
        report.failed[0].1.contains("result: opened"),
        "the failure says what was missing: {}",
        report.failed[0].1
    );
    assert_eq!(report.passed.len(), 8);
}

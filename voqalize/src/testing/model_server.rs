//! [`ModelServer`]: a stand-in for a model provider on 127.0.0.1 that streams scripted replies in
//! the provider's own SSE format, can pause mid-stream, and records every request. It misbehaves
//! on request too, as a broken or hostile provider would: raw bytes of any size
//! ([`Reply::raw`]), thousands of calls or deltas (repeat a step), an error body of any size
//! ([`Reply::status`]), a stream that stalls ([`Reply::hang`]) or that sends keep-alives forever
//! and never ends ([`Reply::keep_alive`]). Test a model-backed brain end to end without the
//! network:
//!
//! ```no_run
//! use voqalize::testing::{ModelServer, Provider, Reply};
//! # async fn run() -> std::io::Result<()> {
//! let server = ModelServer::start(Provider::Gemini).await?;
//! server.reply(Reply::new().text("Opening").call("show_help", serde_json::json!({})).finish());
//! // Gemini::builder("test-key").base_url(server.base_url()) ... then drive a session.
//! let bodies = server.requests(); // every request body, as JSON
//! # let _ = bodies; Ok(()) }
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::recover::lock;

/// Which provider's wire format the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Gemini `streamGenerateContent?alt=sse`: `data:` chunks of candidates, ended by a
    /// `finishReason`.
    Gemini,
    /// OpenAI Responses: named events, ended by `response.completed`.
    OpenAi,
    /// Chat completions: `data:` chunks of choices, ended by `finish_reason` and `[DONE]`.
    Chat,
}

/// A point in a scripted stream where the server stops writing until the test releases it (to
/// barge in while text or a tool is in flight).
#[derive(Debug, Clone)]
pub struct Gate {
    reached: watch::Sender<bool>,
    released: watch::Sender<bool>,
}

impl Gate {
    fn new() -> Self {
        Gate {
            reached: watch::channel(false).0,
            released: watch::channel(false).0,
        }
    }

    /// Completes once the stream has reached this gate (everything before it was written).
    pub async fn reached(&self) {
        let mut rx = self.reached.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Lets the stream go on.
    pub fn release(&self) {
        self.released.send_replace(true);
    }
}

#[derive(Debug, Clone)]
enum Step {
    Text(String),
    Thought(String),
    Call { name: String, args: Value },
    Finish { reason: &'static str },
    Raw(String),
    Pause(Gate),
}

/// One scripted response, built step by step in the provider-neutral notation of the tests
/// (text, call, finish, usage) and written in the provider's format. A reply without
/// [`finish`](Self::finish) ends without the provider's terminal event.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    steps: Vec<Step>,
    usage: Option<(u64, u64)>,
    status: Option<(u16, String)>,
    hang: bool,
    keep_alive: Option<Duration>,
}

impl Reply {
    /// An empty reply.
    pub fn new() -> Reply {
        Reply::default()
    }

    /// An HTTP error answer instead of a stream: `status` with `body` (the provider's error JSON).
    pub fn status(status: u16, body: Value) -> Reply {
        Reply {
            status: Some((status, body.to_string())),
            ..Reply::default()
        }
    }

    /// A text piece, in its own event.
    #[must_use]
    pub fn text(mut self, text: &str) -> Reply {
        self.steps.push(Step::Text(text.to_owned()));
        self
    }

    /// A reasoning part (Gemini `thought: true`, an OpenAI reasoning item); chat has none and
    /// writes nothing.
    #[must_use]
    pub fn thought(mut self, text: &str) -> Reply {
        self.steps.push(Step::Thought(text.to_owned()));
        self
    }

    /// A complete function call (ids `call_1`, `call_2`... in reply order).
    #[must_use]
    pub fn call(mut self, name: &str, args: Value) -> Reply {
        self.steps.push(Step::Call {
            name: name.to_owned(),
            args,
        });
        self
    }

    /// The provider's terminal event (a normal stop).
    #[must_use]
    pub fn finish(mut self) -> Reply {
        self.steps.push(Step::Finish { reason: "STOP" });
        self
    }

    /// Gemini's `MALFORMED_FUNCTION_CALL` finish (other providers: a normal finish).
    #[must_use]
    pub fn malformed(mut self) -> Reply {
        self.steps.push(Step::Finish {
            reason: "MALFORMED_FUNCTION_CALL",
        });
        self
    }

    /// Usage the terminal event reports: prompt and output tokens.
    #[must_use]
    pub fn usage(mut self, input: u64, output: u64) -> Reply {
        self.usage = Some((input, output));
        self
    }

    /// Bytes written as they are (a malformed event, a bare JSON body...).
    #[must_use]
    pub fn raw(mut self, bytes: &str) -> Reply {
        self.steps.push(Step::Raw(bytes.to_owned()));
        self
    }

    /// Pauses the stream here until the returned gate is released.
    #[must_use]
    pub fn pause(mut self) -> (Reply, Gate) {
        let gate = Gate::new();
        self.steps.push(Step::Pause(gate.clone()));
        (self, gate)
    }

    /// After the steps, keeps the connection open without writing (a stalled stream).
    #[must_use]
    pub fn hang(mut self) -> Reply {
        self.hang = true;
        self
    }

    /// After the steps, writes a keep-alive every `every` until the client goes away, and never
    /// the terminal event: a stream that never stalls and never ends. The keep-alive is an event
    /// the client reads and the layer ignores (Gemini: a chunk without candidates; OpenAI: an
    /// event of a type it does not know; chat: a chunk without choices), so no gap timer ever
    /// fires on it.
    #[must_use]
    pub fn keep_alive(mut self, every: Duration) -> Reply {
        self.keep_alive = Some(every);
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Path and query, such as `/v1/models/m:streamGenerateContent?alt=sse`.
    pub target: String,
    /// Request headers, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body, parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
}

impl Recorded {
    /// The first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Shared {
    provider: Provider,
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    seen: watch::Sender<usize>,
}

/// The stand-in provider. Dropping it stops the server.
pub struct ModelServer {
    base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("provider", &self.shared.provider)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl ModelServer {
    /// Starts a server on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// The port could not be bound.
    pub async fn start(provider: Provider) -> std::io::Result<ModelServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            provider,
            replies: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            seen: watch::channel(0).0,
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        // Small SSE events go out at once: Nagle's algorithm against the client's delayed ACK
        // would hold each one back ~40 ms.
        let listener = listener.tap_io(|tcp| drop(tcp.set_nodelay(true)));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let base_url = match provider {
            Provider::Gemini => format!("http://{addr}"),
            Provider::OpenAi | Provider::Chat => format!("http://{addr}/v1"),
        };
        Ok(ModelServer {
            base_url,
            shared,
            task,
        })
    }

    /// The base URL to give the layer (`http://127.0.0.1:<port>`, with `/v1` for OpenAI and chat).
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// Queues the reply to the next request (replies are used in order, one per request; a
    /// request with none queued gets a 500).
    pub fn reply(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// Waits until `n` requests have arrived (5 s at most); true if they did.
    pub async fn wait_requests(&self, n: usize) -> bool {
        let mut rx = self.shared.seen.subscribe();
        tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| *s >= n))
            .await
            .is_ok()
    }
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), ToString::to_string);
    let headers = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if target.starts_with("/v1/responses")
        || target.contains("streamGenerateContent")
        || target.contains("/chat/completions")
    {
        lock(&shared.requests).push(Recorded {
            target,
            headers,
            body,
        });
        shared.seen.send_modify(|n| *n += 1);
    } else {
        // A warm-up (HEAD on the base URL) or anything else: answered, not recorded.
        return StatusCode::NOT_FOUND.into_response();
    }
    let Some(reply) = lock(&shared.replies).pop_front() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no scripted reply").into_response();
    };
    if let Some((status, body)) = reply.status {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, [("content-type", "application/json")], body).into_response();
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    let provider = shared.provider;
    tokio::spawn(async move {
        let mut writer = Writer::new(provider, reply.usage);
        for step in reply.steps {
            if let Step::Pause(gate) = &step {
                gate.reached.send_replace(true);
                let mut rx = gate.released.subscribe();
                let _ = rx.wait_for(|r| *r).await;
                continue;
            }
            for event in writer.render(&step) {
                if tx.send(Ok(Bytes::from(event))).await.is_err() {
                    return; // the client went away (a barge-in dropped the stream)
                }
            }
        }
        if let Some(every) = reply.keep_alive {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                if tx.send(Ok(Bytes::from(writer.keep_alive()))).await.is_err() {
                    return;
                }
            }
        }
        if reply.hang {
            tx.closed().await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Writes neutral steps in one provider's format, keeping the little state each format needs.
struct Writer {
    provider: Provider,
    usage: Option<(u64, u64)>,
    calls: usize,
    seq: u64,
    /// Responses: the message whose text deltas are being written (its number and text so far),
    /// closed by its `response.output_item.done` before the next item, as OpenAI streams it.
    message: Option<(usize, String)>,
    messages: usize,
}

impl Writer {
    fn new(provider: Provider, usage: Option<(u64, u64)>) -> Self {
        Writer {
            provider,
            usage,
            calls: 0,
            seq: 0,
            message: None,
            messages: 0,
        }
    }

    fn render(&mut self, step: &Step) -> Vec<String> {
        self.seq += 1;
        match self.provider {
            Provider::Gemini => self.gemini(step),
            Provider::OpenAi => self.openai(step),
            Provider::Chat => self.chat(step),
        }
    }

    /// One event the layer reads and ignores.
    fn keep_alive(&self) -> &'static str {
        match self.provider {
            Provider::Gemini => "data: {\"candidates\": []}\r\n\r\n",
            Provider::OpenAi => "event: keepalive\ndata: {\"type\": \"keepalive\"}\n\n",
            Provider::Chat => "data: {\"id\": \"chatcmpl-1\", \"choices\": []}\n\n",
        }
    }

    fn next_call_id(&mut self) -> String {
        self.calls += 1;
        format!("call_{}", self.calls)
    }

    fn gemini(&mut self, step: &Step) -> Vec<String> {
        let chunk = |parts: Value| json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]});
        let data = match step {
            Step::Text(t) => chunk(json!([{"text": t}])),
            Step::Thought(t) => chunk(json!([{"text": t, "thought": true}])),
            Step::Call { name, args } => {
                let id = self.next_call_id();
                chunk(json!([{"functionCall": {"id": id, "name": name, "args": args}}]))
            }
            Step::Finish { reason } => {
                let mut c = json!({"candidates": [{"finishReason": reason, "index": 0}]});
                if let Some((input, output)) = self.usage {
                    c["usageMetadata"] = json!({"promptTokenCount": input,
                        "candidatesTokenCount": output, "totalTokenCount": input + output});
                }
                c
            }
            Step::Raw(raw) => return vec![raw.clone()],
            Step::Pause(_) => return Vec::new(),
        };
        vec![format!("data: {data}\r\n\r\n")]
    }

    fn openai(&mut self, step: &Step) -> Vec<String> {
        let seq = self.seq;
        let event = |kind: &str, data: Value| format!("event: {kind}\ndata: {data}\n\n");
        if matches!(
            step,
            Step::Thought(_) | Step::Call { .. } | Step::Finish { .. }
        ) && let Some((n, text)) = self.message.take()
        {
            let done = event(
                "response.output_item.done",
                json!({"type": "response.output_item.done", "sequence_number": seq, "output_index": 0,
                    "item": {"id": format!("msg_{n}"), "type": "message", "status": "completed",
                        "role": "assistant", "content": [{"type": "output_text", "text": text,
                            "annotations": [], "logprobs": []}]}}),
            );
            let mut out = vec![done];
            out.extend(self.openai(step));
            return out;
        }
        match step {
            Step::Text(t) => {
                let n = match &mut self.message {
                    Some((n, text)) => {
                        text.push_str(t);
                        *n
                    }
                    None => {
                        self.messages += 1;
                        self.message = Some((self.messages, t.clone()));
                        self.messages
                    }
                };
                vec![event(
                    "response.output_text.delta",
                    json!({"type": "response.output_text.delta", "sequence_number": seq,
                        "item_id": format!("msg_{n}"), "output_index": 0, "content_index": 0,
                        "delta": t}),
                )]
            }
            Step::Thought(_) => vec![event(
                "response.output_item.done",
                json!({"type": "response.output_item.done", "sequence_number": seq, "output_index": 0,
                    "item": {"id": format!("rs_{seq}"), "type": "reasoning", "summary": [],
                        "encrypted_content": "gAAAAenc", "status": "completed"}}),
            )],
            Step::Call { name, args } => {
                let id = self.next_call_id();
                vec![event(
                    "response.output_item.done",
                    json!({"type": "response.output_item.done", "sequence_number": seq, "output_index": 1,
                        "item": {"id": format!("fc_{}", self.calls), "type": "function_call",
                            "status": "completed", "arguments": args.to_string(), "call_id": id,
                            "name": name}}),
                )]
            }
            Step::Finish { .. } => {
                let usage = self.usage.map_or(Value::Null, |(i, o)| {
                    json!({"input_tokens": i, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": o, "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": i + o})
                });
                vec![event(
                    "response.completed",
                    json!({"type": "response.completed", "sequence_number": seq,
                        "response": {"id": "resp_1", "status": "completed", "output": [], "usage": usage}}),
                )]
            }
            Step::Raw(raw) => vec![raw.clone()],
            Step::Pause(_) => Vec::new(),
        }
    }

    fn chat(&mut self, step: &Step) -> Vec<String> {
        let chunk = |delta: Value, finish: Value| {
            let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {c}\n\n")
        };
        match step {
            Step::Text(t) => vec![chunk(json!({"content": t}), Value::Null)],
            Step::Thought(_) | Step::Pause(_) => Vec::new(),
            Step::Call { name, args } => {
                let id = self.next_call_id();
                let index = self.calls - 1;
                vec![chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}),
                    Value::Null,
                )]
            }
            Step::Finish { .. } => {
                let reason = if self.calls > 0 { "tool_calls" } else { "stop" };
                let mut out = vec![chunk(json!({}), json!(reason))];
                if let Some((i, o)) = self.usage {
                    let u = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                        "model": "m", "choices": [], "usage": {"prompt_tokens": i,
                            "completion_tokens": o, "total_tokens": i + o}});
                    out.push(format!("data: {u}\n\n"));
                }
                out.push("data: [DONE]\n\n".to_owned());
                out
            }
            Step::Raw(raw) => vec![raw.clone()],
        }
    }
}

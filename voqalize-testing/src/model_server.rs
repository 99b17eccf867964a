//! [`ModelServer`]: a stand-in for a model provider on 127.0.0.1 that streams scripted replies in
//! the provider's own SSE format, can pause mid-stream, and records every request. It misbehaves
//! on request too, as a broken or hostile provider would: raw bytes of any size
//! ([`Reply::raw`]), thousands of calls or deltas (repeat a step), an error body of any size
//! ([`Reply::status`]), a stream that stalls ([`Reply::hang`]) or that sends keep-alives forever
//! and never ends ([`Reply::keep_alive`]). Test a model-backed brain end to end without the
//! network:
//!
//! ```no_run
//! use voqalize_testing::{ModelServer, Provider, Reply};
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
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::formats::Provider;
use crate::lock;
use crate::wire_format::{ReadBack, Recorded, StreamWriter, WireFormat};

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
    Call {
        id: String,
        name: String,
        args: Value,
    },
    Finish {
        malformed: bool,
    },
    Error(String),
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
    status: Option<(u16, ErrorBody)>,
    hang: bool,
    keep_alive: Option<Duration>,
    headers: Vec<(String, String)>,
}

impl Reply {
    /// An empty reply.
    pub fn new() -> Reply {
        Reply::default()
    }

    /// An HTTP error answer instead of a stream: `status` with `body` (the provider's error JSON).
    pub fn status(status: u16, body: Value) -> Reply {
        Reply {
            status: Some((status, ErrorBody::Given(body.to_string()))),
            ..Reply::default()
        }
    }

    /// An HTTP error answer instead of a stream: `status` with the provider's own error body
    /// saying `message` ([`WireFormat::error_body`]).
    pub fn error_status(status: u16, message: &str) -> Reply {
        Reply {
            status: Some((status, ErrorBody::Message(message.to_owned()))),
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
        let n = 1 + self
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Call { .. }))
            .count();
        self.steps.push(Step::Call {
            id: format!("call_{n}"),
            name: name.to_owned(),
            args,
        });
        self
    }

    /// The provider's terminal event (a normal stop).
    #[must_use]
    pub fn finish(mut self) -> Reply {
        self.steps.push(Step::Finish { malformed: false });
        self
    }

    /// Gemini's `MALFORMED_FUNCTION_CALL` finish (other providers: a normal finish).
    #[must_use]
    pub fn malformed(mut self) -> Reply {
        self.steps.push(Step::Finish { malformed: true });
        self
    }

    /// An error event inside the stream, as the provider sends one ([`StreamWriter::error`]).
    #[must_use]
    pub fn error(mut self, message: &str) -> Reply {
        self.steps.push(Step::Error(message.to_owned()));
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

    /// Sends the header `name: value` with the answer (a stream or an error status): a
    /// `Retry-After` on a 429 or a 529, a request id.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
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

/// The body of an HTTP error answer.
#[derive(Debug, Clone)]
enum ErrorBody {
    /// Sent as given.
    Given(String),
    /// Rendered by the wire format.
    Message(String),
}

struct Shared {
    format: Arc<dyn WireFormat>,
    name: String,
    replies: Mutex<VecDeque<Reply>>,
    /// What answers a request when no reply is queued ([`ModelServer::answer_with`]).
    answerer: Mutex<Option<Arc<Answerer>>>,
    requests: Mutex<Vec<Recorded>>,
    seen: watch::Sender<usize>,
    /// Streams whose client went away before the reply was over.
    hung_up: watch::Sender<usize>,
}

/// A function that answers a request read back in neutral terms.
type Answerer = dyn Fn(&ReadBack) -> Reply + Send + Sync;

/// The stand-in provider. Dropping it stops the server: it takes no new connection, closes its
/// idle ones and frees its port; a reply still streaming runs to its end.
pub struct ModelServer {
    base_url: String,
    shared: Arc<Shared>,
    /// Tells the server to stop: no new connection, idle ones closed, the port freed.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        // A graceful shutdown, not an abort: aborting the accept loop would leave its
        // connections served by this server's replies, and a pooled connection to this port
        // would then answer a later server that happens to bind the same port.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("format", &self.shared.name)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl ModelServer {
    /// Starts a server speaking a built-in provider's format on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// The port could not be bound.
    pub async fn start(provider: Provider) -> std::io::Result<ModelServer> {
        Self::serve(Arc::new(provider), format!("{provider:?}")).await
    }

    /// Starts a server speaking `format` (a layer of your own) on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// The port could not be bound.
    pub async fn start_with<F: WireFormat>(format: F) -> std::io::Result<ModelServer> {
        Self::serve(Arc::new(format), std::any::type_name::<F>().to_owned()).await
    }

    pub(crate) async fn serve(
        format: Arc<dyn WireFormat>,
        name: String,
    ) -> std::io::Result<ModelServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let base_url = format!("http://{addr}{}", format.base_path());
        let shared = Arc::new(Shared {
            format,
            name,
            replies: Mutex::new(VecDeque::new()),
            answerer: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            seen: watch::channel(0).0,
            hung_up: watch::channel(0).0,
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        // Small SSE events go out at once: Nagle's algorithm against the client's delayed ACK
        // would hold each one back ~40 ms.
        let listener = listener.tap_io(|tcp| drop(tcp.set_nodelay(true)));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(ModelServer {
            base_url,
            shared,
            stop: Some(stop),
        })
    }

    /// The base URL to give the layer (`http://127.0.0.1:<port>` and the format's
    /// [`base_path`](WireFormat::base_path): `/v1` for OpenAI and chat).
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// Queues the reply to the next request (replies are used in order, one per request; a
    /// request with none queued gets a 500).
    pub fn reply(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Answers every request that finds no reply queued with `answer`'s reply to it, read back
    /// in neutral terms (the conversation, the tools declared): a stand-in that plays a model by
    /// rules of your own, for a demo or a test whose number of requests is not known in advance.
    /// Queued replies still come first. A request that finds neither gets a 500.
    pub fn answer_with(&self, answer: impl Fn(&ReadBack) -> Reply + Send + Sync + 'static) {
        *lock(&self.shared.answerer) = Some(Arc::new(answer));
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// Request `i` (0 first) read back in neutral terms by the server's format
    /// ([`WireFormat::read`]); `None` before it arrived.
    pub fn read_back(&self, i: usize) -> Option<ReadBack> {
        let request = lock(&self.shared.requests).get(i).cloned()?;
        Some(self.shared.format.read(&request))
    }

    /// How many streamed replies the client went away from before they were over (a barge-in,
    /// a hedged request cancelled, a stream the client stopped reading): seen when the server
    /// next writes, or at once for a reply that [`hang`](Reply::hang)s.
    pub fn hung_up(&self) -> usize {
        *self.shared.hung_up.borrow()
    }

    /// Waits until the client went away from `n` streamed replies (5 s at most); true if it did.
    pub async fn wait_hung_up(&self, n: usize) -> bool {
        let mut rx = self.shared.hung_up.subscribe();
        tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| *s >= n))
            .await
            .is_ok()
    }

    /// Waits until `n` requests have arrived (5 s at most); true if they did.
    pub async fn wait_requests(&self, n: usize) -> bool {
        let mut rx = self.shared.seen.subscribe();
        tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| *s >= n))
            .await
            .is_ok()
    }
}

/// The reply to the request just recorded: the next one queued, else what the answerer (if any)
/// makes of the request read back.
/// The reply to `request`: the next one queued, else the answerer's to this very request (not
/// the last one recorded, which under concurrent calls may be another call's).
fn next_reply(shared: &Shared, request: &Recorded) -> Option<Reply> {
    if let Some(reply) = lock(&shared.replies).pop_front() {
        return Some(reply);
    }
    let answerer = lock(&shared.answerer).clone()?;
    Some(answerer(&shared.format.read(request)))
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        // A warm-up (HEAD on the base URL) or anything else: answered, not recorded.
        return StatusCode::NOT_FOUND.into_response();
    }
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
    let request = Recorded {
        target,
        headers,
        body,
    };
    lock(&shared.requests).push(request.clone());
    shared.seen.send_modify(|n| *n += 1);
    let Some(reply) = next_reply(&shared, &request) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no scripted reply").into_response();
    };
    let extra = reply.headers.clone();
    let mut response = match reply.status.clone() {
        Some((status, body)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = match body {
                ErrorBody::Given(body) => body,
                ErrorBody::Message(m) => shared.format.error_body(&m).to_string(),
            };
            (status, [("content-type", "application/json")], body).into_response()
        }
        None => stream_reply(reply, shared.format.writer(), shared.hung_up.clone()),
    };
    for (name, value) in extra {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(name.as_bytes()),
            axum::http::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// The response streaming `reply`'s steps as `writer` writes them, from a task of its own: it
/// waits at each gate, then keeps the stream alive or hanging when the reply says so, and stops
/// when the client goes away.
fn stream_reply(
    reply: Reply,
    mut writer: Box<dyn StreamWriter>,
    hung_up: watch::Sender<usize>,
) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    let gone = move || hung_up.send_modify(|n| *n += 1);
    tokio::spawn(async move {
        for step in reply.steps {
            let events = match &step {
                Step::Pause(gate) => {
                    gate.reached.send_replace(true);
                    let mut rx = gate.released.subscribe();
                    let _ = rx.wait_for(|r| *r).await;
                    continue;
                }
                Step::Text(t) => writer.text(t),
                Step::Thought(t) => writer.thought(t),
                Step::Call { id, name, args } => writer.call(id, name, args),
                Step::Finish { malformed } => writer.finish(*malformed, reply.usage),
                Step::Error(message) => writer.error(message),
                Step::Raw(raw) => vec![raw.clone()],
            };
            for event in events {
                if tx.send(Ok(Bytes::from(event))).await.is_err() {
                    gone();
                    return; // the client went away (a barge-in dropped the stream)
                }
            }
        }
        if let Some(every) = reply.keep_alive {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                if tx.send(Ok(Bytes::from(writer.keep_alive()))).await.is_err() {
                    gone();
                    return;
                }
            }
        }
        if reply.hang {
            tx.closed().await;
            gone();
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

//! The transport under the model layers: one pooled HTTP/1.1 client per process, a streamed POST
//! read as server-sent events, three timers and one retry before the first byte.
//!
//! * **HTTP/1.1 only.** hyper puts every request to a host on one HTTP/2 connection and opens no
//!   second one when the server's concurrent-stream cap is reached, so one call's voice turn could
//!   queue behind another call's stream. Over HTTP/1.1 the pool opens one connection per
//!   concurrent stream instead.
//! * **Timers, never a whole-body timeout** (a reply streams for as long as the model speaks):
//!   connect ([`Timeouts::connect`]), first byte ([`Timeouts::first_byte`]: the response head and
//!   the first item) and the gap between items ([`Timeouts::gap`]). What bounds a whole turn is
//!   the voice core's deadline, which drops the stream.
//! * **A byte bound per response**: the body bytes a stream reads are counted where they are
//!   read, and past the caller's bound the stream ends with [`ModelError::ResponseTooLarge`].
//! * **One retry, before the first byte only**: a 429 that is not a quota error, a 5xx, a connect
//!   failure, or a pooled connection the server had closed. Once an item was handed on, nothing is
//!   retried: the model layer has already spoken it.
//! * **TLS**: rustls with the ring provider (aws-lc-rs builds far slower) and the platform's
//!   certificate verifier (`rustls-platform-verifier`, which reqwest already depends on).

use std::collections::HashMap;
use std::error::Error as StdError;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use rustls_platform_verifier::BuilderVerifierExt;
use tokio::time::{Instant, Sleep, sleep, sleep_until, timeout, timeout_at};

use super::http_options::HttpOptions;
use super::sse::{DEFAULT_MAX_EVENT_BYTES, SseError, SseItem, SseParser};
use crate::logline::outside;
use crate::recover::lock;

/// How much of an error response's body is kept in [`ModelError::Status`], in bytes (2 KiB): enough
/// for the provider's JSON error, bounded whatever the server sends.
const ERROR_BODY_BYTES: usize = 2048;
/// The longest `Retry-After` honoured before the first byte (2 s): a voice turn cannot wait longer,
/// so a server asking for more gets the error instead of a retry.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(2);
/// The wait before the one retry when the server names none (200 ms).
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// [`warm`] sends at most one request per base URL in this span (30 s).
const WARM_EVERY: Duration = Duration::from_secs(30);
/// How long [`warm`] waits for the answer to its `HEAD` once connected (5 s).
const WARM_ANSWER: Duration = Duration::from_secs(5);
/// The most clients kept (one per distinct connect timeout; a process configures a handful). A
/// timeout past this many gets a client of its own that is not shared.
const MAX_CLIENTS: usize = 8;
/// The most base URLs [`warm`] remembers; entries older than [`WARM_EVERY`] are pruned when full.
const MAX_WARM_URLS: usize = 256;
/// Response headers that carry the provider's request id, first match wins.
const REQUEST_ID_HEADERS: [&str; 3] = ["x-request-id", "x-goog-request-id", "request-id"];
/// The longest request id kept, in bytes.
const MAX_REQUEST_ID_BYTES: usize = 128;

/// One streamed request to a model API: always a `POST`, whose answer is read as server-sent
/// events (or a bare JSON body) by the transport, with its timers, byte bound and one retry
/// before the first byte. A [`Layer`](super::layer::Layer) builds one per model request. Its
/// `Debug` leaves out the values of headers that carry credentials.
#[derive(Clone)]
pub struct HttpRequest {
    /// The full URL, e.g. `https://generativelanguage.googleapis.com/v1/models/m:streamGenerateContent?alt=sse`.
    pub(crate) url: String,
    /// `url` as the layer's endpoint parsed it once, when it made the request; `None` for a
    /// request a layer of your own made (parsed as it is sent).
    pub(crate) parsed: Option<reqwest::Url>,
    /// Request headers (`content-type`, the API key…), sent as given; shared with the layer's
    /// endpoint when no header is made per request.
    pub(crate) headers: Arc<[(String, String)]>,
    /// The body; a `Bytes` so the retry resends it without a copy.
    pub(crate) body: Bytes,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| {
                let secret = ["authorization", "x-api-key", "api-key", "x-goog-api-key"]
                    .iter()
                    .any(|s| k.eq_ignore_ascii_case(s));
                (k.as_str(), if secret { "<redacted>" } else { v.as_str() })
            })
            .collect();
        f.debug_struct("HttpRequest")
            .field("url", &self.url)
            .field("headers", &headers)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

impl HttpRequest {
    /// A `POST` of `body` to `url` with `headers` (names and values as sent; a header the HTTP
    /// client cannot send fails the request with a transport error, so check keys when your
    /// layer is built).
    pub fn post(url: impl Into<String>, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        HttpRequest {
            url: url.into(),
            parsed: None,
            headers: headers.into(),
            body: Bytes::from(body),
        }
    }

    /// A `POST` of the JSON `body`, with `content-type: application/json` added to `headers`.
    pub fn json(
        url: impl Into<String>,
        mut headers: Vec<(String, String)>,
        body: &serde_json::Value,
    ) -> Self {
        headers.push(("content-type".into(), "application/json".into()));
        HttpRequest {
            url: url.into(),
            parsed: None,
            headers: headers.into(),
            // JSON always serialises (its keys are strings); the fallback is for the type's sake.
            body: super::body::body_bytes(body).unwrap_or_else(|_| Bytes::from(body.to_string())),
        }
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in order.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The body's bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// The timers of a streamed model request. There is deliberately no whole-request timeout: a reply
/// streams for as long as the model talks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect plus TLS handshake for a new connection (default 10 s); a pooled connection
    /// skips it.
    pub connect: Duration,
    /// From sending the request to the response head, and again from the head to the first
    /// streamed item (default 10 s). Counts the connect of a new connection too.
    pub first_byte: Duration,
    /// The longest silence between two items once the first arrived (default 30 s), counted from
    /// each call to `next`, so the time a tool runs between two items is not counted.
    pub gap: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(10),
            gap: Duration::from_secs(30),
        }
    }
}

/// What a model request can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ModelError {
    /// The HTTP client could not be built (the TLS set-up failed); no request was sent.
    #[error("could not build the model HTTP client")]
    Client(#[source] Box<dyn StdError + Send + Sync>),
    /// No connection could be opened (DNS, TCP, TLS, or the connect timeout).
    #[error("could not connect to the model API")]
    Connect(#[source] reqwest::Error),
    /// The connection closed before any response: typically a pooled connection that the server
    /// had already closed.
    #[error("the connection to the model API closed before it answered")]
    ConnectionClosed(#[source] reqwest::Error),
    /// The request failed otherwise before a response (e.g. an invalid header in the request).
    #[error("the model request failed")]
    Request(#[source] reqwest::Error),
    /// The API answered with a non-2xx status.
    #[error("the model API answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (lossy UTF-8, at most 2 KiB): the provider's error JSON.
        body: String,
        /// The provider's request id (`x-request-id`, `x-goog-request-id` or `request-id`).
        request_id: Option<String>,
        /// The `Retry-After` header, when it gave seconds.
        retry_after: Option<Duration>,
    },
    /// No response head, or no first item after it, within [`Timeouts::first_byte`].
    #[error("the model API sent nothing within {0:?}")]
    FirstByteTimeout(Duration),
    /// No item for [`Timeouts::gap`] after the previous one.
    #[error("the model stream stalled: nothing for {0:?}")]
    Stalled(Duration),
    /// Reading the streamed body failed (the connection broke mid-stream).
    #[error("reading the model stream failed")]
    Read(#[source] reqwest::Error),
    /// The stream could not be framed as server-sent events.
    #[error("the model stream could not be read as server-sent events")]
    Sse(#[from] SseError),
    /// The response body passed the byte bound it was read with (the voice core's
    /// `max_response_bytes`); nothing past the bound was read.
    #[error("the model response passed its {limit}-byte bound")]
    ResponseTooLarge {
        /// The bound in bytes.
        limit: usize,
    },
}

impl ModelError {
    /// Whether the same request may succeed if sent again later: a connect failure, a closed
    /// connection, a broken or stalled stream, a timeout, a 5xx, or a 429 that is not a quota
    /// error. A quota error, a 4xx and a malformed stream are not.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            Self::Connect(_)
            | Self::ConnectionClosed(_)
            | Self::FirstByteTimeout(_)
            | Self::Stalled(_)
            | Self::Read(_) => true,
            Self::Status { status, body, .. } => {
                *status >= 500 || (*status == 429 && !is_quota_body(body))
            }
            Self::Client(_) | Self::Request(_) | Self::Sse(_) | Self::ResponseTooLarge { .. } => {
                false
            }
        }
    }

    /// The `Retry-After` the provider answered with, when it gave one in seconds.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether this is a quota (billing) error rather than a rate limit: a 429 whose body mentions
    /// `quota` (`insufficient_quota`, `RESOURCE_EXHAUSTED … quota`). Waiting does not fix it.
    #[cfg(test)]
    pub(crate) fn is_quota(&self) -> bool {
        matches!(self, Self::Status { status: 429, body, .. } if is_quota_body(body))
    }

    /// The wait before the one retry [`open`] makes, or `None` when this error is not retried
    /// there: timeouts are not (a retry would double the wait), nor a `Retry-After` past 2 s.
    fn retry_delay(&self) -> Option<Duration> {
        match self {
            Self::Connect(_) | Self::ConnectionClosed(_) => Some(RETRY_DELAY),
            Self::Status { retry_after, .. } if self.is_retryable() => match retry_after {
                None => Some(RETRY_DELAY),
                Some(after) if *after <= MAX_RETRY_AFTER => Some(*after),
                Some(_) => None,
            },
            _ => None,
        }
    }
}

/// Whether an error body names a quota (case-insensitive `quota`), which waiting does not fix.
fn is_quota_body(body: &str) -> bool {
    body.to_ascii_lowercase().contains("quota")
}

/// The shared client for `connect` (the connect + TLS timeout): one per process per timeout, so
/// every session shares one connection pool. HTTP/1.1 only, no redirects (a model API does not
/// redirect a POST, and following one would resend the body).
///
/// # Errors
/// [`ModelError::Client`] when the TLS configuration cannot be built (no usable protocol version
/// or platform verifier).
pub(crate) fn client(
    connect: Duration,
    http: Option<&HttpOptions>,
) -> Result<reqwest::Client, ModelError> {
    type Key = (Duration, Option<u64>);
    static CLIENTS: OnceLock<Mutex<HashMap<Key, reqwest::Client>>> = OnceLock::new();
    let http = http.filter(|h| h.custom_transport());
    let key = (connect, http.map(HttpOptions::transport_key));
    let mut clients = lock(CLIENTS.get_or_init(Mutex::default));
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let client = build_client(connect, http)?;
    if clients.len() < MAX_CLIENTS {
        clients.insert(key, client.clone());
    }
    Ok(client)
}

/// Builds a client: rustls with ring and the platform verifier (with `http`'s extra roots),
/// ALPN `http/1.1` only, through `http`'s proxy when it names one.
fn build_client(
    connect: Duration,
    http: Option<&HttpOptions>,
) -> Result<reqwest::Client, ModelError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = http
        .map(HttpOptions::root_certificates)
        .transpose()
        .map_err(|why| ModelError::Client(why.into()))?
        .unwrap_or_default();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|err| ModelError::Client(Box::new(err)))?;
    let builder = if roots.is_empty() {
        builder
            .with_platform_verifier()
            .map_err(|err| ModelError::Client(Box::new(err)))?
    } else {
        let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(roots, provider)
            .map_err(|err| ModelError::Client(Box::new(err)))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
    };
    let mut tls = builder.with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut client = reqwest::Client::builder()
        // A stream's small events must not wait on Nagle's algorithm.
        .tcp_nodelay(true)
        .tls_backend_preconfigured(tls)
        .http1_only()
        .connect_timeout(connect)
        .redirect(reqwest::redirect::Policy::none())
        // Only an explicit proxy: the environment's proxy variables are not read.
        .no_proxy();
    if let Some(url) = http.and_then(HttpOptions::proxy_url) {
        let proxy = reqwest::Proxy::all(url).map_err(|err| ModelError::Client(Box::new(err)))?;
        client = client.proxy(proxy);
    }
    client
        .build()
        .map_err(|err| ModelError::Client(Box::new(err)))
}

/// Sends `req` and returns its response as a stream of server-sent events, once the response head
/// arrived with a 2xx status. Retries once before the first byte (see the [module docs](self)),
/// after the server's `Retry-After` (at most 2 s) or 200 ms; dropping the future cancels the
/// wait and the retry (nothing is spawned). The stream reads at most `max_response_bytes` of the
/// body (then [`ModelError::ResponseTooLarge`]); its SSE parser's buffers are bounded by the
/// smaller of that and [`DEFAULT_MAX_EVENT_BYTES`].
///
/// # Errors
/// [`ModelError::Status`] for a non-2xx answer (its body read within `first_byte`, 2 KiB kept),
/// [`ModelError::FirstByteTimeout`] when no head came within `t.first_byte`,
/// [`ModelError::Connect`] / [`ModelError::ConnectionClosed`] / [`ModelError::Request`] when no
/// response came at all, and [`ModelError::Client`] when the client cannot be built.
pub(crate) async fn open(
    req: &HttpRequest,
    t: Timeouts,
    max_response_bytes: usize,
    http: Option<&HttpOptions>,
) -> Result<EventStream, ModelError> {
    open_with(req, t, max_response_bytes, http, true).await
}

/// [`open`], with its one retry only when `retry` (a fallback chain's layer before the last
/// moves on to the next layer instead).
///
/// # Errors
/// As [`open`].
pub(crate) async fn open_with(
    req: &HttpRequest,
    t: Timeouts,
    max_response_bytes: usize,
    http: Option<&HttpOptions>,
    retry: bool,
) -> Result<EventStream, ModelError> {
    let client = client(t.connect, http)?;
    let err = match attempt(&client, req, t, max_response_bytes).await {
        Ok(stream) => return Ok(stream),
        Err(err) => err,
    };
    let Some(delay) = err.retry_delay().filter(|_| retry) else {
        return Err(err);
    };
    tracing::debug!(
        "model request failed before its first byte ({}); retrying once in {delay:?}",
        outside(&crate::logline::chain(&err))
    );
    sleep(delay).await;
    attempt(&client, req, t, max_response_bytes).await
}

/// One try of [`open`].
async fn attempt(
    client: &reqwest::Client,
    req: &HttpRequest,
    t: Timeouts,
    max_response_bytes: usize,
) -> Result<EventStream, ModelError> {
    let deadline = from_now(t.first_byte);
    let builder = match &req.parsed {
        Some(url) => client.post(url.clone()),
        None => client.post(&req.url),
    };
    let mut builder = builder.body(req.body.clone());
    for (name, value) in req.headers.iter() {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let response = timeout_at(deadline, builder.send())
        .await
        .map_err(|_| ModelError::FirstByteTimeout(t.first_byte))?
        .map_err(classify)?;
    let request_id = request_id(response.headers());
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after(response.headers());
        let body = error_body(response, from_now(t.first_byte)).await;
        return Err(ModelError::Status {
            status: status.as_u16(),
            body,
            request_id,
            retry_after,
        });
    }
    Ok(EventStream {
        response,
        parser: SseParser::new(DEFAULT_MAX_EVENT_BYTES.min(max_response_bytes)),
        read: 0,
        max_bytes: max_response_bytes,
        request_id,
        first_deadline: Some(deadline),
        first_byte: t.first_byte,
        gap: t.gap,
        eof: false,
        done: false,
        status: status.as_u16(),
        kept: None,
        timer: None,
    })
}

/// `wait` from now, or as far as the clock reaches: a timer of [`Duration::MAX`] (no limit)
/// never fires, and never overflows the clock.
pub(crate) fn from_now(wait: Duration) -> Instant {
    const FOR_EVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(wait)
        .or_else(|| now.checked_add(FOR_EVER))
        .unwrap_or(now)
}

/// Sorts a failed send into the variant that says whether it may be retried.
fn classify(err: reqwest::Error) -> ModelError {
    if err.is_connect() {
        return ModelError::Connect(err);
    }
    let mut source = err.source();
    while let Some(cause) = source {
        let closed = if let Some(hyper) = cause.downcast_ref::<hyper::Error>() {
            hyper.is_incomplete_message() || hyper.is_closed() || hyper.is_canceled()
        } else if let Some(io) = cause.downcast_ref::<io::Error>() {
            matches!(
                io.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            )
        } else {
            false
        };
        if closed {
            return ModelError::ConnectionClosed(err);
        }
        source = cause.source();
    }
    ModelError::Request(err)
}

/// The provider's request id from the response headers, if any (at most 128 bytes kept).
fn request_id(headers: &HeaderMap) -> Option<String> {
    let value = REQUEST_ID_HEADERS
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())?;
    let mut end = value.len().min(MAX_REQUEST_ID_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    Some(value[..end].to_owned())
}

/// `Retry-After` in seconds (whole or fractional); more seconds than a `Duration` holds is
/// [`Duration::MAX`] (the longest wait: its readers cap it). An HTTP date, a negative or
/// unbounded number, or garbage gives `None`.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds: f64 = value.parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

/// The first [`ERROR_BODY_BYTES`] of an error response, read until `deadline`; the rest is not
/// read (the connection is then dropped rather than pooled).
async fn error_body(mut response: reqwest::Response, deadline: Instant) -> String {
    let mut kept = Vec::new();
    while kept.len() < ERROR_BODY_BYTES {
        match timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = ERROR_BODY_BYTES - kept.len();
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// A 2xx response read as server-sent events. Dropping it closes the connection (a half-read
/// stream cannot go back to the pool).
#[derive(Debug)]
pub(crate) struct EventStream {
    response: reqwest::Response,
    parser: SseParser,
    /// Body bytes read so far.
    read: usize,
    /// The most body bytes this stream reads.
    max_bytes: usize,
    request_id: Option<String>,
    /// The deadline for the first item, set when the request was sent; taken by the first `next`.
    first_deadline: Option<Instant>,
    first_byte: Duration,
    gap: Duration,
    /// The body ended; the parser is being flushed.
    eof: bool,
    /// The stream ended (cleanly or with an error): `next` returns `None` from now on.
    done: bool,
    /// The response's status (a 2xx).
    status: u16,
    /// A copy of the body as read, and the most bytes it keeps, for a call's recording.
    kept: Option<(Vec<u8>, usize)>,
    /// The first-byte or gap timer, made at the first wait and moved at each one after: a timer
    /// made and dropped per read would be registered and removed with the runtime each time.
    timer: Option<std::pin::Pin<Box<Sleep>>>,
}

impl EventStream {
    /// The next item: `Some(Ok(..))` per event or bare body, `None` after the body ended and the
    /// parser was flushed (a last event without a blank line comes out first), and `None` after
    /// an error too. Cancel-safe: dropping the future loses no bytes.
    ///
    /// # Errors
    /// [`ModelError::FirstByteTimeout`] when the first item does not come within
    /// [`Timeouts::first_byte`] of sending the request, [`ModelError::Stalled`] when a later one
    /// does not come within [`Timeouts::gap`] of this call, [`ModelError::Read`] when the
    /// connection breaks, [`ModelError::Sse`] when an event passes the size bound,
    /// [`ModelError::ResponseTooLarge`] when the body passes the stream's byte bound (the bytes
    /// that passed it are not parsed).
    pub(crate) async fn next(&mut self) -> Option<Result<SseItem, ModelError>> {
        if self.done {
            return None;
        }
        let first = self.first_deadline.is_some();
        let deadline = self.first_deadline.unwrap_or_else(|| from_now(self.gap));
        loop {
            let item = if self.eof {
                self.parser.finish()
            } else {
                self.parser.next_item()
            };
            match item {
                Ok(Some(item)) => {
                    self.first_deadline = None;
                    return Some(Ok(item));
                }
                Ok(None) if self.eof => {
                    self.done = true;
                    return None;
                }
                Ok(None) => {}
                Err(err) => return self.fail(err.into()),
            }
            let timer = match &mut self.timer {
                Some(timer) => {
                    timer.as_mut().reset(deadline);
                    timer
                }
                None => self.timer.insert(Box::pin(sleep_until(deadline))),
            };
            let read = tokio::select! {
                biased;
                read = self.response.chunk() => Ok(read),
                () = timer.as_mut() => Err(()),
            };
            match read {
                Ok(Ok(Some(bytes))) => {
                    self.read = self.read.saturating_add(bytes.len());
                    if self.read > self.max_bytes {
                        let limit = self.max_bytes;
                        return self.fail(ModelError::ResponseTooLarge { limit });
                    }
                    if let Some((kept, max)) = &mut self.kept {
                        let take = bytes.len().min(max.saturating_sub(kept.len()));
                        crate::buffer::reserve_within(kept, take, *max);
                        kept.extend_from_slice(&bytes[..take]);
                    }
                    self.parser.push(&bytes);
                }
                Ok(Ok(None)) => self.eof = true,
                Ok(Err(err)) => return self.fail(ModelError::Read(err)),
                Err(_) if first => return self.fail(ModelError::FirstByteTimeout(self.first_byte)),
                Err(_) => return self.fail(ModelError::Stalled(self.gap)),
            }
        }
    }

    /// The provider's request id from the response headers (`x-request-id`, `x-goog-request-id`
    /// or `request-id`), for logs and support tickets.
    pub(crate) fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }

    /// The response's HTTP status.
    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    /// Keeps a copy of the body from now on, at most `max` bytes of it, for
    /// [`take_body`](Self::take_body) (a recorded call).
    pub(crate) fn keep_body(&mut self, max: usize) {
        self.kept = Some((Vec::new(), max));
    }

    /// The body kept since [`keep_body`](Self::keep_body) (empty without it).
    pub(crate) fn take_body(&mut self) -> Vec<u8> {
        self.kept.take().map(|(kept, _)| kept).unwrap_or_default()
    }

    /// Ends the stream with `err`: later calls to `next` return `None`.
    fn fail(&mut self, err: ModelError) -> Option<Result<SseItem, ModelError>> {
        self.done = true;
        Some(Err(err))
    }
}

/// Opens a pooled connection to `base_url` ahead of the first turn, so it pays no DNS or TLS:
/// sends `HEAD base_url` and ignores the answer (any status, or none within `connect` + 5 s).
/// At most once per 30 s per base URL; a later call in that span returns at once. Never fails:
/// a connection that could not be opened now is opened by the turn.
pub(crate) async fn warm(base_url: &str, connect: Duration, http: Option<&HttpOptions>) {
    static WARMED: OnceLock<Mutex<HashMap<String, Instant>>> = OnceLock::new();
    {
        let now = Instant::now();
        let mut warmed = lock(WARMED.get_or_init(Mutex::default));
        if let Some(at) = warmed.get(base_url)
            && now.duration_since(*at) < WARM_EVERY
        {
            return;
        }
        if warmed.len() >= MAX_WARM_URLS {
            warmed.retain(|_, at| now.duration_since(*at) < WARM_EVERY);
        }
        if warmed.len() < MAX_WARM_URLS {
            warmed.insert(base_url.to_owned(), now);
        }
    }
    let Ok(client) = client(connect, http) else {
        return;
    };
    match timeout(connect + WARM_ANSWER, client.head(base_url).send()).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => {
            tracing::debug!(error = %err, base_url, "warming the model connection failed")
        }
        Err(_) => tracing::debug!(base_url, "warming the model connection timed out"),
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::{any, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::{Barrier, mpsc};

    use super::*;
    use crate::model::sse::{DEFAULT_MAX_EVENT_BYTES, SseEvent};

    /// Serves `app` on an ephemeral port of 127.0.0.1 and returns its base URL.
    async fn serve(app: Router) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    /// A JSON POST to `url`.
    fn request(url: &str) -> HttpRequest {
        HttpRequest {
            url: url.to_owned(),
            parsed: None,
            headers: vec![("content-type".into(), "application/json".into())].into(),
            body: Bytes::from_static(b"{}"),
        }
    }

    /// [`open`] with the default timeouts and event bound.
    async fn open_default(url: &str) -> Result<EventStream, ModelError> {
        open(
            &request(url),
            Timeouts::default(),
            DEFAULT_MAX_EVENT_BYTES,
            None,
        )
        .await
    }

    /// A 200 answer with a whole SSE body.
    fn sse(body: &'static str) -> Response {
        ([("content-type", "text/event-stream")], body).into_response()
    }

    /// A streamed SSE body fed from the returned sender.
    fn streamed() -> (mpsc::Sender<&'static str>, Response) {
        let (tx, rx) = mpsc::channel::<&'static str>(4);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            let chunk = rx.recv().await?;
            Some((
                Ok::<_, Infallible>(Bytes::from_static(chunk.as_bytes())),
                rx,
            ))
        });
        let headers = [
            ("content-type", "text/event-stream"),
            ("x-goog-request-id", "g-1"),
        ];
        (tx, (headers, Body::from_stream(stream)).into_response())
    }

    /// The data of an event item; panics on anything else.
    fn data(item: Option<Result<SseItem, ModelError>>) -> String {
        match item {
            Some(Ok(SseItem::Event(SseEvent { data, .. }))) => data,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// Counts the requests a route received.
    #[derive(Clone, Default)]
    struct Count(Arc<AtomicUsize>);

    impl Count {
        /// Counts one request; returns the count before it.
        fn bump(&self) -> usize {
            self.0.fetch_add(1, Ordering::SeqCst)
        }
        /// The requests counted so far.
        fn get(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn events_streamed_slowly_arrive_one_by_one() {
        let (senders_tx, mut senders) = mpsc::unbounded_channel();
        let app = Router::new().route(
            "/s",
            post(move || {
                let (tx, response) = streamed();
                let _ = senders_tx.send(tx);
                async move { response }
            }),
        );
        let base = serve(app).await;
        let mut stream = open_default(&format!("{base}/s")).await.unwrap();
        assert_eq!(stream.request_id(), Some("g-1"));
        let tx = senders.recv().await.unwrap();
        tx.send("data: one\n").await.unwrap();
        tx.send("\n").await.unwrap();
        // The first event comes out while the server still holds the second.
        assert_eq!(data(stream.next().await), "one");
        tx.send("event: e\r\ndata: two\r\n\r\n").await.unwrap();
        assert_eq!(data(stream.next().await), "two");
        tx.send("data: three").await.unwrap();
        drop(tx);
        // The last event has no blank line after it: the end of the body flushes it.
        assert_eq!(data(stream.next().await), "three");
        assert!(stream.next().await.is_none());
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_500_then_a_200_is_retried_once() {
        let count = Count::default();
        let seen = count.clone();
        let app = Router::new().route(
            "/s",
            post(move || {
                let first = seen.bump() == 0;
                async move {
                    if first {
                        (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response()
                    } else {
                        sse("data: ok\n\n")
                    }
                }
            }),
        );
        let base = serve(app).await;
        let mut stream = open_default(&format!("{base}/s")).await.unwrap();
        assert_eq!(data(stream.next().await), "ok");
        assert_eq!(count.get(), 2);
    }

    #[tokio::test]
    async fn a_second_5xx_is_returned_with_its_body() {
        let count = Count::default();
        let seen = count.clone();
        let app = Router::new().route(
            "/s",
            post(move || {
                seen.bump();
                async { (StatusCode::SERVICE_UNAVAILABLE, "overloaded").into_response() }
            }),
        );
        let base = serve(app).await;
        let err = open_default(&format!("{base}/s")).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Status { status: 503, body, .. } if body == "overloaded")
        );
        assert!(err.is_retryable());
        assert_eq!(count.get(), 2);
    }

    #[tokio::test]
    async fn a_429_with_retry_after_is_retried() {
        let count = Count::default();
        let seen = count.clone();
        let app = Router::new().route(
            "/s",
            post(move || {
                let first = seen.bump() == 0;
                async move {
                    if first {
                        let headers = [("retry-after", "1")];
                        (StatusCode::TOO_MANY_REQUESTS, headers, "slow down").into_response()
                    } else {
                        sse("data: ok\n\n")
                    }
                }
            }),
        );
        let base = serve(app).await;
        let mut stream = open_default(&format!("{base}/s")).await.unwrap();
        assert_eq!(data(stream.next().await), "ok");
        assert_eq!(count.get(), 2);
    }

    #[tokio::test]
    async fn a_429_asking_too_long_or_for_quota_is_not_retried() {
        let count = Count::default();
        let seen = count.clone();
        let app = Router::new()
            .route(
                "/quota",
                post({
                    let seen = seen.clone();
                    move || {
                        seen.bump();
                        let body = r#"{"error":{"code":429,"message":"You exceeded your current quota","status":"RESOURCE_EXHAUSTED"}}"#;
                        async move { (StatusCode::TOO_MANY_REQUESTS, body).into_response() }
                    }
                }),
            )
            .route(
                "/later",
                post(move || {
                    seen.bump();
                    let headers = [("retry-after", "30")];
                    async move { (StatusCode::TOO_MANY_REQUESTS, headers, "later").into_response() }
                }),
            );
        let base = serve(app).await;
        let err = open_default(&format!("{base}/quota")).await.unwrap_err();
        assert!(err.is_quota() && !err.is_retryable(), "{err:?}");
        assert_eq!(count.get(), 1);
        let err = open_default(&format!("{base}/later")).await.unwrap_err();
        let ModelError::Status { retry_after, .. } = &err else {
            panic!("expected a status error, got {err:?}");
        };
        assert_eq!(*retry_after, Some(Duration::from_secs(30)));
        assert_eq!(count.get(), 2);
    }

    #[tokio::test]
    async fn a_401_is_not_retried_and_keeps_body_and_request_id() {
        let count = Count::default();
        let seen = count.clone();
        let long = "x".repeat(10_000);
        let app = Router::new().route(
            "/s",
            post(move || {
                seen.bump();
                let body =
                    format!(r#"{{"error":{{"message":"Incorrect API key provided"}}}}{long}"#);
                async move {
                    (
                        StatusCode::UNAUTHORIZED,
                        [("x-request-id", "req_123")],
                        body,
                    )
                        .into_response()
                }
            }),
        );
        let base = serve(app).await;
        let err = open_default(&format!("{base}/s")).await.unwrap_err();
        let ModelError::Status {
            status,
            body,
            request_id,
            ..
        } = &err
        else {
            panic!("expected a status error, got {err:?}");
        };
        assert_eq!(*status, 401);
        assert!(body.contains("Incorrect API key"));
        assert_eq!(body.len(), ERROR_BODY_BYTES);
        assert_eq!(request_id.as_deref(), Some("req_123"));
        assert!(!err.is_retryable());
        assert_eq!(count.get(), 1);
    }

    #[tokio::test]
    async fn first_byte_timeout_without_a_head_or_without_a_first_event() {
        let app = Router::new()
            .route("/silent", post(std::future::pending::<Response>))
            .route(
                "/head-only",
                post(|| async {
                    let stream = futures_util::stream::pending::<Result<Bytes, Infallible>>();
                    (
                        [("content-type", "text/event-stream")],
                        Body::from_stream(stream),
                    )
                        .into_response()
                }),
            );
        let base = serve(app).await;
        let t = Timeouts {
            first_byte: Duration::from_millis(50),
            ..Timeouts::default()
        };
        let url = format!("{base}/silent");
        let err = open(&request(&url), t, DEFAULT_MAX_EVENT_BYTES, None)
            .await
            .unwrap_err();
        assert!(matches!(err, ModelError::FirstByteTimeout(_)), "{err:?}");
        let url = format!("{base}/head-only");
        let mut stream = open(&request(&url), t, DEFAULT_MAX_EVENT_BYTES, None)
            .await
            .unwrap();
        let err = stream.next().await.unwrap().unwrap_err();
        assert!(matches!(err, ModelError::FirstByteTimeout(_)), "{err:?}");
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn gap_timeout_after_the_first_event() {
        let app = Router::new().route(
            "/s",
            post(|| async {
                let first = futures_util::stream::iter([Ok::<_, Infallible>(Bytes::from_static(
                    b"data: one\n\n",
                ))]);
                let stream = futures_util::StreamExt::chain(first, futures_util::stream::pending());
                (
                    [("content-type", "text/event-stream")],
                    Body::from_stream(stream),
                )
                    .into_response()
            }),
        );
        let base = serve(app).await;
        let t = Timeouts {
            gap: Duration::from_millis(50),
            ..Timeouts::default()
        };
        let url = format!("{base}/s");
        let mut stream = open(&request(&url), t, DEFAULT_MAX_EVENT_BYTES, None)
            .await
            .unwrap();
        assert_eq!(data(stream.next().await), "one");
        let err = stream.next().await.unwrap().unwrap_err();
        assert!(matches!(err, ModelError::Stalled(_)), "{err:?}");
        assert!(err.is_retryable());
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_body_past_its_byte_bound_ends_the_stream_unread() {
        let (senders_tx, mut senders) = mpsc::unbounded_channel();
        let app = Router::new().route(
            "/s",
            post(move || {
                let (tx, response) = streamed();
                let _ = senders_tx.send(tx);
                async move { response }
            }),
        );
        let base = serve(app).await;
        let url = format!("{base}/s");
        let mut stream = open(&request(&url), Timeouts::default(), 64, None)
            .await
            .unwrap();
        let tx = senders.recv().await.unwrap();
        tx.send("data: first\n\n").await.unwrap();
        assert_eq!(data(stream.next().await), "first");
        // Tiny events, each complete: the bytes, not the events, are what is bounded.
        tokio::spawn(async move { while tx.send("data: x\n\n").await.is_ok() {} });
        let mut events = 0;
        let err = loop {
            match stream.next().await {
                Some(Ok(_)) => events += 1,
                Some(Err(err)) => break err,
                None => panic!("the stream ended without its bound"),
            }
        };
        assert!(
            matches!(err, ModelError::ResponseTooLarge { limit: 64 }),
            "{err:?}"
        );
        assert!(events <= 6, "{events} events past the bound");
        assert!(!err.is_retryable());
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_bare_json_error_after_events_comes_out() {
        let app = Router::new().route(
            "/s",
            post(|| async { sse("data: {\"a\":1}\n\n{\n  \"error\": {\"code\": 500}\n}\n") }),
        );
        let base = serve(app).await;
        let mut stream = open_default(&format!("{base}/s")).await.unwrap();
        assert_eq!(data(stream.next().await), "{\"a\":1}");
        let bare = stream.next().await.unwrap().unwrap();
        assert_eq!(
            bare,
            SseItem::Bare("{\n  \"error\": {\"code\": 500}\n}".into())
        );
        assert!(stream.next().await.is_none());
    }

    /// Reads one HTTP/1.1 request (head and `content-length` body) from `socket`; false at EOF.
    async fn read_request(socket: &mut TcpStream) -> bool {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            match socket.read(&mut byte).await {
                Ok(1) => buf.push(byte[0]),
                _ => return false,
            }
        }
        let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map_or(0, |n| n.trim().parse().unwrap());
        let mut body = vec![0u8; length];
        socket.read_exact(&mut body).await.is_ok()
    }

    #[tokio::test]
    async fn a_body_closed_with_the_connection_flushes_the_last_event() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/s", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            read_request(&mut socket).await;
            // No content-length, no chunking: the body ends when the connection closes.
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: one\n\ndata: last";
            socket.write_all(answer.as_bytes()).await.unwrap();
        });
        let mut stream = open_default(&url).await.unwrap();
        assert_eq!(data(stream.next().await), "one");
        assert_eq!(data(stream.next().await), "last");
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_stale_pooled_connection_is_retried_on_a_new_one() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/s", listener.local_addr().unwrap());
        let connections = Count::default();
        let on_first = Count::default();
        let (accepted, first_requests) = (connections.clone(), on_first.clone());
        tokio::spawn(async move {
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 10\r\n\r\ndata: ok\n\n";
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let first = accepted.bump() == 0;
                let first_requests = first_requests.clone();
                tokio::spawn(async move {
                    while read_request(&mut socket).await {
                        // The first connection answers one request, then takes the next and
                        // closes without an answer, as a server does with an idle connection.
                        if first && first_requests.bump() == 1 {
                            return;
                        }
                        socket.write_all(answer.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        let mut stream = open_default(&url).await.unwrap();
        assert_eq!(data(stream.next().await), "ok");
        assert!(stream.next().await.is_none());
        drop(stream);
        // Let the client put the finished connection back in its pool (a settle, not a timing
        // assertion): the next request must go out on it.
        sleep(Duration::from_millis(50)).await;
        let mut stream = open_default(&url).await.unwrap();
        assert_eq!(data(stream.next().await), "ok");
        assert_eq!(
            on_first.get(),
            2,
            "the second request did not reuse the pooled connection"
        );
        assert_eq!(connections.get(), 2);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/s", listener.local_addr().unwrap());
        drop(listener);
        let err = open_default(&url).await.unwrap_err();
        assert!(matches!(err, ModelError::Connect(_)), "{err:?}");
        assert!(err.is_retryable());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifty_concurrent_streams_do_not_queue_behind_each_other() {
        const STREAMS: usize = 50;
        let barrier = Arc::new(Barrier::new(STREAMS));
        let app = Router::new().route(
            "/s",
            post(move || {
                let barrier = barrier.clone();
                async move {
                    // No response goes out until all fifty requests have arrived: a client that
                    // queued one stream behind another would wait here forever.
                    barrier.wait().await;
                    sse("data: ok\n\n")
                }
            }),
        );
        let base = serve(app).await;
        let url = format!("{base}/s");
        let calls = (0..STREAMS).map(|_| async {
            let mut stream = open_default(&url).await?;
            let item = stream.next().await;
            Ok::<_, ModelError>(data(item))
        });
        let all = timeout(
            Duration::from_secs(20),
            futures_util::future::join_all(calls),
        )
        .await
        .expect("streams queued behind each other");
        assert_eq!(all.len(), STREAMS);
        for result in all {
            assert_eq!(result.unwrap(), "ok");
        }
    }

    #[tokio::test]
    async fn warm_sends_one_head_per_base_url_per_30_s() {
        let count = Count::default();
        let seen = count.clone();
        let app = Router::new().route(
            "/",
            any(move || {
                seen.bump();
                async { StatusCode::NOT_FOUND }
            }),
        );
        let base = serve(app).await;
        let url = format!("{base}/");
        warm(&url, Duration::from_secs(10), None).await;
        warm(&url, Duration::from_secs(10), None).await;
        assert_eq!(count.get(), 1);
    }

    #[test]
    fn retry_after_and_quota_parsing() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(RETRY_AFTER, " 0.5 ".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(500)));
        headers.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, "-1".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, "inf".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
        // Past what a `Duration` holds: the longest wait, for its readers to cap.
        headers.insert(RETRY_AFTER, "99999999999999999999".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::MAX));

        let status = |status, body: &str, retry_after| ModelError::Status {
            status,
            body: body.to_owned(),
            request_id: None,
            retry_after,
        };
        assert!(status(429, r#"{"code":"insufficient_quota"}"#, None).is_quota());
        assert!(status(429, "RESOURCE_EXHAUSTED: Quota exceeded", None).is_quota());
        assert_eq!(
            status(429, "rate limited", None).retry_delay(),
            Some(RETRY_DELAY)
        );
        let one = Some(Duration::from_secs(1));
        assert_eq!(status(429, "rate limited", one).retry_delay(), one);
        assert_eq!(
            status(503, "", Some(Duration::from_secs(3))).retry_delay(),
            None
        );
        assert_eq!(status(429, "insufficient_quota", None).retry_delay(), None);
        assert_eq!(status(400, "bad", None).retry_delay(), None);
        assert_eq!(
            ModelError::FirstByteTimeout(Duration::ZERO).retry_delay(),
            None
        );
    }

    #[test]
    fn the_client_builds_with_ring_and_the_platform_verifier() {
        assert!(client(Duration::from_secs(7), None).is_ok());
        assert!(build_client(Duration::from_secs(7), None).is_ok());
    }
}

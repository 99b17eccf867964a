//! A local voice console: talk to a brain in a browser before it is deployed.
//!
//! [`Console`] serves one web page (plain HTML and JavaScript embedded in this crate, no build
//! step) and plays Voqalize's side of a call against a brain on the direct leg, one call per open
//! page:
//!
//! * type, or speak where the browser has speech recognition: the text goes to the brain as the
//!   next turn's `UserMessage`;
//! * each speech unit streams in as the brain writes it and is read aloud by the browser's speech
//!   synthesis. Its word-boundary events tell the page what was really heard, so when you talk
//!   over the brain (or press *Barge in*) the page sends `Interruption` and a `Finalize` with the
//!   true heard prefix, as Voqalize does. Without a voice (a headless browser, or *Voice: reading
//!   clock*), words are "heard" at a steady rate instead (`?wpm=` sets it; 170 by default);
//! * a timeline per turn: units with heard and generated text, the TurnSteps (model requests with
//!   their tokens, tool runs), UI commands and other RTVI messages to the app, `configure`
//!   requests (accepted, as the reference runtime does), errors; and a form that sends an
//!   AppEvent (RTVI `ui-event`) back.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // A brain already serving on ws://127.0.0.1:8787 (with `HostOptions::allow_unverified()`,
//! // or give the console a token with `.token(..)`).
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8788").await?;
//! println!("console: http://{}/", listener.local_addr()?);
//! voqalize::console::Console::new("ws://127.0.0.1:8787")
//!     .serve(listener, std::future::pending())
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The examples start one beside their brain: `cargo run --example coach -- --console`.
//!
//! # Between the page and the console
//!
//! One WebSocket at `/ws`, one JSON object per text message, each with a `"type"`. The page sends
//! `say {text}`, `interrupt`, `finalize {speech_id, heard}`, `app_event {name, payload}` and `end`.
//! The console sends `session {session_id}`, `turn {turn_id, text}` (text `null` for the greeting's
//! turn 1), `speech_start {speech_id, turn_id}`, `chunk {speech_id, text}`, `speech_end`,
//! `speech_cancel`, `turn_step {..}`, `rtvi {kind, data, turn_id}`, `configure {request_id, config}`,
//! `error {code, message, fatal}`, `interrupted {through_turn}`, `finalized {speech_id, heard}`,
//! `app_event`, `end` (the brain ended the call: the console closes its socket), `ended_by_user`
//! (the page's `end` was sent), `closed {code, reason}` (the brain's socket closed) and
//! `notice {text}` (something the console saw and the developer should know).
//!
//! The page reads two query parameters: `?voice=clock` starts on the reading clock instead of the
//! browser's voice, and `?wpm=N` sets the words per minute (170 by default).
//!
//! The console keeps Voqalize's promises to the brain whatever the page sends: one `Finalize` per
//! unit, for a unit the brain opened, with heard text cut to a prefix of what the unit generated.
//!
//! # Safety of a local tool
//!
//! The console is for a developer's machine: bind it to 127.0.0.1. It refuses a WebSocket upgrade
//! whose `Origin` is another site than its own page (so a web page open in the same browser cannot
//! drive your brain), and any request whose `Host` is not `localhost` or a loopback address (a
//! site whose name was pointed at 127.0.0.1). No other site may frame the page
//! (`X-Frame-Options: DENY`, `Content-Security-Policy: frame-ancestors 'none'`, and a
//! `default-src 'none'` that allows only the page's own script, style and socket); a page that is
//! framed all the same dials no call until the user presses *New call*. It bounds what either side
//! sends ([`Console::max_page_message`], [`Console::max_brain_message`]) and what it keeps of a
//! call (1 MiB of text per unit, 256 open units, 4 MiB in all), gives up on a brain that does not
//! answer its upgrade, or stops reading, within 10 s, and ends the call of a page that takes
//! nothing for [`Console::page_write_timeout`]. Its port holds at most
//! [`Console::max_connections`] HTTP connections, each given [`Console::header_timeout`] to send
//! a request's head.

mod bridge;
mod call;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value};

use call::Limits;

use crate::host::listen::{Port, PortLimits};

/// The page, served at `/`; its script and its style, at `/console.js` and `/console.css` (the
/// page allows no inline script or style: [`CSP`]).
const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// The page's Content-Security-Policy: nothing but its own script, style and socket, and no site
/// may frame it (`X-Frame-Options: DENY` says the same to older browsers).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The default of [`Console::page_write_timeout`].
const PAGE_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the console stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// Serving on the listener failed.
    #[error("the console's server failed")]
    Serve(#[source] std::io::Error),
}

/// Serves the console page for the brain at one URL. Build with [`Console::new`], then
/// [`serve`](Console::serve). Clones share the calls' timelines (see
/// [`tool_observer`](Console::tool_observer)).
#[derive(Debug, Clone)]
pub struct Console {
    settings: Settings,
    taps: Arc<Taps>,
}

/// Where the tool runs a brain in this process reports reach the page of their call: one
/// bounded queue per open call, by session id.
#[derive(Debug, Default)]
pub(crate) struct Taps(
    std::sync::Mutex<std::collections::HashMap<String, tokio::sync::mpsc::Sender<Value>>>,
);

/// The most bytes of a tool's arguments or response shown on the page; the rest is cut.
#[cfg(feature = "model")]
const TOOL_JSON_BYTES: usize = 8 * 1024;

/// What every call of one console shares.
#[derive(Debug, Clone)]
struct Settings {
    brain_url: String,
    token: Option<String>,
    init: Map<String, Value>,
    max_page_message: usize,
    max_brain_message: usize,
    max_calls: usize,
    limits: Limits,
    /// How long one write toward a page may wait before its call ends.
    page_write_timeout: Duration,
    port: PortLimits,
}

impl Console {
    /// A console for the brain at `brain_url` (`ws://host:port[/path]`; each call adds
    /// `?session_id=console-N`). No token is sent: the brain must accept unverified calls
    /// (`HostOptions::allow_unverified()`), or set one with [`token`](Self::token).
    pub fn new(brain_url: impl Into<String>) -> Self {
        Console {
            settings: Settings {
                brain_url: brain_url.into(),
                token: None,
                init: Map::new(),
                max_page_message: 64 * 1024,
                max_brain_message: 1024 * 1024,
                max_calls: 16,
                limits: Limits {
                    unit_text_bytes: 1024 * 1024,
                    open_units: 256,
                    call_text_bytes: 4 * 1024 * 1024,
                },
                page_write_timeout: PAGE_WRITE_TIMEOUT,
                port: PortLimits::default(),
            },
            taps: Arc::default(),
        }
    }

    /// An observer for [`Model::on_tool_run`](crate::voice::Model::on_tool_run) that shows each
    /// tool call (name, arguments, the response the model read, how long it ran) in the timeline
    /// of its call, when the brain runs in the same process as the console (as the examples'
    /// `--console` does): a tool's arguments and result never travel on the wire, so the page
    /// cannot see them otherwise. Each is cut to 8 KiB for the page; a page that does not keep up
    /// misses some (never the brain: it does not wait).
    ///
    /// ```no_run
    /// # use voqalize::prelude::*;
    /// # fn factory(layer: Gemini, console: voqalize::console::Console) -> Model {
    /// Model::new(layer).on_tool_run(console.tool_observer())
    /// # }
    /// ```
    #[cfg(feature = "model")]
    pub fn tool_observer(&self) -> impl Fn(&crate::voice::ToolRun<'_>) + Send + Sync + 'static {
        let taps = self.taps.clone();
        move |run| {
            let Some(queue) = crate::recover::lock(&taps.0).get(run.session_id).cloned() else {
                return;
            };
            let shown = |value: &Value| {
                let text = value.to_string();
                if text.len() <= TOOL_JSON_BYTES {
                    value.clone()
                } else {
                    Value::String(format!(
                        "{}…",
                        &text[..text.floor_char_boundary(TOOL_JSON_BYTES)]
                    ))
                }
            };
            let _ = queue.try_send(serde_json::json!({
                "type": "tool",
                "turn_id": run.turn_id,
                "name": crate::logline::outside(run.name).to_string(),
                "arguments": shown(run.arguments),
                "response": shown(run.response),
                "duration_ms": u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
                "ran": run.ran,
            }));
        }
    }

    /// Dials the brain at `brain_url` instead (for a brain whose address is known only once it
    /// listens); the tool runs already shown through [`tool_observer`](Self::tool_observer)
    /// still reach the page.
    pub fn brain_url(mut self, brain_url: impl Into<String>) -> Self {
        self.settings.brain_url = brain_url.into();
        self
    }

    /// Sends `token` as `Authorization: Bearer <token>` on every call (a token your brain's
    /// `HostOptions` accepts, such as one from `voqalize_testing::TokenSigner`).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.settings.token = Some(token.into());
        self
    }

    /// The `init` data of every call's `SessionStart` (default `{}`): what your app would pass.
    pub fn init(mut self, init: Map<String, Value>) -> Self {
        self.settings.init = init;
        self
    }

    /// The largest message the page may send, in bytes (default 64 KiB); a larger one closes the
    /// page's socket.
    pub fn max_page_message(mut self, bytes: usize) -> Self {
        self.settings.max_page_message = bytes;
        self
    }

    /// How many pages may hold a call at once (default 16; at least 1): past it a page is
    /// refused (503) until one closes, so a page opened again and again cannot pile up calls.
    pub fn max_calls(mut self, calls: usize) -> Self {
        self.settings.max_calls = calls.max(1);
        self
    }

    /// The largest frame the brain may send, in bytes (default 1 MiB); a larger one ends the call.
    pub fn max_brain_message(mut self, bytes: usize) -> Self {
        self.settings.max_brain_message = bytes;
        self
    }

    /// How long one write toward a page may wait for the page to take it (default 10 s): past
    /// it the page is taken for gone, and its call ends as a hang-up does (`End` to the brain),
    /// so a page that never reads cannot keep its place under [`max_calls`](Self::max_calls).
    pub fn page_write_timeout(mut self, timeout: Duration) -> Self {
        self.settings.page_write_timeout = timeout;
        self
    }

    /// The most HTTP connections the console's port holds at once (default 32, at least 1): past
    /// it a connection is answered `503` and closed at once. A page's call, once its socket is
    /// open, counts under [`max_calls`](Self::max_calls) instead.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.settings.port.max_connections = n.max(1);
        self
    }

    /// How long a connection to the console's port has to send a whole request head, the first
    /// and each next one on a kept-alive connection (default 10 s): a connection that sends
    /// nothing, or a byte at a time, is closed then.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.settings.port.header_timeout = timeout;
        self
    }

    /// Serves the page at `/` (its script and style at `/console.js`, `/console.css`) and its
    /// calls at `/ws` on `listener` until `shutdown` resolves, within
    /// [`max_connections`](Self::max_connections) and [`header_timeout`](Self::header_timeout).
    /// A failed accept (out of file descriptors) is retried every 100 ms and logged once, then
    /// counted every 10 s.
    ///
    /// # Errors
    /// [`ConsoleError::Serve`] when the server fails (none in practice: the `Result` leaves room
    /// for listener errors that are permanent).
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ConsoleError> {
        let limits = self.settings.port;
        let app = axum::Router::new()
            .route("/", get(page))
            .route("/console.js", get(script))
            .route("/console.css", get(style))
            .route("/ws", get(upgrade))
            .with_state(Shared {
                settings: Arc::new(self.settings),
                taps: self.taps,
                calls: Arc::new(AtomicU64::new(0)),
                open: Arc::new(AtomicUsize::new(0)),
            });
        let app = hyper_util::service::TowerToHyperService::new(app);
        crate::host::listen::serve_http(listener, app, limits, Port::Console, shutdown)
            .await
            .map_err(ConsoleError::Serve)
    }
}

#[derive(Clone)]
struct Shared {
    settings: Arc<Settings>,
    taps: Arc<Taps>,
    calls: Arc<AtomicU64>,
    /// Calls open now, against `max_calls`.
    open: Arc<AtomicUsize>,
}

async fn page(headers: HeaderMap) -> Response {
    asset(&headers, "text/html; charset=utf-8", PAGE)
}

async fn script(headers: HeaderMap) -> Response {
    asset(&headers, "text/javascript; charset=utf-8", SCRIPT)
}

async fn style(headers: HeaderMap) -> Response {
    asset(&headers, "text/css; charset=utf-8", STYLE)
}

/// One of the page's files, with the headers that keep other sites from framing or reading it.
fn asset(headers: &HeaderMap, content_type: &'static str, body: &'static str) -> Response {
    if !loopback_host(headers) {
        return (StatusCode::FORBIDDEN, NOT_LOOPBACK).into_response();
    }
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

async fn upgrade(
    ws: WebSocketUpgrade,
    headers: HeaderMap,
    State(shared): State<Shared>,
) -> Response {
    if !loopback_host(&headers) {
        return (StatusCode::FORBIDDEN, NOT_LOOPBACK).into_response();
    }
    if !same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "the console takes calls only from its own page",
        )
            .into_response();
    }
    if shared.open.fetch_add(1, Ordering::AcqRel) >= shared.settings.max_calls {
        shared.open.fetch_sub(1, Ordering::AcqRel);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the console holds its most calls at once; close a page",
        )
            .into_response();
    }
    let n = shared.calls.fetch_add(1, Ordering::Relaxed) + 1;
    // Given back when the call ends, or when the upgrade never completes (the closure drops).
    let place = Place(shared.open);
    let (settings, taps) = (shared.settings, shared.taps);
    ws.max_message_size(settings.max_page_message)
        .max_frame_size(settings.max_page_message)
        .on_upgrade(move |socket| async move {
            bridge::run(socket, settings, taps, n).await;
            drop(place);
        })
}

/// One page's place under `max_calls`; freed when dropped.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a request naming another host than this machine is refused.
const NOT_LOOPBACK: &str = "the console answers only requests for localhost or a loopback address";

/// True when the request names this machine as its `Host` (`localhost`, `127.x.x.x`, `[::1]`,
/// with any port): a page on another site whose name was pointed at 127.0.0.1 (DNS rebinding)
/// sends its own name, and is refused.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(Ok(host)) = headers.get(header::HOST).map(|h| h.to_str()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// True when the upgrade comes from the console's own page: no `Origin` (not a browser), or an
/// `Origin` whose host and port are the `Host` the request was sent to.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(Ok(host))) = (
        origin.to_str(),
        headers.get(header::HOST).map(|h| h.to_str()),
    ) else {
        return false;
    };
    origin
        .strip_prefix("http://")
        .is_some_and(|rest| rest == host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_the_consoles_own_page_may_open_a_call() {
        assert!(same_origin(&headers(&[(header::HOST, "127.0.0.1:8788")])));
        assert!(same_origin(&headers(&[
            (header::HOST, "127.0.0.1:8788"),
            (header::ORIGIN, "http://127.0.0.1:8788"),
        ])));
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "null",
            "https://127.0.0.1:8788",
        ] {
            assert!(
                !same_origin(&headers(&[
                    (header::HOST, "127.0.0.1:8788"),
                    (header::ORIGIN, origin),
                ])),
                "{origin}"
            );
        }
        assert!(!same_origin(&headers(&[(
            header::ORIGIN,
            "http://127.0.0.1:8788"
        )])));
    }

    #[test]
    fn only_requests_for_this_machine_are_answered() {
        for host in [
            "127.0.0.1:8788",
            "localhost:8788",
            "LOCALHOST",
            "[::1]:8788",
            "127.1.2.3",
        ] {
            assert!(loopback_host(&headers(&[(header::HOST, host)])), "{host}");
        }
        // DNS rebinding: another site's name pointed at 127.0.0.1 still sends that name.
        for host in [
            "evil.example:8788",
            "evil.example",
            "10.0.0.1:8788",
            "[2001:db8::1]:8788",
            "",
        ] {
            assert!(!loopback_host(&headers(&[(header::HOST, host)])), "{host}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
    }
}

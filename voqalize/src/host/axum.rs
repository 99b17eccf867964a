//! Mount a brain as a route in an axum server you already run.
//!
//! To drain on shutdown, give the route options that follow a [`Shutdown`](super::Shutdown) and
//! let axum stop once it has drained:
//! `axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.drained().await; })`.
//! While it drains the route answers new calls `503` with `Retry-After`.
//!
//! ```no_run
//! use voqalize::prelude::*;
//! # struct Echo;
//! # impl Brain for Echo {
//! #     async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult { turn.say(&m.text); Ok(()) }
//! # }
//! # async fn run() -> std::io::Result<()> {
//! let app = axum::Router::new().route("/voice", voqalize::host::axum::brain_route(|| Echo, HostOptions::production()));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//! axum::serve(listener, app).await
//! # }
//! ```

use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};

use super::{
    Admission, Admitted, Channel, ChannelError, ChannelReceiver, ChannelSender, HostError,
    HostOptions, Incoming, MakeBrain, Refused, Upgrade, run_session,
};

/// A GET route that upgrades to a WebSocket and hosts one call per connection with [`run_session`]:
/// `?session_id=` and the `Authorization` header are read from the upgrade; a bad token completes
/// the upgrade and closes with 4000, a missing session id with 1008. A GET that is no upgrade is
/// answered `426 Upgrade Required` with a line saying what the route is, and logged by nothing.
///
/// The route bounds the calls; the server you mount it in bounds its connections (axum's `serve`
/// sets no deadline on a request's head: serve a port strangers reach behind a proxy that does,
/// or use [`serve`](super::serve)).
pub fn brain_route<M, S>(factory: M, options: HostOptions) -> MethodRouter<S>
where
    M: MakeBrain,
    S: Clone + Send + Sync + 'static,
{
    let factory = Arc::new(factory);
    let admission = Admission::new(&options);
    // Shared: a clone in each call's task would be a quarter of a kilobyte of every call.
    let options = Arc::new(options);
    get(
        move |ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
              uri: Uri,
              headers: HeaderMap| {
            let (factory, options) = (factory.clone(), options.clone());
            // A plain GET (a browser, a scanner) is refused before it takes a place.
            let admitted = ws.is_ok().then(|| admission.admit()).flatten();
            async move {
                match ws {
                    Ok(ws) => upgrade(ws, uri, headers, factory, options, admitted),
                    Err(_) => upgrade_required(),
                }
            }
        },
    )
}

/// The answer to a request on the route that is no WebSocket upgrade: `426 Upgrade Required`,
/// with a line saying what the route is (axum's own answer is a `400` naming a header).
fn upgrade_required() -> Response {
    (
        axum::http::StatusCode::UPGRADE_REQUIRED,
        [
            (header::UPGRADE, "websocket"),
            (header::SEC_WEBSOCKET_VERSION, "13"),
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
        ],
        super::refusal::NOT_WEBSOCKET,
    )
        .into_response()
}

/// The probes of [`Health`](super::Health) as routes to merge into your app: `GET /healthz`
/// (liveness, always `200`) and `GET /readyz` (`200` while the process takes calls, `503` once it
/// drains).
///
/// ```no_run
/// # use voqalize::prelude::*;
/// # struct Echo;
/// # impl Brain for Echo {
/// #     async fn on_user_message(&self, t: &mut Turn, m: UserMessage) -> BrainResult { t.say(&m.text); Ok(()) }
/// # }
/// # fn app(shutdown: &voqalize::host::Shutdown) -> Result<axum::Router, HostError> {
/// let options = HostOptions::builder().shutdown(shutdown).build()?;
/// let app = axum::Router::new()
///     .route("/voice", voqalize::host::axum::brain_route(|| Echo, options))
///     .merge(voqalize::host::axum::health_routes(voqalize::host::Health::new(shutdown)));
/// # Ok(app) }
/// ```
pub fn health_routes<S>(health: super::Health) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    health.routes()
}

fn upgrade<M: MakeBrain>(
    ws: WebSocketUpgrade,
    uri: Uri,
    headers: HeaderMap,
    factory: Arc<M>,
    options: Arc<HostOptions>,
    admitted: Option<Admitted>,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let upgrade = Upgrade::from_query(uri.query(), authorization);
    let web_page = options.refuses_web_pages() && headers.contains_key(header::ORIGIN);
    let refused = Refused::first(
        options.draining(),
        options.overloaded(),
        web_page,
        admitted.is_none(),
    );
    let (None, Some(admitted)) = (refused, admitted) else {
        let why = refused.unwrap_or(Refused::AtCapacity);
        let status = axum::http::StatusCode::from_u16(why.status())
            .unwrap_or(axum::http::StatusCode::SERVICE_UNAVAILABLE);
        let mut answer = (status, why.body()).into_response();
        if let Some(s) = why.retry_after() {
            answer.headers_mut().insert(header::RETRY_AFTER, s.into());
        }
        return answer;
    };
    let limits = options.websocket_config();
    let ws = ws
        .read_buffer_size(limits.read_buffer_size)
        .write_buffer_size(limits.write_buffer_size)
        .max_write_buffer_size(limits.max_write_buffer_size)
        .max_message_size(limits.max_message_size.unwrap_or(usize::MAX))
        .max_frame_size(limits.max_frame_size.unwrap_or(usize::MAX));
    ws.on_upgrade(move |socket| async move {
        match run_session(AxumChannel(socket), factory, upgrade, &options).await {
            Ok(()) | Err(HostError::Rejected { .. }) => {}
            Err(e) => tracing::warn!(
                "brain: {}",
                crate::logline::outside(&crate::logline::chain(&e))
            ),
        }
        drop(admitted);
    })
}

/// [`Channel`] over an axum [`WebSocket`], for running a call with [`run_session`] from a handler
/// of your own ([`brain_route`] does this for you). The adapter names axum's type by design: it
/// follows axum's major version.
///
/// [`run_session`]: super::run_session
pub struct AxumChannel(WebSocket);

impl AxumChannel {
    /// The channel over an upgraded socket.
    pub fn new(socket: WebSocket) -> Self {
        AxumChannel(socket)
    }

    /// The socket back.
    pub fn into_inner(self) -> WebSocket {
        self.0
    }
}

impl Channel for AxumChannel {
    type Sender = AxumSender;
    type Receiver = AxumReceiver;
    fn split(self) -> (AxumSender, AxumReceiver) {
        let (tx, rx) = self.0.split();
        (AxumSender(tx), AxumReceiver(rx))
    }
}

/// The sending half of an [`AxumChannel`].
pub struct AxumSender(SplitSink<WebSocket, Message>);
/// The receiving half of an [`AxumChannel`].
pub struct AxumReceiver(SplitStream<WebSocket>);

impl ChannelSender for AxumSender {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.0
            .send(Message::Binary(frame.into()))
            .await
            .map_err(ChannelError::new)
    }

    async fn feed(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.0
            .feed(Message::Binary(frame.into()))
            .await
            .map_err(ChannelError::new)
    }

    async fn flush(&mut self) -> Result<(), ChannelError> {
        SinkExt::flush(&mut self.0).await.map_err(ChannelError::new)
    }

    async fn ping(&mut self) -> Result<(), ChannelError> {
        self.0
            .send(Message::Ping(Default::default()))
            .await
            .map_err(ChannelError::new)
    }

    async fn close(&mut self, code: u16, reason: &str) {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = self.0.send(Message::Close(Some(frame))).await;
        let _ = self.0.close().await;
    }
}

impl ChannelReceiver for AxumReceiver {
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        loop {
            return match self.0.next().await? {
                Ok(Message::Binary(b)) => Some(Ok(Incoming::Binary(b))),
                Ok(Message::Text(t)) => Some(Ok(Incoming::Text(t.as_str().to_owned()))),
                Ok(Message::Close(_)) => None,
                Ok(Message::Pong(_)) => Some(Ok(Incoming::Pong)),
                Ok(Message::Ping(_)) => continue,
                Err(e) => Some(Err(too_big_or(e))),
            };
        }
    }
}

/// A read failure as the session sees it: axum wraps tungstenite's error, and a message over the
/// size limit calls for close 1009.
fn too_big_or(e: axum::Error) -> ChannelError {
    let too_big = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<tokio_tungstenite::tungstenite::Error>())
        .is_some_and(|t| matches!(t, tokio_tungstenite::tungstenite::Error::Capacity(_)));
    if too_big {
        ChannelError::too_big(e)
    } else {
        ChannelError::new(e)
    }
}

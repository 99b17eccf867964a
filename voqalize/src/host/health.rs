//! Liveness and readiness for a platform's probes: [`Health`] answers `/healthz` (the process is
//! up) and `/readyz` (it takes calls: not draining), on a small server of its own
//! ([`Health::serve`]) or, with the feature `axum`, as routes of your axum app
//! (`host::axum::health_routes`).

use std::sync::Arc;
use std::time::Duration;

use hyper::{Method, StatusCode, header};

use super::listen::{Port, PortLimits};
use super::{Load, Shutdown};

/// What the probes read: whether this process takes calls, and how many it hosts.
///
/// `/healthz` is always `200 ok` while the process answers. `/readyz` is `200` while the process
/// takes calls and `503` once its [`Shutdown`] drains (or, with [`relay`](Self::relay), while the
/// relay connection is down; with [`load`](Self::load), while the load is above its threshold),
/// so a load balancer sends new calls elsewhere while the running ones finish. Its body is JSON:
/// `{"ready": true, "draining": false, "sessions": 3}`, with `"relay_connected"` when it follows
/// a relay and `"load"` (a share, 0 to 1 for the CPU) when it follows a load. `sessions` counts the calls that follow the
/// shutdown, on either leg.
///
/// ```no_run
/// use std::time::Duration;
/// use voqalize::host::{Health, Shutdown};
/// # async fn run() -> std::io::Result<()> {
/// let shutdown = Shutdown::new(Duration::from_secs(30)).on_signals();
/// // A relay-only process: the probes on a port of their own.
/// let probes = tokio::net::TcpListener::bind("0.0.0.0:8081").await?;
/// tokio::spawn(Health::new(&shutdown).serve(probes));
/// # Ok(()) }
/// ```
///
/// The port [`serve`](Self::serve) opens is bounded as any port a stranger may reach:
/// [`max_connections`](Self::max_connections) at once, and
/// [`header_timeout`](Self::header_timeout) to send each request's head.
#[derive(Clone)]
pub struct Health {
    shutdown: Shutdown,
    /// Whether the relay readiness follows is connected (set by `Health::relay`, in the relay
    /// module: the host layer knows no relay).
    relay: Option<Connected>,
    load: Option<Load>,
    metrics: Option<Metrics>,
    port: PortLimits,
}

/// What `/metrics` answers with, when it is served.
type Metrics = Arc<dyn Fn() -> String + Send + Sync>;

/// Whether a connection readiness follows is up.
type Connected = Arc<dyn Fn() -> bool + Send + Sync>;

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Health");
        d.field("shutdown", &self.shutdown)
            .field("relay", &self.relay.is_some())
            .field("load", &self.load)
            .field("metrics", &self.metrics.is_some())
            .field("port", &self.port)
            .finish()
    }
}

impl Health {
    /// Probes for the calls that follow `shutdown` (the one given to
    /// [`HostBuilder::shutdown`](crate::host::HostBuilder::shutdown)).
    pub fn new(shutdown: &Shutdown) -> Self {
        Health {
            shutdown: shutdown.clone(),
            relay: None,
            load: None,
            metrics: None,
            port: PortLimits::default(),
        }
    }

    /// [`serve`](Self::serve) also answers `GET /metrics` with what `render` returns, as
    /// `text/plain` (Prometheus's text format: `PrometheusHandle::render` of
    /// metrics-exporter-prometheus), called once per request.
    #[must_use]
    pub fn metrics(mut self, render: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.metrics = Some(Arc::new(render));
        self
    }

    /// The most connections [`serve`](Self::serve) holds at once (default 32, at least 1): a
    /// connection past it is answered `503` and closed at once, so a peer that opens thousands
    /// cannot take the file descriptors the voice port needs. (A platform's probes open one or
    /// two at a time; keep the probe port off the public network all the same.)
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.port.max_connections = n.max(1);
        self
    }

    /// How long a connection to [`serve`](Self::serve)'s port has to send a whole request head,
    /// the first and each next one on a kept-alive connection (default 10 s, the voice port's
    /// handshake deadline): a connection that sends nothing, or a byte at a time, is closed then.
    #[must_use]
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.port.header_timeout = timeout;
        self
    }

    /// Readiness also follows `load`: not ready while it is above its threshold (the one given
    /// to [`HostBuilder::load`](crate::host::HostBuilder::load), which refuses the calls themselves).
    /// The body gains `"load"`.
    #[must_use]
    pub fn load(mut self, load: &Load) -> Self {
        self.load = Some(load.clone());
        self
    }

    /// Readiness also follows a relay connection, up while `connected` says so
    /// ([`Health::relay`](Self::relay) gives it the relay's).
    #[cfg_attr(not(feature = "relay"), allow(dead_code))]
    pub(crate) fn follow_relay(
        mut self,
        connected: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.relay = Some(Arc::new(connected));
        self
    }

    /// `GET /healthz` and `GET /readyz` as routes (what
    /// [`axum::health_routes`](super::axum::health_routes) gives).
    #[cfg(feature = "axum")]
    pub(crate) fn routes<S>(self) -> axum::Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        axum::Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            .route(
                "/readyz",
                axum::routing::get(move || {
                    let health = self.clone();
                    async move { health.readiness() }
                }),
            )
    }

    /// The shutdown readiness follows (the one [`Health::serve`] stops with).
    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// Whether the process takes calls now: not draining, its relay (if any) connected, its
    /// load (if any) at or below the threshold.
    pub fn ready(&self) -> bool {
        self.ready_at(self.load.as_ref().map(Load::current))
    }

    /// Whether the process takes calls with the load at `load`.
    fn ready_at(&self, load: Option<f64>) -> bool {
        !self.shutdown.is_draining()
            && self.relay_connected().unwrap_or(true)
            && !self
                .load
                .as_ref()
                .zip(load)
                .is_some_and(|(l, now)| now > l.limit())
    }

    /// Whether the relay readiness follows is connected, when it follows one.
    fn relay_connected(&self) -> Option<bool> {
        self.relay.as_ref().map(|connected| connected())
    }

    /// Serves `/healthz` and `/readyz` (and `/metrics`, with [`metrics`](Self::metrics)) on
    /// `listener` until the drain is done (everything else is 404), within
    /// [`max_connections`](Self::max_connections) and [`header_timeout`](Self::header_timeout).
    /// A failed accept (out of file descriptors) is retried every 100 ms and logged once, then
    /// counted every 10 s.
    ///
    /// # Errors
    /// None in practice. The `Result` leaves room for listener errors that are permanent.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let shutdown = self.shutdown.clone();
        let limits = self.port;
        let health = Arc::new(self);
        let app = hyper::service::service_fn(move |request: super::listen::Request| {
            let answer = health.answer(request.method(), request.uri().path());
            std::future::ready(Ok::<_, std::convert::Infallible>(answer))
        });
        super::listen::serve_http(listener, app, limits, Port::Probes, async move {
            shutdown.drained().await;
        })
        .await
    }

    /// The answer to a request for `path` on [`serve`](Self::serve)'s port: the probes (and
    /// `/metrics`) to `GET` and `HEAD` (`HEAD` with an empty body), `405` to another method,
    /// `404` elsewhere.
    fn answer(&self, method: &Method, path: &str) -> Response {
        let answer = match (path, &self.metrics) {
            ("/healthz", _) => plain(StatusCode::OK, "text/plain; charset=utf-8", "ok".into()),
            ("/readyz", _) => self.readiness(),
            ("/metrics", Some(render)) => {
                plain(StatusCode::OK, "text/plain; version=0.0.4", render())
            }
            _ => {
                return plain(
                    StatusCode::NOT_FOUND,
                    "text/plain; charset=utf-8",
                    String::new(),
                );
            }
        };
        match *method {
            Method::GET => answer,
            Method::HEAD => answer.map(|_| String::new()),
            _ => {
                let mut refused = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "text/plain; charset=utf-8",
                    String::new(),
                );
                refused
                    .headers_mut()
                    .insert(header::ALLOW, header::HeaderValue::from_static("GET,HEAD"));
                refused
            }
        }
    }

    /// The answer to `/readyz`.
    pub(crate) fn readiness(&self) -> Response {
        let load = self.load.as_ref().map(Load::current);
        let ready = self.ready_at(load);
        let status = if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        let mut body = serde_json::json!({
            "ready": ready,
            "draining": self.shutdown.is_draining(),
            "sessions": self.shutdown.open(),
        });
        if let Some(connected) = self.relay_connected() {
            body["relay_connected"] = connected.into();
        }
        if let Some(load) = load {
            // Two decimals: a probe's reader wants the figure, not its noise.
            body["load"] = ((load * 100.0).round() / 100.0).into();
        }
        plain(status, "application/json", body.to_string())
    }
}

/// An answer of the probe port: a status, a content type, a body.
pub(crate) type Response = hyper::Response<String>;

/// The answer `status` with `body` of `content_type`.
fn plain(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut answer = hyper::Response::new(body);
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    answer
}

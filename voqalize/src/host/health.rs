//! Liveness and readiness for a platform's probes: [`Health`] answers `/healthz` (the process is
//! up) and `/readyz` (it takes calls: not draining), on the direct leg's own axum server
//! ([`axum::health_routes`](super::axum::health_routes)) or on a small server of its own for a
//! process that serves only over the relay ([`Health::serve`]).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

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
#[derive(Debug, Clone)]
pub struct Health {
    shutdown: Shutdown,
    #[cfg(feature = "relay")]
    relay: Option<crate::relay::Relay>,
    load: Option<Load>,
}

impl Health {
    /// Probes for the calls that follow `shutdown` (the one given to
    /// [`HostOptions::shutdown`](super::HostOptions::shutdown)).
    pub fn new(shutdown: &Shutdown) -> Self {
        Health {
            shutdown: shutdown.clone(),
            #[cfg(feature = "relay")]
            relay: None,
            load: None,
        }
    }

    /// Readiness also follows `load`: not ready while it is above its threshold (the one given
    /// to [`HostOptions::load`](super::HostOptions::load), which refuses the calls themselves).
    /// The body gains `"load"`.
    #[must_use]
    pub fn load(mut self, load: &Load) -> Self {
        self.load = Some(load.clone());
        self
    }

    /// Readiness also follows `relay`'s connection: not ready while it is down (the process
    /// could take no call then). The body gains `"relay_connected"`.
    #[cfg(feature = "relay")]
    #[must_use]
    pub fn relay(mut self, relay: &crate::relay::Relay) -> Self {
        self.relay = Some(relay.clone());
        self
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
        #[cfg(feature = "relay")]
        if let Some(relay) = &self.relay {
            return Some(relay.connected());
        }
        None
    }

    /// Serves `/healthz` and `/readyz` on `listener` until the drain is done (everything else is
    /// 404).
    ///
    /// # Errors
    /// The server failed.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let shutdown = self.shutdown.clone();
        let app = super::axum::health_routes(self);
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown.drained().await;
            })
            .await
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
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

//! Liveness and readiness for a platform's probes: [`Health`] answers `/healthz` (the process is
//! up) and `/readyz` (it takes calls: not draining), on the direct leg's own axum server
//! ([`axum::health_routes`](super::axum::health_routes)) or on a small server of its own for a
//! process that serves only over the relay ([`Health::serve`]).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Shutdown;

/// What the probes read: whether this process takes calls, and how many it hosts.
///
/// `/healthz` is always `200 ok` while the process answers. `/readyz` is `200` while the process
/// takes calls and `503` once its [`Shutdown`] drains, so a load balancer sends new calls
/// elsewhere while the running ones finish; both bodies are JSON:
/// `{"ready": true, "draining": false, "sessions": 3}`.
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
}

impl Health {
    /// Probes for the calls that follow `shutdown` (the one given to
    /// [`HostOptions::shutdown`](super::HostOptions::shutdown)).
    pub fn new(shutdown: &Shutdown) -> Self {
        Health {
            shutdown: shutdown.clone(),
        }
    }

    /// Whether the process takes calls now.
    pub fn ready(&self) -> bool {
        !self.shutdown.is_draining()
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
        let ready = self.ready();
        let status = if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        let body = serde_json::json!({
            "ready": ready,
            "draining": self.shutdown.is_draining(),
            "sessions": self.shutdown.open(),
        });
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

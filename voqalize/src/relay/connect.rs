//! Dialing the relay: the upgrade with its headers, TLS for `wss://`, and the backoff between
//! attempts (one reconnect authority: only this loop dials).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::http::header::InvalidHeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{Authorization, Relay};

/// The relay connection.
pub(super) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Why [`Relay::serve`](super::Relay::serve) or [`build`](super::RelayBuilder::build) stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The builder's settings cannot work.
    #[error("relay configuration: {0}")]
    Config(String),
    /// The relay refused the upgrade with HTTP 401 or 403: the API key (or the provider's token)
    /// is not accepted. Check `VOQAL_API_KEY` against the key in the Voqalize console. Not retried.
    #[error(
        "the relay refused this agent (HTTP {status}): check the API key (VOQAL_API_KEY) against the \
         key in the Voqalize console"
    )]
    AuthRejected {
        /// 401 or 403.
        status: u16,
    },
    /// The relay closed with 4000 ("no agent"): it does not accept this agent. Not retried.
    #[error("the relay closed with 4000 (no agent): it does not accept this agent")]
    NoAgent,
}

pub(super) fn header_value(text: &str) -> Result<HeaderValue, InvalidHeaderValue> {
    HeaderValue::from_str(text)
}

/// How long one connect attempt may take.
const ATTEMPT: Duration = Duration::from_secs(10);
/// The first and the longest wait between attempts.
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(60);

/// What one attempt gave.
enum Attempt {
    Open(Box<Socket>),
    /// Worth retrying (connection refused, DNS, timeout, HTTP 5xx...), with the reason to log.
    Retry(String),
}

/// Dials until a connection opens; fails at once only when the relay refuses the agent.
pub(super) async fn connect(relay: &Relay) -> Result<Box<Socket>, RelayError> {
    let mut delay = FIRST_DELAY;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        match once(relay).await? {
            Attempt::Open(socket) => return Ok(socket),
            Attempt::Retry(why) => {
                tracing::warn!(
                    "relay: connect attempt {attempt} failed ({why}); retrying in {delay:?}"
                );
                tokio::time::sleep(jittered(delay)).await;
                delay = (delay * 2).min(MAX_DELAY);
            }
        }
    }
}

/// `delay` ±10 %, so that many agents do not reconnect in step.
fn jittered(delay: Duration) -> Duration {
    // A cheap, good-enough spread: the clock's nanoseconds, not a cryptographic source.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let factor = 0.9 + 0.2 * (f64::from(nanos % 1000) / 1000.0);
    delay.mul_f64(factor)
}

async fn once(relay: &Relay) -> Result<Attempt, RelayError> {
    let mut request = match relay.url.as_str().into_client_request() {
        Ok(r) => r,
        Err(e) => return Err(RelayError::Config(format!("bad relay URL: {e}"))),
    };
    let authorization = match &relay.authorization {
        Authorization::Static(value) => value.clone(),
        Authorization::Provider(provider) => provider(),
    };
    let headers = request.headers_mut();
    match (header_value(&relay.version), header_value(&authorization)) {
        (Ok(version), Ok(auth)) => {
            headers.insert("x-agent-version", version);
            headers.insert("authorization", auth);
        }
        _ => {
            return Ok(Attempt::Retry(
                "a header value is not valid HTTP".to_owned(),
            ));
        }
    }
    let config = relay.options.websocket_config();
    let dial = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(config),
        true,
        Some(connector()),
    );
    match tokio::time::timeout(ATTEMPT, dial).await {
        Err(_) => Ok(Attempt::Retry(format!("no answer within {ATTEMPT:?}"))),
        Ok(Ok((socket, _))) => Ok(Attempt::Open(Box::new(socket))),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            if status == 401 || status == 403 {
                tracing::error!("relay: connect refused with HTTP {status}; not retrying");
                Err(RelayError::AuthRejected { status })
            } else {
                Ok(Attempt::Retry(format!("HTTP {status}")))
            }
        }
        Ok(Err(e)) => Ok(Attempt::Retry(e.to_string())),
    }
}

/// TLS for `wss://`: rustls with ring and the platform's roots, as the model layers use.
fn connector() -> tokio_tungstenite::Connector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier)
        .map(|builder| builder.with_no_client_auth());
    match config {
        Ok(config) => tokio_tungstenite::Connector::Rustls(Arc::new(config)),
        Err(e) => {
            // Without TLS a `ws://` relay still works; a `wss://` one fails to connect, and says why.
            tracing::error!("relay: TLS is not available ({e})");
            tokio_tungstenite::Connector::Plain
        }
    }
}

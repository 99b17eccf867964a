//! Dialing the relay: the upgrade with its headers, TLS for `wss://`, the socket's limits and TCP
//! keepalive, and the backoff between attempts and connections (one reconnect authority: only
//! this module dials).

use std::sync::Arc;
use std::time::Duration;

use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::http::header::InvalidHeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::outbound::{BATCH_BYTES, Socket};
use super::{Authorization, PREFIX, Relay, Settings};
use crate::logline::outside;

/// Why [`Relay::serve`](super::Relay::serve) or [`build`](crate::host::HostBuilder::build) stopped.
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
    /// Every connect attempt for [`RelayBuilder::give_up_after`](crate::host::HostBuilder::give_up_after)
    /// failed in a way waiting does not heal: the host does not resolve, or TLS fails.
    #[error("the relay cannot be reached: {why} (every attempt for {lasted:?})")]
    Unreachable {
        /// The last attempt's failure, e.g. `the host relay.example does not resolve`.
        why: String,
        /// How long the attempts went on.
        lasted: Duration,
    },
}

pub(super) fn header_value(text: &str) -> Result<HeaderValue, InvalidHeaderValue> {
    HeaderValue::from_str(text)
}

/// How long one connect attempt may take.
const ATTEMPT: Duration = Duration::from_secs(10);

/// The wait before each redial, kept across connections: it doubles after every failed attempt
/// and every connection that did not stay up for `reset_after`, and starts over only after one
/// that did. A relay that accepts and closes at once is backed off like one that refuses.
pub(super) struct Backoff {
    first: Duration,
    max: Duration,
    reset_after: Duration,
    next: Duration,
}

impl Backoff {
    pub(super) fn new(settings: &Settings) -> Self {
        Backoff {
            first: settings.first_delay,
            max: settings.max_delay,
            reset_after: settings.backoff_reset_after,
            next: settings.first_delay,
        }
    }

    /// The wait before the next attempt (before jitter).
    pub(super) fn delay(&self) -> Duration {
        self.next
    }

    /// A connection ended after `up`: one that stayed up long enough starts the delay over.
    pub(super) fn connection_ended(&mut self, up: Duration) {
        if up >= self.reset_after {
            self.next = self.first;
        }
    }

    /// Waits the delay (±10 %), then doubles it for the next time.
    pub(super) async fn wait(&mut self) {
        tokio::time::sleep(jittered(self.next)).await;
        self.next = self.next.saturating_mul(2).min(self.max);
    }
}

/// What one attempt gave.
enum Attempt {
    Open(Box<Socket>),
    /// Worth retrying (connection refused, timeout, HTTP 5xx...): a relay not up yet, with the
    /// reason to log.
    Retry(String),
    /// Retried, but waiting is not what heals it (the host does not resolve, TLS fails): after
    /// `give_up_after` of these alone, `serve` stops.
    Lasting(String),
}

/// Dials until a connection opens, waiting `backoff` between attempts; fails at once only when
/// the relay refuses the agent.
pub(super) async fn connect(
    relay: &Relay,
    backoff: &mut Backoff,
) -> Result<Box<Socket>, RelayError> {
    let mut attempt = 0u32;
    // Since when every attempt failed in a lasting way.
    let mut lasting: Option<tokio::time::Instant> = None;
    loop {
        attempt += 1;
        let why = match once(relay).await? {
            Attempt::Open(socket) => return Ok(socket),
            Attempt::Retry(why) => {
                lasting = None;
                why
            }
            Attempt::Lasting(why) => {
                let since = *lasting.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= relay.settings.give_up_after {
                    tracing::error!("relay: {}; giving up", outside(&why));
                    return Err(RelayError::Unreachable {
                        why,
                        lasted: since.elapsed(),
                    });
                }
                why
            }
        };
        tracing::warn!(
            "relay: connect attempt {attempt} failed ({}); retrying in {:?}",
            outside(&why),
            backoff.delay()
        );
        backoff.wait().await;
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

/// The relay socket's buffers and limits: a message (and a frame) may be a session's largest plus
/// its prefix plus the headroom, 8 MiB + 16 bytes at the defaults (so one over a session's limit
/// reaches the demux, which ends that session only; tungstenite holds it whole, once, for the
/// one connection); the write buffer holds one batch until its flush.
fn websocket_config(relay: &Relay) -> WebSocketConfig {
    let options = &relay.options;
    let max_message = options
        .max_message()
        .saturating_add(PREFIX)
        .saturating_add(relay.settings.frame_headroom);
    // A batch, then at most one more frame (never bigger than a session's backlog) and a Ping.
    let max_write = BATCH_BYTES + relay.session_backlog() + 1024;
    options
        .websocket_config()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(BATCH_BYTES)
        .max_write_buffer_size(max_write)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
}

/// The relay socket's read buffer: one connection carries every call.
const READ_BUFFER: usize = 16 * 1024;

/// TCP keepalive on the dialled socket, below the WebSocket Pings (see
/// [`crate::host::set_keepalive`]).
fn set_keepalive(socket: &Socket) {
    match socket.get_ref() {
        MaybeTlsStream::Plain(tcp) => crate::host::set_keepalive(tcp),
        MaybeTlsStream::Rustls(tls) => crate::host::set_keepalive(tls.get_ref().0),
        _ => {}
    }
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
    // The host is resolved first, so that a name that does not resolve is told from a relay that
    // is not up yet (tungstenite reports both as I/O errors).
    if let (Some(host), Some(port)) = (
        request.uri().host(),
        request
            .uri()
            .port_u16()
            .or(match request.uri().scheme_str() {
                Some("wss") => Some(443),
                _ => Some(80),
            }),
    ) {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let resolved = tokio::time::timeout(ATTEMPT, tokio::net::lookup_host((host, port))).await;
        match resolved.map(|found| found.map(|mut addrs| addrs.next().is_some())) {
            Ok(Ok(true)) => {}
            Ok(Ok(false) | Err(_)) => {
                return Ok(Attempt::Lasting(format!(
                    "the host {host} does not resolve"
                )));
            }
            Err(_) => return Ok(Attempt::Retry(format!("resolving {host} timed out"))),
        }
    }
    let config = websocket_config(relay);
    let dial = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(config),
        true,
        Some(connector()),
    );
    match tokio::time::timeout(ATTEMPT, dial).await {
        Err(_) => Ok(Attempt::Retry(format!("no answer within {ATTEMPT:?}"))),
        Ok(Ok((socket, _))) => {
            set_keepalive(&socket);
            Ok(Attempt::Open(Box::new(socket)))
        }
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            if status == 401 || status == 403 {
                tracing::error!("relay: connect refused with HTTP {status}; not retrying");
                Err(RelayError::AuthRejected { status })
            } else {
                Ok(Attempt::Retry(format!("HTTP {status}")))
            }
        }
        Ok(Err(e @ tokio_tungstenite::tungstenite::Error::Tls(_))) => {
            Ok(Attempt::Lasting(format!("TLS failed: {e}")))
        }
        // The TLS handshake's own failure reaches us as an I/O error: one carrying rustls's
        // (a certificate refused, a protocol error), or tokio-rustls's end of stream in the
        // handshake (a server that does not speak TLS on that port).
        Ok(Err(tokio_tungstenite::tungstenite::Error::Io(e))) if tls_handshake_failed(&e) => {
            Ok(Attempt::Lasting(format!("TLS failed: {e}")))
        }
        Ok(Err(e)) => Ok(Attempt::Retry(e.to_string())),
    }
}

/// Whether `e` is the TLS handshake failing, as tokio-rustls reports it.
fn tls_handshake_failed(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
        || (e.kind() == std::io::ErrorKind::UnexpectedEof
            && e.to_string().contains("tls handshake"))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(url: &str) -> Relay {
        Relay::builder(url, "v9")
            .api_key("k")
            .reconnect_backoff(Duration::from_millis(1), Duration::from_millis(4))
            .backoff_reset_after(Duration::from_secs(30))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn the_delay_doubles_until_a_connection_stayed_up_long_enough() {
        let mut backoff = Backoff::new(&relay("ws://127.0.0.1:1/agent").settings);
        let ms = Duration::from_millis;
        assert_eq!(backoff.delay(), ms(1));
        backoff.wait().await;
        // A connection that closed at once does not start the delay over.
        backoff.connection_ended(ms(5));
        assert_eq!(backoff.delay(), ms(2));
        backoff.wait().await;
        backoff.wait().await;
        assert_eq!(backoff.delay(), ms(4), "at most max_delay");
        backoff.connection_ended(Duration::from_secs(30));
        assert_eq!(backoff.delay(), ms(1));
    }

    #[tokio::test]
    async fn the_dialled_socket_has_tcp_keepalive() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            tokio_tungstenite::accept_async(stream).await.unwrap()
        });
        let Attempt::Open(socket) = once(&relay(&format!("ws://{addr}/agent"))).await.unwrap()
        else {
            panic!("the stand-in accepts");
        };
        let MaybeTlsStream::Plain(tcp) = socket.get_ref() else {
            panic!("ws:// is plain TCP");
        };
        assert!(socket2::SockRef::from(tcp).keepalive().unwrap());
        drop(server.await.unwrap());
    }
}

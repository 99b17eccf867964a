//! The direct leg's own WebSocket server: an accept loop ([`serve`]) or one accepted TCP stream
//! ([`accept`]). Built on tokio-tungstenite, whose types it does not name: the adapter that does
//! is [`tungstenite`](super::tungstenite) (feature `tungstenite`).

use super::coalesce::Coalesced;
use std::borrow::Borrow;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::handshake::server::{
    Callback, ErrorResponse, Request, Response,
};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tracing::Instrument;

use crate::recover::lock;

use super::listen::{AcceptFailures, Port, accept as accept_next};
use super::ws::TungsteniteChannel;
use super::{
    Admission, DrainReport, HostError, HostOptions, MakeBrain, Refused, Upgrade, run_session,
};

/// Accepts connections on `listener`, hosting one call per connection in its own task, until the
/// [`Shutdown`](super::Shutdown) the options follow ([`HostBuilder::shutdown`](crate::host::HostBuilder::shutdown)) has drained: it
/// returns once no call is left, with what the drain did ([`DrainReport`]: the calls that
/// finished during it, the calls it ended). Without a shutdown it serves forever. A failed
/// handshake or a rejected token affects that connection only; a plain HTTP request is answered
/// `426 Upgrade Required` ([`AcceptError::NotWebSocket`]); a failed `accept` (for example too
/// many open files) is retried every 100 ms, so the server stays up, and logged once, then
/// counted every 10 s.
///
/// # Errors
/// None in practice. The `Result` leaves room for listener errors that are permanent.
pub async fn serve<M: MakeBrain>(
    listener: TcpListener,
    factory: M,
    options: HostOptions,
) -> std::io::Result<DrainReport> {
    let factory = Arc::new(factory);
    let admission = Admission::new(&options);
    crate::metrics::leg_serving(crate::metrics::leg(true));
    // Shared: a clone in each call's task would be a quarter of a kilobyte of every call.
    let options = Arc::new(options);
    let shutdown = options.shutting().cloned();
    let drained = async move {
        match shutdown {
            Some(shutdown) => shutdown.drained().await,
            None => std::future::pending().await,
        }
    };
    let mut drained = std::pin::pin!(drained);
    let mut failures = AcceptFailures::new(Port::Voice);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept_next(&listener, &mut failures) => accepted,
            report = &mut drained => return Ok(report),
        };
        // The call's future is made here and chained, so the task holds it once and the peer's
        // address, not the values it was made from as well (an async block would hold the
        // future twice: as what it captured and as what it awaits).
        let call = accepting(stream, factory.clone(), options.clone(), admission.clone());
        tokio::spawn(
            call.map(move |accepted| {
                if let Err(e) = accepted {
                    match e {
                        AcceptError::Host(HostError::Rejected { .. }) => {}
                        AcceptError::AtCapacity => {
                            tracing::debug!("brain: refused {peer}: at max_sessions");
                        }
                        AcceptError::ShuttingDown => {
                            tracing::debug!("brain: refused {peer}: shutting down");
                        }
                        AcceptError::Overloaded => {
                            tracing::debug!("brain: refused {peer}: above the load threshold");
                        }
                        AcceptError::WebPage => {
                            tracing::debug!("brain: refused {peer}: an upgrade from a web page");
                        }
                        // A health check's or a load balancer's TCP probe, a port scan, a plain
                        // HTTP request: no call was lost, and any peer can repeat it at will, so
                        // it is no warning.
                        e @ (AcceptError::Handshake(_)
                        | AcceptError::HandshakeTimeout
                        | AcceptError::NotWebSocket) => {
                            tracing::debug!(
                                "brain: connection from {peer} was not a WebSocket call: {}",
                                crate::logline::outside(&crate::logline::chain(&e))
                            );
                        }
                        // The error may quote what the peer sent (a handshake's bytes).
                        e => tracing::warn!(
                            "brain: connection from {peer}: {}",
                            crate::logline::outside(&crate::logline::chain(&e))
                        ),
                    }
                }
            })
            .in_current_span(),
        );
    }
}

pub use super::listen::{HANDSHAKE_TIMEOUT, set_keepalive};

/// Why [`accept`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptError {
    /// The WebSocket handshake failed.
    #[error("websocket handshake failed")]
    Handshake(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The peer did not complete the handshake within [`HANDSHAKE_TIMEOUT`].
    #[error("websocket handshake did not complete within {HANDSHAKE_TIMEOUT:?}")]
    HandshakeTimeout,
    /// The peer sent an HTTP request that is no WebSocket upgrade (a browser's or a scanner's
    /// `GET /`): it was answered `426 Upgrade Required`, with a line saying what this port is.
    #[error("an HTTP request that is no WebSocket upgrade (answered 426)")]
    NotWebSocket,
    /// The process hosts [`HostBuilder::max_sessions`](crate::host::HostBuilder::max_sessions) calls already: the upgrade was answered
    /// with HTTP 503.
    #[error("refused: this process hosts its maximum number of calls")]
    AtCapacity,
    /// The server is shutting down ([`HostBuilder::shutdown`](crate::host::HostBuilder::shutdown)): the upgrade was answered with
    /// HTTP 503 and `Retry-After`.
    #[error("refused: this process is shutting down")]
    ShuttingDown,
    /// The process's load is above its threshold ([`HostBuilder::load`](crate::host::HostBuilder::load)): the upgrade was
    /// answered with HTTP 503 and `Retry-After`.
    #[error("refused: this process is above its load threshold")]
    Overloaded,
    /// An unverified brain refuses upgrades from web pages (with an `Origin` header): the
    /// upgrade was answered with HTTP 403.
    #[error("refused: an upgrade from a web page to a brain that checks no tokens")]
    WebPage,
    /// The call could not be hosted.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// Completes the WebSocket handshake on `stream` (within [`HANDSHAKE_TIMEOUT`], with `TCP_NODELAY`
/// set), reading `?session_id=` and the `Authorization`
/// header, then hosts the call with [`run_session`], as one of the calls `admission` counts (a
/// connection past its cap is answered 503).
///
/// # Errors
/// [`AcceptError::Handshake`], or the [`HostError`] of [`run_session`].
#[allow(clippy::result_large_err)] // the ErrorResponse type is fixed by tungstenite's callback
pub fn accept<'a, M: MakeBrain>(
    stream: TcpStream,
    factory: Arc<M>,
    options: &'a HostOptions,
    admission: &'a Admission,
) -> impl Future<Output = Result<(), AcceptError>> + Send + 'a {
    accepting(stream, factory, options, admission)
}

/// [`accept`], with the options and the admission held as the caller holds them: borrowed, or
/// shared by a server's calls. The call's future owns what it uses and holds no copy of it.
#[allow(clippy::result_large_err)] // as `accept`
#[allow(
    clippy::manual_async_fn,
    reason = "an async block holds its arguments once (see `runtime`'s module note)"
)]
fn accepting<M, O, A>(
    stream: TcpStream,
    factory: Arc<M>,
    options: O,
    admission: A,
) -> impl Future<Output = Result<(), AcceptError>> + Send
where
    M: MakeBrain,
    O: Borrow<HostOptions> + Send + Sync,
    A: Borrow<Admission> + Send + Sync,
{
    async move {
        let (options, admission) = (options.borrow(), admission.borrow());
        let admitted = admission.admit();
        let full = admitted.is_none();
        let seen = Arc::new(Mutex::new(Upgrade::default()));
        let cell = seen.clone();
        let no_web_pages = options.refuses_web_pages();
        let (draining, overloaded) = (options.draining(), options.overloaded());
        let refused = Arc::new(Mutex::new(None));
        let told = refused.clone();
        let callback = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
            let web_page = no_web_pages && req.headers().contains_key("origin");
            if let Some(why) = Refused::first(draining, overloaded, web_page, full) {
                *lock(&told) = Some(why);
                let mut refusal = ErrorResponse::new(Some(why.body().to_owned()));
                *refusal.status_mut() =
                    tokio_tungstenite::tungstenite::http::StatusCode::from_u16(why.status())
                        .unwrap_or(
                            tokio_tungstenite::tungstenite::http::StatusCode::SERVICE_UNAVAILABLE,
                        );
                if let Some(s) = why.retry_after() {
                    refusal.headers_mut().insert("retry-after", s.into());
                }
                return Err(refusal);
            }
            let authorization = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            *lock(&cell) = Upgrade::from_query(req.uri().query(), authorization);
            Ok(resp)
        };
        // Speech chunks are small and latency-bound: never let Nagle hold one back.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("brain: could not set TCP_NODELAY: {e}");
        }
        set_keepalive(&stream);
        // Boxed: the handshake's state is large and only lives for the handshake; inline, it would
        // size this future (which lives as long as the call) for its whole life.
        let ws = Box::pin(handshake(stream, callback, options.websocket_config()))
            .await
            .map_err(|e| match (*lock(&refused), e) {
                (Some(Refused::Draining), _) => AcceptError::ShuttingDown,
                (Some(Refused::Overloaded), _) => AcceptError::Overloaded,
                (Some(Refused::WebPage), _) => AcceptError::WebPage,
                (Some(Refused::AtCapacity), _) => AcceptError::AtCapacity,
                (None, e) => e,
            })?;
        let upgrade = std::mem::take(&mut *lock(&seen));
        drop(seen);
        run_session(TungsteniteChannel::batched(ws), factory, upgrade, options).await?;
        drop(admitted);
        Ok(())
    }
}

/// The WebSocket handshake on `stream`, within [`HANDSHAKE_TIMEOUT`]. An HTTP request that is no
/// upgrade is answered `426 Upgrade Required` ([`AcceptError::NotWebSocket`]): tungstenite itself
/// would close without a word, and a person who opened the URL in a browser would see nothing.
async fn handshake<C: Callback + Unpin>(
    stream: TcpStream,
    callback: C,
    config: WebSocketConfig,
) -> Result<WebSocketStream<Coalesced<TcpStream>>, AcceptError> {
    let mut stream = Coalesced::new(stream);
    let shaken = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::accept_hdr_async_with_config(&mut stream, callback, Some(config)),
    )
    .await
    .map_err(|_| AcceptError::HandshakeTimeout)?;
    match shaken {
        // The handshake read nothing past the request (tungstenite refuses any byte after it) and
        // wrote its whole answer, so the socket is a WebSocket from its next byte on.
        Ok(ws) => drop(ws),
        Err(WsError::Protocol(e)) if not_an_upgrade(&e) => {
            let answer = super::refusal::upgrade_required();
            // A peer that does not read holds the socket no longer than a handshake may.
            let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
                stream.write_all(answer.as_bytes()).await?;
                stream.shutdown().await
            })
            .await;
            return Err(AcceptError::NotWebSocket);
        }
        Err(e) => return Err(AcceptError::Handshake(Box::new(e))),
    }
    Ok(WebSocketStream::from_raw_socket(stream, Role::Server, Some(config)).await)
}

/// Whether a failed handshake read a whole HTTP request that asked for no WebSocket (or not the
/// version this server speaks).
fn not_an_upgrade(e: &ProtocolError) -> bool {
    matches!(
        e,
        ProtocolError::WrongHttpMethod
            | ProtocolError::WrongHttpVersion
            | ProtocolError::MissingConnectionUpgradeHeader
            | ProtocolError::MissingUpgradeWebSocketHeader
            | ProtocolError::MissingSecWebSocketVersionHeader
            | ProtocolError::MissingSecWebSocketKey
    )
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn accepted_sockets_get_tcp_keepalive() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        super::set_keepalive(&server);
        assert!(socket2::SockRef::from(&server).keepalive().unwrap());
        drop(client);
    }
}

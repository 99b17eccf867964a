//! Accepting connections on a port anyone who can reach it may open, bounded: the voice port's
//! accept loop ([`serve`](super::serve)) and the small HTTP ports, the
//! probes ([`Health::serve`](super::Health::serve)) and the console
//! (`voqalize::console::Console::serve`).
//!
//! * A failed `accept` (the process is out of file descriptors, or of memory) is retried after
//!   [`ACCEPT_RETRY`], and logged once, then counted ([`AcceptFailures`]): at the fd limit it fails
//!   ten times a second, for as long as the limit is reached.
//! * An HTTP port ([`serve_http`]) holds at most [`PortLimits::max_connections`] connections (a
//!   connection past it is answered `503` and closed at once), so it can never take the
//!   descriptors the voice port needs; and a connection must send a whole request head within
//!   [`PortLimits::header_timeout`] (the voice port's handshake deadline by default), the first
//!   and each one after, or it is closed: a peer that opens connections and sends nothing, or a
//!   byte at a time, holds nothing for long.

use std::future::Future;
use std::io;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use super::Admission;
use crate::logline::Repeated;

/// Pause after a failed `accept` (file descriptors or memory exhausted) before trying again.
pub(crate) const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The most bytes of a request head (and of a response waiting to be written) an HTTP port
/// buffers per connection: a browser's request for the console, cookies included, fits.
const MAX_BUFFER_BYTES: usize = 64 * 1024;

/// The default of [`PortLimits::max_connections`]: far above what a platform's probes or one
/// developer's browser open at once.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 32;

/// Which port a line is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Port {
    /// The direct leg's WebSocket port.
    Voice,
    /// [`Health::serve`](super::Health::serve)'s port.
    Probes,
    /// The console's page and its calls.
    #[cfg(feature = "console")]
    Console,
}

impl Port {
    /// The prefix of its log lines.
    fn name(self) -> &'static str {
        match self {
            Port::Voice => "brain",
            Port::Probes => "probes",
            #[cfg(feature = "console")]
            Port::Console => "console",
        }
    }

    /// What its summary of failed accepts counts.
    fn failed_accepts(self) -> &'static str {
        match self {
            Port::Voice => "failed accepts on the voice port",
            Port::Probes => "failed accepts on the probe port",
            #[cfg(feature = "console")]
            Port::Console => "failed accepts on the console's port",
        }
    }

    /// What its summary of connections refused at the cap counts.
    fn refused(self) -> &'static str {
        match self {
            Port::Voice => "connections refused on the voice port",
            Port::Probes => "connections refused at the probe port's cap",
            #[cfg(feature = "console")]
            Port::Console => "connections refused at the console port's cap",
        }
    }
}

/// The failed accepts of one listener: the first is logged with its error, the rest counted and
/// summed up once per window ("skipped 99 failed accepts on the probe port in the last 10s").
#[derive(Debug)]
pub(crate) struct AcceptFailures {
    port: Port,
    repeated: Repeated,
}

impl AcceptFailures {
    /// The failures of `port`'s listener, summed up every 10 s.
    pub(crate) fn new(port: Port) -> Self {
        AcceptFailures {
            port,
            repeated: Repeated::new(port.failed_accepts()),
        }
    }

    /// Notes one failed accept: logged when it is the first of its window, counted otherwise.
    pub(crate) fn note(&mut self, error: &io::Error) {
        if self.repeated.allow() {
            tracing::warn!(
                "{}: accept failed ({error}); retrying every {ACCEPT_RETRY:?}, further failures \
                 are counted",
                self.port.name()
            );
        }
    }
}

/// The next connection on `listener`: a failed accept is noted in `failures` and retried after
/// [`ACCEPT_RETRY`] (the pending connection stays in the listen queue meanwhile).
pub(crate) async fn accept(
    listener: &TcpListener,
    failures: &mut AcceptFailures,
) -> (TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                failures.note(&e);
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}

/// The bounds of an HTTP port a stranger can reach.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortLimits {
    /// Connections held at once; past it a new one is answered `503` and closed.
    pub(crate) max_connections: usize,
    /// How long a connection has to send a whole request head, the first and each next one.
    pub(crate) header_timeout: Duration,
}

impl Default for PortLimits {
    fn default() -> Self {
        PortLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: HANDSHAKE_TIMEOUT,
        }
    }
}

/// How long a connection may take to complete the WebSocket handshake (the websockets library's
/// open timeout, which Voqalize's client uses too); also how long an HTTP port's connection has
/// for a request head, by default.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keepalive on an accepted socket: the kernel probes a peer that went silent after 30 s, every
/// 10 s, so a connection to a host that vanished (no FIN, no RST) fails even below the WebSocket
/// Pings. For an axum server, set it in `axum::serve(listener.tap_io(...))` the same way.
pub fn set_keepalive(stream: &TcpStream) {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(30))
        .with_interval(Duration::from_secs(10));
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!("brain: could not set TCP keepalive: {e}");
    }
}

/// The answer to a connection past the cap, written if the socket takes it at once.
const AT_CAP: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// A request as a port's service gets it.
pub(crate) type Request = hyper::Request<hyper::body::Incoming>;

/// Serves `app` (a hyper service: a `service_fn`, or an axum router through hyper-util's
/// `TowerToHyperService`) over HTTP/1.1 on `listener` within `limits` until `stop` resolves, then lets
/// each open connection finish its request and returns once none is left. A request that
/// upgrades (the console's WebSocket) leaves the count when it does: from then on its handler
/// owns the socket.
///
/// # Errors
/// None in practice: a failed accept is retried. The `Result` leaves room for listener errors
/// that are permanent.
pub(crate) async fn serve_http<S, B>(
    listener: TcpListener,
    app: S,
    limits: PortLimits,
    port: Port,
    stop: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: hyper::service::Service<Request, Response = hyper::Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let places = Admission::with_max(limits.max_connections.max(1));
    let mut failures = AcceptFailures::new(port);
    let mut refusals = Repeated::new(port.refused());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_BUFFER_BYTES);
    // Every connection's task holds a receiver; once the last is gone, `closed` resolves.
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener, &mut failures) => accepted,
            () = &mut stop => break,
        };
        let Some(place) = places.admit() else {
            if refusals.allow() {
                tracing::warn!(
                    "{}: refused a connection from {peer}: {} connections are open, its cap; \
                     further refusals are counted",
                    port.name(),
                    limits.max_connections
                );
            }
            let _ = stream.try_write(AT_CAP);
            continue;
        };
        set_keepalive(&stream);
        let connection = http
            .serve_connection(TokioIo::new(stream), app.clone())
            .with_upgrades();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = async { drop(stopped.wait_for(|stop| *stop).await) } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            // A header deadline, a reset, a peer that spoke no HTTP: no request was lost.
            if let Err(e) = served {
                tracing::debug!("{}: connection from {peer}: {e}", port.name());
            }
            drop(place);
        });
    }
    drop(stopped);
    let _ = stopping.send(true);
    stopping.closed().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At the fd limit `accept` fails ten times a second: one line says so, the rest are a count.
    #[test]
    fn failed_accepts_are_logged_once_then_counted() {
        let ((), text) = crate::logging::logged_at_debug(|| {
            let mut failures = AcceptFailures::new(Port::Probes);
            let emfile = io::Error::from_raw_os_error(24);
            for _ in 0..1_351 {
                failures.note(&emfile);
            }
        });
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("probes: accept failed (Too many open files"),
            "{text}"
        );
        assert!(
            lines[1].contains("skipped 1350 failed accepts on the probe port"),
            "{text}"
        );
    }
}

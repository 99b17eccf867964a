//! Why an upgrade is refused before the call is taken: one answer on both adapters.

/// An upgrade refused before the WebSocket is accepted, and how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The server drains ([`HostBuilder::shutdown`](crate::host::HostBuilder::shutdown)): `503` and
    /// `Retry-After`, another process will take the call.
    Draining,
    /// The load is above its threshold ([`HostBuilder::load`](crate::host::HostBuilder::load)): `503`
    /// and `Retry-After`.
    Overloaded,
    /// An unverified brain and an upgrade from a web page (an `Origin` header): `403`.
    WebPage,
    /// At [`HostBuilder::max_sessions`](crate::host::HostBuilder::max_sessions): `503`.
    AtCapacity,
}

/// The `Retry-After` of a refusal another process may take, in s.
const RETRY_AFTER_S: u16 = 1;

impl Refused {
    /// The first reason that applies, in the order a peer is best told them.
    pub(crate) fn first(
        draining: bool,
        overloaded: bool,
        web_page: bool,
        full: bool,
    ) -> Option<Self> {
        [
            (draining, Refused::Draining),
            (web_page, Refused::WebPage),
            (overloaded, Refused::Overloaded),
            (full, Refused::AtCapacity),
        ]
        .into_iter()
        .find_map(|(applies, why)| applies.then_some(why))
        .inspect(|why| crate::metrics::call_refused(why.label()))
    }

    /// The reason's label in the `voqalize_calls_refused_total` metric.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Refused::Draining => "draining",
            Refused::Overloaded => "overloaded",
            Refused::WebPage => "web_page",
            Refused::AtCapacity => "at_capacity",
        }
    }

    /// The HTTP status of the answer.
    pub(crate) fn status(self) -> u16 {
        match self {
            Refused::WebPage => 403,
            Refused::Draining | Refused::Overloaded | Refused::AtCapacity => 503,
        }
    }

    /// The `Retry-After` of the answer (s), when another process will take the call.
    pub(crate) fn retry_after(self) -> Option<u16> {
        match self {
            Refused::Draining | Refused::Overloaded => Some(RETRY_AFTER_S),
            Refused::WebPage | Refused::AtCapacity => None,
        }
    }

    /// The body of the answer.
    pub(crate) fn body(self) -> &'static str {
        match self {
            Refused::Draining => "this brain is shutting down; try another",
            Refused::Overloaded => "this brain is above its load threshold; try another",
            Refused::WebPage => {
                "this brain checks no tokens (development), so it takes no calls from web pages"
            }
            Refused::AtCapacity => "this brain hosts its maximum number of calls; try another",
        }
    }
}

/// The body of the answer to an HTTP request on the voice port that is no WebSocket upgrade (a
/// browser's or a scanner's `GET /`), on both adapters.
pub(crate) const NOT_WEBSOCKET: &str = "This is a Voqalize brain's WebSocket endpoint: Voqalize \
opens one WebSocket here per call. There is nothing to see over plain HTTP.\n";

/// The whole `426 Upgrade Required` answer the tungstenite adapter writes itself (RFC 9110
/// §15.5.22: it names the protocol to upgrade to; RFC 6455 §4.4: and the version spoken).
pub(crate) fn upgrade_required() -> String {
    format!(
        "HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nConnection: Upgrade, close\r\n\
         Sec-WebSocket-Version: 13\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\n\r\n{NOT_WEBSOCKET}",
        NOT_WEBSOCKET.len()
    )
}

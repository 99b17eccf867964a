//! [`EndReason`]: why a call ended, as `Brain::on_session_end` is told.

use std::fmt;

/// Why a call ended: what [`Brain::on_session_end`](crate::Brain::on_session_end) is told, and
/// what the session's last log line says.
///
/// `#[non_exhaustive]`: a later release may tell more reasons apart; match with a `_` arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// Voqalize ended the call with `End`: the caller hung up, or the platform closed the call.
    /// Also when the connection closed, failed or refused a send right after that `End` was read:
    /// the `End` is what ended the call.
    Ended,
    /// Voqalize cancelled the call with `Cancel`: stop at once (queued frames were dropped).
    Cancelled,
    /// This brain ended the call with [`Session::end`](crate::Session::end).
    ByBrain {
        /// The reason the brain gave (as it gave it: the brain's own text).
        reason: String,
    },
    /// The connection was lost before an `End` came.
    TransportLost(TransportLoss),
    /// One of the session's bounds was exceeded.
    BoundExceeded(BoundExceeded),
    /// The server is shutting down (the relay leg's `serve` was asked to stop).
    Shutdown,
}

/// How the connection was lost ([`EndReason::TransportLost`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportLoss {
    /// The peer closed the connection (or it ended) without sending `End`.
    Closed,
    /// Receiving failed: the connection was reset or broke. The transport's error, as text.
    Failed(String),
    /// Nothing came from the peer, not even a Pong, past the keepalive deadline: a half-open
    /// connection (the direct leg's `ping_interval` + `pong_timeout`).
    KeepaliveDeadline,
    /// Sending to the peer failed.
    SendFailed,
    /// The connection to the Cortex relay that carried the call was lost.
    RelayLost,
}

/// Which bound ended the call ([`EndReason::BoundExceeded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BoundExceeded {
    /// An inbound or outbound lane passed its hard bound: the peer floods the brain, or does not
    /// read what it sends (`HostBuilder::max_lane_frames` / `max_lane_bytes`).
    Lane,
    /// The peer sent a message over `HostBuilder::max_message_bytes`: on the direct leg the
    /// socket's limit (closed with 1009), on the relay leg the call's own (its `End` goes to the
    /// relay; the connection stays).
    InboundMessage,
    /// The brain built a frame over the socket's limit; `Error` and `End` went out instead.
    OutboundFrame,
}

impl EndReason {
    /// The reason's label in the `voqalize_calls_ended_total` metric.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            EndReason::Ended => "ended",
            EndReason::Cancelled => "cancelled",
            EndReason::ByBrain { .. } => "by_brain",
            EndReason::TransportLost(_) => "transport_lost",
            EndReason::BoundExceeded(_) => "bound_exceeded",
            EndReason::Shutdown => "shutdown",
        }
    }
}

impl BoundExceeded {
    /// The bound's label in the `voqalize_bounds_tripped_total` metric.
    pub(crate) fn label(self) -> &'static str {
        match self {
            BoundExceeded::Lane => "lane",
            BoundExceeded::InboundMessage => "inbound_message",
            BoundExceeded::OutboundFrame => "outbound_frame",
        }
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Ended => f.write_str("Voqalize ended the call"),
            EndReason::Cancelled => f.write_str("Voqalize cancelled the call"),
            EndReason::ByBrain { reason } => write!(
                f,
                "the brain ended the call ({})",
                crate::logline::outside(reason)
            ),
            EndReason::TransportLost(loss) => match loss {
                TransportLoss::Closed => f.write_str("the connection closed without End"),
                TransportLoss::Failed(e) => {
                    write!(f, "the connection failed: {}", crate::logline::outside(e))
                }
                TransportLoss::KeepaliveDeadline => {
                    f.write_str("nothing from the peer past the keepalive deadline")
                }
                TransportLoss::SendFailed => f.write_str("sending to the peer failed"),
                TransportLoss::RelayLost => f.write_str("the relay connection was lost"),
            },
            EndReason::BoundExceeded(bound) => f.write_str(match bound {
                BoundExceeded::Lane => "a lane passed its bound",
                BoundExceeded::InboundMessage => "the peer sent a message over the limit",
                BoundExceeded::OutboundFrame => "the brain built a frame over the limit",
            }),
            EndReason::Shutdown => f.write_str("the server is shutting down"),
        }
    }
}

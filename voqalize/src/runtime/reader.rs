//! The reader: decodes inbound frames, applies `Response`, `Interruption` and `Cancel` at once, and
//! queues the rest on the inbound lanes (docs/protocol.md §3.1).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::Limits;
use super::inbound::{Inbound, Lanes, Stop};
use super::turns::Control;
use crate::channel::{CLOSE_TOO_BIG, ChannelError, ChannelReceiver, Incoming};
use crate::logline::{Repeated, chain, outside};
use crate::record::Tape;
use crate::recover::lock;
use crate::session::outbound::Outbound;
use crate::session::{BoundExceeded, EndReason, TransportLoss};
use crate::wire::{self, Frame};

/// Reads until the channel closes or fails; returns the close code a failure calls for (1009 for
/// a message over the size limit). A peer that does not send `SessionStart` within
/// `limits.start_timeout` of the upgrade is dropped: an idle socket must not hold a call slot.
///
/// Each `Finalize` is stamped with how many outbound frames the writer had handed over when it was
/// read (`out`): the writer runs in this task, so the stamp is exact.
#[allow(
    clippy::manual_async_fn,
    reason = "an async block holds its arguments once (see the module note)"
)]
pub(super) fn read_loop(
    receiver: &mut impl ChannelReceiver,
    lanes: &Arc<Lanes>,
    out: &Outbound,
    control: &Control,
    limits: &Limits,
    tape: Option<&Tape>,
) -> impl Future<Output = Option<u16>> {
    async move {
        let start_deadline = Instant::now() + limits.start_timeout;
        // No silence deadline where the connection owns liveness (the relay leg): a quiet caller is
        // not a dead peer there.
        let silence = limits
            .session_keepalive
            .then(|| limits.ping_interval + limits.pong_timeout);
        let mut heard = Instant::now();
        let mut close = None;
        let mut why = EndReason::TransportLost(TransportLoss::Closed);
        let mut junk = Repeated::new("malformed, text or unknown frames");
        // One timer for the whole call, moved at each frame (no timer made per frame).
        let watchdog = sleep_until(start_deadline);
        tokio::pin!(watchdog);
        loop {
            let started = control.started.load(Ordering::Acquire);
            let deadline = match (started, silence) {
                (false, _) => Some(start_deadline),
                (true, Some(silence)) => Some(heard + silence),
                (true, None) => None,
            };
            if let Some(deadline) = deadline {
                watchdog.as_mut().reset(deadline);
            }
            let next = tokio::select! {
                next = receiver.recv() => next,
                () = &mut watchdog, if deadline.is_some() => {
                    if let Some(reason) = timed_out(started, silence, limits) {
                        why = reason;
                    }
                    break;
                }
            };
            heard = Instant::now();
            let bytes = match next {
                None => break,
                Some(Err(e)) => {
                    close = e.close_code();
                    why = ended_by(&e);
                    break;
                }
                Some(Ok(Incoming::Text(_))) => {
                    if junk.allow() {
                        tracing::warn!("session: received TEXT frame; ignoring");
                    }
                    continue;
                }
                Some(Ok(Incoming::Pong)) => continue,
                Some(Ok(Incoming::Binary(b))) => b,
            };
            if bytes.is_empty() {
                continue;
            }
            decoded(&bytes, &mut junk, lanes, out, control, limits, tape);
        }
        lanes.stop(Stop::Closed(why));
        close
    }
}

/// The watchdog fired: logs why, and returns the end reason when it is a keepalive's (no
/// `SessionStart` in time leaves the reason a closed transport).
fn timed_out(started: bool, silence: Option<Duration>, limits: &Limits) -> Option<EndReason> {
    if let (true, Some(silence)) = (started, silence) {
        tracing::warn!(
            "session: nothing from the peer for {silence:?}, not even a Pong; closing a half-open connection"
        );
        Some(EndReason::TransportLost(TransportLoss::KeepaliveDeadline))
    } else {
        tracing::warn!(
            "session: no SessionStart within {:?} of the upgrade; closing",
            limits.start_timeout
        );
        None
    }
}

/// One binary message: decoded (within `limits.max_json`), recorded, and routed; what does not
/// decode is skipped, logged through `junk`.
fn decoded(
    bytes: &[u8],
    junk: &mut Repeated,
    lanes: &Arc<Lanes>,
    out: &Outbound,
    control: &Control,
    limits: &Limits,
    tape: Option<&Tape>,
) {
    match wire::decode_limited(bytes, limits.max_json) {
        Ok(Some(frame)) => {
            if let Some(tape) = tape {
                tape.frame_in(bytes, &frame);
            }
            route(frame, lanes, out, control, limits.request_timeout);
        }
        Ok(None) => {
            if junk.allow() {
                tracing::warn!("wire: envelope with no known body (newer peer?); skipping");
            }
        }
        Err(wire::WireError::BadInit { session_id, why }) => {
            if junk.allow() {
                tracing::error!("session: {}", outside(&why));
            }
            let first = !control.started.swap(true, Ordering::AcqRel);
            start_lane(lanes, first, Inbound::BadStart(session_id));
        }
        Err(e) => {
            if junk.allow() {
                tracing::error!(
                    "session: malformed payload; skipping: {}",
                    outside(&e.to_string())
                );
            }
        }
    }
}

/// Why the session ends when its channel fails with `e`, logged as what happened.
fn ended_by(e: &ChannelError) -> EndReason {
    match (e.end_reason(), e.close_code()) {
        // The host ends the call: not a transport failure, though it comes the same way.
        (Some(EndReason::Shutdown), _) => {
            tracing::info!(
                "session: the drain ends the call (its timeout passed, or the shutdown was triggered again)"
            );
            EndReason::Shutdown
        }
        (Some(reason), _) => {
            tracing::info!("session: the call is ending: {reason}");
            reason.clone()
        }
        (None, code) => {
            tracing::info!("session: channel closed: {}", outside(&chain(e)));
            if code == Some(CLOSE_TOO_BIG) {
                return EndReason::BoundExceeded(BoundExceeded::InboundMessage);
            }
            // The transport's error can quote the peer: kept to 1 KiB.
            let mut error = chain(e);
            wire::clip(&mut error, 1024);
            EndReason::TransportLost(TransportLoss::Failed(error))
        }
    }
}

fn route(
    frame: Frame,
    lanes: &Arc<Lanes>,
    out: &Outbound,
    control: &Control,
    request_timeout: Duration,
) {
    if let Frame::SessionStart(_) = frame {
        let first = !control.started.swap(true, Ordering::AcqRel);
        return start_lane(lanes, first, Inbound::Frame(frame));
    } else if !control.started.load(Ordering::Acquire)
        && !matches!(frame, Frame::End | Frame::Cancel { .. })
    {
        tracing::debug!("dropping {} that arrived before SessionStart", frame.name());
        return;
    }
    match frame {
        Frame::Response(r) => match control.session.get() {
            Some(s) => s.settle_response(r),
            None => tracing::debug!("dropping a Response that arrived before SessionStart"),
        },
        Frame::Interruption { through_turn } => {
            crate::metrics::barge_in();
            control.interrupt(through_turn);
        }
        Frame::Cancel { .. } => lanes.stop(Stop::Cancel),
        Frame::End => {
            // End waits behind the frames queued before it; if the feeder is stuck in a callback,
            // it ends the session anyway after the request timeout.
            lanes.push_bulk(Inbound::Frame(Frame::End));
            let lanes_ = lanes.clone();
            let timer = tokio::spawn(async move {
                tokio::time::sleep(request_timeout).await;
                lanes_.stop(Stop::End);
            });
            if let Some(old) = lock(&control.end_timer).replace(timer) {
                old.abort();
            }
        }
        Frame::Finalize {
            speech_id,
            heard_text,
        } => lanes.push_bulk(Inbound::Finalize {
            speech_id,
            heard: heard_text,
            seen: out.handed(),
        }),
        other => lanes.push_bulk(Inbound::Frame(other)),
    }
}

/// The first SessionStart of a call rides the priority lane, ahead of everything (docs/protocol.md
/// §3.1). Any later one is only answered with an error, so it waits its turn on the bulk lane,
/// where a flood of them meets the lane's bounds like any other flood.
fn start_lane(lanes: &Lanes, first: bool, start: Inbound) {
    if first {
        lanes.push_priority(start);
    } else {
        lanes.push_bulk(start);
    }
}

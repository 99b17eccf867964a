//! The writer: sends the outbound lane FIFO, polled in the call's task beside the reader.

use std::sync::Arc;
use std::time::Duration;

use super::inbound::{Lanes, Stop};
use crate::channel::{ChannelError, ChannelSender};
use crate::session::outbound::Outbound;
use crate::wire::{self, Frame};

/// Sends the outbound lane FIFO. Returns the sender once the lane is closed and drained, or the
/// error of a failed send, which stops the session: a brain that cannot be heard is not kept
/// running.
///
/// Between frames it pings the peer every `ping_interval`, so that the reader hears from a
/// live peer even when the call is silent; `None` where the connection owns liveness (the relay
/// leg).
pub(super) async fn write_loop<S: ChannelSender>(
    mut sender: S,
    out: Arc<Outbound>,
    lanes: Arc<Lanes>,
    ping_interval: Option<Duration>,
) -> Result<S, ChannelError> {
    // Without pings the timer is never polled: its period only has to be valid.
    let period = ping_interval.unwrap_or(Duration::from_secs(3600));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            frame = out.pop() => frame,
            _ = ping.tick(), if ping_interval.is_some() => {
                // Boxed, as is each batch: inline, their state would size this task for the
                // call's whole life, while the writer mostly waits.
                if let Err(e) = Box::pin(sender.ping()).await {
                    tracing::info!("session: ping failed: {e}");
                }
                continue;
            }
        };
        let Some(frame) = frame else { break };
        match Box::pin(send_batch(&mut sender, &out, frame)).await {
            Ok(n) => out.wrote(n),
            Err(e) => {
                tracing::error!("session: send failed, ending the session: {e}");
                lanes.stop(Stop::SendFailed);
                out.close();
                return Err(e);
            }
        }
    }
    Ok(sender)
}

/// The most frames sent in one batch: one flush, one system call on a socket (docs/protocol.md §3).
const MAX_BATCH: u64 = 64;

/// Feeds `first` and every frame already queued behind it (up to [`MAX_BATCH`]), then flushes
/// once. Returns how many frames went out.
async fn send_batch<S: ChannelSender>(
    sender: &mut S,
    out: &Outbound,
    first: Frame,
) -> Result<u64, ChannelError> {
    let mut bytes = wire::encode(&first);
    drop(first);
    let mut sent = 0;
    loop {
        sender.feed(bytes).await?;
        sent += 1;
        let next = if sent < MAX_BATCH {
            out.try_pop()
        } else {
            None
        };
        match next {
            Some(frame) => bytes = wire::encode(&frame),
            None => break,
        }
    }
    sender.flush().await?;
    Ok(sent)
}

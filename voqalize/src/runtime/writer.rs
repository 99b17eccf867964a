//! The writer task: sends the outbound lane FIFO.

use std::sync::Arc;

use super::Limits;
use super::inbound::{Lanes, Stop};
use crate::channel::{ChannelError, ChannelSender};
use crate::session::outbound::Outbound;
use crate::wire;

/// Sends the outbound lane FIFO. Returns the sender once the lane is closed and drained, or the
/// error of a failed send, which stops the session: a brain that cannot be heard is not kept
/// running.
///
/// Between frames it pings the peer every `limits.ping_interval`, so that the reader hears from a
/// live peer even when the call is silent.
pub(super) async fn write_loop<S: ChannelSender>(
    mut sender: S,
    out: Arc<Outbound>,
    lanes: Arc<Lanes>,
    limits: Limits,
) -> Result<S, ChannelError> {
    let mut ping = tokio::time::interval_at(
        tokio::time::Instant::now() + limits.ping_interval,
        limits.ping_interval,
    );
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            frame = out.pop() => frame,
            _ = ping.tick() => {
                if let Err(e) = sender.ping().await {
                    tracing::info!("session: ping failed: {e}");
                }
                continue;
            }
        };
        let Some(frame) = frame else { break };
        let bytes = wire::encode(&frame);
        if let Err(e) = sender.send(bytes).await {
            tracing::error!("session: send failed, ending the session: {e}");
            lanes.stop(Stop::SendFailed);
            out.close();
            return Err(e);
        }
        out.wrote();
    }
    Ok(sender)
}

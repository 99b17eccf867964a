//! The writer task: sends the outbound lane FIFO.

use std::sync::Arc;

use super::inbound::{Lanes, Stop};
use crate::channel::{ChannelError, ChannelSender};
use crate::session::outbound::Outbound;
use crate::wire;

/// Sends the outbound lane FIFO. Returns the sender once the lane is closed and drained, or the
/// error of a failed send, which stops the session: a brain that cannot be heard is not kept
/// running.
pub(super) async fn write_loop<S: ChannelSender>(
    mut sender: S,
    out: Arc<Outbound>,
    lanes: Arc<Lanes>,
) -> Result<S, ChannelError> {
    while let Some(frame) = out.pop().await {
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

//! The writer: sends the outbound lane FIFO, polled in the call's task beside the reader.

use std::sync::Arc;
use std::time::Duration;

use super::inbound::{Lanes, Stop};
use super::out_of_line;
use crate::channel::{ChannelError, ChannelSender};
use crate::logline::{chain, outside};
use crate::record::Tape;
use crate::session::outbound::Outbound;
use crate::wire::{self, ErrorCode, ErrorFrame, Frame};

/// Sends the outbound lane FIFO. Returns the sender once the lane is closed and drained, or the
/// error of a failed send, which stops the session: a brain that cannot be heard is not kept
/// running.
///
/// No frame over `max_frame` bytes (the socket's message limit) is handed to the transport: the
/// call ends instead, with an `Error` and `End` in its place and a close frame after teardown
/// (docs/protocol.md §3.2). Handed over, the transport would fail the write and drop the socket
/// with nothing said.
///
/// Between frames it pings the peer every `ping_interval`, so that the reader hears from a
/// live peer even when the call is silent; `None` where the connection owns liveness (the relay
/// leg).
pub(super) async fn write_loop<S: ChannelSender>(
    mut sender: S,
    out: Arc<Outbound>,
    lanes: Arc<Lanes>,
    ping_interval: Option<Duration>,
    max_frame: usize,
    tape: Option<Arc<Tape>>,
) -> Result<S, ChannelError> {
    // Without pings the timer is never polled: its period only has to be valid.
    let period = ping_interval.unwrap_or(Duration::from_secs(3600));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            frame = out.pop() => frame,
            _ = ping.tick(), if ping_interval.is_some() => {
                if let Err(e) = out_of_line(sender.ping()).await {
                    tracing::info!("session: ping failed: {}", outside(&chain(&e)));
                }
                continue;
            }
        };
        let Some(frame) = frame else { break };
        match out_of_line(send_batch(
            &mut sender,
            &out,
            frame,
            max_frame,
            tape.as_deref(),
        ))
        .await
        {
            Ok(Batch::Sent(n)) => out.wrote(n),
            Ok(Batch::Refused(n)) => {
                out.wrote(n);
                lanes.stop(Stop::FrameTooBig);
                out.close();
                return Ok(sender);
            }
            Err(e) => {
                tracing::error!(
                    "session: send failed, ending the session: {}",
                    outside(&chain(&e))
                );
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

/// What a batch did.
enum Batch {
    /// This many frames went out.
    Sent(u64),
    /// This many frames went out, then one over the socket's limit came up: an `Error` and `End`
    /// went out in its place, and nothing more may follow.
    Refused(u64),
}

/// Feeds `first` and every frame already queued behind it (up to [`MAX_BATCH`]), then flushes
/// once.
async fn send_batch<S: ChannelSender>(
    sender: &mut S,
    out: &Outbound,
    first: Frame,
    max_frame: usize,
    tape: Option<&Tape>,
) -> Result<Batch, ChannelError> {
    let taped = |bytes: &[u8], kind: &'static str| {
        if let Some(tape) = tape {
            tape.frame_out(bytes, kind);
        }
    };
    let mut frame = first;
    let mut sent = 0;
    loop {
        let bytes = wire::encode(&frame);
        if bytes.len() > max_frame {
            let (name, size) = (frame.name(), bytes.len());
            drop((frame, bytes));
            tracing::error!(
                "session: the brain built a {name} frame of {size} bytes, over the socket's limit \
                 of {max_frame}; ending the call"
            );
            let refusal = Frame::Error(ErrorFrame {
                code: ErrorCode::Internal,
                message: format!(
                    "voqalize: a {name} frame over the socket's limit of {max_frame} bytes; the call is ended"
                ),
                fatal: true,
            });
            for frame in [refusal, Frame::End] {
                let bytes = wire::encode(&frame);
                taped(&bytes, frame.name());
                sender.feed(bytes).await?;
            }
            sender.flush().await?;
            return Ok(Batch::Refused(sent));
        }
        taped(&bytes, frame.name());
        drop(frame);
        // Counted before it is handed over: once the transport has it, the peer may answer it.
        out.handing();
        sender.feed(bytes).await?;
        sent += 1;
        let next = if sent < MAX_BATCH {
            out.try_pop()
        } else {
            None
        };
        match next {
            Some(next) => frame = next,
            None => break,
        }
    }
    sender.flush().await?;
    Ok(Batch::Sent(sent))
}

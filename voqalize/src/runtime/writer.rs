//! The writer: sends the outbound lane FIFO, polled in the call's task beside the reader and the
//! feeder.

use std::time::Duration;

use super::inbound::{Lanes, Stop};
use super::out_of_line;
use crate::channel::{ChannelError, ChannelSender};
use crate::logline::{chain, outside};
use crate::record::Tape;
use crate::session::outbound::Outbound;
use crate::wire::{self, ErrorCode, ErrorFrame, Frame};

/// Sends the outbound lane FIFO through `sender`. Returns once the lane is closed and drained, or
/// with the error of a failed send, which stops the session: a brain that cannot be heard is not
/// kept running.
///
/// No frame over `max_frame` bytes (the socket's message limit) is handed to the transport: the
/// call ends instead, with an `Error` and `End` in its place and a close frame after teardown
/// (docs/protocol.md §3.2). Handed over, the transport would fail the write and drop the socket
/// with nothing said.
///
/// Between frames it pings the peer every `ping_interval`, so that the reader hears from a
/// live peer even when the call is silent; `None` where the connection owns liveness (the relay
/// leg).
#[allow(
    clippy::manual_async_fn,
    reason = "an async block holds its arguments once (see the module note)"
)]
pub(super) fn write_loop<S: ChannelSender>(
    sender: &mut S,
    out: &Outbound,
    lanes: &Lanes,
    ping_interval: Option<Duration>,
    max_frame: usize,
    tape: Option<&Tape>,
) -> impl Future<Output = Result<(), ChannelError>> {
    async move {
        // Without pings the timer is never polled: its period only has to be valid.
        let period = ping_interval.unwrap_or(Duration::from_secs(3600));
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // The ping is sent after the `select!`, not in its branch: a branch's await would keep
            // the `select!`'s output (a frame's room) in this future for the whole call.
            let frame = loop {
                {
                    let woke = tokio::select! {
                        frame = out.pop() => Some(frame),
                        _ = ping.tick(), if ping_interval.is_some() => None,
                    };
                    if let Some(frame) = woke {
                        break frame;
                    }
                }
                if let Err(e) = out_of_line(sender.ping()).await {
                    tracing::info!("session: ping failed: {}", outside(&chain(&e)));
                }
            };
            let Some(frame) = frame else { break };
            match out_of_line(send_batch(sender, out, frame, max_frame, tape)).await {
                Ok(Batch::Sent(n)) => out.wrote(n),
                Ok(Batch::Refused(n)) => {
                    out.wrote(n);
                    lanes.stop(Stop::FrameTooBig);
                    out.close();
                    return Ok(());
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
        Ok(())
    }
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
///
/// Its future is boxed for each batch (see [`out_of_line`]), so it is kept small: no frame is
/// held across an `.await` (each is encoded and dropped before it is fed), and the refusal of
/// a frame over the limit is a step of its own. Past about a kilobyte, the allocator serves
/// each box from its slow path.
#[allow(
    clippy::manual_async_fn,
    reason = "an async block holds its arguments once (see the module note)"
)]
fn send_batch<S: ChannelSender>(
    sender: &mut S,
    out: &Outbound,
    first: Frame,
    max_frame: usize,
    tape: Option<&Tape>,
) -> impl Future<Output = Result<Batch, ChannelError>> {
    async move {
        let mut frame = first;
        let mut sent = 0;
        loop {
            let bytes = wire::encode(&frame);
            let name = frame.name();
            drop(frame);
            if bytes.len() > max_frame {
                let size = bytes.len();
                drop(bytes);
                out_of_line(refuse(sender, name, size, max_frame, tape)).await?;
                return Ok(Batch::Refused(sent));
            }
            if let Some(tape) = tape {
                tape.frame_out(&bytes, name);
            }
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
}

/// Sends an `Error` and `End` in place of a `name` frame of `size` bytes, over the socket's limit
/// of `max_frame` (nothing may follow them).
async fn refuse<S: ChannelSender>(
    sender: &mut S,
    name: &'static str,
    size: usize,
    max_frame: usize,
    tape: Option<&Tape>,
) -> Result<(), ChannelError> {
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
        if let Some(tape) = tape {
            tape.frame_out(&bytes, frame.name());
        }
        sender.feed(bytes).await?;
    }
    sender.flush().await
}

//! The outbound bulk lane of one session: every frame the brain emits, FIFO (docs/protocol.md §3).
//!
//! Pushing never blocks. Past the bound a droppable frame is shed ([`Shedding`]) and the brain
//! hears one `OVERLOAD` per congestion episode. `End` is the last frame: anything pushed after it
//! is dropped.

use std::sync::Mutex;

use tokio::sync::{Notify, mpsc};

use crate::queue::{Admitted, Shedding, overload};
use crate::recover::lock;
use crate::wire::{ErrorFrame, Frame};

pub(crate) const OUTBOUND_CONGESTED: &str =
    "voqalize: outbound queue full; dropping data frames until wire catches up";

/// Why a push did not queue the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    Queued,
    Shed,
    AfterEnd,
    /// Emitted by a turn that a barge-in or teardown has cancelled.
    TurnCancelled,
}

struct Lane {
    queue: Shedding<Frame>,
    ended: bool,
    closed: bool,
}

pub(crate) struct Outbound {
    lane: Mutex<Lane>,
    notify: Notify,
    local_errors: mpsc::UnboundedSender<ErrorFrame>,
}

impl Outbound {
    pub(crate) fn new(maxsize: usize, local_errors: mpsc::UnboundedSender<ErrorFrame>) -> Self {
        Outbound {
            lane: Mutex::new(Lane {
                queue: Shedding::new(maxsize),
                ended: false,
                closed: false,
            }),
            notify: Notify::new(),
            local_errors,
        }
    }

    pub(crate) fn push(&self, frame: Frame) -> Pushed {
        let mut lane = lock(&self.lane);
        if lane.ended || lane.closed {
            tracing::debug!("dropping {} emitted after End", frame.name());
            return Pushed::AfterEnd;
        }
        let is_end = matches!(frame, Frame::End);
        let droppable = frame.droppable();
        match lane.queue.push(frame, droppable) {
            Admitted::Shed { first } => {
                if first {
                    let _ = self.local_errors.send(overload(OUTBOUND_CONGESTED));
                }
                return Pushed::Shed;
            }
            Admitted::Queued => {}
        }
        if is_end {
            lane.ended = true;
        }
        drop(lane);
        self.notify.notify_one();
        Pushed::Queued
    }

    /// Waits for the next frame; `None` once the lane is closed and empty.
    pub(crate) async fn pop(&self) -> Option<Frame> {
        loop {
            let notified = self.notify.notified();
            {
                let mut lane = lock(&self.lane);
                if let Some(f) = lane.queue.pop() {
                    return Some(f);
                }
                if lane.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// No more frames will be accepted; `pop` drains what is queued, then returns `None`.
    pub(crate) fn close(&self) {
        lock(&self.lane).closed = true;
        self.notify.notify_one();
    }

    pub(crate) fn ended(&self) -> bool {
        lock(&self.lane).ended
    }
}

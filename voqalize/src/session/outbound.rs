//! The outbound bulk lane of one session: every frame the brain emits, FIFO (wire.md §1.8).
//!
//! Pushing never blocks. When the lane holds `maxsize` frames or more, a newly pushed droppable
//! frame (`SpeechChunk`, `RTVIFrame`) is shed and the brain hears one `OVERLOAD` error per
//! congestion episode; other frames queue past the bound. `End` is the last frame: anything pushed
//! after it is dropped (Decisions T-U2).

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::{Notify, mpsc};

use crate::wire::{ErrorCode, ErrorFrame, Frame};

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
    queue: VecDeque<Frame>,
    congested: bool,
    ended: bool,
    closed: bool,
}

pub(crate) struct Outbound {
    lane: Mutex<Lane>,
    notify: Notify,
    maxsize: usize,
    local_errors: mpsc::UnboundedSender<ErrorFrame>,
}

impl Outbound {
    pub(crate) fn new(maxsize: usize, local_errors: mpsc::UnboundedSender<ErrorFrame>) -> Self {
        Outbound {
            lane: Mutex::new(Lane {
                queue: VecDeque::new(),
                congested: false,
                ended: false,
                closed: false,
            }),
            notify: Notify::new(),
            maxsize: maxsize.max(1),
            local_errors,
        }
    }

    fn lane(&self) -> std::sync::MutexGuard<'_, Lane> {
        // A panic while holding this lock cannot leave the queue inconsistent (plain VecDeque ops).
        self.lane.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push(&self, frame: Frame) -> Pushed {
        let mut lane = self.lane();
        if lane.ended || lane.closed {
            tracing::debug!("dropping {} emitted after End", frame.name());
            return Pushed::AfterEnd;
        }
        if frame.droppable() && lane.queue.len() >= self.maxsize {
            if !lane.congested {
                lane.congested = true;
                let _ = self.local_errors.send(ErrorFrame {
                    code: ErrorCode::Overload,
                    message: OUTBOUND_CONGESTED.to_owned(),
                    fatal: false,
                });
            }
            return Pushed::Shed;
        }
        if matches!(frame, Frame::End) {
            lane.ended = true;
        }
        lane.queue.push_back(frame);
        drop(lane);
        self.notify.notify_one();
        Pushed::Queued
    }

    /// Waits for the next frame; `None` once the lane is closed and empty.
    pub(crate) async fn pop(&self) -> Option<Frame> {
        loop {
            let notified = self.notify.notified();
            {
                let mut lane = self.lane();
                if let Some(f) = lane.queue.pop_front() {
                    if lane.congested && lane.queue.len() <= (self.maxsize / 2).max(1) {
                        lane.congested = false;
                    }
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
        self.lane().closed = true;
        self.notify.notify_one();
    }

    pub(crate) fn ended(&self) -> bool {
        self.lane().ended
    }
}

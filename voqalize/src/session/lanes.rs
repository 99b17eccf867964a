//! The inbound lanes of one session (wire.md §1.8, with the Decisions of wire.md).
//!
//! The reader task puts frames here and the feeder takes them one at a time. `SessionStart` rides
//! the priority lane; everything else queues FIFO on the bulk lane, where a droppable frame
//! (`RTVIFrame`, `SpeechChunk`) arriving at or past the bound is shed, with one `OVERLOAD` error per
//! congestion episode. `Interruption` and `Response` never enter the lanes (the reader applies them
//! at once), and `Cancel` is a flag: it stops the feeder with queued data undelivered, so no flood
//! of priority frames can overflow anything (Decisions T-U8).

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::{Notify, mpsc, watch};

use crate::wire::{ErrorCode, ErrorFrame, Frame};

pub(crate) const INBOUND_CONGESTED: &str =
    "voqalize: inbound queue full; dropping data frames until consumer catches up";

/// How many SessionStarts may wait at once; more are bugs on the peer's side and are dropped.
const PRIORITY_BOUND: usize = 32;

/// What the reader hands the feeder.
#[derive(Debug)]
pub(crate) enum Inbound {
    Frame(Frame),
    /// A SessionStart whose `init` was not a JSON object (Decisions T-U3).
    BadStart(String),
}

/// Why the feeder stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `End` from Voqalize, after the frames queued before it.
    End,
    /// `Cancel` from Voqalize: queued frames are dropped.
    Cancel,
    /// The channel closed or failed to receive.
    Closed,
    /// Sending failed (Decisions T-U5).
    SendFailed(String),
}

pub(crate) enum Next {
    Item(Inbound),
    Stop(Stop),
}

struct State {
    priority: VecDeque<Inbound>,
    bulk: VecDeque<Inbound>,
    congested: bool,
    stop: Option<Stop>,
}

pub(crate) struct Lanes {
    state: Mutex<State>,
    notify: Notify,
    /// Flips to true when a stop reason is recorded, so a callback the feeder is stuck in can be
    /// abandoned.
    halt: watch::Sender<bool>,
    maxsize: usize,
    local_errors: mpsc::UnboundedSender<ErrorFrame>,
}

impl Lanes {
    pub(crate) fn new(maxsize: usize, local_errors: mpsc::UnboundedSender<ErrorFrame>) -> Self {
        Lanes {
            state: Mutex::new(State {
                priority: VecDeque::new(),
                bulk: VecDeque::new(),
                congested: false,
                stop: None,
            }),
            notify: Notify::new(),
            halt: watch::channel(false).0,
            maxsize: maxsize.max(1),
            local_errors,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push_priority(&self, item: Inbound) {
        let mut s = self.state();
        if s.priority.len() >= PRIORITY_BOUND {
            tracing::warn!("inbound: {PRIORITY_BOUND} SessionStarts already waiting; dropping one");
            return;
        }
        s.priority.push_back(item);
        drop(s);
        self.notify.notify_one();
    }

    pub(crate) fn push_bulk(&self, frame: Frame) {
        let mut s = self.state();
        if frame.droppable() && s.bulk.len() >= self.maxsize {
            if !s.congested {
                s.congested = true;
                let _ = self.local_errors.send(ErrorFrame {
                    code: ErrorCode::Overload,
                    message: INBOUND_CONGESTED.to_owned(),
                    fatal: false,
                });
            }
            tracing::debug!("inbound congested: dropping {}", frame.name());
            return;
        }
        s.bulk.push_back(Inbound::Frame(frame));
        drop(s);
        self.notify.notify_one();
    }

    /// Reports inbound congestion past the lanes (the RTVI task is behind).
    pub(crate) fn signal_congestion(&self) {
        let _ = self.local_errors.send(ErrorFrame {
            code: ErrorCode::Overload,
            message: INBOUND_CONGESTED.to_owned(),
            fatal: false,
        });
    }

    /// Records why the session must stop; the first reason wins. The feeder stops before its next
    /// frame and abandons a callback it is waiting on ([`Lanes::halted`]).
    pub(crate) fn stop(&self, why: Stop) {
        let mut s = self.state();
        if s.stop.is_none() {
            s.stop = Some(why);
        }
        drop(s);
        self.halt.send_replace(true);
        self.notify.notify_one();
    }

    /// Completes once a stop reason has been recorded.
    pub(crate) async fn halted(&self) {
        let mut rx = self.halt.subscribe();
        // The sender lives as long as `self`, so `wait_for` only returns once the flag is true.
        let _ = rx.wait_for(|halted| *halted).await;
    }

    /// The next item for the feeder: SessionStarts first, then bulk frames in order. `Cancel`, a
    /// closed channel or a failed send stop it at once; `End` stops it after the frames before it.
    pub(crate) async fn next(&self) -> Next {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.state();
                if let Some(item) = s.priority.pop_front() {
                    return Next::Item(item);
                }
                if let Some(stop) = &s.stop {
                    return Next::Stop(stop.clone());
                }
                if let Some(item) = s.bulk.pop_front() {
                    if let Inbound::Frame(Frame::End) = item {
                        return Next::Stop(Stop::End);
                    }
                    return Next::Item(item);
                }
            }
            notified.await;
        }
    }

    /// Called after each handled frame: a congestion episode ends once the bulk lane has drained to
    /// half its bound.
    pub(crate) fn handled(&self) {
        let mut s = self.state();
        if s.congested && s.bulk.len() <= (self.maxsize / 2).max(1) {
            s.congested = false;
        }
    }
}

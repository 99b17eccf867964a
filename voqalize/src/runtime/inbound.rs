//! The inbound lanes of one session (docs/protocol.md §3).
//!
//! The reader task puts frames here and the feeder takes them one at a time. The call's first
//! `SessionStart` rides the priority lane; everything else queues FIFO on the bulk lane, a shedding
//! [`Lane`] where a droppable frame (`RTVIFrame`, `SpeechChunk`) arriving at or past the bound is shed, with one
//! `OVERLOAD` error per congestion episode. `Interruption` and `Response` never enter the lanes
//! (the reader applies them at once), and `Cancel` is a flag: it stops the feeder with queued data
//! undelivered, so no flood of priority frames can overflow anything.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::queue::{Admitted, Alerts, Flag, Lane, wait_for};
use crate::recover::lock;
use crate::session::EndReason;
use crate::wire::{FRAME_WEIGHT, Frame};

pub(crate) const INBOUND_OVERFLOW: &str = "voqalize: inbound queue overflow; the call is ended";

pub(crate) const INBOUND_CONGESTED: &str =
    "voqalize: inbound queue full; dropping data frames until consumer catches up";

/// How many SessionStarts may wait at once. Only a call's first one takes this lane (the reader
/// queues later ones on the bulk lane), so it never holds more than one; the bound is a backstop.
const PRIORITY_BOUND: usize = 32;

/// What the reader hands the feeder.
#[derive(Debug)]
pub(crate) enum Inbound {
    Frame(Frame),
    /// A SessionStart whose `init` was not a JSON object (docs/protocol.md §7 D3).
    BadStart(String),
    /// A `Finalize`, with how many outbound frames had been handed to the transport when it was
    /// read: a unit whose `SpeechStart` was not among them cannot have been heard (docs/protocol.md §4.7).
    Finalize {
        speech_id: u64,
        heard: String,
        seen: u64,
    },
}

impl Inbound {
    fn name(&self) -> &'static str {
        match self {
            Inbound::Frame(frame) => frame.name(),
            Inbound::BadStart(_) => "SessionStart",
            Inbound::Finalize { .. } => "Finalize",
        }
    }

    fn droppable(&self) -> bool {
        matches!(self, Inbound::Frame(frame) if frame.droppable())
    }

    /// About how many bytes it holds, for the bulk lane's byte bound.
    fn weight(&self) -> usize {
        match self {
            Inbound::Frame(frame) => frame.weight(),
            Inbound::BadStart(session_id) => FRAME_WEIGHT + session_id.len(),
            Inbound::Finalize { heard, .. } => FRAME_WEIGHT + heard.len(),
        }
    }
}

/// Why the feeder stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `End` from Voqalize, after the frames queued before it.
    End,
    /// `Cancel` from Voqalize: queued frames are dropped.
    Cancel,
    /// The channel closed or failed to receive: why, as the brain is told.
    Closed(EndReason),
    /// Sending failed; the writer keeps the cause.
    SendFailed,
    /// A lane passed its hard bound: the peer floods it (inbound) or does not read (outbound).
    Overloaded,
    /// The brain built a frame over the socket's limit; the writer sent `Error` and `End` instead.
    FrameTooBig,
}

pub(crate) enum Next {
    Item(Inbound),
    Stop(Stop),
}

struct State {
    /// The call's first `SessionStart`: bounded in count only (it is checked before it is queued).
    priority: Lane<Inbound>,
    bulk: Lane<Inbound>,
    stop: Option<Stop>,
    /// An inbound `End` is queued: the peer has ended the call. The session stops at it, whatever
    /// the transport does after it, and nothing behind it is queued.
    end_queued: bool,
}

pub(crate) struct Lanes {
    state: Mutex<State>,
    notify: Notify,
    /// Set when a stop reason is recorded, so a callback the feeder is stuck in can be abandoned.
    halt: Flag,
    alerts: Arc<Alerts>,
}

impl Lanes {
    /// Lanes whose bulk lane holds `maxsize` frames and `max_bytes` bytes before it sheds.
    pub(crate) fn new(maxsize: usize, max_bytes: usize, alerts: Arc<Alerts>) -> Self {
        Lanes {
            state: Mutex::new(State {
                priority: Lane::new(PRIORITY_BOUND, usize::MAX),
                bulk: Lane::new(maxsize, max_bytes),
                stop: None,
                end_queued: false,
            }),
            notify: Notify::new(),
            halt: Flag::default(),
            alerts,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(crate) fn push_priority(&self, item: Inbound) {
        if self.state().priority.offer(item, 0).is_err() {
            tracing::debug!(
                "inbound: {PRIORITY_BOUND} SessionStarts already waiting; dropping one"
            );
            return;
        }
        self.notify.notify_one();
    }

    /// Queues `item` on the bulk lane. Once the session is stopping, or an `End` is queued,
    /// nothing more is queued (the feeder will not take it), so a flood past the hard bound ends
    /// the call with one line, not one per frame that follows.
    pub(crate) fn push_bulk(&self, item: Inbound) {
        let mut s = self.state();
        if s.stop.is_some() || s.end_queued {
            return;
        }
        let (name, droppable) = (item.name(), item.droppable());
        let weight = item.weight();
        let end = matches!(item, Inbound::Frame(Frame::End));
        match s.bulk.admit(item, droppable, weight) {
            Admitted::Queued => s.end_queued = end,
            Admitted::Shed { first } => {
                if first {
                    self.alerts.raise(INBOUND_CONGESTED);
                }
                tracing::debug!("inbound congested: dropping {name}");
                crate::metrics::shed("inbound");
                return;
            }
            Admitted::Overflow => {
                drop(s);
                tracing::error!(
                    "session: the peer floods the inbound lane ({name}); ending the call"
                );
                self.stop(Stop::Overloaded);
                return;
            }
        }
        drop(s);
        self.notify.notify_one();
    }

    /// Reports inbound congestion past the lanes (the RTVI task is behind).
    pub(crate) fn signal_congestion(&self) {
        self.alerts.raise(INBOUND_CONGESTED);
    }

    /// Records why the session must stop; the first reason wins. The feeder stops before its next
    /// frame and abandons a callback it is waiting on ([`Lanes::halted`]).
    ///
    /// Once an inbound `End` is queued, the transport closing, failing or refusing a send is what
    /// follows that `End` (a console's *End call* sends it, then closes at once): it stops nothing,
    /// and the session stops at the `End` (after the frames before it, or when its timer runs out)
    /// with the peer's reason.
    pub(crate) fn stop(&self, why: Stop) {
        let mut s = self.state();
        if s.end_queued && matches!(why, Stop::Closed(_) | Stop::SendFailed) {
            return;
        }
        if s.stop.is_none() {
            s.stop = Some(why);
        }
        drop(s);
        self.halt.set();
        self.notify.notify_one();
    }

    /// Completes once a stop reason has been recorded.
    pub(crate) async fn halted(&self) {
        self.halt.wait().await;
    }

    /// The next item for the feeder: SessionStarts first, then bulk frames in order. `Cancel`, a
    /// closed channel or a failed send stop it at once; `End` stops it after the frames before it.
    pub(crate) async fn next(&self) -> Next {
        wait_for(&self.notify, || {
            let mut s = self.state();
            // One SessionStart a call: the drained lane keeps no buffer for it afterwards.
            if let Some(item) = s.priority.pop() {
                return Some(Next::Item(item));
            }
            if let Some(stop) = &s.stop {
                return Some(Next::Stop(stop.clone()));
            }
            match s.bulk.pop()? {
                Inbound::Frame(Frame::End) => Some(Next::Stop(Stop::End)),
                item => Some(Next::Item(item)),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::TransportLoss;

    fn said(turn_id: u64) -> Inbound {
        Inbound::Frame(Frame::UserMessage(crate::wire::UserMessage::new(
            turn_id, "hi",
        )))
    }

    async fn taken(lanes: &Lanes) -> Result<String, Stop> {
        match lanes.next().await {
            Next::Item(item) => Ok(item.name().to_owned()),
            Next::Stop(stop) => Err(stop),
        }
    }

    #[tokio::test]
    async fn the_transport_going_after_an_end_stops_the_session_at_that_end() {
        let lanes = Lanes::new(16, 1 << 20, Arc::default());
        lanes.push_bulk(said(2));
        lanes.push_bulk(Inbound::Frame(Frame::End));
        lanes.push_bulk(said(3));
        lanes.stop(Stop::Closed(EndReason::TransportLost(
            TransportLoss::Closed,
        )));
        lanes.stop(Stop::SendFailed);
        assert_eq!(taken(&lanes).await, Ok("UserMessage".to_owned()));
        assert_eq!(taken(&lanes).await, Err(Stop::End), "nothing after the End");
        // Without an End, a close stops the session before the frames still queued.
        let lanes = Lanes::new(16, 1 << 20, Arc::default());
        lanes.push_bulk(said(2));
        let closed = Stop::Closed(EndReason::TransportLost(TransportLoss::Closed));
        lanes.stop(closed.clone());
        assert_eq!(taken(&lanes).await, Err(closed));
    }
}

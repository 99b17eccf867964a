//! The outbound bulk lane of one session: every frame the brain emits, FIFO (docs/protocol.md §3).
//!
//! Pushing never blocks. Past the bound a droppable frame is shed ([`Lane::admit`]) and the brain
//! hears one `OVERLOAD` per congestion episode. `End` is the last frame: anything pushed after it
//! is dropped.
//!
//! The lane numbers the frames it queues (1, 2, 3, ...) and counts those the writer has handed to
//! the transport, so the session can tell whether a frame can have reached the peer yet: a
//! `Finalize` for a unit whose `SpeechStart` has not gone out is not an answer (docs/protocol.md §4.7).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::queue::{Admitted, Alerts, Flag, Lane, wait_for};
use crate::recover::lock;
use crate::wire::Frame;

pub(crate) const OUTBOUND_CONGESTED: &str =
    "voqalize: outbound queue full; dropping data frames until wire catches up";

/// The room the lane takes when a burst of frames begins: a `SpeechStart` and a few chunks at
/// once, or a streamed response's frames as each event brings them. Seven frames of the lane are
/// just under a kilobyte, which the allocator serves from its per-thread cache; a bigger first
/// block would take its slow path at every burst, and a streamed turn is a burst per event.
const TURN_FRAMES: usize = 7;

/// Whether more of a speech unit follows `frame` (it opened one, or is one of its chunks): a
/// lane drained by it keeps its room for the unit's next frames, and gives it back once a frame
/// that is not a unit's opening or chunk (its `SpeechEnd`, a `TurnStep`) drains it.
fn unit_goes_on(frame: &Frame) -> bool {
    matches!(frame, Frame::SpeechStart { .. } | Frame::SpeechChunk { .. })
}

/// Why a push did not queue the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    Queued,
    Shed,
    AfterEnd,
    /// Emitted by a turn that a barge-in or teardown has cancelled.
    TurnCancelled,
}

struct State {
    queue: Lane<Frame>,
    /// The lane passed its hard bound: the peer does not read. Nothing more is queued.
    overflowed: bool,
    /// How many frames were ever queued.
    queued: u64,
    ended: bool,
    closed: bool,
}

pub(crate) struct Outbound {
    lane: Mutex<State>,
    notify: Notify,
    /// How many frames the writer has handed to the transport, counted before each is handed over:
    /// the peer can have seen frame `n` only once this is at least `n`.
    handed: AtomicU64,
    /// How many frames the writer has written (or given up on, once the lane closed).
    written: AtomicU64,
    /// Wakes [`Outbound::flushed`] waiters as `written` grows.
    wrote: Notify,
    /// Set when the lane passes its hard bound.
    overflow: Flag,
    alerts: Arc<Alerts>,
}

impl Outbound {
    /// A lane that holds `maxsize` frames and `max_bytes` bytes before it sheds.
    pub(crate) fn new(maxsize: usize, max_bytes: usize, alerts: Arc<Alerts>) -> Self {
        Outbound {
            lane: Mutex::new(State {
                queue: Lane::new(maxsize, max_bytes).starting_with(TURN_FRAMES),
                overflowed: false,
                queued: 0,
                ended: false,
                closed: false,
            }),
            notify: Notify::new(),
            handed: AtomicU64::new(0),
            written: AtomicU64::new(0),
            wrote: Notify::new(),
            overflow: Flag::default(),
            alerts,
        }
    }

    pub(crate) fn push(&self, frame: Frame) -> Pushed {
        self.push_numbered(frame).0
    }

    /// [`push`](Self::push), and the frame's number in the lane's order when it was queued (the
    /// first frame ever queued is 1; 0 when it was not): it has gone out once
    /// [`handed`](Self::handed) reaches it.
    pub(crate) fn push_numbered(&self, frame: Frame) -> (Pushed, u64) {
        let mut lane = lock(&self.lane);
        if lane.ended || lane.closed || lane.overflowed {
            tracing::debug!("dropping {} emitted after End", frame.name());
            return (Pushed::AfterEnd, 0);
        }
        let is_end = matches!(frame, Frame::End);
        let droppable = frame.droppable();
        let weight = frame.weight();
        match lane.queue.admit(frame, droppable, weight) {
            Admitted::Shed { first } => {
                if first {
                    self.alerts.raise(OUTBOUND_CONGESTED);
                }
                crate::metrics::shed("outbound");
                return (Pushed::Shed, 0);
            }
            Admitted::Overflow => {
                lane.overflowed = true;
                drop(lane);
                tracing::error!(
                    "session: the peer does not read; the outbound lane overflowed, ending the call"
                );
                self.overflow.set();
                return (Pushed::Shed, 0);
            }
            Admitted::Queued => {}
        }
        if is_end {
            lane.ended = true;
        }
        lane.queued += 1;
        let number = lane.queued;
        drop(lane);
        self.notify.notify_one();
        (Pushed::Queued, number)
    }

    /// Waits for the next frame; `None` once the lane is closed and empty.
    pub(crate) async fn pop(&self) -> Option<Frame> {
        wait_for(&self.notify, || {
            let mut lane = lock(&self.lane);
            match lane.queue.pop_holding(unit_goes_on) {
                Some(frame) => Some(Some(frame)),
                None if lane.closed => Some(None),
                None => None,
            }
        })
        .await
    }

    /// How many frames were ever queued (the number of the last one).
    pub(crate) fn queued(&self) -> u64 {
        lock(&self.lane).queued
    }

    /// The next frame if one is queued, without waiting.
    pub(crate) fn try_pop(&self) -> Option<Frame> {
        lock(&self.lane).queue.pop_holding(unit_goes_on)
    }

    /// No more frames will be accepted; `pop` drains what is queued, then returns `None`.
    pub(crate) fn close(&self) {
        lock(&self.lane).closed = true;
        self.notify.notify_one();
        // Nobody waits for a flush that will never come.
        self.written.store(u64::MAX, Ordering::Release);
        self.wrote.notify_waiters();
    }

    /// Completes once the lane has passed its hard bound (the peer does not read).
    pub(crate) async fn overflowed(&self) {
        self.overflow.wait().await;
    }

    /// The writer is about to hand the transport its next frame.
    pub(crate) fn handing(&self) {
        self.handed.fetch_add(1, Ordering::AcqRel);
    }

    /// How many frames the writer has handed to the transport: the peer cannot have seen a frame
    /// numbered above it.
    pub(crate) fn handed(&self) -> u64 {
        self.handed.load(Ordering::Acquire)
    }

    /// The writer wrote `n` more frames.
    pub(crate) fn wrote(&self, n: u64) {
        let _ = self
            .written
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(w.saturating_add(n))
            });
        self.wrote.notify_waiters();
    }

    /// Completes once every frame queued before the call has been written (or the lane closed).
    #[cfg(feature = "model")]
    pub(crate) async fn flushed(&self) {
        let target = lock(&self.lane).queued;
        loop {
            let wrote = self.wrote.notified();
            if self.written.load(Ordering::Acquire) >= target {
                return;
            }
            wrote.await;
        }
    }

    pub(crate) fn ended(&self) -> bool {
        lock(&self.lane).ended
    }
}

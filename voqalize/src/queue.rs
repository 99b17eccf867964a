//! The bounded queue behind every bulk lane, inbound and outbound (docs/protocol.md §3).
//!
//! A lane holds frames FIFO, bounded in frames and in bytes (each frame's
//! [`weight`](crate::wire::Frame::weight)): a frame count alone is no bound when one frame can be
//! a megabyte. Once it holds `bound` items or `max_bytes` bytes, a newly pushed *droppable* item
//! (`SpeechChunk`, `RTVIFrame`) is shed and every other item still queues: losing a chunk of text
//! or an app message degrades a call, losing a `SpeechEnd` or a `Finalize` would break it. The
//! first shed item of a congestion episode is reported once (an `OVERLOAD` error to the brain);
//! the episode ends when the lane has drained to half its bounds.
//!
//! Frames that are never shed are still bounded: past [`HARD_BOUND_FACTOR`] times the bound, or
//! [`HARD_BYTES_FACTOR`] times the byte bound, a push is refused as an overflow, and the owner ends
//! the call. A peer that floods a lane (or never reads its own) cannot grow a session's memory
//! without limit.
//!
//! Beside the lanes: [`Alerts`], where a shedding lane leaves its congestion error for the brain,
//! and [`Flag`], a one-way switch a task can wait on. Both live inline in the session's shared
//! state and allocate nothing while a call is quiet: an idle call costs a few kilobytes, so a
//! channel per signal (a kilobyte or more each) would be most of it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use crate::recover::lock;
use crate::wire::{ErrorCode, ErrorFrame};

/// What [`Shedding::push`] did with an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// It was queued.
    Queued,
    /// It was shed; `first` is true for the first shed item of a congestion episode, which the
    /// owner reports once.
    Shed { first: bool },
    /// The lane holds its hard bound: the item was refused and the owner ends the call.
    Overflow,
}

/// A lane's hard bound, for frames that are never shed, is this many times its bound.
pub(crate) const HARD_BOUND_FACTOR: usize = 8;

/// A lane's hard byte bound, for frames that are never shed, is this many times its byte bound.
/// Those frames are small (a `SpeechEnd`, a clipped `TurnStep`) but for the peer's own
/// `UserMessage`s, so twice the room droppable frames may take is ample.
pub(crate) const HARD_BYTES_FACTOR: usize = 2;

/// A FIFO with soft bounds (items and bytes) for droppable items. It does no locking of its own:
/// each lane keeps it under the lock that guards the lane's other state.
#[derive(Debug)]
pub(crate) struct Shedding<T> {
    /// Each item with the weight it was pushed with.
    items: VecDeque<(T, usize)>,
    /// The weights of the items queued.
    bytes: usize,
    bound: usize,
    max_bytes: usize,
    congested: bool,
    /// The room an empty lane takes at its first push (see [`starting_with`](Self::starting_with)).
    start: usize,
}

impl<T> Shedding<T> {
    /// A lane that sheds droppable items once it holds `bound` (at least 1) items or `max_bytes`
    /// (at least 1) bytes.
    pub(crate) fn new(bound: usize, max_bytes: usize) -> Self {
        Shedding {
            items: VecDeque::new(),
            bytes: 0,
            bound: bound.max(1),
            max_bytes: max_bytes.max(1),
            congested: false,
            start: 0,
        }
    }

    /// The lane takes room for `items` items (never past its bound) at the first push after it
    /// drained, rather than growing one doubling at a time: a lane that fills in bursts (a turn's
    /// frames) pays one allocation a burst instead of one per doubling.
    pub(crate) fn starting_with(mut self, items: usize) -> Self {
        self.start = items.min(self.bound);
        self
    }

    /// Queues `item`, which weighs `weight` bytes, or sheds it when it is droppable and the lane
    /// is full. An item is refused only once the lane already holds its bounds, so an empty lane
    /// takes any one item.
    pub(crate) fn push(&mut self, item: T, droppable: bool, weight: usize) -> Admitted {
        if droppable && (self.items.len() >= self.bound || self.bytes >= self.max_bytes) {
            let first = !std::mem::replace(&mut self.congested, true);
            return Admitted::Shed { first };
        }
        if self.items.len() >= self.bound.saturating_mul(HARD_BOUND_FACTOR).max(64)
            || self.bytes >= self.max_bytes.saturating_mul(HARD_BYTES_FACTOR)
        {
            return Admitted::Overflow;
        }
        self.bytes += weight;
        if self.items.capacity() == 0 {
            self.items.reserve(self.start);
        }
        self.items.push_back((item, weight));
        Admitted::Queued
    }

    /// The oldest item. A congestion episode ends once the lane has drained to half its bounds.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let (item, weight) = self.items.pop_front()?;
        self.bytes -= weight;
        if self.items.is_empty() {
            // A drained lane holds no memory: a call between turns keeps none of its last
            // turn's frames' room (a turn's dozen frames would be two kilobytes a call).
            self.items = VecDeque::new();
        }
        if self.congested
            && self.items.len() <= (self.bound / 2).max(1)
            && self.bytes <= self.max_bytes / 2
        {
            self.congested = false;
        }
        Some(item)
    }

    /// How many items wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// How many items the lane has room for without allocating.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }
}

/// The local congestion signal a brain's `on_error` receives: `OVERLOAD`, non-fatal, never sent on
/// the wire.
pub(crate) fn overload(message: &str) -> ErrorFrame {
    ErrorFrame {
        code: ErrorCode::Overload,
        message: message.to_owned(),
        fatal: false,
    }
}

/// How many congestion errors may wait for the brain at once. Each lane raises one per congestion
/// episode, so more only pile up while `on_error` itself is stuck; those are dropped (and logged).
pub(crate) const ALERT_BOUND: usize = 8;

/// Congestion errors waiting for the brain's `on_error`, which hears them beside the feeder (a busy
/// feeder is why they happen). Bounded by [`ALERT_BOUND`]; holds no heap memory while empty.
#[derive(Debug, Default)]
pub(crate) struct Alerts {
    waiting: Mutex<VecDeque<&'static str>>,
    raised: Notify,
}

impl Alerts {
    /// Leaves an `OVERLOAD` error with `message` for the brain.
    pub(crate) fn raise(&self, message: &'static str) {
        let mut waiting = lock(&self.waiting);
        if waiting.len() >= ALERT_BOUND {
            tracing::debug!("{ALERT_BOUND} congestion errors already wait; dropping one");
            return;
        }
        waiting.push_back(message);
        drop(waiting);
        self.raised.notify_one();
    }

    /// The oldest waiting error, once there is one.
    pub(crate) async fn next(&self) -> ErrorFrame {
        loop {
            let raised = self.raised.notified();
            {
                let mut waiting = lock(&self.waiting);
                if let Some(message) = waiting.pop_front() {
                    if waiting.is_empty() {
                        // Give the memory back: alerts are rare, a quiet call should hold none.
                        *waiting = VecDeque::new();
                    }
                    return overload(message);
                }
            }
            raised.await;
        }
    }
}

/// A switch that goes from off to on once, and that tasks can wait on: a watch channel's job for
/// a boolean, inline (a `watch` channel allocates its shared state).
#[derive(Debug, Default)]
pub(crate) struct Flag {
    on: AtomicBool,
    changed: Notify,
}

impl Flag {
    /// Turns the flag on and wakes every waiter. Returns whether it was already on.
    pub(crate) fn set(&self) -> bool {
        let was = self.on.swap(true, Ordering::AcqRel);
        if !was {
            self.changed.notify_waiters();
        }
        was
    }

    /// Whether the flag is on.
    pub(crate) fn is_set(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Completes once the flag is on.
    pub(crate) async fn wait(&self) {
        loop {
            // Registered before the check: a `set` between the check and the await still wakes it.
            let changed = self.changed.notified();
            if self.is_set() {
                return;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sheds_only_droppable_items_once_full_and_reports_once_per_episode() {
        let mut q = Shedding::new(2, usize::MAX);
        assert_eq!(q.push(1, true, 1), Admitted::Queued);
        assert_eq!(q.push(2, true, 1), Admitted::Queued);
        assert_eq!(q.push(3, true, 1), Admitted::Shed { first: true });
        assert_eq!(q.push(4, true, 1), Admitted::Shed { first: false });
        assert_eq!(
            q.push(5, false, 1),
            Admitted::Queued,
            "non-droppable items queue past the bound"
        );
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(2));
        // Drained to half the bound: the episode is over, the next shed is reported again.
        assert_eq!(q.push(6, true, 1), Admitted::Queued);
        assert_eq!(q.push(7, true, 1), Admitted::Shed { first: true });
    }

    #[test]
    fn a_drained_lane_holds_no_memory() {
        let mut q = Shedding::new(16, usize::MAX);
        for i in 0..10 {
            q.push(i, false, 1);
        }
        while q.pop().is_some() {}
        assert_eq!(q.capacity(), 0);
    }

    #[test]
    fn a_lane_that_fills_in_bursts_takes_its_room_at_once_within_its_bound() {
        let mut q = Shedding::new(16, usize::MAX).starting_with(12);
        q.push(0, false, 1);
        let room = q.capacity();
        assert!(room >= 12, "room for the burst at the first push: {room}");
        for i in 1..12 {
            q.push(i, false, 1);
        }
        assert_eq!(q.capacity(), room, "no growth within the burst");
        while q.pop().is_some() {}
        assert_eq!(q.capacity(), 0, "and none kept once drained");
        // Never more room than the bound.
        let mut q = Shedding::new(2, usize::MAX).starting_with(64);
        q.push(0, false, 1);
        assert!(q.capacity() < 64);
    }

    #[tokio::test]
    async fn alerts_are_bounded_and_come_out_in_order() {
        let alerts = Alerts::default();
        for _ in 0..ALERT_BOUND {
            alerts.raise("first");
        }
        alerts.raise("over the bound");
        for _ in 0..ALERT_BOUND {
            let e = alerts.next().await;
            assert_eq!(
                (e.code, e.message.as_str(), e.fatal),
                (ErrorCode::Overload, "first", false)
            );
        }
        alerts.raise("later");
        assert_eq!(alerts.next().await.message, "later");
    }

    #[tokio::test]
    async fn a_flag_wakes_a_waiter_that_registered_before_it_was_set() {
        let flag = std::sync::Arc::new(Flag::default());
        let waiter = tokio::spawn({
            let flag = flag.clone();
            async move { flag.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!flag.set());
        waiter.await.unwrap();
        assert!(flag.set(), "a second set reports the flag was on");
        flag.wait().await;
    }

    #[test]
    fn frames_that_are_never_shed_still_meet_a_hard_bound() {
        let mut q = Shedding::new(1, usize::MAX);
        for i in 0..64 {
            assert_eq!(q.push(i, false, 1), Admitted::Queued);
        }
        assert_eq!(q.push(64, false, 1), Admitted::Overflow);
        q.pop();
        assert_eq!(q.push(65, false, 1), Admitted::Queued);
    }

    #[test]
    fn a_lane_is_bounded_in_bytes_as_well_as_in_items() {
        let mut q = Shedding::new(256, 1000);
        // One item bigger than the bound still fits in an empty lane...
        assert_eq!(q.push(0, true, 1500), Admitted::Queued);
        // ...and then droppable items are shed, however few the lane holds.
        assert_eq!(q.push(1, true, 10), Admitted::Shed { first: true });
        // Items that are never shed queue up to twice the byte bound, then overflow.
        assert_eq!(q.push(2, false, 500), Admitted::Queued);
        assert_eq!(q.push(3, false, 1), Admitted::Overflow);
        assert_eq!(q.pop(), Some(0));
        // 500 bytes left, half the bound: the episode is over.
        assert_eq!(q.push(4, true, 10), Admitted::Queued);
        assert_eq!(q.push(5, true, 700), Admitted::Queued);
        assert_eq!(q.push(6, true, 10), Admitted::Shed { first: true });
    }
}

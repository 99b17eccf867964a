//! The one bounded lane type every queue of the SDK is built on: [`Lane`], a FIFO bounded in
//! items and in bytes (docs/protocol.md §3), and the ways its owners meet its bounds.
//!
//! A lane holds its items with the weight each was pushed with (a frame's
//! [`weight`](crate::wire::Frame::weight), a relay frame's length): an item count alone is no
//! bound when one item can be a megabyte. It does no locking of its own: each owner keeps it
//! under the lock that guards the owner's other state (a stop reason, counters, a round-robin
//! line), and wakes its one consumer with a [`Notify`] through [`wait_for`]. A drained lane gives
//! its room back (an idle call holds none of its last turn's frames), and a lane that fills in
//! bursts can take a burst's room at once ([`Lane::starting_with`]).
//!
//! What each queue needs, and how it uses the lane:
//!
//! | queue | bound (items / bytes) | when full | wake-ups | close | priority |
//! |---|---|---|---|---|---|
//! | inbound bulk lane (`runtime::inbound`) | `HostOptions::max_lane_frames` / `max_lane_bytes` | [sheds](Lane::admit) droppable frames (one `OVERLOAD` an episode); the rest queue to a hard bound, past which the call ends | the reader wakes the feeder | a stop reason stops the feeder before the frames still queued, but `End` after those before it | the call's first `SessionStart` (its own lane, 32, refused past it) before a stop, a stop before the bulk lane |
//! | outbound lane (`session::outbound`) | the same two settings | sheds as the inbound lane; past the hard bound the call ends (the peer does not read) | the session wakes the writer; the writer wakes `flushed` waiters | `End` is the last frame; once closed the writer drains it, then stops | none (one lane) |
//! | relay session inbox (`relay::inbox`) | 256 / `max_message_bytes` (one frame always fits) | [refuses](Lane::offer): the mux ends that session rather than lose an `End` | the mux wakes the session's reader | the mux letting go: drained, then the end; the reader gone: nothing more is taken | none |
//! | relay backlog (`relay::outbound`), a lane per session | 64 / `max_write_backlog_bytes`, and every session's bytes together (`RelayBuilder::max_backlog_bytes`) | back-pressure: the session waits for room; a session's `End` and a refusal go in [past the bounds](Lane::push) | sessions wake the writer; each batch taken wakes the sessions waiting for room | close drains what is queued; abandon drops it | round-robin, a frame of each session in turn |
//! | congestion [`Alerts`] | 8 / none | refused (logged): only a stuck `on_error` fills it | a raise wakes the pump | none (lives as long as the session) | none |
//!
//! The two soft rules differ on purpose, and each keeps the behaviour it had. A shedding lane
//! ([`Lane::admit`]) is full once it *holds* its bounds, so an item that takes it past them is
//! still queued: text is shed only when the lane is really behind. A refusing or back-pressured
//! lane ([`Lane::has_room`]) takes an item only when it *fits* (but an empty lane takes any one):
//! its byte bound is a promise about memory.
//!
//! No lane is specialised beyond the owner's own state (what it keeps under the same lock: a stop
//! reason, frame counters, the relay backlog's round-robin line), because none measured to matter.
//! Counted in instructions (callgrind, so the shared machine's noise does not enter), the old queue
//! code against this lane, copied into one program: a shedding lane filled in bursts of 7 frames
//! and drained took 116 instructions a frame before and 118 after, with the same allocations; a
//! relay inbox taking one frame at a time 50 before and 77 after (the weight stored beside each
//! frame, the congestion check on each pop): 27 instructions, some nanoseconds, a frame, against
//! the 0.1 ms of CPU a relay turn costs (docs/performance.md). Wall-clock timings of the same
//! program moved by more than that between runs.
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

/// What [`Lane::admit`] did with an item.
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

/// A shedding lane's hard bound, for items that are never shed, is this many times its bound (and
/// at least 64).
pub(crate) const HARD_BOUND_FACTOR: usize = 8;

/// A shedding lane's hard byte bound, for items that are never shed, is this many times its byte
/// bound. Those frames are small (a `SpeechEnd`, a clipped `TurnStep`) but for the peer's own
/// `UserMessage`s, so twice the room droppable frames may take is ample.
pub(crate) const HARD_BYTES_FACTOR: usize = 2;

/// A FIFO bounded in items and in bytes: see the [module](self) for what each owner does when it
/// is full. 64 bytes inline; no heap memory while it is empty (but what [`keeping`](Self::keeping)
/// lets it keep).
#[derive(Debug)]
pub(crate) struct Lane<T> {
    /// Each item with the weight it was pushed with.
    items: VecDeque<(T, usize)>,
    /// The weights of the items queued.
    bytes: usize,
    /// The most items: at least 1.
    bound: usize,
    /// The most bytes: at least 1.
    max_bytes: usize,
    /// The room an empty lane takes at its first push (see [`starting_with`](Self::starting_with)).
    start: u16,
    /// The room a drained lane keeps (see [`keeping`](Self::keeping)).
    keep: u16,
    /// A shedding lane has shed since it last drained to half its bounds.
    congested: bool,
}

impl<T> Lane<T> {
    /// A lane bounded at `bound` items and `max_bytes` bytes (each at least 1; `usize::MAX` for
    /// no bound). Allocates nothing.
    pub(crate) fn new(bound: usize, max_bytes: usize) -> Self {
        Lane {
            items: VecDeque::new(),
            bytes: 0,
            bound: bound.max(1),
            max_bytes: max_bytes.max(1),
            start: 0,
            keep: 0,
            congested: false,
        }
    }

    /// The lane takes room for `items` items (never past its bound) at the first push after it
    /// drained, rather than growing one doubling at a time: a lane that fills in bursts (a turn's
    /// frames) pays one allocation a burst instead of one per doubling.
    pub(crate) fn starting_with(mut self, items: usize) -> Self {
        self.start = u16::try_from(items.min(self.bound)).unwrap_or(u16::MAX);
        self
    }

    /// A drained lane keeps its room while that is at most `items` items, and gives back more: a
    /// lane that takes one item at a time does not allocate for each, and a burst's room is not
    /// kept. By default a drained lane keeps none.
    #[cfg_attr(not(feature = "relay"), allow(dead_code))] // the relay's lanes use it
    pub(crate) fn keeping(mut self, items: usize) -> Self {
        self.keep = u16::try_from(items).unwrap_or(u16::MAX);
        self
    }

    /// How many items wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item waits.
    #[cfg_attr(not(feature = "relay"), allow(dead_code))] // the relay's lanes use it
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether an item of `weight` bytes fits: the lane holds fewer items than its bound, and it
    /// is empty or the item keeps it within its byte bound.
    pub(crate) fn has_room(&self, weight: usize) -> bool {
        self.items.len() < self.bound
            && (self.items.is_empty() || self.bytes.saturating_add(weight) <= self.max_bytes)
    }

    /// Queues `item` of `weight` bytes whatever the bounds: for the few items an owner bounds
    /// otherwise (a session's one `End`) or has checked with [`has_room`](Self::has_room).
    pub(crate) fn push(&mut self, item: T, weight: usize) {
        self.bytes += weight;
        if self.items.capacity() == 0 {
            self.items.reserve(usize::from(self.start));
        }
        self.items.push_back((item, weight));
    }

    /// Queues `item` of `weight` bytes if it [fits](Self::has_room); gives it back if not.
    pub(crate) fn offer(&mut self, item: T, weight: usize) -> Result<(), T> {
        if !self.has_room(weight) {
            return Err(item);
        }
        self.push(item, weight);
        Ok(())
    }

    /// Queues `item` of `weight` bytes, or sheds it when it is droppable and the lane is full. An
    /// item is refused only once the lane already holds its bounds, so an empty lane takes any
    /// one item. Items that are never shed queue up to [`HARD_BOUND_FACTOR`] times the bound (at
    /// least 64) and [`HARD_BYTES_FACTOR`] times the byte bound, then overflow.
    pub(crate) fn admit(&mut self, item: T, droppable: bool, weight: usize) -> Admitted {
        if droppable && (self.items.len() >= self.bound || self.bytes >= self.max_bytes) {
            let first = !std::mem::replace(&mut self.congested, true);
            return Admitted::Shed { first };
        }
        if self.items.len() >= self.bound.saturating_mul(HARD_BOUND_FACTOR).max(64)
            || self.bytes >= self.max_bytes.saturating_mul(HARD_BYTES_FACTOR)
        {
            return Admitted::Overflow;
        }
        self.push(item, weight);
        Admitted::Queued
    }

    /// The oldest item. A congestion episode ends once the lane has drained to half its bounds.
    pub(crate) fn pop(&mut self) -> Option<T> {
        self.pop_holding(|_| false)
    }

    /// [`pop`](Self::pop), keeping the lane's room when it drains if `more_soon` says of the item
    /// that more will follow it shortly (a speech unit's chunk: the next one comes with the
    /// model's next event), so a burst spread over a stream takes its room once, not once per
    /// event. Only up to twice the room the lane starts with (see
    /// [`starting_with`](Self::starting_with)) is held so: the room a flood grew it to is given
    /// back even while a unit speaks on.
    pub(crate) fn pop_holding(&mut self, more_soon: impl FnOnce(&T) -> bool) -> Option<T> {
        let (item, weight) = self.items.pop_front()?;
        self.bytes -= weight;
        let room = self.items.capacity();
        if self.items.is_empty()
            && room > usize::from(self.keep)
            && (room > usize::from(self.start).max(1) * 2 || !more_soon(&item))
        {
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

    /// Drops every item and gives the room back.
    #[cfg_attr(not(feature = "relay"), allow(dead_code))] // the relay's lanes use it
    pub(crate) fn clear(&mut self) {
        self.items = VecDeque::new();
        self.bytes = 0;
        self.congested = false;
    }

    /// How many items the lane has room for without allocating.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }
}

/// Waits on `notify` until `ready` (which looks at a lane under its lock) gives something. The
/// waiter registers before it looks, so a `notify_one` or `notify_waiters` between the look and the
/// wait still wakes it. Cancel-safe when `ready` takes nothing it does not return.
pub(crate) async fn wait_for<R>(notify: &Notify, mut ready: impl FnMut() -> Option<R>) -> R {
    loop {
        let notified = notify.notified();
        if let Some(got) = ready() {
            return got;
        }
        notified.await;
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
/// feeder is why they happen). A [`Lane`] bounded at [`ALERT_BOUND`]; holds no heap memory while
/// empty (alerts are rare: a quiet call keeps none).
#[derive(Debug)]
pub(crate) struct Alerts {
    waiting: Mutex<Lane<&'static str>>,
    raised: Notify,
}

impl Default for Alerts {
    fn default() -> Self {
        Alerts {
            waiting: Mutex::new(Lane::new(ALERT_BOUND, usize::MAX)),
            raised: Notify::new(),
        }
    }
}

impl Alerts {
    /// Leaves an `OVERLOAD` error with `message` for the brain.
    pub(crate) fn raise(&self, message: &'static str) {
        if lock(&self.waiting).offer(message, 0).is_err() {
            tracing::debug!("{ALERT_BOUND} congestion errors already wait; dropping one");
            return;
        }
        self.raised.notify_one();
    }

    /// The oldest waiting error, once there is one.
    pub(crate) async fn next(&self) -> ErrorFrame {
        let message = wait_for(&self.raised, || lock(&self.waiting).pop()).await;
        overload(message)
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
        let mut q = Lane::new(2, usize::MAX);
        assert_eq!(q.admit(1, true, 1), Admitted::Queued);
        assert_eq!(q.admit(2, true, 1), Admitted::Queued);
        assert_eq!(q.admit(3, true, 1), Admitted::Shed { first: true });
        assert_eq!(q.admit(4, true, 1), Admitted::Shed { first: false });
        assert_eq!(
            q.admit(5, false, 1),
            Admitted::Queued,
            "non-droppable items queue past the bound"
        );
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(2));
        // Drained to half the bound: the episode is over, the next shed is reported again.
        assert_eq!(q.admit(6, true, 1), Admitted::Queued);
        assert_eq!(q.admit(7, true, 1), Admitted::Shed { first: true });
    }

    #[test]
    fn a_drained_lane_holds_no_memory() {
        let mut q = Lane::new(16, usize::MAX);
        for i in 0..10 {
            q.admit(i, false, 1);
        }
        while q.pop().is_some() {}
        assert_eq!(q.capacity(), 0);
    }

    #[test]
    fn a_lane_that_fills_in_bursts_takes_its_room_at_once_within_its_bound() {
        let mut q = Lane::new(16, usize::MAX).starting_with(12);
        q.admit(0, false, 1);
        let room = q.capacity();
        assert!(room >= 12, "room for the burst at the first push: {room}");
        for i in 1..12 {
            q.admit(i, false, 1);
        }
        assert_eq!(q.capacity(), room, "no growth within the burst");
        while q.pop().is_some() {}
        assert_eq!(q.capacity(), 0, "and none kept once drained");
        // Never more room than the bound.
        let mut q = Lane::new(2, usize::MAX).starting_with(64);
        q.admit(0, false, 1);
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
    fn a_lane_drained_by_an_item_with_more_to_come_keeps_its_room_until_one_without() {
        let mut q = Lane::new(64, usize::MAX).starting_with(7);
        q.push(1, 1);
        assert_eq!(q.pop_holding(|_| true), Some(1));
        let room = q.capacity();
        assert!(room >= 7, "kept: {room}");
        q.push(2, 1);
        assert_eq!(q.capacity(), room, "the next item takes no new room");
        assert_eq!(q.pop_holding(|i| *i == 1), Some(2));
        assert_eq!(q.capacity(), 0, "given back once nothing more is coming");
    }

    #[test]
    fn the_room_a_burst_grew_is_given_back_even_with_more_to_come() {
        let mut q = Lane::new(4096, usize::MAX).starting_with(7);
        for i in 0..1000 {
            q.push(i, 1);
        }
        assert!(q.capacity() >= 1000);
        for i in 0..1000 {
            assert_eq!(q.pop_holding(|_| true), Some(i));
        }
        assert_eq!(
            q.capacity(),
            0,
            "a burst's room is not held for the rest of a unit"
        );
    }

    #[test]
    fn frames_that_are_never_shed_still_meet_a_hard_bound() {
        let mut q = Lane::new(1, usize::MAX);
        for i in 0..64 {
            assert_eq!(q.admit(i, false, 1), Admitted::Queued);
        }
        assert_eq!(q.admit(64, false, 1), Admitted::Overflow);
        q.pop();
        assert_eq!(q.admit(65, false, 1), Admitted::Queued);
    }

    #[test]
    fn a_lane_is_bounded_in_bytes_as_well_as_in_items() {
        let mut q = Lane::new(256, 1000);
        // One item bigger than the bound still fits in an empty lane...
        assert_eq!(q.admit(0, true, 1500), Admitted::Queued);
        // ...and then droppable items are shed, however few the lane holds.
        assert_eq!(q.admit(1, true, 10), Admitted::Shed { first: true });
        // Items that are never shed queue up to twice the byte bound, then overflow.
        assert_eq!(q.admit(2, false, 500), Admitted::Queued);
        assert_eq!(q.admit(3, false, 1), Admitted::Overflow);
        assert_eq!(q.pop(), Some(0));
        // 500 bytes left, half the bound: the episode is over.
        assert_eq!(q.admit(4, true, 10), Admitted::Queued);
        assert_eq!(q.admit(5, true, 700), Admitted::Queued);
        assert_eq!(q.admit(6, true, 10), Admitted::Shed { first: true });
    }

    #[test]
    fn a_refusing_lane_takes_an_item_only_when_it_fits_but_an_empty_one_takes_any() {
        let mut q = Lane::new(3, 1000).keeping(4);
        assert_eq!(q.offer(0, 1500), Ok(()), "an empty lane takes any one item");
        assert_eq!(q.offer(1, 1), Err(1));
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.offer(2, 600), Ok(()));
        assert_eq!(
            q.offer(3, 401),
            Err(3),
            "1,001 bytes would be over the bound"
        );
        assert_eq!(q.offer(4, 400), Ok(()));
        assert_eq!(q.offer(5, 0), Ok(()));
        assert_eq!(q.offer(6, 0), Err(6), "and so would a fourth item");
        // Items a caller bounds otherwise go in past both bounds.
        q.push(7, 5000);
        assert_eq!(q.len(), 4);
        while q.pop().is_some() {}
        assert!(q.capacity() > 0, "a lane keeping 4 keeps room for 4");
        for i in 0..8 {
            q.push(i, 0);
        }
        while q.pop().is_some() {}
        assert_eq!(q.capacity(), 0, "but gives back a burst's room");
        q.push(1, 1);
        q.clear();
        assert_eq!((q.len(), q.capacity(), q.offer(2, 1000)), (0, 0, Ok(())));
    }
}

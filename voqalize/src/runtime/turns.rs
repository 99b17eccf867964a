//! The turns a session is running, and the barge-in watermark that cancels them
//! (docs/protocol.md §4.6). Shared by the reader (which applies `Interruption` at once) and the
//! feeder (which starts turns).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::logline::Repeated;
use crate::recover::lock;
use crate::session::Session;

pub(super) struct RunningTurn {
    pub(super) turn_id: u64,
    pub(super) cancelled: Arc<AtomicBool>,
    pub(super) handle: JoinHandle<()>,
}

#[derive(Default)]
pub(super) struct Turns {
    pub(super) watermark: u64,
    pub(super) next_key: u64,
    /// The turns running, by the key each was given (a handful: a list, no hashing).
    pub(super) running: Vec<(u64, RunningTurn)>,
}

/// State the reader and the feeder share.
pub(super) struct Control {
    pub(super) session: OnceLock<Session>,
    pub(super) turns: Mutex<Turns>,
    /// A turn stopped running (it ended, or a barge-in cancelled it): a turn waiting for a place
    /// under `HostBuilder::max_turns` may start.
    pub(super) turn_ended: Notify,
    /// Set after a refusal or a fatal start failure: no further callbacks (docs/protocol.md §7 D1).
    pub(super) dead: AtomicBool,
    /// Set by the reader at the first SessionStart; frames read before it are dropped (docs/protocol.md §4.2).
    pub(super) started: AtomicBool,
    /// Ends the session if a stuck callback keeps the feeder from reaching an inbound End.
    pub(super) end_timer: Mutex<Option<JoinHandle<()>>>,
    /// Failed turns and callbacks: a peer starts as many as it sends frames, so one line, then a
    /// count (shared by the feeder, the turn tasks, the RTVI task and the alert pump).
    pub(super) failures: Mutex<Repeated>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            session: OnceLock::new(),
            turns: Mutex::default(),
            turn_ended: Notify::new(),
            dead: AtomicBool::new(false),
            started: AtomicBool::new(false),
            end_timer: Mutex::new(None),
            failures: Mutex::new(Repeated::new("failed turns and callbacks")),
        }
    }
}

impl Control {
    /// Raises the watermark and cancels every running turn at or below it (docs/protocol.md §4.6).
    pub(super) fn interrupt(&self, through_turn: u64) {
        let mut turns = lock(&self.turns);
        turns.watermark = turns.watermark.max(through_turn);
        let watermark = turns.watermark;
        let before = turns.running.len();
        turns.running.retain(|(_, t)| {
            if t.turn_id <= watermark {
                t.cancelled.store(true, Ordering::Release);
                t.handle.abort();
                false
            } else {
                true
            }
        });
        if turns.running.len() < before {
            drop(turns);
            self.turn_ended.notify_waiters();
        }
    }
}

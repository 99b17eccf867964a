//! Helpers shared by the test modules: a driver with short waits and a log that test brains write to.

#![allow(dead_code)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use voqalize::MakeBrain;
use voqalize::testing::Voqalize;

/// An in-process driver with a short quiet window (the in-memory channel has no network jitter).
pub fn driver(factory: impl MakeBrain) -> Voqalize {
    let mut v = Voqalize::in_process(factory);
    v.quiet = Duration::from_millis(60);
    v.linger = Duration::from_millis(300);
    v
}

/// What a test brain records: named events in order, and how often the session ended. Every change
/// wakes [`Log::wait`]ers.
pub struct Log {
    events: Mutex<Vec<String>>,
    pub session_ends: AtomicUsize,
    changed: watch::Sender<usize>,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            events: Mutex::new(Vec::new()),
            session_ends: AtomicUsize::new(0),
            changed: watch::channel(0).0,
        }
    }
}

impl Log {
    pub fn push(&self, event: impl Into<String>) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.into());
        self.changed.send_modify(|n| *n += 1);
    }

    /// Waits until `check` holds over this log (5 s at most), without a driver; true if it held.
    pub async fn until(&self, check: impl Fn(&Log) -> bool) -> bool {
        let mut rx = self.changed.subscribe();
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while !check(self) {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        waited.is_ok() && check(self)
    }

    /// Drives `v` until `check` holds over this log (5 s at most); true if it held.
    pub async fn wait(&self, v: &mut Voqalize, check: impl Fn(&Log) -> bool) -> bool {
        let mut rx = self.changed.subscribe();
        loop {
            if check(self) {
                return true;
            }
            match v.run_until(Duration::from_secs(5), rx.changed()).await {
                Ok(Some(Ok(()))) => continue,
                _ => return check(self),
            }
        }
    }

    pub fn events(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn ended(&self) -> usize {
        self.session_ends.load(Ordering::SeqCst)
    }

    pub fn end(&self) {
        self.session_ends.fetch_add(1, Ordering::SeqCst);
        self.changed.send_modify(|n| *n += 1);
    }
}

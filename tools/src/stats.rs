//! `--stats-file`: a measured brain writes its live tokio tasks and the session counters to a
//! file every 500 ms; the load tool's `--brain-stats` reads it (a soak fails when they do not come
//! back to their baseline).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Sessions whose `on_session_start` ran, in this process (bumped by the brains that count).
pub static SESSIONS_STARTED: AtomicU64 = AtomicU64::new(0);
/// Sessions whose `on_session_end` ran, in this process (bumped by the brains that count).
pub static SESSIONS_ENDED: AtomicU64 = AtomicU64::new(0);

/// The flag, flattened into a brain's command line.
#[derive(clap::Args, Debug)]
pub struct Stats {
    /// Every 500 ms, write `{"alive_tasks": n, "sessions_started": a, "sessions_ended": b}` to
    /// this file (a temporary file renamed over it): the runtime's live tokio tasks (this writer
    /// is one of them) and the session counters. The load tool's `--brain-stats` reads it.
    #[arg(long, value_name = "PATH")]
    pub stats_file: Option<PathBuf>,
}

impl Stats {
    /// With `--stats-file`, starts the writer on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it spawns a task).
    pub fn start(&self) {
        if let Some(path) = self.stats_file.clone() {
            tokio::spawn(write_stats(path));
        }
    }
}

/// Every 500 ms, writes the live task count and the session counters to `path` as one JSON
/// object: to `path.tmp`, then renamed over `path`, so a reader never sees half a file.
async fn write_stats(path: PathBuf) {
    let mut tmp = path.clone().into_os_string();
    tmp.push(".tmp");
    let mut every = tokio::time::interval(std::time::Duration::from_millis(500));
    loop {
        every.tick().await;
        let line = format!(
            "{{\"alive_tasks\": {}, \"sessions_started\": {}, \"sessions_ended\": {}}}\n",
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            SESSIONS_STARTED.load(Relaxed),
            SESSIONS_ENDED.load(Relaxed)
        );
        if let Err(e) = std::fs::write(&tmp, line).and_then(|()| std::fs::rename(&tmp, &path)) {
            eprintln!("--stats-file {}: {e}", path.display());
        }
    }
}

//! The comparison workload: every user message gets one unit of 8 chunks, 41 words. The Python
//! SDK's twin is `examples/python/workload_brain.py`; `scripts/compare` runs both under the same
//! load.
//!
//! ```text
//! cargo run --release --example workload -- --listen 127.0.0.1:8787 --allow-unverified
//! ```

use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;

#[path = "support/answer.rs"]
mod answer;
use answer::CHUNKS;

/// Answers every message with [`CHUNKS`]; counts sessions for `--stats-file`.
struct Workload;

impl Brain for Workload {
    async fn on_session_start(&self, _session: &Session) -> BrainResult {
        cli::SESSIONS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, _reason: EndReason) {
        cli::SESSIONS_ENDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    async fn on_user_message(&self, turn: &mut Turn, _message: UserMessage) -> BrainResult {
        let mut unit = turn.open_unit();
        for chunk in CHUNKS {
            unit.write(chunk);
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    cli::serve(|| Workload).await
}

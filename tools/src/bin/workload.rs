//! The comparison workload: every user message gets one unit of 8 chunks, 41 words. The Python
//! SDK's twin is `tools/python/workload_brain.py`; `tools/scripts/compare` runs both under the
//! same load. It takes the examples' flags (`examples/support/cli.rs`) and `--stats-file`.
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin workload -- --listen 127.0.0.1:8787 --allow-unverified
//! ```

use std::sync::atomic::Ordering::Relaxed;

use clap::Parser;
use voqalize::prelude::*;
use voqalize_tools::answer::CHUNKS;
use voqalize_tools::stats::{self, SESSIONS_ENDED, SESSIONS_STARTED};

/// Serve the comparison workload's brain on a WebSocket.
#[derive(Parser, Debug)]
struct WorkloadArgs {
    #[command(flatten)]
    host: voqalize_tools::cli::Args,
    #[command(flatten)]
    stats: stats::Stats,
}

/// Answers every message with [`CHUNKS`]; counts sessions for `--stats-file`.
struct Workload;

impl Brain for Workload {
    async fn on_session_start(&self, _session: &Session) -> BrainResult {
        SESSIONS_STARTED.fetch_add(1, Relaxed);
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, _reason: EndReason) {
        SESSIONS_ENDED.fetch_add(1, Relaxed);
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
    let args = WorkloadArgs::parse();
    args.stats.start();
    args.host.serve(|| Workload).await
}

//! A load tool that is never the bottleneck: many sessions at once against a brain (Rust or
//! Python: the same wire), each on a lean client of its own (one small-buffered WebSocket, frames
//! encoded and decoded with `voqalize::wire`, nothing recorded but the timings).
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin workload -- --listen 127.0.0.1:8787 --allow-unverified &
//! # saturating: 100 calls at once until 1,000 are done, no think time
//! cargo run --release -p voqalize-tools --bin load -- --url ws://127.0.0.1:8787 --calls 1000 --concurrency 100
//! # paced: 1,000 sessions started over 5 s, 10 turns each, 1 s between a turn's end and the next
//! cargo run --release -p voqalize-tools --bin load -- --url ws://127.0.0.1:8787 --sessions 1000 --turns 10 --think-ms 1000 --ramp-s 5
//! ```
//!
//! Each call: connect, `SessionStart` (turn 1), `--turns` user messages (turns 2, 3, ...), then
//! `End`. A turn is timed from its `UserMessage` to its first `SpeechChunk` ("first chunk") and to
//! its last `SpeechEnd` ("last end"); every unit is finalized at its `SpeechEnd` with all of its
//! text, a `SpeechCancel` at once with the text so far, and a `configure` is accepted. The wire has
//! no turn-complete frame: as in `voqalize_testing`, a turn is over once it opened a unit and every
//! unit it opened has ended (`--quiet-ms` waits that long more for another unit). Without
//! `--think-ms` and `--ramp-s` the run is saturating: `--concurrency` calls at once (default 50)
//! until `--calls` are done. With either it is paced: `--ramp-s` spreads the session starts evenly
//! over that many seconds, `--think-ms` pauses between a turn's end and the next message, and
//! `--concurrency` defaults to `--calls` (every session at once).
//!
//! It reports calls ok and failed (failures grouped by kind: connect, timeout, closed, protocol,
//! with the first message of each), turns and turns a second, first-chunk and last-end
//! percentiles, and with `--brain-pid PID` the brain's CPU per turn and per call (`--turns 0`: a
//! call by itself) and its RSS before, at its peak (sampled every 100 ms) and after. Against the
//! stand-in provider run with `--stamp` (`tools/src/bin/provider.rs`), whose answers begin with the
//! moment their first event was written, it also reports the time from that first SSE byte to the
//! first `SpeechChunk` it receives (one clock: both read the system time). `--json` prints all of it as one JSON object (times in
//! ms) and nothing else on stdout. Bounded: every frame wait times out after `--timeout-s` (10 s),
//! no call starts after `--deadline-s` and whatever still runs `--timeout-s` later is cut.
//!
//! With `--relay-listen 127.0.0.1:9000` it plays the Cortex relay instead: start the brain with
//! `--cortex ws://127.0.0.1:9000/agent --api-key x` and every call rides that one connection (same
//! turns, same measurements).
//!
//! With `--idle N --brain-pid PID` it measures memory instead: it reads the brain's RSS and open
//! files, opens `N` started, idle sessions (200 connecting at a time), waits until the RSS is
//! steady, reads both again, closes the sessions and samples the RSS until it stops falling (up to
//! 15 s). It raises its own open-file limit, so `--idle 10000` works from one process:
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin load -- --url ws://127.0.0.1:8787 --idle 1000 --brain-pid $(pgrep -f release/workload)
//! ```
//!
//! With `--soak SECONDS --brain-pid PID` it runs calls that barge in, reset their TCP connection,
//! send junk or stop reading beside ordinary ones, then reports the brain's open files and RSS
//! against its baseline; with `--brain-stats PATH` (the brain's `--stats-file`) also its live tokio
//! tasks and sessions started and ended, and it fails when they differ or the tasks did not return
//! to their baseline.
//!
//! With `--attack NAME` it plays a hostile peer instead (a relay, a provider or a caller that
//! misbehaves one way, beside a bystander call it times), and with `--brain-pid` reports the
//! brain's RSS, its log lines and its longest line: `--attack list` names them.

use std::time::Duration;

use clap::Parser;
use voqalize_testing::TokenSigner;

/// Load a brain with concurrent calls, hold idle sessions, or soak it; measure it all.
#[derive(Parser, Debug)]
struct Args {
    /// The brain's WebSocket URL (direct leg, `ws://` only).
    #[arg(long, required_unless_present_any = ["relay_listen", "attack"])]
    url: Option<String>,
    /// Act as the Cortex relay instead: listen here, wait for the agent to dial
    /// (`--cortex ws://ADDR/agent`), and run every call over that one connection.
    #[arg(long, value_name = "ADDR")]
    relay_listen: Option<String>,
    /// How many calls (sessions) in all.
    #[arg(long, visible_alias = "sessions", default_value_t = 200)]
    calls: usize,
    /// How many calls at once. Default: 50 when saturating, every call (`--calls`) when paced
    /// (`--think-ms` or `--ramp-s`).
    #[arg(long)]
    concurrency: Option<usize>,
    /// User turns per call.
    #[arg(long, default_value_t = 3)]
    turns: usize,
    /// Paced: wait this long between the end of a turn and the next user message.
    #[arg(long, default_value_t = 0)]
    think_ms: u64,
    /// Paced: spread the session starts evenly over this many seconds.
    #[arg(long, default_value_t = 0.0)]
    ramp_s: f64,
    /// After a turn's units have all ended, wait this long for another unit of the turn (for
    /// brains that speak several units a turn with gaps between them; 0: the turn is over).
    #[arg(long, default_value_t = 0)]
    quiet_ms: u64,
    /// Sign tokens with this RSA private key (PEM) when the brain verifies them.
    #[arg(long)]
    private_key: Option<std::path::PathBuf>,
    /// Start no call after this many seconds; cut what still runs `--timeout-s` later.
    #[arg(long, default_value_t = 120)]
    deadline_s: u64,
    /// How long to wait for any one frame (or connection) before the call fails as a timeout.
    #[arg(long, default_value_t = 10)]
    timeout_s: u64,
    /// Instead of calls: run a soak for this many seconds (`--concurrency` calls at once, default
    /// 50, that barge in, reset their TCP connection, send junk, or stop reading, beside ordinary
    /// ones), then report the brain's open files, RSS and (with --brain-stats) tasks and sessions
    /// against its baseline (needs --brain-pid).
    #[arg(long, value_name = "SECONDS")]
    soak: Option<u64>,
    /// Instead of calls: hold this many started, idle sessions and report the brain's RSS and
    /// open files (needs --brain-pid).
    #[arg(long, value_name = "N")]
    idle: Option<usize>,
    /// The brain's process id: its CPU time per turn, RSS and open files (from /proc).
    #[arg(long, value_name = "PID")]
    brain_pid: Option<u32>,
    /// The brain's `--stats-file`: live tasks and sessions started/ended, before and after a
    /// soak (the soak fails when they do not come back).
    #[arg(long, value_name = "PATH")]
    brain_stats: Option<std::path::PathBuf>,
    /// Instead of calls: play one hostile peer (`--attack list` names them) against the brain,
    /// beside a bystander call, and report what it cost the brain.
    #[arg(long, value_name = "NAME")]
    attack: Option<String>,
    /// With `--attack`: the brain's log file (its stderr), to count its lines and find the longest.
    #[arg(long, value_name = "PATH")]
    brain_log: Option<std::path::PathBuf>,
    /// With `--attack provider-*`: play the brain's model provider here (the brain's `--base-url`,
    /// such as http://127.0.0.1:8790/v1 for `--provider chat`).
    #[arg(long, value_name = "ADDR")]
    provider_listen: Option<String>,
    /// Print one JSON object with every number on stdout, and nothing else.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// Paced when there is think time or a ramp.
    fn paced(&self) -> bool {
        self.think_ms > 0 || self.ramp_s > 0.0
    }

    /// `--concurrency`, or its default for the mode.
    fn concurrency(&self) -> usize {
        let default = if self.paced() { self.calls } else { 50 };
        self.concurrency.unwrap_or(default).max(1)
    }

    /// The wait for one frame.
    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s.max(1))
    }
}

mod attack;
mod calls;
mod client;
mod failure;
mod idle;
mod probe;
mod relay;
mod soak;

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args).await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Runs the mode the flags ask for.
async fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let signer = match &args.private_key {
        Some(path) => Some(TokenSigner::from_pem(&std::fs::read_to_string(path)?)?),
        None => None,
    };
    if let Some(n) = args.idle {
        return idle::idle(args, n, signer).await;
    }
    if let Some(name) = &args.attack {
        return attack::attack(args, name).await;
    }
    if let Some(seconds) = args.soak {
        return soak::soak(args, seconds).await;
    }
    calls::load(args, signer).await
}

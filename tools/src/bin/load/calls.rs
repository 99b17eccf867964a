//! Measured calls: saturating or paced, and their report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use voqalize_testing::TokenSigner;

use crate::Args;
use crate::client::{Leg, OnFirstChunk, Session, TurnTimes, dial};
use crate::failure::{Failure, Failures, Kind};
use crate::probe::{PeakSampler, cpu_ms, cpu_ns, cpu_split_ms, raise_open_file_limit, rss_kb};
use crate::relay::RelayLink;

/// What every call of a run shares.
pub struct Plan {
    /// The brain's URL (direct).
    pub url: String,
    /// The relay link (relay).
    pub relay: Option<Arc<RelayLink>>,
    /// Token signer, when the brain verifies tokens.
    pub signer: Option<TokenSigner>,
    /// User turns per call.
    pub turns: usize,
    /// Pause between turns.
    pub think: Duration,
    /// Extra wait for another unit of a turn.
    pub quiet: Duration,
    /// The wait for one frame.
    pub timeout: Duration,
    /// Every finished turn's times, kept as they come (a call cut at the deadline keeps its
    /// finished turns).
    pub times: std::sync::Mutex<Vec<TurnTimes>>,
}

impl Plan {
    /// A leg for session `id` (`session_id`): a new connection, or a share of the relay's.
    pub async fn leg(&self, id: usize, session_id: &str) -> Result<Leg, Failure> {
        match &self.relay {
            Some(link) => Ok(link.leg(id)),
            None => {
                let token = self.signer.as_ref().map(|s| s.mint(session_id));
                Ok(Leg::Direct(Box::new(
                    dial(&self.url, session_id, token.as_deref(), self.timeout).await?,
                )))
            }
        }
    }
}

/// One measured call: its turns' times go to `plan.times`; gives the failure that ended it, if any.
pub async fn one_call(plan: &Plan, id: usize) -> Option<Failure> {
    let out = async {
        let session_id = format!("load-{id}");
        let leg = plan.leg(id, &session_id).await?;
        let mut s = Session::start(leg, session_id, plan.timeout).await?;
        for t in 0..plan.turns {
            if t > 0 && !plan.think.is_zero() {
                tokio::time::sleep(plan.think).await;
            }
            let text = format!("turn {t} of call {id}");
            let times = s.turn(text, plan.quiet, OnFirstChunk::Listen).await?;
            plan.times
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(times);
        }
        s.leg.end(plan.timeout).await;
        Ok::<(), Failure>(())
    }
    .await;
    out.err()
}

/// `p`th percentile of `sorted`, in ms.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// p50, p90, p99 and max of `values` (sorted here), in ms.
pub fn spread(values: &mut [Duration]) -> [f64; 4] {
    values.sort();
    [50.0, 90.0, 99.0, 100.0].map(|p| percentile(values, p))
}

/// `{"p50": .., "p90": .., "p99": .., "max": ..}`.
pub fn spread_json(s: [f64; 4]) -> serde_json::Value {
    serde_json::json!({ "p50": s[0], "p90": s[1], "p99": s[2], "max": s[3] })
}

/// Runs `--calls` measured calls and reports them.
pub async fn load(
    args: &Args,
    signer: Option<TokenSigner>,
) -> Result<(), Box<dyn std::error::Error>> {
    raise_open_file_limit();
    let plan = plan_of(args, signer).await?;
    let meter = Meter::start(args.brain_pid)?;
    let run = run_calls(args, &plan).await?;
    let usage = meter.stop()?;
    let times = std::mem::take(&mut *plan.times.lock().unwrap_or_else(|p| p.into_inner()));
    let report = Report::new(args, run, usage, &times);
    if args.json {
        report.print_json(args);
    } else {
        report.print_text();
    }
    let Report {
        failures,
        not_started,
        ..
    } = report;
    if failures.total() == 0 && not_started == 0 {
        Ok(())
    } else {
        Err(format!(
            "{} calls failed, {not_started} not started",
            failures.total()
        )
        .into())
    }
}

/// The run's shared plan, from `args` (and the relay's link, accepted here when the run plays it).
async fn plan_of(
    args: &Args,
    signer: Option<TokenSigner>,
) -> Result<Arc<Plan>, Box<dyn std::error::Error>> {
    let relay = match &args.relay_listen {
        Some(addr) => Some(RelayLink::accept(addr, args.json).await?),
        None => None,
    };
    Ok(Arc::new(Plan {
        url: args.url.clone().unwrap_or_default(),
        relay,
        signer,
        turns: args.turns,
        think: Duration::from_millis(args.think_ms),
        quiet: Duration::from_millis(args.quiet_ms),
        timeout: args.timeout(),
        times: std::sync::Mutex::new(Vec::with_capacity(args.calls * args.turns)),
    }))
}

/// How the calls went: counts, and the seconds from the first launch to the last call's end.
struct Run {
    ok: usize,
    failures: Failures,
    launched: usize,
    concurrency: usize,
    elapsed: f64,
}

/// Launches the calls (at most `--concurrency` at once, paced over `--ramp-s`, none after
/// `--deadline-s`) and waits for them, cutting those still running a timeout after the deadline.
async fn run_calls(args: &Args, plan: &Arc<Plan>) -> Result<Run, Box<dyn std::error::Error>> {
    let concurrency = args.concurrency();
    let gate = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.deadline_s);
    let hard_deadline = deadline + args.timeout();
    let step = if args.ramp_s > 0.0 && args.calls > 0 {
        Duration::from_secs_f64(args.ramp_s / args.calls as f64)
    } else {
        Duration::ZERO
    };
    let mut tasks = tokio::task::JoinSet::new();
    let mut failures = Failures::default();
    let mut ok = 0usize;
    let mut launched = 0usize;
    let mut collect = |f: Option<Failure>| match f {
        Some(f) => failures.add(f),
        None => ok += 1,
    };
    for id in 0..args.calls {
        if !step.is_zero() {
            let at = tokio::time::Instant::from_std(started) + step * id as u32;
            tokio::time::sleep_until(at).await;
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        let permit = gate.clone().acquire_owned().await?;
        let plan = plan.clone();
        tasks.spawn(async move {
            let out = one_call(&plan, id).await;
            drop(permit);
            out
        });
        launched += 1;
        while let Some(done) = tasks.try_join_next() {
            collect(done?);
        }
    }
    loop {
        match tokio::time::timeout_at(hard_deadline, tasks.join_next()).await {
            Ok(Some(done)) => collect(done?),
            Ok(None) => break,
            Err(_) => {
                let cut = tasks.len();
                tasks.abort_all();
                for _ in 0..cut {
                    collect(Some(Failure::new(
                        Kind::Timeout,
                        "cut at the run's deadline",
                    )));
                }
                break;
            }
        }
    }
    Ok(Run {
        ok,
        failures,
        launched,
        concurrency,
        elapsed: started.elapsed().as_secs_f64(),
    })
}

/// The brain's CPU and memory (with `--brain-pid`) and the load tool's own CPU, read before the
/// calls; [`Meter::stop`] reads them again.
struct Meter {
    pid: Option<u32>,
    /// (user, system) in ms.
    cpu_before: Option<(u64, u64)>,
    ns_before: Option<u64>,
    own_cpu_before: u64,
    rss_before: Option<u64>,
    sampler: Option<PeakSampler>,
}

/// What the calls cost, from a [`Meter`].
struct Usage {
    /// (user, system) in ms.
    cpu_split: Option<(u64, u64)>,
    /// User and system, in ms.
    cpu_used: Option<u64>,
    /// The same, to the nanosecond (the ticks above are 10 ms each).
    ns_used: Option<u64>,
    own_cpu: u64,
    rss_before: Option<u64>,
    peak: Option<u64>,
    rss_after: Option<u64>,
}

impl Meter {
    fn start(pid: Option<u32>) -> Result<Self, Box<dyn std::error::Error>> {
        let cpu_before = pid.map(|p| cpu_split_ms(&p.to_string())).transpose()?;
        let ns_before = pid.map(|p| cpu_ns(&p.to_string())).transpose()?;
        let own_cpu_before = cpu_ms("self")?;
        let rss_before = pid.map(rss_kb).transpose()?;
        let sampler = pid.zip(rss_before).map(|(p, r)| PeakSampler::start(p, r));
        Ok(Meter {
            pid,
            cpu_before,
            ns_before,
            own_cpu_before,
            rss_before,
            sampler,
        })
    }

    fn stop(self) -> Result<Usage, Box<dyn std::error::Error>> {
        let pid = self.pid;
        let peak = self.sampler.map(PeakSampler::stop);
        let rss_after = pid.map(rss_kb).transpose()?;
        let cpu_split = match (pid, self.cpu_before) {
            (Some(p), Some((user, system))) => {
                let (u, s) = cpu_split_ms(&p.to_string())?;
                Some((u.saturating_sub(user), s.saturating_sub(system)))
            }
            _ => None,
        };
        let ns_used = match (pid, self.ns_before) {
            (Some(p), Some(before)) => Some(cpu_ns(&p.to_string())?.saturating_sub(before)),
            _ => None,
        };
        Ok(Usage {
            cpu_split,
            cpu_used: cpu_split.map(|(u, s)| u + s),
            ns_used,
            own_cpu: cpu_ms("self")?.saturating_sub(self.own_cpu_before),
            rss_before: self.rss_before,
            peak,
            rss_after,
        })
    }
}

/// The run's numbers, as printed.
struct Report {
    run: Run,
    failures: Failures,
    usage: Usage,
    not_started: usize,
    turns: usize,
    turns_per_s: f64,
    first: [f64; 4],
    end: [f64; 4],
    /// First SSE byte to first chunk, on the turns whose answer was stamped (`provider --stamp`).
    sse: Option<[f64; 4]>,
    stamped: usize,
    cpu_per_turn: Option<f64>,
}

impl Report {
    fn new(args: &Args, mut run: Run, usage: Usage, times: &[TurnTimes]) -> Self {
        let turns = times.len();
        let mut firsts: Vec<Duration> = times.iter().map(|t| t.first_chunk).collect();
        let mut ends: Vec<Duration> = times.iter().map(|t| t.last_end).collect();
        let mut stamped: Vec<Duration> = times.iter().filter_map(|t| t.sse_to_chunk).collect();
        let sse = (!stamped.is_empty()).then(|| spread(&mut stamped));
        // From the scheduler's clock where there is one, else from the ticks.
        let cpu_per_turn = usage
            .ns_used
            .map(|ns| ns as f64 / 1e6 / turns.max(1) as f64)
            .or(usage.cpu_used.map(|c| c as f64 / turns.max(1) as f64));
        Report {
            failures: std::mem::take(&mut run.failures),
            not_started: args.calls - run.launched,
            turns,
            turns_per_s: turns as f64 / run.elapsed.max(1e-9),
            first: spread(&mut firsts),
            end: spread(&mut ends),
            sse,
            stamped: stamped.len(),
            cpu_per_turn,
            run,
            usage,
        }
    }

    fn print_json(&self, args: &Args) {
        let (u, turns, ok) = (&self.usage, self.turns, self.run.ok);
        let out = serde_json::json!({
            "mode": if relay_mode(args) { "relay" } else { "direct" },
            "paced": args.paced(),
            "calls": args.calls,
            "concurrency": self.run.concurrency,
            "turns_per_call": args.turns,
            "think_ms": args.think_ms,
            "ramp_s": args.ramp_s,
            "calls_ok": ok,
            "calls_failed": self.failures.total(),
            "calls_not_started": self.not_started,
            "errors": self.failures.json(),
            "seconds": self.run.elapsed,
            "turns": turns,
            "turns_per_s": self.turns_per_s,
            "first_chunk_ms": spread_json(self.first),
            "last_end_ms": spread_json(self.end),
            "sse_to_first_chunk_ms": self.sse.map(spread_json),
            "sse_stamped_turns": self.stamped,
            "brain_cpu_ms": u.cpu_used,
            "brain_cpu_ns": u.ns_used,
            "brain_cpu_ms_per_turn": self.cpu_per_turn,
            // Handshake, session, turns and end: with `--turns 0`, what a call costs by itself.
            "brain_cpu_ms_per_call": u.ns_used.map(|ns| ns as f64 / 1e6 / ok.max(1) as f64),
            "brain_cpu_user_ms_per_turn": u.cpu_split.map(|(c, _)| c as f64 / turns.max(1) as f64),
            "brain_cpu_system_ms_per_turn": u.cpu_split.map(|(_, c)| c as f64 / turns.max(1) as f64),
            "brain_rss_kb": { "before": u.rss_before, "peak": u.peak, "after": u.rss_after },
            "load_cpu_ms": u.own_cpu,
        });
        println!("{out}");
    }

    fn print_text(&self) {
        let (u, turns, ok, not_started) = (&self.usage, self.turns, self.run.ok, self.not_started);
        let (first, end) = (self.first, self.end);
        println!(
            "calls: {ok} ok, {} failed{} in {:.1} s; turns: {turns}, {:.1} a second",
            self.failures.total(),
            if not_started > 0 {
                format!(", {not_started} not started (deadline)")
            } else {
                String::new()
            },
            self.run.elapsed,
            self.turns_per_s,
        );
        self.failures.print();
        println!(
            "time to first chunk (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            first[0], first[1], first[2], first[3]
        );
        println!(
            "time to last end (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            end[0], end[1], end[2], end[3]
        );
        if let Some(sse) = self.sse {
            println!(
                "first SSE byte to first chunk (ms, {} stamped turns): p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
                self.stamped, sse[0], sse[1], sse[2], sse[3]
            );
        }
        if let (Some(used), Some(per)) = (u.cpu_used, self.cpu_per_turn) {
            let clock = if u.ns_used.is_some() {
                "the scheduler's clock"
            } else {
                "10 ms clock ticks"
            };
            println!("brain CPU: {used} ms for {turns} turns, {per:.3} ms a turn ({clock})");
            if let Some(ns) = u.ns_used {
                println!(
                    "brain CPU a call: {:.3} ms (its handshake, session, turns and end)",
                    ns as f64 / 1e6 / ok.max(1) as f64
                );
            }
        }
        if let (Some(b), Some(p), Some(a)) = (u.rss_before, u.peak, u.rss_after) {
            println!("brain RSS: {b} kB before, {p} kB peak, {a} kB after");
        }
        println!("load tool CPU: {} ms", u.own_cpu);
    }
}

/// True when the run plays the relay.
pub fn relay_mode(args: &Args) -> bool {
    args.relay_listen.is_some()
}

//! The soak: misbehaving calls beside ordinary ones, then the brain's health against its baseline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;

use crate::Args;
use crate::client::{Leg, OnFirstChunk, Session, dial};
use crate::failure::{Failure, Failures};
use crate::probe::{
    BrainStats, open_files, raise_open_file_limit, rss_kb, settled_files, settled_rss,
};

/// One soak call: what it does is chosen by `kind`. Errors are expected (the brain may close a
/// misbehaving call); they are counted, but only the brain's health at the end counts.
pub async fn soak_call(url: &str, id: usize, kind: u64, timeout: Duration) -> Result<(), Failure> {
    let session_id = format!("soak-{id}");
    let leg = Leg::Direct(Box::new(dial(url, &session_id, None, timeout).await?));
    let mut s = Session::start(leg, session_id, timeout).await?;
    let quiet = Duration::ZERO;
    match kind % 5 {
        // An ordinary call.
        0 => {
            s.turn("an ordinary turn".into(), quiet, OnFirstChunk::Listen)
                .await?;
            s.leg.end(timeout).await;
        }
        // A barge-in on the answer: interrupted at its first chunk, then a new message.
        1 => {
            s.turn("interrupt me".into(), quiet, OnFirstChunk::BargeIn)
                .await?;
            s.turn("after the barge-in".into(), quiet, OnFirstChunk::Listen)
                .await?;
            s.leg.end(timeout).await;
        }
        // A TCP reset: the connection just goes away, no close frame.
        2 => {
            s.say("going away".into()).await?;
            if let Leg::Direct(ws) = &s.leg {
                let _ = ws.get_ref().set_zero_linger();
            }
            drop(s);
        }
        // Junk frames, then an ordinary turn.
        3 => {
            for i in 0..20u8 {
                s.leg
                    .send_raw(Message::Binary(vec![0xff, i, 0x07].into()))
                    .await?;
                s.leg.send_raw(Message::Text("not a frame".into())).await?;
            }
            s.turn("after the junk".into(), quiet, OnFirstChunk::Listen)
                .await?;
            s.leg.end(timeout).await;
        }
        // A client that stops reading: messages sent, nothing read, then gone.
        _ => {
            for t in 0..50 {
                s.say(format!("flood {t}")).await?;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(s);
        }
    }
    Ok(())
}

/// The brain's stats once it is quiet (every started session ended, the same reading twice in a
/// row, 500 ms apart), or the last reading after 10 s: the soak's baseline.
async fn quiet_stats(path: &std::path::Path) -> Result<BrainStats, Box<dyn std::error::Error>> {
    let until = Instant::now() + Duration::from_secs(10);
    let mut last = BrainStats::read(path)?;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = BrainStats::read(path)?;
        if (now == last && now.sessions_started == now.sessions_ended) || Instant::now() >= until {
            return Ok(now);
        }
        last = now;
    }
}

/// Runs the soak and reports the brain's files, memory, tasks and sessions against its baseline.
pub async fn soak(args: &Args, seconds: u64) -> Result<(), Box<dyn std::error::Error>> {
    raise_open_file_limit();
    let pid = args.brain_pid.ok_or("--soak needs --brain-pid")?;
    let url = args.url.clone().ok_or("--soak needs --url")?;
    let stats_before = match &args.brain_stats {
        Some(path) => Some(quiet_stats(path).await?),
        None => None,
    };
    let (files, rss) = (open_files(pid)?, rss_kb(pid)?);
    let concurrency = args.concurrency.unwrap_or(50).max(1);
    let calls = soak_calls(&url, concurrency, args.timeout(), seconds).await?;
    // Let the brain finish tearing down what was cut, then read.
    let files_after = settled_files(pid, files, Duration::from_secs(10)).await?;
    let rss_after = settled_rss(pid, rss, Duration::from_secs(20)).await?;
    let stats_after = match (&args.brain_stats, stats_before) {
        (Some(path), Some(before)) => Some(settled_stats(path, before).await?),
        _ => None,
    };
    let report = SoakReport {
        seconds,
        calls,
        files: [files, files_after],
        rss: [rss, rss_after],
        stats: [stats_before, stats_after],
        problems: problems(stats_before, stats_after),
    };
    report.print(args.json);
    if report.problems.is_empty() {
        Ok(())
    } else {
        Err(report.problems.join("; ").into())
    }
}

/// How the soak's calls went.
struct SoakCalls {
    /// Calls started.
    started: usize,
    /// Calls without an error.
    ok: usize,
    failures: Failures,
}

/// Starts soak calls of random kinds (at most `concurrency` at once) for `seconds`, and waits for
/// them all.
async fn soak_calls(
    url: &str,
    concurrency: usize,
    timeout: Duration,
    seconds: u64,
) -> Result<SoakCalls, Box<dyn std::error::Error>> {
    let gate = Arc::new(Semaphore::new(concurrency));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    let mut id = 0usize;
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos() as u64
        | 1;
    let mut failures = Failures::default();
    let mut ok = 0usize;
    let mut count = |r: Result<(), Failure>| match r {
        Ok(()) => ok += 1,
        Err(f) => failures.add(f),
    };
    while Instant::now() < deadline {
        let permit = gate.clone().acquire_owned().await?;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let (url, kind) = (url.to_owned(), rng);
        id += 1;
        tasks.spawn(async move {
            let out = soak_call(&url, id, kind, timeout).await;
            drop(permit);
            out
        });
        while let Some(done) = tasks.try_join_next() {
            count(done?);
        }
    }
    while let Some(done) = tasks.join_next().await {
        count(done?);
    }
    Ok(SoakCalls {
        started: id,
        ok,
        failures,
    })
}

/// The brain's stats after the soak: the sessions' ends and tasks, polled from the stats file
/// (written every 500 ms) until every session has ended and the tasks are back to `before`, or
/// for up to 10 s.
async fn settled_stats(
    path: &std::path::Path,
    before: BrainStats,
) -> Result<BrainStats, Box<dyn std::error::Error>> {
    // The file is rewritten every 500 ms: wait for one written after the last call.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let now = BrainStats::read(path)?;
        let settled =
            now.sessions_started == now.sessions_ended && now.alive_tasks <= before.alive_tasks;
        if settled || Instant::now() >= until {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What the stats after the soak show wrong against the baseline: sessions not ended, tasks left.
fn problems(before: Option<BrainStats>, after: Option<BrainStats>) -> Vec<String> {
    let mut problems = Vec::new();
    if let (Some(b), Some(a)) = (before, after) {
        if a.sessions_started != a.sessions_ended {
            problems.push(format!(
                "sessions started {} but ended {}",
                a.sessions_started, a.sessions_ended
            ));
        }
        if a.alive_tasks > b.alive_tasks {
            problems.push(format!(
                "brain tasks {} after, {} before",
                a.alive_tasks, b.alive_tasks
            ));
        }
    }
    problems
}

/// The soak's numbers: each pair is (before, after).
struct SoakReport {
    seconds: u64,
    calls: SoakCalls,
    files: [usize; 2],
    /// In kB.
    rss: [u64; 2],
    stats: [Option<BrainStats>; 2],
    problems: Vec<String>,
}

impl SoakReport {
    fn print(&self, json: bool) {
        let SoakReport {
            seconds,
            calls,
            files: [files, files_after],
            rss: [rss, rss_after],
            stats: [stats_before, stats_after],
            problems,
        } = self;
        let (id, ok, failures) = (calls.started, calls.ok, &calls.failures);
        if json {
            let stats = |s: Option<BrainStats>| {
                s.map(|s| {
                    serde_json::json!({
                        "alive_tasks": s.alive_tasks,
                        "sessions_started": s.sessions_started,
                        "sessions_ended": s.sessions_ended,
                    })
                })
            };
            let out = serde_json::json!({
                "mode": "soak",
                "seconds": seconds,
                "calls": id,
                "calls_ok": ok,
                "calls_failed": failures.total(),
                "errors": failures.json(),
                "brain_open_files": { "before": files, "after": files_after },
                "brain_rss_kb": { "before": rss, "after": rss_after },
                "brain_stats": { "before": stats(*stats_before), "after": stats(*stats_after) },
                "problems": problems,
            });
            println!("{out}");
            return;
        }
        println!(
            "soak: {id} calls in {seconds} s ({ok} without error, {} with one: expected, as the brain cuts misbehaving calls)",
            failures.total()
        );
        failures.print();
        println!(
            "brain open files {files} before, {files_after} after; RSS {rss} kB before, {rss_after} kB after"
        );
        if let (Some(b), Some(a)) = (stats_before, stats_after) {
            println!(
                "brain tasks {} before, {} after; sessions started {} ended {} ({} before the soak)",
                b.alive_tasks,
                a.alive_tasks,
                a.sessions_started,
                a.sessions_ended,
                b.sessions_started
            );
        }
        for p in problems {
            println!("problem: {p}");
        }
    }
}

//! Hostile callers on the direct leg: a peer that sends what the brain must not trust or must not
//! log once per frame, beside a bystander call whose first chunks are timed.
//!
//! ```text
//! cargo run --release --example echo -- --listen 127.0.0.1:8787 --allow-unverified 2> brain.log &
//! cargo run --release -p voqalize-tools --bin load -- --url ws://127.0.0.1:8787 --attack caller-strays \
//!     --brain-pid $(pgrep -f examples/echo) --brain-log brain.log
//! ```
//!
//! Each attack runs for [`RUN`] on one hostile connection (dialled again whenever the brain ends
//! it), never reading what the brain sends, and reports how many frames and calls it took, the
//! bystander's first chunk unloaded and under attack, the brain's RSS (with `--brain-pid`) and the
//! brain's log lines per hostile call and its longest line (with `--brain-log`).

use std::time::{Duration, Instant};

use voqalize::wire::{Frame, Response, Rtvi, RtviType, UserMessage};

use crate::Args;
use crate::client::{self, Leg, OnFirstChunk, Session};
use crate::failure::Failure;
use crate::probe::{PeakSampler, rss_kb};

/// How long each attack runs.
const RUN: Duration = Duration::from_secs(8);

/// How many turns the bystander takes before the attack, for its unloaded first chunk.
const WARM_TURNS: usize = 50;

/// How long the bystander waits between turns under attack.
const BYSTANDER_PAUSE: Duration = Duration::from_millis(20);

/// One way to be a hostile caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostile {
    /// `Response`s for requests the brain never made, at line rate.
    Strays,
    /// `SessionStart` again and again, never reading the brain's answers.
    Restarts,
    /// 300 `Finalize`s for units the brain never opened, each with 1 MB of heard text, then quiet.
    Forged,
    /// RTVI `server-message` (a type only the brain sends) inbound, at line rate.
    BrainRtvi,
    /// `UserMessage`s at line rate, never reading: the brain's answers back up and the call ends;
    /// then again on a new call.
    Flood,
}

/// How many forged Finalizes [`Hostile::Forged`] sends.
const FORGED: u64 = 300;

/// The heard text of each forged Finalize: 1 MB, under the brain's 1 MiB message limit.
const FORGED_BYTES: usize = 1_000_000;

impl Hostile {
    /// The `n`-th frame of the attack (0 first), or `None` once it has sent all it sends.
    fn frame(self, session_id: &str, n: u64, heard: &str) -> Option<Frame> {
        Some(match self {
            Hostile::Strays => Frame::Response(Response::new(
                n + 1,
                true,
                "accepted, though nobody asked",
                None,
            )),
            Hostile::Restarts => client::session_start(session_id.to_owned()),
            Hostile::Forged if n < FORGED => Frame::Finalize {
                speech_id: 1_000 + n,
                heard_text: heard.to_owned(),
            },
            Hostile::Forged => return None,
            Hostile::BrainRtvi => Frame::Rtvi(Rtvi {
                kind: RtviType::ServerMessage,
                data: Some(serde_json::json!({ "n": n })),
                id: None,
                turn_id: None,
            }),
            Hostile::Flood => Frame::UserMessage(UserMessage::new(n + 2, "flood")),
        })
    }
}

pub fn strays(args: &Args) -> super::Attack<'_> {
    Box::pin(run(args, Hostile::Strays, "caller-strays"))
}

pub fn restarts(args: &Args) -> super::Attack<'_> {
    Box::pin(run(args, Hostile::Restarts, "caller-restarts"))
}

pub fn forged(args: &Args) -> super::Attack<'_> {
    Box::pin(run(args, Hostile::Forged, "caller-forged-finalize"))
}

pub fn brain_rtvi(args: &Args) -> super::Attack<'_> {
    Box::pin(run(args, Hostile::BrainRtvi, "caller-brain-rtvi"))
}

pub fn flood(args: &Args) -> super::Attack<'_> {
    Box::pin(run(args, Hostile::Flood, "caller-flood"))
}

/// What the hostile side did.
#[derive(Debug, Default)]
struct Sent {
    frames: u64,
    calls: u64,
}

/// Plays `hostile` until `until`, dialling again whenever the brain ends the call.
async fn hostile_calls(url: String, hostile: Hostile, until: Instant, timeout: Duration) -> Sent {
    let heard = "x".repeat(FORGED_BYTES);
    let mut sent = Sent::default();
    while Instant::now() < until {
        let sid = format!("attack-{}-{}", std::process::id(), sent.calls);
        let Ok(ws) = client::dial(&url, &sid, None, timeout).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        sent.calls += 1;
        let mut leg = Leg::Direct(Box::new(ws));
        if leg.send(&client::session_start(sid.clone())).await.is_err() {
            continue;
        }
        let mut n = 0;
        while Instant::now() < until {
            let Some(frame) = hostile.frame(&sid, n, &heard) else {
                // All sent: hold the call open, quiet, until the end.
                tokio::time::sleep_until(until.into()).await;
                break;
            };
            if leg.send(&frame).await.is_err() {
                break; // the brain ended the call
            }
            n += 1;
            sent.frames += 1;
        }
    }
    sent
}

/// A bystander's first chunk, for `turns` turns (or until `until`), `pause` apart.
async fn bystander(
    session: &mut Session,
    turns: usize,
    until: Option<Instant>,
    pause: Duration,
) -> Result<Vec<Duration>, Failure> {
    let mut firsts = Vec::new();
    while firsts.len() < turns && until.is_none_or(|u| Instant::now() < u) {
        let times = session
            .turn("are you there".into(), Duration::ZERO, OnFirstChunk::Listen)
            .await?;
        firsts.push(times.first_chunk);
        tokio::time::sleep(pause).await;
    }
    Ok(firsts)
}

/// The bystander's failure as an error: the attack reached it.
fn why(f: Failure) -> Box<dyn std::error::Error> {
    format!("the bystander failed ({}): {}", f.kind.name(), f.message).into()
}

/// p50, p99 and max of `times`, in ms.
fn summary(times: &mut [Duration]) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    match times.last() {
        None => "no turns".into(),
        Some(&max) => format!(
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} turns)",
            ms(times[times.len() / 2]),
            ms(times[(times.len() * 99 / 100).min(times.len() - 1)]),
            ms(max),
            times.len()
        ),
    }
}

async fn run(args: &Args, hostile: Hostile, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.url.clone().ok_or("--attack caller-* needs --url")?;
    let timeout = args.timeout();
    let ws = client::dial(&url, "bystander", None, timeout)
        .await
        .map_err(why)?;
    let mut calm = Session::start(Leg::Direct(Box::new(ws)), "bystander".into(), timeout)
        .await
        .map_err(why)?;
    let mut unloaded = bystander(&mut calm, WARM_TURNS, None, Duration::ZERO)
        .await
        .map_err(why)?;

    let rss_before = args.brain_pid.map(rss_kb).transpose()?;
    let sampler = args
        .brain_pid
        .zip(rss_before)
        .map(|(pid, rss)| PeakSampler::start(pid, rss));
    let log_from = args.brain_log.as_deref().map(super::log_len);

    let until = Instant::now() + RUN;
    let attacker = tokio::spawn(hostile_calls(url, hostile, until, timeout));
    let mut loaded = bystander(&mut calm, usize::MAX, Some(until), BYSTANDER_PAUSE)
        .await
        .map_err(why)?;
    let sent = attacker.await?;
    // The brain ends the last hostile call and writes its summaries; give it a moment.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut after = bystander(&mut calm, WARM_TURNS, None, Duration::ZERO)
        .await
        .map_err(why)?;
    calm.leg.end(timeout).await;

    println!(
        "attack {name}: {:.0} s, {} hostile call(s), {} frames sent",
        RUN.as_secs_f64(),
        sent.calls,
        sent.frames
    );
    println!(
        "bystander first chunk, unloaded: {}",
        summary(&mut unloaded)
    );
    println!(
        "bystander first chunk, under attack: {}",
        summary(&mut loaded)
    );
    println!("bystander first chunk, after: {}", summary(&mut after));
    if let (Some(pid), Some(before), Some(sampler)) = (args.brain_pid, rss_before, sampler) {
        let peak = sampler.stop();
        let now = rss_kb(pid)?;
        println!(
            "brain RSS: before {:.1} MB, peak {:.1} MB, after {:.1} MB",
            before as f64 / 1024.0,
            peak as f64 / 1024.0,
            now as f64 / 1024.0
        );
    }
    if let (Some(path), Some(from)) = (args.brain_log.as_deref(), log_from) {
        let (lines, longest) = super::log_since(path, from)?;
        println!(
            "brain log: {lines} lines during the attack ({:.1} per hostile call), longest {longest} bytes",
            lines as f64 / sent.calls.max(1) as f64
        );
    }
    Ok(())
}

//! A load tool: many calls at once against a brain on a socket, reporting time to first speech.
//!
//! ```text
//! cargo run --release --example echo -- --listen 127.0.0.1:8787 --allow-unverified &
//! cargo run --release --example load -- --url ws://127.0.0.1:8787 --calls 500 --concurrency 100
//! ```
//! Each call: connect, SessionStart, `--turns` user messages (each waits for the brain's first
//! SpeechChunk, then plays the turn out with a short quiet window), then End. Prints percentiles of
//! the time from UserMessage to first chunk, and how many calls failed. Bounded in count and time:
//! it stops after `--calls` calls or `--deadline-s` seconds. Loopback only is the intended use.
//!
//! With `--relay-listen 127.0.0.1:9000` it plays the Cortex relay instead: start the brain with
//! `--cortex ws://127.0.0.1:9000/agent --api-key x` and every call rides that one connection.
//! With `--brain-pid PID` it also reports the brain's CPU time per turn.
//!
//! With `--idle N --brain-pid PID` it measures memory instead: it reads the brain's RSS, holds `N`
//! started, idle sessions open, reads it again, closes them, and reads it a third time:
//!
//! ```text
//! cargo run --release --example load -- --url ws://127.0.0.1:8787 --idle 1000 --brain-pid $(pgrep -f examples/echo)
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use voqalize::testing::{TokenSigner, Voqalize};
use voqalize::wire::{Frame, SessionStart};

/// Load a brain with concurrent calls and measure time to first speech.
#[derive(Parser, Debug)]
struct Args {
    /// The brain's WebSocket URL (direct leg).
    #[arg(long, required_unless_present = "relay_listen")]
    url: Option<String>,
    /// Act as the Cortex relay instead: listen here, wait for the agent to dial
    /// (`--cortex ws://ADDR/agent`), and run every call over that one connection.
    #[arg(long, value_name = "ADDR")]
    relay_listen: Option<String>,
    /// How many calls in all.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// How many calls at once.
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    /// User turns per call.
    #[arg(long, default_value_t = 3)]
    turns: usize,
    /// Sign tokens with this RSA private key (PEM) when the brain verifies them.
    #[arg(long)]
    private_key: Option<std::path::PathBuf>,
    /// Stop starting calls after this many seconds.
    #[arg(long, default_value_t = 120)]
    deadline_s: u64,
    /// Instead of calls: run a soak for this many seconds (concurrent calls that barge in, reset
    /// their TCP connection, send junk, or stop reading, beside ordinary ones), then report the
    /// brain's open files and RSS against its baseline (needs --brain-pid).
    #[arg(long, value_name = "SECONDS")]
    soak: Option<u64>,
    /// Instead of calls: hold this many started, idle sessions and report the brain's RSS.
    #[arg(long)]
    idle: Option<usize>,
    /// The brain's process id: `--idle` reads its RSS, a load run its CPU time (from /proc).
    #[arg(long)]
    brain_pid: Option<u32>,
}

/// The resident set size of process `pid`, in kB (`VmRSS` of /proc/PID/status).
fn rss_kb(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS line")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("no VmRSS value")?
        .parse()?)
}

/// The CPU time process `pid` has used, in ms (utime + stime of /proc/PID/stat; 100 ticks a second).
fn cpu_ms(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after its closing parenthesis.
    let rest = stat.rsplit_once(')').ok_or("no command name")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).ok_or("no utime")?.parse::<u64>()?
        + fields.get(12).ok_or("no stime")?.parse::<u64>()?;
    Ok(ticks * 10)
}

/// The relay's side of one connection carrying every call: frames out through one writer, frames
/// in routed to each call by its 16-byte prefix.
struct RelayLink {
    out: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    routes: std::sync::Arc<
        std::sync::Mutex<
            std::collections::HashMap<[u8; 16], tokio::sync::mpsc::UnboundedSender<Frame>>,
        >,
    >,
}

impl RelayLink {
    /// Waits for the agent on `addr` and starts the reader and the writer.
    async fn accept(addr: &str) -> Result<std::sync::Arc<Self>, Box<dyn std::error::Error>> {
        use futures_util::{SinkExt, StreamExt};
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("relay stand-in on ws://{}/agent", listener.local_addr()?);
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let ws = tokio_tungstenite::accept_async(stream).await?;
        let (mut sink, mut stream) = ws.split();
        let (out, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if sink.send(Message::Binary(bytes.into())).await.is_err() {
                    break;
                }
            }
        });
        let link = std::sync::Arc::new(RelayLink {
            out,
            routes: Default::default(),
        });
        let routes = link.routes.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Binary(bytes) = message else {
                    continue;
                };
                let Some((prefix, envelope)) = bytes.split_first_chunk::<16>() else {
                    continue;
                };
                let Ok(Some(frame)) = voqalize::wire::decode(envelope) else {
                    continue;
                };
                let route = routes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(prefix)
                    .cloned();
                if let Some(route) = route {
                    let _ = route.send(frame);
                }
            }
        });
        Ok(link)
    }

    fn send(&self, prefix: [u8; 16], frame: &Frame) {
        let mut bytes = prefix.to_vec();
        bytes.extend(voqalize::wire::encode(frame));
        let _ = self.out.send(bytes);
    }
}

/// One call over the relay link: SessionStart, `turns` user messages (each waits for the first
/// SpeechChunk, then for the SpeechEnd, and finalizes the unit with its text), End.
async fn one_relay_call(
    link: &RelayLink,
    id: usize,
    turns: usize,
) -> Result<Vec<Duration>, String> {
    let mut prefix = [0u8; 16];
    prefix[..8].copy_from_slice(&(id as u64).to_be_bytes());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    link.routes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(prefix, tx);
    link.send(
        prefix,
        &Frame::SessionStart(SessionStart {
            session_id: format!("relay-load-{id}"),
            turn_id: 1,
            init: Default::default(),
            wire_version: voqalize::wire::WIRE_VERSION,
            capabilities: Default::default(),
        }),
    );
    let mut firsts = Vec::with_capacity(turns);
    for t in 0..turns {
        let sent = Instant::now();
        link.send(
            prefix,
            &Frame::UserMessage(voqalize::wire::UserMessage {
                turn_id: 2 + t as u64,
                text: format!("turn {t} of call {id}"),
            }),
        );
        let mut text = String::new();
        let mut first = None;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .map_err(|_| format!("call {id}: no answer within 10 s"))?
                .ok_or("the relay link closed")?;
            match frame {
                Frame::SpeechChunk { text: t, .. } => {
                    first.get_or_insert_with(|| sent.elapsed());
                    text.push_str(&t);
                }
                Frame::SpeechEnd { speech_id } => {
                    link.send(
                        prefix,
                        &Frame::Finalize {
                            speech_id,
                            heard_text: text,
                        },
                    );
                    break;
                }
                _ => {}
            }
        }
        firsts.push(first.ok_or("a unit without text")?);
    }
    link.send(prefix, &Frame::End);
    link.routes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&prefix);
    Ok(firsts)
}

/// The number of open file descriptors of process `pid`.
fn open_files(pid: u32) -> Result<usize, Box<dyn std::error::Error>> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// One soak call: what it does is chosen by `kind`. Errors are expected (the brain may close a
/// misbehaving call); only the brain's health at the end counts.
async fn soak_call(url: &str, id: usize, kind: u64) {
    let session_id = format!("soak-{id}");
    let Ok(mut v) = Voqalize::connect(url, &session_id, None).await else {
        return;
    };
    v.quiet = Duration::from_millis(20);
    if v.start_silent().await.is_err() {
        return;
    }
    match kind % 5 {
        // An ordinary call.
        0 => {
            let _ = v.user_says("an ordinary turn").await;
            let _ = v.end().await;
        }
        // A barge-in on the answer.
        1 => {
            let _ = v
                .barge_in("interrupt me", voqalize::testing::BargeIn::default())
                .await;
            let _ = v.user_says("after the barge-in").await;
            let _ = v.end().await;
        }
        // A TCP reset: the connection just goes away.
        2 => {
            let _ = v.send_user_message("going away").await;
            drop(v);
        }
        // Junk frames, then an ordinary turn.
        3 => {
            for i in 0..20u8 {
                let _ = v.send_bytes(vec![0xff, i, 0x07]).await;
                let _ = v.send_text("not a frame").await;
            }
            let _ = v.user_says("after the junk").await;
            let _ = v.end().await;
        }
        // A client that stops reading: messages sent, nothing read, then gone.
        _ => {
            for t in 0..50 {
                let _ = v.send_user_message(&format!("flood {t}")).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            v.hang_up().await;
        }
    }
}

/// Runs the soak and reports the brain's files and memory against its baseline.
async fn soak(args: &Args, seconds: u64) -> Result<(), Box<dyn std::error::Error>> {
    let pid = args.brain_pid.ok_or("--soak needs --brain-pid")?;
    let url = args.url.clone().ok_or("--soak needs --url")?;
    let (files, rss) = (open_files(pid)?, rss_kb(pid)?);
    let gate = std::sync::Arc::new(Semaphore::new(args.concurrency.max(1)));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    let mut id = 0usize;
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos() as u64
        | 1;
    while Instant::now() < deadline {
        let permit = gate.clone().acquire_owned().await?;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let (url, kind) = (url.clone(), rng);
        id += 1;
        tasks.spawn(async move {
            soak_call(&url, id, kind).await;
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    // Let the brain finish tearing down what was cut, then read.
    tokio::time::sleep(Duration::from_secs(12)).await;
    println!(
        "soak: {id} calls in {seconds} s; brain open files {files} before, {} after; RSS {rss} kB before, {} kB after",
        open_files(pid)?,
        rss_kb(pid)?
    );
    Ok(())
}

/// Holds `n` idle sessions open and reports the brain's RSS before, with them, and after.
async fn idle(
    args: &Args,
    n: usize,
    signer: Option<&TokenSigner>,
) -> Result<(), Box<dyn std::error::Error>> {
    let pid = args.brain_pid.ok_or("--idle needs --brain-pid")?;
    let before = rss_kb(pid)?;
    let mut sessions = Vec::with_capacity(n);
    for id in 0..n {
        let session_id = format!("idle-{id}");
        let token = signer.map(|s| s.mint(&session_id));
        let url = args.url.as_deref().ok_or("--idle needs --url")?;
        let mut v = Voqalize::connect(url, &session_id, token.as_deref()).await?;
        v.start_silent().await?;
        sessions.push(v);
    }
    // Let the brain settle (every SessionStart handled) before reading.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let with = rss_kb(pid)?;
    for v in &mut sessions {
        v.hang_up().await;
    }
    drop(sessions);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kb(pid)?;
    println!(
        "brain RSS: {before} kB idle, {with} kB with {n} idle sessions ({:.1} kB a session), {after} kB after they closed",
        (with.saturating_sub(before)) as f64 / n.max(1) as f64
    );
    Ok(())
}

async fn one_call(
    url: &str,
    id: usize,
    turns: usize,
    signer: Option<&TokenSigner>,
) -> Result<Vec<Duration>, String> {
    let session_id = format!("load-{id}");
    let token = signer.map(|s| s.mint(&session_id));
    let mut v = Voqalize::connect(url, &session_id, token.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    v.quiet = Duration::from_millis(20);
    v.start_silent().await.map_err(|e| e.to_string())?;
    let mut firsts = Vec::with_capacity(turns);
    for t in 0..turns {
        let sent = Instant::now();
        let turn_id = v
            .send_user_message(&format!("turn {t} of call {id}"))
            .await
            .map_err(|e| e.to_string())?;
        let spoke = v
            .wait_for(Duration::from_secs(10), |v| {
                v.turn(turn_id).units.iter().any(|u| !u.chunks.is_empty())
            })
            .await
            .map_err(|e| e.to_string())?;
        if !spoke {
            return Err(format!("turn {turn_id} did not speak within 10 s"));
        }
        firsts.push(sent.elapsed());
        v.wait_for(Duration::from_secs(10), |v| v.turn(turn_id).completed())
            .await
            .map_err(|e| e.to_string())?;
    }
    v.assert_clean();
    let _ = v.end().await;
    Ok(firsts)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let signer = match &args.private_key {
        Some(path) => Some(TokenSigner::from_pem(&std::fs::read_to_string(path)?)?),
        None => None,
    };
    if let Some(n) = args.idle {
        return idle(&args, n, signer.as_ref()).await;
    }
    if let Some(seconds) = args.soak {
        return soak(&args, seconds).await;
    }
    let relay = match &args.relay_listen {
        Some(addr) => Some(RelayLink::accept(addr).await?),
        None => None,
    };
    let cpu_before = args.brain_pid.map(cpu_ms).transpose()?;
    let signer = std::sync::Arc::new(signer);
    let gate = std::sync::Arc::new(Semaphore::new(args.concurrency.max(1)));
    let deadline = Instant::now() + Duration::from_secs(args.deadline_s);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.calls);
    for id in 0..args.calls {
        if Instant::now() >= deadline {
            break;
        }
        let permit = gate.clone().acquire_owned().await?;
        let (url, signer, turns) = (
            args.url.clone().unwrap_or_default(),
            signer.clone(),
            args.turns,
        );
        let relay = relay.clone();
        tasks.push(tokio::spawn(async move {
            let out = match &relay {
                Some(link) => one_relay_call(link, id, turns).await,
                None => one_call(&url, id, turns, signer.as_ref().as_ref()).await,
            };
            drop(permit);
            out
        }));
    }
    let mut firsts = Vec::new();
    let mut failures = Vec::new();
    for t in tasks {
        match t.await? {
            Ok(f) => firsts.extend(f),
            Err(e) => failures.push(e),
        }
    }
    firsts.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "calls: {} ok, {} failed in {:.1} s; turns: {}",
        args.calls - failures.len(),
        failures.len(),
        started.elapsed().as_secs_f64(),
        firsts.len()
    );
    println!(
        "time to first chunk (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        ms(percentile(&firsts, 50.0)),
        ms(percentile(&firsts, 90.0)),
        ms(percentile(&firsts, 99.0)),
        ms(percentile(&firsts, 100.0))
    );
    if let (Some(pid), Some(before)) = (args.brain_pid, cpu_before) {
        let used = cpu_ms(pid)?.saturating_sub(before);
        println!(
            "brain CPU: {used} ms for {} turns, {:.3} ms a turn (10 ms clock ticks)",
            firsts.len(),
            used as f64 / firsts.len().max(1) as f64
        );
    }
    if let Some(first) = failures.first() {
        println!("first failure: {first}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} calls failed", failures.len()).into())
    }
}

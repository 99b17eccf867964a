//! Hostile relays: the load tool listens on `--relay-listen` as the Cortex relay, the brain dials
//! it (`examples/echo -- --cortex ws://ADDR/agent --api-key x`), and the relay misbehaves one way
//! beside a bystander call whose first chunk it times (issue 15, failures 1–5):
//!
//! * `relay-silent`: goes silent (reads and sends nothing, not even a Pong), then on the next
//!   connection sends half a frame and goes silent again; reports how long the brain took to redial
//!   each time (its Pong deadline: 40 s by default);
//! * `relay-accept-close`: accepts and at once closes (1011, then a plain EOF, in turn) for 20 s,
//!   then serves; reports the connects, the brain's CPU, and the log;
//! * `relay-oversized`: sends 1.5 MiB frames, for running sessions and for unknown prefixes, beside
//!   the bystander on the same connection; reports the `End`s and that the connection stayed;
//! * `relay-never-reads`: 20 sessions ask for `--turns` 900 KB answers each, and the relay reads
//!   none of them; reports the brain's RSS peak until it redials (its write deadline: 20 s by
//!   default).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use voqalize::wire::{Frame, UserMessage};

use super::{log_len, log_since};
use crate::Args;
use crate::client::session_start;
use crate::probe::{PeakSampler, cpu_ms, rss_kb};

type Error = Box<dyn std::error::Error>;
type Attack<'a> = Pin<Box<dyn Future<Output = Result<(), Error>> + 'a>>;

/// Turns timed for a first-chunk figure.
const TURNS: usize = 20;

/// The relay's side of one agent connection.
struct Link {
    ws: WebSocketStream<TcpStream>,
    /// The last turn id sent per session.
    turns: HashMap<[u8; 16], u64>,
    /// `End`s the agent sent, per session.
    ends: HashMap<[u8; 16], usize>,
}

/// The prefix of session number `n`.
fn prefix(n: u64) -> [u8; 16] {
    let mut p = [0u8; 16];
    p[..8].copy_from_slice(&n.to_be_bytes());
    p[8] = 0xa5;
    p
}

/// Accepts the agent's next connection (within `wait`).
async fn accept(listener: &TcpListener, wait: Duration) -> Result<Link, Error> {
    let (stream, _) = tokio::time::timeout(wait, listener.accept())
        .await
        .map_err(|_| format!("the brain did not dial within {wait:?}"))??;
    stream.set_nodelay(true)?;
    // The relay takes big messages: the agent's limit is what is measured.
    let config = WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let ws = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await?;
    Ok(Link {
        ws,
        turns: HashMap::new(),
        ends: HashMap::new(),
    })
}

impl Link {
    async fn send(&mut self, prefix: [u8; 16], frame: &Frame) -> Result<(), Error> {
        let mut bytes = prefix.to_vec();
        bytes.extend(voqalize::wire::encode(frame));
        self.ws.send(Message::Binary(bytes.into())).await?;
        Ok(())
    }

    async fn start(&mut self, prefix: [u8; 16]) -> Result<(), Error> {
        self.turns.insert(prefix, 1);
        let id = format!("attack-{:x}", u64::from_be_bytes(prefix[..8].try_into()?));
        self.send(prefix, &session_start(id)).await
    }

    /// Sends a user message for `prefix` without waiting for the answer.
    async fn say(&mut self, prefix: [u8; 16], text: String) -> Result<u64, Error> {
        let turn = self.turns.entry(prefix).or_insert(1);
        *turn += 1;
        let turn_id = *turn;
        let frame = Frame::UserMessage(UserMessage::new(turn_id, text));
        self.send(prefix, &frame).await?;
        Ok(turn_id)
    }

    /// The next frame from the agent (within `wait`), with its prefix.
    async fn recv(&mut self, wait: Duration) -> Result<([u8; 16], Frame), Error> {
        loop {
            let next = tokio::time::timeout(wait, self.ws.next())
                .await
                .map_err(|_| format!("no frame within {wait:?}"))?
                .ok_or("the agent closed the connection")??;
            let Message::Binary(bytes) = next else {
                continue;
            };
            let Some((p, envelope)) = bytes.split_first_chunk::<16>() else {
                return Err("a message shorter than its prefix".into());
            };
            let Ok(Some(frame)) = voqalize::wire::decode(envelope) else {
                continue;
            };
            if matches!(frame, Frame::End) {
                *self.ends.entry(*p).or_default() += 1;
            }
            return Ok((*p, frame));
        }
    }

    /// One bystander turn on `prefix`: the time to its first chunk (the turn is heard out).
    async fn turn(&mut self, prefix: [u8; 16], wait: Duration) -> Result<Duration, Error> {
        let sent = Instant::now();
        let turn_id = self.say(prefix, "are you there?".into()).await?;
        let mut first = None;
        let mut unit = None;
        loop {
            match self.recv(wait).await? {
                (
                    p,
                    Frame::SpeechStart {
                        speech_id,
                        turn_id: t,
                    },
                ) if p == prefix && t == turn_id => {
                    unit = Some(speech_id);
                }
                (p, Frame::SpeechChunk { speech_id, .. })
                    if p == prefix && unit == Some(speech_id) =>
                {
                    first.get_or_insert_with(|| sent.elapsed());
                }
                (p, Frame::SpeechEnd { speech_id }) if p == prefix && unit == Some(speech_id) => {
                    return first.ok_or_else(|| "a unit without a chunk".into());
                }
                (p, Frame::End) if p == prefix => return Err("the bystander was ended".into()),
                _ => {}
            }
        }
    }

    /// The median first chunk of [`TURNS`] bystander turns, in ms.
    async fn first_chunk_ms(&mut self, prefix: [u8; 16], wait: Duration) -> Result<f64, Error> {
        let mut times = Vec::with_capacity(TURNS);
        for _ in 0..TURNS {
            times.push(self.turn(prefix, wait).await?);
        }
        times.sort();
        Ok(times[TURNS / 2].as_secs_f64() * 1e3)
    }
}

/// What the attack cost the brain: RSS, CPU, log.
struct Cost {
    pid: Option<u32>,
    rss_before: u64,
    cpu_before: u64,
    peak: Option<PeakSampler>,
    log_from: u64,
}

impl Cost {
    fn start(args: &Args) -> Self {
        let pid = args.brain_pid;
        let rss_before = pid.and_then(|p| rss_kb(p).ok()).unwrap_or(0);
        Cost {
            pid,
            rss_before,
            cpu_before: pid.and_then(|p| cpu_ms(&p.to_string()).ok()).unwrap_or(0),
            peak: pid.map(|p| PeakSampler::start(p, rss_before)),
            log_from: args.brain_log.as_deref().map_or(0, log_len),
        }
    }

    /// Prints the figures, with `calls` calls taking part (for log lines per call).
    fn report(self, args: &Args, name: &str, calls: usize, figures: serde_json::Value) {
        let peak = self.peak.map_or(0, PeakSampler::stop);
        let (rss_after, cpu) = match self.pid {
            Some(p) => (
                rss_kb(p).unwrap_or(0),
                cpu_ms(&p.to_string()).unwrap_or(0) - self.cpu_before,
            ),
            None => (0, 0),
        };
        let log = args
            .brain_log
            .as_deref()
            .map(|path| log_since(path, self.log_from));
        let (lines, longest) = match log {
            Some(Ok(l)) => l,
            _ => (0, 0),
        };
        let report = serde_json::json!({
            "attack": name,
            "figures": figures,
            "brain": {
                "rss_mb": { "before": self.rss_before as f64 / 1024.0, "peak": peak as f64 / 1024.0, "after": rss_after as f64 / 1024.0 },
                "cpu_ms": cpu,
                "log_lines": lines,
                "log_lines_per_call": lines as f64 / calls.max(1) as f64,
                "longest_log_line_bytes": longest,
            },
        });
        if args.json {
            println!("{report}");
        } else {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
        }
    }
}

fn listener_addr(args: &Args) -> Result<&str, Error> {
    args.relay_listen
        .as_deref()
        .ok_or_else(|| "the relay attacks need --relay-listen ADDR (the brain's --cortex)".into())
}

/// See the module docs.
pub fn silent(args: &Args) -> Attack<'_> {
    Box::pin(async move {
        let listener = TcpListener::bind(listener_addr(args)?).await?;
        let wait = args.timeout();
        let dial = Duration::from_secs(120);
        let mut link = accept(&listener, dial).await?;
        link.start(prefix(1)).await?;
        let before = link.first_chunk_ms(prefix(1), wait).await?;
        let cost = Cost::start(args);
        // Silent: the link is held, never read nor written.
        let hung = Instant::now();
        let mut half = accept(&listener, dial).await?;
        let redial_silent = hung.elapsed().as_secs_f64();
        // Half a frame header (a 4 KiB binary frame) and three bytes of it, then silence.
        half.ws
            .get_mut()
            .write_all(&[0x82, 0x7e, 0x10, 0x00, 1, 2, 3])
            .await?;
        let cut = Instant::now();
        let mut live = accept(&listener, dial).await?;
        let redial_half = cut.elapsed().as_secs_f64();
        live.start(prefix(2)).await?;
        let after = live.first_chunk_ms(prefix(2), wait).await?;
        drop((link, half));
        cost.report(
            args,
            "relay-silent",
            2,
            serde_json::json!({
                "redialled_after_silence_s": redial_silent,
                "redialled_after_half_a_frame_s": redial_half,
                "bystander_first_chunk_ms": { "before": before, "after_redial": after },
            }),
        );
        Ok(())
    })
}

/// See the module docs.
pub fn accept_close(args: &Args) -> Attack<'_> {
    Box::pin(async move {
        let listener = TcpListener::bind(listener_addr(args)?).await?;
        let wait = args.timeout();
        let mut link = accept(&listener, Duration::from_secs(120)).await?;
        link.start(prefix(1)).await?;
        let before = link.first_chunk_ms(prefix(1), wait).await?;
        let cost = Cost::start(args);
        let window = Duration::from_secs(20);
        let began = Instant::now();
        let mut connects = 0u32;
        // The first hang-up is the bystander's connection.
        let mut next = Some(link);
        while began.elapsed() < window {
            let mut link = match next.take() {
                Some(link) => link,
                None => match accept(&listener, window.saturating_sub(began.elapsed())).await {
                    Ok(link) => link,
                    Err(_) => break,
                },
            };
            connects += 1;
            if connects % 2 == 1 {
                let frame = CloseFrame {
                    code: 1011.into(),
                    reason: "".into(),
                };
                let _ = link.ws.close(Some(frame)).await;
            } else {
                drop(link);
            }
        }
        let first_served = Instant::now();
        let mut live = accept(&listener, Duration::from_secs(120)).await?;
        let served_after = first_served.elapsed().as_secs_f64();
        live.start(prefix(2)).await?;
        let after = live.first_chunk_ms(prefix(2), wait).await?;
        cost.report(
            args,
            "relay-accept-close",
            2,
            serde_json::json!({
                "window_s": window.as_secs(),
                "connects_in_window": connects,
                "next_connect_after_window_s": served_after,
                "bystander_first_chunk_ms": { "before": before, "after": after },
            }),
        );
        Ok(())
    })
}

/// See the module docs.
pub fn oversized(args: &Args) -> Attack<'_> {
    Box::pin(async move {
        let listener = TcpListener::bind(listener_addr(args)?).await?;
        let wait = args.timeout();
        let mut link = accept(&listener, Duration::from_secs(120)).await?;
        let bystander = prefix(1);
        link.start(bystander).await?;
        let before = link.first_chunk_ms(bystander, wait).await?;
        let cost = Cost::start(args);
        let huge = vec![0u8; 1536 * 1024];
        let rounds = 200u64;
        let mut during = Vec::new();
        for n in 0..rounds {
            // A running session gets one, and so does a prefix with no session.
            let victim = prefix(1000 + n);
            link.start(victim).await?;
            for p in [victim, prefix(100_000 + n)] {
                let message = [&p[..], &huge].concat();
                link.ws.send(Message::Binary(message.into())).await?;
            }
            if n % 10 == 9 {
                during.push(link.turn(bystander, wait).await?);
            }
        }
        // Every victim's End, then the bystander still answers.
        let deadline = Instant::now() + wait;
        while (1000..1000 + rounds).any(|n| !link.ends.contains_key(&prefix(n))) {
            link.recv(deadline.saturating_duration_since(Instant::now()))
                .await?;
        }
        let after = link.first_chunk_ms(bystander, wait).await?;
        let redialled = tokio::time::timeout(Duration::from_millis(100), listener.accept())
            .await
            .is_ok();
        during.sort();
        cost.report(
            args,
            "relay-oversized",
            rounds as usize + 1,
            serde_json::json!({
                "frames_of_1_5_mib": rounds * 2,
                "victim_ends": link.ends.len(),
                "connection_lost": redialled,
                "bystander_first_chunk_ms": {
                    "before": before,
                    "during_median": during[during.len() / 2].as_secs_f64() * 1e3,
                    "during_max": during[during.len() - 1].as_secs_f64() * 1e3,
                    "after": after,
                },
            }),
        );
        Ok(())
    })
}

/// See the module docs.
pub fn never_reads(args: &Args) -> Attack<'_> {
    Box::pin(async move {
        let listener = TcpListener::bind(listener_addr(args)?).await?;
        let wait = args.timeout();
        let mut link = accept(&listener, Duration::from_secs(120)).await?;
        let bystander = prefix(1);
        link.start(bystander).await?;
        let before = link.first_chunk_ms(bystander, wait).await?;
        let cost = Cost::start(args);
        let (sessions, asks) = (20u64, args.turns.max(1));
        let answer = "x".repeat(900 * 1000);
        for n in 0..sessions {
            link.start(prefix(10 + n)).await?;
        }
        // The relay reads nothing from here on: every answer stays with the brain or the sockets.
        let stopped = Instant::now();
        for _ in 0..asks {
            for n in 0..sessions {
                link.say(prefix(10 + n), answer.clone()).await?;
            }
        }
        let mut live = accept(&listener, Duration::from_secs(120)).await?;
        let redialled = stopped.elapsed().as_secs_f64();
        live.start(prefix(2)).await?;
        let after = live.first_chunk_ms(prefix(2), wait).await?;
        drop(link);
        cost.report(
            args,
            "relay-never-reads",
            sessions as usize + 2,
            serde_json::json!({
                "sessions": sessions,
                "answers_asked_of_900_kb": sessions * asks as u64,
                "redialled_after_s": redialled,
                "bystander_first_chunk_ms": { "before": before, "after_redial": after },
            }),
        );
        Ok(())
    })
}

//! Hostile model providers (`--attack provider-*`, issue 15's failures 7–10 and 14): the load tool
//! plays the brain's model provider on `--provider-listen` and answers every request of a caller
//! who says "attack" with one misbehaviour, while a bystander caller's requests get an ordinary
//! answer. Point a release `examples/coach` at it, stderr to a file:
//!
//! ```text
//! cargo run --release --example coach -- --listen 127.0.0.1:8787 --allow-unverified \
//!     --provider chat --base-url http://127.0.0.1:8790/v1 --model hostile 2> coach.log &
//! cargo run --release -p voqalize-tools --bin load -- --attack provider-calls --url ws://127.0.0.1:8787 \
//!     --provider-listen 127.0.0.1:8790 --brain-pid $(pgrep -f examples/coach) --brain-log coach.log
//! ```
//!
//! It speaks chat completions on `/chat/completions` and Gemini on `:streamGenerateContent`
//! (`--provider gemini --base-url http://127.0.0.1:8790` with `GEMINI_API_KEY=x`), the same
//! misbehaviour in each format. First the bystander's turns are timed alone; then `--concurrency`
//! attackers (default 4) each say "attack" for `--turns` turns while the bystander goes on; the
//! report gives the bystander's first chunk before and during the attack, the brain's RSS (with
//! `--brain-pid`: before, peak, after) and its log (with `--brain-log`: lines, lines per call, the
//! longest line). Every response starts with a few words, so each attacked turn speaks.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::log_len;
use crate::Args;
use crate::calls::spread;
use crate::client::{Leg, OnFirstChunk, Session, dial};
use crate::probe::{PeakSampler, rss_kb};

/// What the hostile provider does to an attacker's request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A call to `show` whose arguments stream as 900 fragments of 1 MB (failure 7).
    Arguments,
    /// 10,000 calls to the `#[needs_result_now]` tool in one response, on every request (8).
    Calls,
    /// 5,000,000 one-byte text deltas (7).
    Deltas,
    /// A few words, then a keep-alive every 2 s and never the end (9).
    KeepAlive,
    /// A 3 MB error message holding a newline and an ESC (14).
    Error,
    /// Sixteen calls to a tool whose 16 KB name holds a newline and an ESC (14).
    Names,
    /// Sixteen calls to `show` whose 60 KB argument does not fit (serde repeats it) (14).
    BadArguments,
    /// A few words and 120,000 tiny parts no layer knows (`{"a":0}`), 960 KB in one event: each
    /// would be a part of its own in the history (the hostile review's finding 4; Gemini only,
    /// chat completions keep nothing they do not know).
    TinyParts,
    /// A few words and one part holding 120,000 tiny objects, 960 KB (finding 4, in one part).
    TinyObjects,
    /// No attack: the attackers get the bystander's answer (the same load, to compare with).
    Control,
}

/// What every attack entry point returns (the shape `ATTACKS` lists).
type Run<'a> = Pin<Box<dyn Future<Output = Result<(), Box<dyn std::error::Error>>> + 'a>>;

/// `--attack provider-arguments`.
pub fn arguments(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::Arguments))
}
/// `--attack provider-calls`.
pub fn calls(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::Calls))
}
/// `--attack provider-deltas`.
pub fn deltas(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::Deltas))
}
/// `--attack provider-keepalive`.
pub fn keep_alive(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::KeepAlive))
}
/// `--attack provider-error`.
pub fn error(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::Error))
}
/// `--attack provider-names`.
pub fn names(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::Names))
}
/// `--attack provider-badargs`.
pub fn bad_arguments(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::BadArguments))
}
/// `--attack provider-tiny-parts`.
pub fn tiny_parts(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::TinyParts))
}
/// `--attack provider-tiny-objects`.
pub fn tiny_objects(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::TinyObjects))
}
/// `--attack provider-control`.
pub fn control(args: &Args) -> Run<'_> {
    Box::pin(run(args, Mode::Control))
}

/// The wire format a request asked for, by its path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Gemini,
    Chat,
}

impl Format {
    /// One event holding `delta` (chat) or these `parts` (Gemini), not the last.
    fn event(self, content: Value) -> String {
        match self {
            Format::Chat => {
                let c = json!({"choices": [{"index": 0, "delta": content, "finish_reason": null}]});
                format!("data: {c}\n\n")
            }
            Format::Gemini => {
                let c = json!({"candidates": [{"content": {"parts": content, "role": "model"},
                    "index": 0}]});
                format!("data: {c}\r\n\r\n")
            }
        }
    }

    /// Text as one event.
    fn text(self, text: &str) -> String {
        match self {
            Format::Chat => self.event(json!({"content": text})),
            Format::Gemini => self.event(json!([{"text": text}])),
        }
    }

    /// A whole call as one event (chat: on its own index).
    fn call(self, index: usize, name: &str, args: Value) -> String {
        match self {
            Format::Chat => self.event(json!({"tool_calls": [{"index": index,
                "id": format!("call_{index}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]})),
            Format::Gemini => self.event(json!([{"functionCall": {"id": format!("call_{index}"),
                "name": name, "args": args}}])),
        }
    }

    /// The terminal events.
    fn finish(self, called: bool) -> String {
        match self {
            Format::Chat => {
                let reason = if called { "tool_calls" } else { "stop" };
                let c = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]});
                format!("data: {c}\n\ndata: [DONE]\n\n")
            }
            Format::Gemini => {
                let c = json!({"candidates": [{"finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 12}});
                format!("data: {c}\r\n\r\n")
            }
        }
    }

    /// An event the layer reads and ignores.
    fn keep_alive(self) -> &'static str {
        match self {
            Format::Chat => "data: {\"choices\": []}\n\n",
            Format::Gemini => "data: {\"candidates\": []}\r\n\r\n",
        }
    }

    /// A provider error event.
    fn error(self, message: &str) -> String {
        format!(
            "data: {}\n\n",
            json!({"error": {"code": 500, "message": message}})
        )
    }
}

/// An answer as frames of SSE text, each sent `n` times in a row: rendered once when the provider
/// starts, so that 300 MB of attack cost the provider a few clones of a few frames, not the CPU
/// the bystander's timings share.
type Script = Vec<(Bytes, usize)>;

/// One frame, once.
fn once(text: String) -> (Bytes, usize) {
    (Bytes::from(text), 1)
}

/// A tool name that holds a newline, an ESC and 16 KB (sixteen calls of it fit in a response).
fn hostile_name() -> String {
    format!(
        "show\n2026-01-01T00:00:00Z ERROR forged by a tool name \u{1b}[2J{}",
        "n".repeat(16 * 1024)
    )
}

/// The hostile answer to an attacker's request, as frames (`None` for the keep-alive, which is
/// timed).
fn script(mode: Mode, format: Format) -> Option<Script> {
    let script = match mode {
        Mode::Arguments => huge_arguments(format),
        // 10,000 calls, 100 events a frame.
        Mode::Calls => std::iter::once(once(format.text("Checking. ")))
            .chain((0..100).map(|f| {
                once(
                    (0..100)
                        .map(|j| format.call(f * 100 + j, "weekly_average", json!({})))
                        .collect(),
                )
            }))
            .chain(std::iter::once(once(format.finish(true))))
            .collect(),
        // 5,000,000 one-byte deltas, 1,000 events a frame.
        Mode::Deltas => vec![
            once(format.text("Counting. ")),
            (
                Bytes::from((0..1000).map(|_| format.text("a")).collect::<String>()),
                5000,
            ),
            once(format.finish(false)),
        ],
        Mode::KeepAlive => return None,
        Mode::Error => vec![
            once(format.text("Hmm. ")),
            once(format.error(&format!(
                "overloaded\n2026-01-01T00:00:00Z ERROR forged by a provider \u{1b}[2J{}",
                "e".repeat(3_000_000)
            ))),
        ],
        Mode::Names => {
            let name = hostile_name();
            std::iter::once(once(format.text("Opening. ")))
                .chain((0..16).map(|i| once(format.call(i, &name, json!({})))))
                .chain(std::iter::once(once(format.finish(true))))
                .collect()
        }
        Mode::BadArguments => {
            let value = "v".repeat(60 * 1024);
            std::iter::once(once(format.text("Showing. ")))
                .chain((0..16).map(|i| once(format.call(i, "show", json!({"name": value})))))
                .chain(std::iter::once(once(format.finish(true))))
                .collect()
        }
        Mode::TinyParts | Mode::TinyObjects => tiny_items(mode, format),
        Mode::Control => vec![once(ordinary(format))],
    };
    Some(script)
}

/// A tool call whose arguments are 900 MB, a megabyte a frame.
fn huge_arguments(format: Format) -> Script {
    let megabyte = "x".repeat(1024 * 1024);
    match format {
        Format::Chat => vec![
            once(format.text("Showing it. ")),
            once(
                format.event(json!({"tool_calls": [{"index": 0, "id": "call_0",
                "type": "function",
                "function": {"name": "show", "arguments": "{\"name\": \""}}]})),
            ),
            (
                Bytes::from(format.event(json!({"tool_calls": [{"index": 0,
                    "function": {"arguments": megabyte}}]}))),
                900,
            ),
            once(format.finish(true)),
        ],
        // Gemini sends a call whole: one event of 900 MB, a megabyte a frame.
        Format::Gemini => vec![
            once(format.text("Showing it. ")),
            once(
                "data: {\"candidates\": [{\"content\": {\"role\": \"model\", \
                 \"parts\": [{\"functionCall\": {\"name\": \"show\", \"args\": \
                 {\"name\": \""
                    .to_owned(),
            ),
            (Bytes::from(megabyte), 900),
            once("\"}}}]}, \"index\": 0}]}\r\n\r\n".to_owned()),
            once(format.finish(true)),
        ],
    }
}

/// One event of 120,000 tiny items: as its parts (`TinyParts`), or in one object's array
/// (`TinyObjects`).
fn tiny_items(mode: Mode, format: Format) -> Script {
    let tiny = vec![json!({"a": 0}); 120_000];
    let parts = if mode == Mode::TinyParts {
        Value::Array(tiny)
    } else {
        json!([{"x": tiny}])
    };
    let content = match format {
        Format::Chat => json!({"content": "", "tiny": parts}),
        Format::Gemini => parts,
    };
    vec![
        once(format.text("Looking. ")),
        once(format.event(content)),
        once(format.finish(false)),
    ]
}

/// A body that plays `script`.
fn play(script: &Script) -> Body {
    let frames: Vec<(Bytes, usize)> = script.clone();
    let stream = futures_util::stream::iter(
        frames
            .into_iter()
            .flat_map(|(frame, n)| std::iter::repeat_n(frame, n)),
    )
    .map(Ok::<_, Infallible>);
    Body::from_stream(stream)
}

/// A few words, then a keep-alive every 2 s until the client goes away, and never the end.
fn keep_alive_body(format: Format) -> Body {
    let first = futures_util::stream::once(async move { format.text("One moment. ") });
    let pings = futures_util::stream::unfold((), move |()| async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Some((format.keep_alive().to_owned(), ()))
    });
    Body::from_stream(
        first
            .chain(pings)
            .map(|s| Ok::<_, Infallible>(Bytes::from(s))),
    )
}

/// The bystander's answer: a few pieces of text and the finish.
fn ordinary(format: Format) -> String {
    let pieces = [
        "Your average ",
        "this week is ",
        "5.4 mmol/L, ",
        "right on target.",
    ];
    let mut body: String = pieces.iter().map(|p| format.text(p)).collect();
    body.push_str(&format.finish(false));
    body
}

/// Whether a request body is an attacker's: some user text of its conversation says "attack".
fn from_attacker(body: &Value) -> bool {
    let says = |v: &Value| v.as_str().is_some_and(|t| t.contains("attack"));
    let chat = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["role"] == "user" && says(&m["content"]));
    let gemini = body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .any(|p| says(&p["text"]));
    chat || gemini
}

/// Serves the hostile provider on `addr` until the returned task is aborted.
async fn provider(
    addr: &str,
    mode: Mode,
) -> Result<tokio::task::JoinHandle<()>, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let scripts = Arc::new([script(mode, Format::Chat), script(mode, Format::Gemini)]);
    let app = axum::Router::new().fallback(move |uri: Uri, body: Bytes| async move {
        let format = if uri.path().ends_with("/chat/completions") {
            Format::Chat
        } else if uri.path().contains(":streamGenerateContent") {
            Format::Gemini
        } else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let body = if !from_attacker(&request) {
            Body::from(ordinary(format))
        } else {
            match &scripts[usize::from(format == Format::Gemini)] {
                Some(script) => play(script),
                None => keep_alive_body(format),
            }
        };
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(body)
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    });
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }))
}

/// A failure of the load client as an error to report.
fn said(f: crate::failure::Failure) -> String {
    format!("{}: {}", f.kind.name(), f.message)
}

/// One started session on the brain.
async fn session(args: &Args, id: &str) -> Result<Session, Box<dyn std::error::Error>> {
    let url = args
        .url
        .as_deref()
        .ok_or("--attack provider-* needs --url")?;
    let ws = dial(url, id, None, args.timeout()).await.map_err(said)?;
    Session::start(Leg::Direct(Box::new(ws)), id.to_owned(), args.timeout())
        .await
        .map_err(|f| said(f).into())
}

/// The bystander's turns' first chunks until `stop` is set (or `turns` turns, when given).
async fn bystander(
    s: &mut Session,
    stop: &AtomicBool,
    turns: Option<usize>,
) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let mut firsts = Vec::new();
    while !stop.load(Ordering::Relaxed) && turns.is_none_or(|n| firsts.len() < n) {
        let times = s
            .turn("hello".into(), Duration::ZERO, OnFirstChunk::Listen)
            .await
            .map_err(said)?;
        firsts.push(times.first_chunk);
    }
    Ok(firsts)
}

/// The brain's log since `from` bytes: lines of the attackers' sessions, of the bystander's, of
/// neither, and the longest line in bytes.
fn log_by_session(path: &std::path::Path, from: u64) -> std::io::Result<[usize; 4]> {
    use std::io::{BufRead, Seek};
    let mut file = std::fs::File::open(path)?;
    file.seek(std::io::SeekFrom::Start(from))?;
    let mut counts = [0; 4];
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line?;
        let has = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
        let at = if has(b"session_id=attacker-") {
            0
        } else if has(b"session_id=bystander") {
            1
        } else {
            2
        };
        counts[at] += 1;
        counts[3] = counts[3].max(line.len());
    }
    Ok(counts)
}

/// p50 / p99 / max of `values`, in ms, as one text.
fn shown(values: &mut [Duration]) -> String {
    let [p50, _, p99, max] = spread(values);
    format!(
        "p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms ({} turns)",
        values.len()
    )
}

/// Runs one hostile-provider attack against the brain at `--url` and reports it.
async fn run(args: &Args, mode: Mode) -> Result<(), Box<dyn std::error::Error>> {
    let addr = args
        .provider_listen
        .as_deref()
        .ok_or("--attack provider-* needs --provider-listen (the brain's --base-url)")?;
    let server = provider(addr, mode).await?;
    let attackers = args.concurrency.unwrap_or(4).max(1);
    let mut watcher = session(args, "bystander").await?;
    let stop = AtomicBool::new(false);
    let mut alone = bystander(&mut watcher, &stop, Some(20)).await?;
    let log_from = args.brain_log.as_deref().map(log_len);
    let rss_before = args.brain_pid.map(rss_kb).transpose()?;
    let peak = args
        .brain_pid
        .zip(rss_before)
        .map(|(pid, first)| PeakSampler::start(pid, first));
    let started = Instant::now();
    let attack = async {
        let one = |id: usize| async move {
            let mut s = session(args, &format!("attacker-{id}")).await?;
            let mut failures = 0;
            for t in 0..args.turns {
                let said = s
                    .turn(
                        format!("attack {t}"),
                        Duration::from_millis(500),
                        OnFirstChunk::Listen,
                    )
                    .await;
                failures += usize::from(said.is_err());
            }
            s.leg.end(args.timeout()).await;
            Ok::<usize, Box<dyn std::error::Error>>(failures)
        };
        let all = futures_util::future::join_all((0..attackers).map(one)).await;
        stop.store(true, Ordering::Relaxed);
        all
    };
    let (outcomes, during) = tokio::join!(attack, bystander(&mut watcher, &stop, None));
    let elapsed = started.elapsed();
    let mut during = during?;
    let mut failed_turns = 0;
    for outcome in outcomes {
        failed_turns += outcome?;
    }
    watcher.leg.end(args.timeout()).await;
    server.abort();
    let rss_peak = peak.map(PeakSampler::stop);
    let rss_after = args.brain_pid.map(rss_kb).transpose()?;
    let log = match (args.brain_log.as_deref(), log_from) {
        (Some(path), Some(from)) => Some(log_by_session(path, from)?),
        _ => None,
    };
    println!(
        "attack provider {mode:?}: {attackers} attackers x {} turns in {:.1} s ({failed_turns} \
         attacked turns failed or timed out)",
        args.turns,
        elapsed.as_secs_f64()
    );
    println!("  bystander first chunk alone:  {}", shown(&mut alone));
    println!("  bystander first chunk during: {}", shown(&mut during));
    if let (Some(before), Some(peak), Some(after)) = (rss_before, rss_peak, rss_after) {
        println!(
            "  brain RSS: {:.1} MB before, {:.1} MB peak, {:.1} MB after",
            before as f64 / 1024.0,
            peak as f64 / 1024.0,
            after as f64 / 1024.0
        );
    }
    if let Some([attacked, watched, other, longest]) = log {
        println!(
            "  brain log: {:.1} lines per attacker call ({attacked} in all), {watched} for the \
             bystander's {} turns, {other} outside a session; longest line {longest} bytes",
            attacked as f64 / attackers as f64,
            during.len() + alone.len(),
        );
    }
    Ok(())
}

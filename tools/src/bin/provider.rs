//! A stand-in provider, as a process, for the model-backed half of the Rust-vs-Python
//! comparison: every `POST .../models/{model}:streamGenerateContent?alt=sse` gets the same answer,
//! the workload's 8 chunks (the text of `tools/src/bin/workload.rs`, 41 words) as 8 SSE events in
//! Gemini's format, the last with `finishReason: STOP` and `usageMetadata`, written without delay.
//! Every `POST /v1/messages` gets the same words as Anthropic streams them (`message_start`, one
//! text block of 8 deltas, `message_delta` with the usage, `message_stop`: 13 events), so the two
//! layers can be compared under the same load.
//!
//! `tools/src/bin/model_workload.rs` (Rust) and `tools/python/model_brain.py` (the Python SDK) are
//! the two brains it answers; `tools/scripts/compare-model` runs them against it, one after the other.
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin provider -- --listen 127.0.0.1:8790
//! GEMINI_API_KEY=x cargo run --release -p voqalize-tools --bin model_workload -- --allow-unverified \
//!     --provider gemini --base-url http://127.0.0.1:8790 --model workload
//! ```
//!
//! With `--stamp`, each Gemini answer's first text begins with the moment its event is written
//! (ns since the Unix epoch): the load tool reads it off the brain's first `SpeechChunk` and
//! reports the time from the first SSE byte to the first chunk.
//!
//! Any API version prefix (`/v1`, `/v1beta`) is accepted; the key and the request body are not
//! checked. Anything else gets a 404. (`voqalize_testing::ModelServer` is the in-process twin for
//! tests: it serves scripted replies one per request, on a free port.)

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use clap::Parser;
use serde_json::json;

use voqalize_tools::answer::CHUNKS;

/// Serve a stand-in Gemini provider that streams the workload's answer to every request.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on, such as 127.0.0.1:8790 (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8790")]
    listen: String,
    /// Begin each Gemini answer's first text with the moment its event is written, in ns since
    /// the Unix epoch, and a space: the load tool reads it off the brain's first `SpeechChunk` and
    /// reports the time from the first SSE byte to the first chunk (both read the system clock).
    #[arg(long)]
    stamp: bool,
}

/// The 8 SSE events of the answer, rendered once: Gemini's `data: {json}\r\n\r\n` chunks, each a
/// candidate with one text part; the last also carries the finish reason and the token counts.
fn events() -> Arc<[Bytes]> {
    (0..CHUNKS.len())
        .map(|i| gemini_event(i, CHUNKS[i]))
        .collect()
}

/// The `i`-th Gemini event of the answer, with `text` for its text.
fn gemini_event(i: usize, text: &str) -> Bytes {
    let mut candidate = json!({
        "content": {"parts": [{"text": text}], "role": "model"},
        "index": 0,
    });
    let mut chunk = json!({
        "candidates": [],
        "modelVersion": "workload",
        "responseId": "workload-1",
    });
    if i == CHUNKS.len() - 1 {
        candidate["finishReason"] = json!("STOP");
        chunk["usageMetadata"] = json!({
            "promptTokenCount": 40,
            "candidatesTokenCount": 52,
            "totalTokenCount": 92,
        });
    }
    chunk["candidates"] = json!([candidate]);
    Bytes::from(format!("data: {chunk}\r\n\r\n"))
}

/// The first Gemini event, its text led by the time now (see `--stamp`).
fn stamped_first_event() -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    gemini_event(0, &format!("{now:019} {}", CHUNKS[0]))
}

/// The same answer as Anthropic's Messages stream, rendered once.
fn anthropic_events() -> Arc<[Bytes]> {
    let event = |data: serde_json::Value| {
        let kind = data["type"].as_str().unwrap_or_default().to_owned();
        Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
    };
    let mut out = vec![
        event(
            json!({"type": "message_start", "message": {"id": "msg_workload", "type": "message",
            "role": "assistant", "content": [], "model": "workload", "stop_reason": null,
            "usage": {"input_tokens": 40, "output_tokens": 1}}}),
        ),
        event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})),
    ];
    for text in CHUNKS {
        out.push(event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}})));
    }
    out.push(event(json!({"type": "content_block_stop", "index": 0})));
    out.push(event(json!({"type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": null},
        "usage": {"output_tokens": 52}})));
    out.push(event(json!({"type": "message_stop"})));
    out.into()
}

/// Both answers, rendered once.
struct Answers {
    gemini: Arc<[Bytes]>,
    anthropic: Arc<[Bytes]>,
    /// `--stamp`.
    stamp: bool,
}

/// Answers a `streamGenerateContent` or `/v1/messages` POST with the rendered events, one body
/// frame each; anything else with a 404. The request body is read (so the connection can be
/// reused) and ignored.
async fn answer(
    State(answers): State<Arc<Answers>>,
    method: Method,
    uri: Uri,
    _body: Bytes,
) -> Response {
    let (events, stamped) = match uri.path() {
        _ if method != Method::POST => return StatusCode::NOT_FOUND.into_response(),
        p if p.ends_with(":streamGenerateContent") => (&answers.gemini, answers.stamp),
        "/v1/messages" => (&answers.anthropic, false),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    use futures_util::StreamExt as _;
    let skip = usize::from(stamped);
    let frames: Vec<Result<Bytes, Infallible>> =
        events.iter().skip(skip).cloned().map(Ok).collect();
    // A stamped first event is made when the server takes it to write (after the response head).
    let first = futures_util::stream::iter(stamped.then_some(()))
        .map(|()| Ok::<_, Infallible>(stamped_first_event()));
    let body = first.chain(futures_util::stream::iter(frames));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("provider on http://{}", listener.local_addr()?);
    use std::io::Write as _;
    std::io::stdout().flush()?;
    let answers = Arc::new(Answers {
        gemini: events(),
        anthropic: anthropic_events(),
        stamp: args.stamp,
    });
    let app = axum::Router::new().fallback(answer).with_state(answers);
    // Small SSE events go out at once (no Nagle delay against the client's delayed ACK).
    let listener = listener.tap_io(|tcp| drop(tcp.set_nodelay(true)));
    axum::serve(listener, app).await?;
    Ok(())
}

//! The floor a brain is measured against: the comparison workload's answer with no SDK runtime.
//! Tokio and tokio-tungstenite only; `voqalize::wire` encodes and decodes the frames, as the load
//! tool does. Each call is one task that reads a frame and, for a `UserMessage`, writes the
//! answer (`SpeechStart`, the 8 chunks, `SpeechEnd`) and flushes once: one write. No lanes, no
//! turns, no heard truth, no bounds, no tokens checked: what any brain must at least do to answer.
//! `tools/scripts/compare` runs it beside the SDK's `workload` brain under the same load.
//!
//! With `--model-url`, it is the floor of the model-backed pair too: each `UserMessage` makes one
//! plain streamed HTTP request to the stand-in provider (the same pooled HTTP/1.1 client the SDK
//! uses, reqwest over hyper), with no SSE parsing, no JSON, no history, and speaks as it reads,
//! as a voice brain must (its first words go out before its last arrive): `SpeechStart` and a
//! chunk for each piece of the body as it comes, each flushed at once, the rest of the 8 chunks
//! and `SpeechEnd` at the body's end. What the SDK adds above it is its own work (the event
//! parser, the decoder, the voice core, the turn's frames); the HTTP stack's cost, and a write
//! for each piece of a streamed answer, are in both. `tools/scripts/compare-model` runs it beside the
//! SDK's `model_workload` brain.
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin floor -- --listen 127.0.0.1:8787
//! cargo run --release -p voqalize-tools --bin floor -- --listen 127.0.0.1:8787 --model-url http://127.0.0.1:8790
//! ```

use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use voqalize::wire::{self, Frame};

use voqalize_tools::answer;

/// Serve the raw-socket floor brain.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// A stand-in provider (`tools/src/bin/provider.rs`) to ask once a turn, as a model-backed brain
    /// does.
    #[arg(long)]
    model_url: Option<String>,
}

/// One plain streamed request a turn, when the floor stands for a model-backed brain.
#[derive(Clone)]
struct Provider {
    client: reqwest::Client,
    url: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let listener = TcpListener::bind(&args.listen).await?;
    println!("serving a brain on ws://{}", listener.local_addr()?);
    use std::io::Write as _;
    std::io::stdout().flush()?;
    // The answer's text, shared by every call; only the speech id differs per unit.
    let chunks: Arc<[String]> = answer::CHUNKS.iter().map(|c| (*c).to_owned()).collect();
    let provider = match &args.model_url {
        Some(base) => Some(Provider {
            // The SDK's TLS provider (ring); plain HTTP needs none, but the client wants one.
            client: {
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::Client::builder()
                    .http1_only()
                    .tcp_nodelay(true)
                    .build()?
            },
            url: format!("{base}/v1beta/models/workload:streamGenerateContent?alt=sse"),
        }),
        None => None,
    };
    // On a worker thread, as the SDK's accept loop runs.
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(call(stream, chunks.clone(), provider.clone()));
        }
    })
    .await?;
    Ok(())
}

/// One call: every `UserMessage` gets the answer in one unit, written in one flush.
async fn call(stream: TcpStream, chunks: Arc<[String]>, provider: Option<Provider>) {
    let _ = stream.set_nodelay(true);
    let config = WebSocketConfig::default()
        .read_buffer_size(512)
        .max_message_size(Some(1024 * 1024));
    let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await else {
        return;
    };
    let mut speech_id = 0;
    while let Some(Ok(message)) = ws.next().await {
        let Message::Binary(bytes) = message else {
            continue;
        };
        match wire::decode(&bytes) {
            Ok(Some(Frame::UserMessage(m))) => {
                speech_id += 1;
                let start = Frame::SpeechStart {
                    speech_id,
                    turn_id: m.turn_id,
                };
                let chunk = |i: usize| {
                    binary(&Frame::SpeechChunk {
                        speech_id,
                        text: chunks[i].clone(),
                    })
                };
                // The chunks spoken so far.
                let mut said = 0;
                if let Some(provider) = &provider {
                    let Ok(mut response) = ask(provider, &m.text).await else {
                        return;
                    };
                    if ws.feed(binary(&start)).await.is_err() {
                        return;
                    }
                    // A chunk for each piece of the body as it comes, flushed at once.
                    while let Ok(Some(_)) = response.chunk().await {
                        if said < chunks.len() {
                            let sent = ws.feed(chunk(said)).await;
                            if sent.and(ws.flush().await).is_err() {
                                return;
                            }
                            said += 1;
                        }
                    }
                } else if ws.feed(binary(&start)).await.is_err() {
                    return;
                }
                let mut sent = Ok(());
                for i in said..chunks.len() {
                    sent = sent.and(ws.feed(chunk(i)).await);
                }
                sent = sent.and(ws.feed(binary(&Frame::SpeechEnd { speech_id })).await);
                if sent.and(ws.flush().await).is_err() {
                    return;
                }
            }
            Ok(Some(Frame::End)) => {
                let _ = ws.close(None).await;
                return;
            }
            _ => {}
        }
    }
}

/// The turn's one model request, sent: its body is read by the caller as it comes.
async fn ask(provider: &Provider, text: &str) -> Result<reqwest::Response, reqwest::Error> {
    let body =
        voqalize::json!({"contents": [{"role": "user", "parts": [{"text": text}]}]}).to_string();
    provider
        .client
        .post(&provider.url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
}

fn binary(frame: &Frame) -> Message {
    Message::Binary(Bytes::from(wire::encode(frame)))
}

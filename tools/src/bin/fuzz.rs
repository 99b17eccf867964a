//! A fuzz loop that runs on the pinned stable toolchain (no cargo-fuzz): random and mutated inputs
//! into the decoders a peer or a model controls, until the time is up or one of them panics.
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin fuzz -- --target envelope --seconds 600
//! cargo run --release -p voqalize-tools --bin fuzz -- --target gemini --seconds 600   # also openai, chat, token
//! ```
//!
//! Targets: `envelope` (the wire decoder, seeded with every frame kind), `relay` (a relay message:
//! the 16-byte session prefix, then an envelope), `gemini`, `openai`, `chat`
//! (our SSE parser and that provider's stream decoder, seeded with real-shaped streams), `token`
//! (the RS256 token checks), `schema` (the per-provider schema rewrites, on any JSON). A panic prints the input (hex) and exits 1: keep it as a regression
//! test. The generator is a small deterministic PRNG: `--seed` replays a run.

use std::time::{Duration, Instant};

use clap::Parser;
use voqalize::__kit::bench::RequestBench;
use voqalize::host::HostOptions;
use voqalize::wire::{self, Frame, UserMessage};

/// Fuzz one decoder for a while.
#[derive(Parser, Debug)]
struct Args {
    /// envelope, relay, gemini, openai, chat, token or schema.
    #[arg(long)]
    target: String,
    /// How long to run.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The PRNG seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// xorshift64*: fast, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random change: flip, insert, delete, duplicate a slice, splice from another seed, or
/// truncate.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    let len = input.len();
    match rng.below(7) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 => {
            let i = rng.below(len + 1);
            input.insert(i, rng.next() as u8);
        }
        2 if len > 0 => {
            input.remove(rng.below(len));
        }
        3 if len > 1 => {
            let a = rng.below(len);
            let b = (a + rng.below(16) + 1).min(len);
            let slice = input[a..b].to_vec();
            let at = rng.below(len + 1);
            input.splice(at..at, slice);
        }
        4 => {
            let other = &seeds[rng.below(seeds.len())];
            if !other.is_empty() {
                let a = rng.below(other.len());
                let b = (a + rng.below(64) + 1).min(other.len());
                let at = rng.below(len + 1);
                input.splice(at..at, other[a..b].iter().copied());
            }
        }
        5 if len > 0 => input.truncate(rng.below(len)),
        _ => {
            let i = rng.below(len + 1);
            let interesting: &[&[u8]] = &[
                b"\r\n",
                b"\n\n",
                b"\r",
                b"data: ",
                b"{",
                b"}",
                b"\"",
                b"\xef\xbb\xbf",
                b"\xff",
                b"[DONE]",
                b"event: ",
                b":",
            ];
            let piece = interesting[rng.below(interesting.len())];
            input.splice(i..i, piece.iter().copied());
        }
    }
}

fn envelope_seeds() -> Vec<Vec<u8>> {
    [
        Frame::UserMessage(UserMessage::new(2, "hello there")),
        Frame::Interruption { through_turn: 3 },
        Frame::Finalize {
            speech_id: 1,
            heard_text: "hello".into(),
        },
        Frame::SpeechChunk {
            speech_id: 4,
            text: "chunk".into(),
        },
        Frame::End,
    ]
    .iter()
    .map(wire::encode)
    .collect()
}

fn gemini_seeds() -> Vec<Vec<u8>> {
    vec![
        b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Opening\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":120}}\r\n\r\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"id\":\"c1\",\"name\":\"open\",\"args\":{\"city\":\"Paris\"}},\"thoughtSignature\":\"c2ln\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]}\r\n\r\n".to_vec(),
        b"data: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\n\n".to_vec(),
        b"{\n  \"error\": {\"code\": 400, \"message\": \"bad\"}\n}\n".to_vec(),
    ]
}

fn openai_seeds() -> Vec<Vec<u8>> {
    vec![
        b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\nevent: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"{}\",\"call_id\":\"call_A\",\"name\":\"open\"}}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}\n\n".to_vec(),
        b"event: error\ndata: {\"type\":\"error\",\"message\":\"rate limit\"}\n\n".to_vec(),
    ]
}

fn chat_seeds() -> Vec<Vec<u8>> {
    vec![
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_X\",\"function\":{\"name\":\"open\",\"arguments\":\"{\\\"ci\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ty\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":5}}\n\ndata: [DONE]\n\n".to_vec(),
    ]
}

fn schema_seeds() -> Vec<Vec<u8>> {
    vec![
        br##"{"type":"object","properties":{"guest":{"$ref":"#/$defs/Guest"},"alt":{"anyOf":[{"$ref":"#/$defs/Guest"},{"type":"null"}]}},"required":["guest"],"$defs":{"Guest":{"type":"object","properties":{"name":{"type":"string"},"party":{"type":"integer","format":"uint8","minimum":0}},"required":["name"]}}}"##.to_vec(),
        br##"{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":["string","null"]}}},{"type":"object","properties":{"kind":{"const":"b"}},"additionalProperties":false}],"$defs":{"Node":{"type":"object","properties":{"next":{"$ref":"#/$defs/Node"}}}}}"##.to_vec(),
        br##"{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}},"map":{"type":"object","additionalProperties":{"$ref":"#"}},"t":{"type":"array","prefixItems":[{"type":"integer"},{"enum":[1,"x",null]}]}}}"##.to_vec(),
    ]
}

fn token_seeds() -> Vec<Vec<u8>> {
    vec![
        b"Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzIiwiZXhwIjoxfQ.c2ln".to_vec(),
        b"bearer a.b.c".to_vec(),
    ]
}

/// What one target does with an input.
type Target = Box<dyn Fn(&[u8])>;

/// A target's seed inputs and what it does with an input, or why there is none.
type Chosen = Result<(Vec<Vec<u8>>, Target), Box<dyn std::error::Error>>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let (seeds, run) = target(&args.target)?;
    let runs = fuzz(&args, &seeds, &run);
    println!(
        "{}: {runs} inputs in {} s, no panic (seed {})",
        args.target, args.seconds, args.seed
    );
    Ok(())
}

/// The target named `name`: its seed inputs, and what it does with an input.
fn target(name: &str) -> Chosen {
    let found: (Vec<Vec<u8>>, Target) = match name {
        "envelope" => (
            envelope_seeds(),
            Box::new(|input: &[u8]| {
                let _ = wire::decode(input);
            }),
        ),
        "relay" => (
            // A session prefix, then an envelope: what the relay sends on its one connection.
            envelope_seeds()
                .into_iter()
                .map(|envelope| [[7u8; 16].as_slice(), &envelope].concat())
                .collect(),
            Box::new(|input: &[u8]| {
                if let Some(inbound) = voqalize::__kit::RelayInbound::parse(input) {
                    let _ = inbound.opens_session(64 * 1024);
                }
            }),
        ),
        provider @ ("gemini" | "openai" | "chat") => provider_target(provider)?,
        "schema" => (
            schema_seeds(),
            Box::new(|input: &[u8]| {
                if let Ok(value) = serde_json::from_slice::<serde_json::Value>(input) {
                    for dialect in [
                        voqalize::tools::Dialect::Gemini,
                        voqalize::tools::Dialect::OpenAi,
                        voqalize::tools::Dialect::OpenAiStrict,
                    ] {
                        let _ = voqalize::tools::__rewrite_schema(&value, dialect);
                    }
                }
            }),
        ),
        "token" => {
            let options = HostOptions::production();
            (
                token_seeds(),
                Box::new(move |input: &[u8]| {
                    let text = String::from_utf8_lossy(input);
                    let _ = options.verify(Some(&text), "s");
                }),
            )
        }
        other => return Err(format!("unknown target {other}").into()),
    };
    Ok(found)
}

/// A provider's request bench decoding a response body (`gemini`, `openai`, `chat`).
fn provider_target(provider: &str) -> Chosen {
    let layer: voqalize::voice::ModelLayer = match provider {
        "gemini" => voqalize::model::Gemini::builder("k").build()?.into(),
        "openai" => voqalize::model::OpenAi::builder("k", "m").build()?.into(),
        _ => voqalize::model::Chat::builder("http://127.0.0.1:1/v1", "m")
            .build()?
            .into(),
    };
    let bench = RequestBench::new(layer, voqalize::tools::ToolSet::empty(), 0);
    let seeds = match provider {
        "gemini" => gemini_seeds(),
        "openai" => openai_seeds(),
        _ => chat_seeds(),
    };
    Ok((
        seeds,
        Box::new(move |input: &[u8]| {
            let _ = bench.decode(input);
        }),
    ))
}

/// Runs `run` on mutated seeds for `--seconds`, and gives how many inputs it ran; on a panic,
/// prints the input (in hex) and exits with 1.
fn fuzz(args: &Args, seeds: &[Vec<u8>], run: &Target) -> u64 {
    let mut rng = Rng(args.seed.max(1));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut runs = 0u64;
    std::panic::set_hook(Box::new(|_| {}));
    while Instant::now() < deadline {
        for _ in 0..1000 {
            let mut input = if rng.below(8) == 0 {
                (0..rng.below(512)).map(|_| rng.next() as u8).collect()
            } else {
                seeds[rng.below(seeds.len())].clone()
            };
            for _ in 0..=rng.below(8) {
                mutate(&mut rng, &mut input, seeds);
            }
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&input)));
            if outcome.is_err() {
                let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
                eprintln!("PANIC on input (hex): {hex}");
                std::process::exit(1);
            }
            runs += 1;
        }
    }
    runs
}

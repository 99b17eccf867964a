//! Benchmarks of a model-backed turn's hot paths and of the codec.
//!
//! ```text
//! cargo bench -p voqalize-tools --bench voice
//! ```
//!
//! * `request_build/<provider>/30_turns`: one request body from 30 exchanges of history;
//! * `decode/<provider>`: SSE bytes of a 40-piece answer with a call (as the stand-in provider
//!   writes that provider's stream), parsed and decoded;
//! * `turn/<provider>`: one whole turn in process: UserMessage → model request over loopback HTTP
//!   to the stand-in provider → streamed answer → every SpeechChunk and the SpeechEnd on the
//!   session;
//! * `codec/*`: encode and decode of the frames of a turn.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use voqalize::__kit::bench::RequestBench;
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize::wire::{self, Frame, TurnStep};
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize, WireFormat};

#[path = "shared/desk.rs"]
mod desk;
use desk::Desk;

fn desk_tools() -> voqalize::tools::ToolSet {
    let gemini = Gemini::builder("k").build().expect("layer");
    Desk {
        model: Model::new(gemini),
        ended: None,
    }
    .tools_for_turn()
}

fn request_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_build");
    let layers: [(&str, ModelLayer); 5] = [
        (
            "gemini",
            Gemini::builder("k").build().expect("layer").into(),
        ),
        (
            "openai",
            OpenAi::builder("k", "gpt").build().expect("layer").into(),
        ),
        (
            "chat",
            Chat::builder("http://127.0.0.1:1/v1", "gpt")
                .build()
                .expect("layer")
                .into(),
        ),
        (
            "anthropic",
            Anthropic::builder("k", "claude")
                .build()
                .expect("layer")
                .into(),
        ),
        (
            "interactions",
            Interactions::builder("k").build().expect("layer").into(),
        ),
    ];
    for (name, layer) in layers {
        let bench = RequestBench::new(layer, desk_tools(), 30);
        group.bench_function(format!("{name}/30_turns"), |b| {
            b.iter(|| black_box(bench.build().expect("a request")))
        });
        if name == "gemini" {
            // Every entry rendered: a call's first request (the layer keeps none before it).
            group.bench_function(format!("{name}/30_turns_fresh"), |b| {
                b.iter(|| black_box(bench.build_fresh().expect("a request")))
            });
        }
    }
    group.finish();
}

/// The built-in layer for `provider` against `base_url`.
fn layer(provider: Provider, base_url: &str) -> ModelLayer {
    match provider {
        Provider::Gemini => Gemini::builder("k")
            .base_url(base_url)
            .build()
            .map(Into::into),
        Provider::OpenAi => OpenAi::builder("k", "gpt")
            .base_url(base_url)
            .build()
            .map(Into::into),
        Provider::Chat => Chat::builder(base_url, "gpt").build().map(Into::into),
        Provider::Anthropic => Anthropic::builder("k", "claude")
            .base_url(base_url)
            .build()
            .map(Into::into),
        _ => Interactions::builder("k")
            .base_url(base_url)
            .build()
            .map(Into::into),
    }
    .expect("layer")
}

const PROVIDERS: [(&str, Provider); 5] = [
    ("gemini", Provider::Gemini),
    ("openai", Provider::OpenAi),
    ("chat", Provider::Chat),
    ("anthropic", Provider::Anthropic),
    ("interactions", Provider::Interactions),
];

/// A 40-piece answer with a call, in `provider`'s stream format as the stand-in writes it.
fn answer(provider: Provider) -> Vec<u8> {
    let mut writer = provider.writer();
    let mut sse: Vec<String> = Vec::new();
    for i in 0..40 {
        sse.extend(writer.text(&format!("word{i} ")));
    }
    sse.extend(writer.call("c1", "show_help", &serde_json::json!({})));
    sse.extend(writer.finish(false, Some((120, 50))));
    sse.concat().into_bytes()
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    for (name, provider) in PROVIDERS {
        let bench = RequestBench::new(layer(provider, "http://127.0.0.1:1/v1"), desk_tools(), 0);
        let sse = answer(provider);
        group.bench_function(name, |b| {
            b.iter(|| black_box(bench.decode(black_box(&sse)).expect("decodes")))
        });
    }
    group.finish();
}

fn turn(c: &mut Criterion) {
    for (name, provider) in [
        ("gemini", Provider::Gemini),
        ("anthropic", Provider::Anthropic),
        ("interactions", Provider::Interactions),
    ] {
        turn_on(c, name, provider);
    }
}

fn turn_on(c: &mut Criterion, name: &str, provider: Provider) {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let (server, mut v) = rt.block_on(async {
        let server = ModelServer::start(provider).await.expect("a port");
        let base = server.base_url();
        let mut v = Voqalize::in_process(move || Desk {
            model: Model::new(layer(provider, &base)),
            ended: None,
        });
        v.start_silent().await.expect("started");
        (server, v)
    });
    let mut words = Reply::new();
    for i in 0..8 {
        words = words.text(&format!("word{i} "));
    }
    let answer = words.finish().usage(100, 10);
    c.bench_function(&format!("turn/{name}"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    server.reply(answer.clone());
                    let started = Instant::now();
                    let turn = v.send_user_message("hello").await.expect("sent");
                    let ended = v
                        .wait_for(Duration::from_secs(5), |v| {
                            v.units().any(|u| u.turn_id == turn && u.ended)
                        })
                        .await
                        .expect("the driver runs");
                    total += started.elapsed();
                    assert!(ended, "the turn spoke");
                    let units: Vec<(u64, String)> = v
                        .units()
                        .filter(|u| u.turn_id == turn)
                        .map(|u| (u.speech_id, u.text()))
                        .collect();
                    for (id, text) in units {
                        v.finalize(id, &text).await.expect("finalized");
                    }
                }
                total
            })
        })
    });
}

fn codec(c: &mut Criterion) {
    let frames = [
        (
            "speech_chunk",
            Frame::SpeechChunk {
                speech_id: 7,
                text: "Opening the booking form for you now.".into(),
            },
        ),
        (
            "user_message",
            Frame::UserMessage(UserMessage::new(3, "Please book a table for four tonight.")),
        ),
        (
            "turn_step",
            Frame::TurnStep(TurnStep {
                turn_id: 3,
                kind: "model".into(),
                name: "gemini-3.5-flash".into(),
                provider: "google".into(),
                start_ms: 2,
                duration_ms: 310,
                first_output_ms: Some(120),
                counts: [
                    ("input_tokens".to_owned(), 120),
                    ("output_tokens".to_owned(), 31),
                ]
                .into_iter()
                .collect(),
            }),
        ),
        ("speech_end", Frame::SpeechEnd { speech_id: 7 }),
    ];
    let mut group = c.benchmark_group("codec");
    for (name, frame) in &frames {
        let bytes = wire::encode(frame);
        group.bench_function(format!("encode/{name}"), |b| {
            b.iter(|| black_box(wire::encode(black_box(frame))))
        });
        group.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| black_box(wire::decode(black_box(&bytes)).expect("decodes")))
        });
    }
    group.finish();
}

criterion_group!(benches, request_build, decode, turn, codec);
criterion_main!(benches);

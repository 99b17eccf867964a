//! A hostile or broken provider against the Anthropic and Interactions decoders, and
//! `HttpOptions` / bearer handling: what a review as an attacker found, kept as regression tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use voqalize::model::{HttpOptions, Timeouts};
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::support::{driver, logs};

/// Something to repeat.
#[json_type]
struct Rep {
    /// The piece.
    name: String,
    /// How often.
    count: u32,
}

struct Target {
    model: Model,
    runs: Arc<AtomicUsize>,
    args: Arc<Mutex<Vec<String>>>,
}

impl Brain for Target {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Target {
    /// Show help.
    #[tool]
    async fn show_help(&self) -> &'static str {
        self.runs.fetch_add(1, Ordering::SeqCst);
        "shown"
    }

    /// Repeats a piece.
    #[tool]
    async fn repeat(&self, a: Rep) -> String {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.args
            .lock()
            .unwrap()
            .push(format!("{} x{}", a.name, a.count));
        a.name.repeat(a.count as usize)
    }
}

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(5),
    }
}

struct Rig {
    server: ModelServer,
    layer: ModelLayer,
    runs: Arc<AtomicUsize>,
    args: Arc<Mutex<Vec<String>>>,
}

impl Rig {
    async fn new(provider: Provider) -> Rig {
        logs();
        let server = ModelServer::start(provider).await.unwrap();
        let layer = crate::support::layer(provider, &server.base_url(), "review-model", timeouts());
        Rig::with_layer(server, layer)
    }

    fn with_layer(server: ModelServer, layer: ModelLayer) -> Rig {
        Rig {
            server,
            layer,
            runs: Arc::new(AtomicUsize::new(0)),
            args: Arc::new(Mutex::new(Vec::new())),
        }
    }

    async fn session(&self) -> Voqalize {
        let (layer, runs, args) = (self.layer.clone(), self.runs.clone(), self.args.clone());
        let mut v = driver(move || Target {
            model: Model::new(layer.clone()).fallback_line("Sorry, one moment."),
            runs: runs.clone(),
            args: args.clone(),
        })
        .await;
        v.start_silent().await.unwrap();
        v
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    fn args(&self) -> Vec<String> {
        self.args.lock().unwrap().clone()
    }
}

/// A turn that may speak nothing: waits for its first model step, lets the session go quiet,
/// finalizes every unit as heard.
async fn silent_turn(v: &mut Voqalize, text: &str) -> u64 {
    let turn = v.send_user_message(text).await.unwrap();
    let stepped = v
        .wait_for(Duration::from_secs(5), |v| {
            v.turn_steps()
                .iter()
                .any(|s| s.turn_id == turn && s.kind == "model")
        })
        .await
        .unwrap();
    assert!(stepped, "turn {turn} reported a model step");
    v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
        .await
        .unwrap();
    let units: Vec<(u64, String)> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| (u.speech_id, u.text()))
        .collect();
    for (id, text) in units {
        v.finalize(id, &text).await.unwrap();
    }
    turn
}

/// An Anthropic SSE event.
fn an(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn an_start() -> String {
    an(
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    )
}

fn an_end(reason: &str) -> String {
    an(
        json!({"type": "message_delta", "delta": {"stop_reason": reason},
        "usage": {"output_tokens": 1}}),
    ) + &an(json!({"type": "message_stop"}))
}

/// An Interactions SSE event.
fn ix(kind: &str, mut data: Value) -> String {
    data["event_type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n")
}

fn ix_end() -> String {
    ix(
        "interaction.completed",
        json!({"interaction": {"id": "", "status": "completed"}}),
    ) + "event: done\ndata: [DONE]\n\n"
}

// ------------------------------------------------------------------------------------------
// F1. A call without an id poisons the conversation: every later request is unbuildable.
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn anthropic_call_without_id_does_not_break_every_later_turn() {
    let rig = Rig::new(Provider::Anthropic).await;
    let body = an_start()
        + &an(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "name": "show_help", "input": {}}}))
        + &an(json!({"type": "content_block_stop", "index": 0}))
        + &an_end("tool_use");
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    silent_turn(&mut v, "help").await;
    assert_eq!(rig.runs(), 1, "the call ran");
    rig.server.reply(Reply::new().text("Still here.").finish());
    let said = v.user_says("hello?").await.unwrap().text();
    assert_eq!(
        (said.as_str(), rig.server.requests().len()),
        ("Still here.", 2),
        "the next turn is asked and answered"
    );
}

#[tokio::test]
async fn interactions_call_without_id_does_not_break_every_later_turn() {
    let rig = Rig::new(Provider::Interactions).await;
    let body = ix(
        "step.start",
        json!({"index": 0,
            "step": {"type": "function_call", "name": "show_help", "arguments": {}}}),
    ) + &ix("step.stop", json!({"index": 0}))
        + &ix_end();
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    silent_turn(&mut v, "help").await;
    assert_eq!(rig.runs(), 1, "the call ran");
    rig.server.reply(Reply::new().text("Still here.").finish());
    let said = v.user_says("hello?").await.unwrap().text();
    assert_eq!(
        (said.as_str(), rig.server.requests().len()),
        ("Still here.", 2),
        "the next turn is asked and answered"
    );
}

// ------------------------------------------------------------------------------------------
// F2. Two calls under one id: both run, and the history replays duplicate tool_use ids (the
// Messages API refuses such a request: every later turn of the call fails).
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn anthropic_duplicate_call_ids_are_not_replayed() {
    let rig = Rig::new(Provider::Anthropic).await;
    let call = |i: u64| {
        an(json!({"type": "content_block_start", "index": i,
            "content_block": {"type": "tool_use", "id": "toolu_same", "name": "show_help", "input": {}}}))
            + &an(json!({"type": "content_block_stop", "index": i}))
    };
    let body = an_start() + &call(0) + &call(1) + &an_end("tool_use");
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    silent_turn(&mut v, "help twice").await;
    rig.server.reply(Reply::new().text("Still here.").finish());
    v.user_says("hello?").await.unwrap();
    let messages = rig.server.requests()[1].body["messages"].clone();
    let ids: Vec<String> = messages
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "tool_use ids replayed: {ids:?}");
}

// ------------------------------------------------------------------------------------------
// F3. Block / step indexes are never read: a delta for an index that was never started is
// applied to whatever block is open, so a call runs with arguments from another index.
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn anthropic_delta_for_an_unstarted_index_is_not_taken_as_the_open_calls_input() {
    let rig = Rig::new(Provider::Anthropic).await;
    let body = an_start()
        + &an(
            json!({"type": "content_block_start", "index": 0, "content_block":
            {"type": "tool_use", "id": "toolu_1", "name": "repeat", "input": {}}}),
        )
        + &an(json!({"type": "content_block_delta", "index": 7,
            "delta": {"type": "input_json_delta", "partial_json": "{\"name\": \"evil\", \"count\": 2}"}}))
        + &an(json!({"type": "content_block_stop", "index": 0}))
        + &an_end("tool_use");
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    silent_turn(&mut v, "repeat").await;
    assert_eq!(
        rig.args(),
        Vec::<String>::new(),
        "the tool ran on index 7's input"
    );
}

#[tokio::test]
async fn interactions_delta_for_an_unstarted_index_is_not_taken_as_the_open_calls_arguments() {
    let rig = Rig::new(Provider::Interactions).await;
    let body = ix(
        "step.start",
        json!({"index": 0, "step":
            {"type": "function_call", "id": "c1", "name": "repeat", "arguments": {}}}),
    ) + &ix(
        "step.delta",
        json!({"index": 3, "delta":
            {"type": "arguments_delta", "arguments": "{\"name\": \"evil\", \"count\": 2}"}}),
    ) + &ix("step.stop", json!({"index": 0}))
        + &ix_end();
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    silent_turn(&mut v, "repeat").await;
    assert_eq!(
        rig.args(),
        Vec::<String>::new(),
        "the tool ran on index 3's arguments"
    );
}

// ------------------------------------------------------------------------------------------
// F4. Usage counts are summed unchecked: `input_tokens` + `cache_read_input_tokens` overflows
// u64 (a panic in a debug build, a wrapped count in release).
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn anthropic_huge_usage_counts_neither_panic_nor_wrap() {
    let rig = Rig::new(Provider::Anthropic).await;
    let start = an(
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test",
        "usage": {"input_tokens": u64::MAX, "cache_read_input_tokens": 2, "output_tokens": 1}}}),
    );
    let body = start
        + &an(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}))
        + &an(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Hi."}}))
        + &an(json!({"type": "content_block_stop", "index": 0}))
        + &an_end("end_turn");
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    let said = v.user_says("hello").await.map(|t| t.text());
    assert_eq!(said.ok().as_deref(), Some("Hi."), "the turn spoke");
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.kind == "model")
        .cloned()
        .expect("a model step");
    let input = step.counts.get("input_tokens").copied();
    assert!(
        input.is_none() || input >= Some(u64::MAX - 10) || input.unwrap() > 1 << 62,
        "input_tokens reported as {input:?}"
    );
}

// ------------------------------------------------------------------------------------------
// F5. HttpOptions: the documented proxy credentials are refused; transport-owned headers are not.
// ------------------------------------------------------------------------------------------

#[test]
fn a_proxy_with_basic_auth_builds_as_documented() {
    // endpoint.rs: "`http://host:port`, with `user:password@` for basic auth".
    let built = Anthropic::builder("key", "claude-test")
        .http(HttpOptions::new().proxy("http://user:secret@proxy.internal:3128"))
        .build();
    assert!(built.is_ok(), "{:?}", built.err().map(|e| e.to_string()));
}

/// Headers the transport owns (a `content-length` would cut the body and leave the rest on a
/// pooled connection) and headers the layer sets itself (an `authorization` beside a bearer
/// source, a second key) are refused when the layer is built, naming the header.
#[test]
fn http_options_cannot_override_the_transports_or_the_layers_headers() {
    let refused = |built: Result<(), voqalize::model::LayerError>, header: &str| {
        let err = built.expect_err("refused at build").to_string();
        assert!(err.contains(header), "{err}");
    };
    for header in ["content-length", "Host", "transfer-encoding", "Connection"] {
        let built = Anthropic::builder("test-key", "m")
            .http(HttpOptions::new().header(header, "2"))
            .build()
            .map(|_| ());
        refused(built, header);
    }
    let built = Interactions::builder("unused")
        .bearer(|| "fresh-token".to_owned())
        .http(HttpOptions::new().header("Authorization", "Bearer stale-token"))
        .build()
        .map(|_| ());
    refused(built, "Authorization");
    let built = Anthropic::builder("key", "m")
        .http(HttpOptions::new().header("X-Api-Key", "other"))
        .build()
        .map(|_| ());
    refused(built, "X-Api-Key");
    let fine = Anthropic::builder("key", "m")
        .http(HttpOptions::new().header("anthropic-beta", "prompt-caching-2024-07-31"))
        .build();
    assert!(
        fine.is_ok(),
        "an extra header of the provider's own is fine"
    );
}

/// endpoint.rs says a token "with spaces" is refused and the request never sent.
#[tokio::test]
async fn a_bearer_token_with_a_space_is_not_sent() {
    logs();
    let server = ModelServer::start(Provider::Interactions).await.unwrap();
    let layer = Interactions::builder("unused")
        .model("review-model")
        .base_url(server.base_url())
        .timeouts(timeouts())
        .bearer(|| "ya29.abc def".to_owned())
        .build()
        .unwrap();
    let rig = Rig::with_layer(server, layer.into());
    rig.server.reply(Reply::new().text("Hi.").finish());
    let mut v = rig.session().await;
    let _ = v.user_says("hello").await;
    let sent: Vec<String> = rig
        .server
        .requests()
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    assert!(sent.is_empty(), "sent {sent:?}");
}

// ------------------------------------------------------------------------------------------
// F6. Interactions: a `model_output` step's opening `content` is spoken whatever each item's
// type (deltas are spoken only when `type == "text"`).
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn interactions_non_text_content_at_step_start_is_not_spoken() {
    let rig = Rig::new(Provider::Interactions).await;
    let body = ix(
        "step.start",
        json!({"index": 0, "step": {"type": "model_output", "content": [
            {"type": "thought_summary", "text": "SECRET "}, {"type": "text", "text": "Hi."}]}}),
    ) + &ix("step.stop", json!({"index": 0}))
        + &ix_end();
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Hi.");
}

// ------------------------------------------------------------------------------------------
// Checks that held (kept as regression tests).
// ------------------------------------------------------------------------------------------

/// Text deltas inside thinking, redacted, unknown and tool_use blocks are never spoken; text
/// deltas inside Interactions thought/unknown/function_call steps neither.
#[tokio::test]
async fn holds_no_text_leaks_from_non_text_blocks() {
    let rig = Rig::new(Provider::Anthropic).await;
    let leak = |i: u64| {
        an(json!({"type": "content_block_delta", "index": i,
            "delta": {"type": "text_delta", "text": "SECRET "}}))
    };
    let body = an_start()
        + &an(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
        + &leak(0)
        + &an(json!({"type": "content_block_stop", "index": 0}))
        + &an(json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}}))
        + &leak(1)
        + &an(json!({"type": "content_block_stop", "index": 1}))
        + &an(json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "mystery_block", "text": "SECRET"}}))
        + &leak(2)
        + &an(json!({"type": "content_block_stop", "index": 2}))
        + &an(json!({"type": "content_block_start", "index": 3,
            "content_block": {"type": "text", "text": ""}}))
        + &an(json!({"type": "content_block_delta", "index": 3,
            "delta": {"type": "text_delta", "text": "Hello."}}))
        + &an(json!({"type": "content_block_stop", "index": 3}))
        + &an_end("end_turn");
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Hello.");

    let rig = Rig::new(Provider::Interactions).await;
    let leak = |i: u64| {
        ix(
            "step.delta",
            json!({"index": i, "delta": {"type": "text", "text": "SECRET "}}),
        )
    };
    let body = ix(
        "step.start",
        json!({"index": 0, "step": {"type": "thought"}}),
    ) + &leak(0)
        + &ix("step.stop", json!({"index": 0}))
        + &ix(
            "step.start",
            json!({"index": 1, "step": {"type": "code_execution_call"}}),
        )
        + &leak(1)
        + &ix("step.stop", json!({"index": 1}))
        + &ix(
            "step.start",
            json!({"index": 2, "step": {"type": "model_output"}}),
        )
        + &ix(
            "step.delta",
            json!({"index": 2, "delta": {"type": "text", "text": "Hello."}}),
        )
        + &ix("step.stop", json!({"index": 2}))
        + &ix_end();
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Hello.");
}

/// 20,000 unknown events and 2,000 unknown blocks / steps: no warn line, the turn answers, the next
/// request carries nothing of them.
#[tokio::test]
async fn holds_unknown_events_and_blocks_cost_nothing() {
    for provider in [Provider::Anthropic, Provider::Interactions] {
        let rig = Rig::new(provider).await;
        let mut body = String::new();
        if provider == Provider::Anthropic {
            body += &an_start();
            for i in 0..20_000 {
                body += &an(json!({"type": format!("mystery_{i}\n\u{1b}[2J"), "x": i}));
            }
            for i in 0..2_000u64 {
                body += &an(json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": format!("block_{i}"), "blob": "y"}}));
                body += &an(json!({"type": "content_block_stop", "index": i}));
            }
            body += &an(json!({"type": "content_block_start", "index": 2000,
                "content_block": {"type": "text", "text": "Hi."}}));
            body += &an_end("end_turn");
        } else {
            for i in 0..20_000 {
                body += &ix(&format!("mystery.{i}"), json!({"x": i}));
            }
            for i in 0..2_000u64 {
                body += &ix(
                    "step.start",
                    json!({"index": i, "step": {"type": format!("step_{i}")}}),
                );
                body += &ix("step.stop", json!({"index": i}));
            }
            body += &ix(
                "step.start",
                json!({"index": 2000, "step": {"type": "model_output",
                "content": [{"type": "text", "text": "Hi."}]}}),
            );
            body += &ix_end();
        }
        rig.server.reply(Reply::new().raw(&body));
        let mut v = {
            let layer = rig.layer.clone();
            let (runs, args) = (rig.runs.clone(), rig.args.clone());
            let mut v = driver(move || Target {
                model: Model::new(layer.clone()).max_response_bytes(8 << 20),
                runs: runs.clone(),
                args: args.clone(),
            })
            .await;
            v.start_silent().await.unwrap();
            v
        };
        assert_eq!(
            v.user_says("hi").await.unwrap().text(),
            "Hi.",
            "{provider:?}"
        );
        rig.server.reply(Reply::new().text("Again.").finish());
        v.user_says("again").await.unwrap();
        let next = rig.server.requests()[1].body.to_string();
        assert!(
            next.len() < 4000 && !next.contains("mystery") && !next.contains("block_"),
            "{provider:?}: {} bytes",
            next.len()
        );
        assert!(logs().lines_with("mystery").is_empty(), "{provider:?}");
    }
}

/// Pings / status updates forever end at the turn deadline, for both layers.
#[tokio::test]
async fn holds_keep_alives_end_at_the_deadline() {
    for provider in [Provider::Anthropic, Provider::Interactions] {
        let rig = Rig::new(provider).await;
        rig.server.reply(
            Reply::new()
                .text("One moment.")
                .keep_alive(Duration::from_millis(20)),
        );
        let layer = rig.layer.clone();
        let mut v = driver(move || Target {
            model: Model::new(layer.clone()).turn_deadline(Duration::from_millis(600)),
            runs: Arc::default(),
            args: Arc::default(),
        })
        .await;
        v.start_silent().await.unwrap();
        let turn = v.user_says("hello").await.unwrap();
        assert_eq!(turn.text(), "One moment.", "{provider:?}");
        assert!(turn.completed(), "{provider:?}");
    }
}

/// A layer's own code that panics (here a bearer token source: a vault client that panics) fails
/// that request like any failed request: logged, the fallback line spoken, the session going on.
#[tokio::test]
async fn a_panicking_token_source_fails_the_request_and_the_fallback_line_covers_it() {
    logs();
    let server = ModelServer::start(Provider::Interactions).await.unwrap();
    let layer = Interactions::builder("unused")
        .model("review-model")
        .base_url(server.base_url())
        .timeouts(timeouts())
        .bearer(|| panic!("the vault is down"))
        .build()
        .unwrap();
    let rig = Rig::with_layer(server, layer.into());
    let mut v = rig.session().await;
    for _ in 0..2 {
        assert_eq!(
            v.user_says("hello").await.unwrap().text(),
            "Sorry, one moment."
        );
    }
    assert!(rig.server.requests().is_empty(), "nothing was sent");
    assert!(
        !logs().lines_with("the vault is down").is_empty(),
        "the cause is logged"
    );
}

/// A layer of the user's whose decoder cannot be made: making it panics.
struct PanickingDecoder(voqalize::model::Gemini);

impl voqalize::model::layer::Layer for PanickingDecoder {
    fn provider(&self) -> &str {
        self.0.provider()
    }

    fn model(&self) -> &str {
        self.0.model()
    }

    fn base_url(&self) -> &str {
        self.0.base_url()
    }

    fn timeouts(&self) -> Timeouts {
        self.0.timeouts()
    }

    fn build(
        &self,
        spec: &voqalize::model::layer::RequestSpec<'_>,
    ) -> Result<voqalize::model::layer::HttpRequest, voqalize::model::layer::StreamError> {
        self.0.build(spec)
    }

    fn decoder(
        &self,
        _: voqalize::model::layer::DecodeLimits,
    ) -> Box<dyn voqalize::model::layer::Decoder> {
        panic!("the decoder broke")
    }
}

/// A panic in code the voice core runs in line (making a layer's decoder) ends the turn as a
/// failed request does: the fallback line is spoken, the turn completes, the cause is logged,
/// and the call goes on.
#[tokio::test]
async fn a_panic_inside_a_model_turn_is_covered_by_the_fallback_line() {
    logs();
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    server.answer_with(|_| Reply::new().text("Hello.").finish());
    let gemini = voqalize::model::Gemini::builder("k")
        .model("panicking-decoder")
        .base_url(server.base_url())
        .timeouts(timeouts())
        .build()
        .unwrap();
    let rig = Rig::with_layer(server, ModelLayer::new(PanickingDecoder(gemini)));
    let mut v = rig.session().await;
    for _ in 0..2 {
        let turn = v.user_says("hello").await.unwrap();
        assert_eq!(turn.text(), "Sorry, one moment.");
        assert!(turn.completed());
    }
    assert!(
        !logs().lines_with("the decoder broke").is_empty(),
        "the cause is logged"
    );
}

//! A model response is bounded in bytes, counts and time (docs/protocol.md §6.14), and what a
//! provider or a model says reaches the log clipped and escaped: a model-backed `Brain` on a real
//! session socket against the stand-in provider misbehaving over real HTTP, with small configured bounds
//! so each test stays fast. Each test checks the bound held and that the session, and a bystander
//! session on the same layer, go on being answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize_testing::{ModelServer, Provider, Reply, Said, Voqalize, WireFormat};

use crate::support::{driver, logs};

/// Something to repeat.
#[json_type]
struct Repeat {
    /// The piece.
    name: String,
    /// How often.
    count: u32,
}

/// The brain under attack: tools that count their runs.
struct Teller {
    model: Model,
    runs: Arc<AtomicUsize>,
}

impl Brain for Teller {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Teller {
    /// Show help.
    #[tool]
    async fn show_help(&self) -> &'static str {
        self.runs.fetch_add(1, Ordering::SeqCst);
        "shown"
    }

    /// The account balance.
    #[tool]
    #[needs_result_now]
    async fn get_balance(&self) -> &'static str {
        self.runs.fetch_add(1, Ordering::SeqCst);
        "12.50"
    }

    /// Repeats a piece.
    #[tool]
    async fn repeat(&self, args: Repeat) -> String {
        self.runs.fetch_add(1, Ordering::SeqCst);
        args.name.repeat(args.count as usize)
    }
}

type Settings = Arc<dyn Fn(Model) -> Model + Send + Sync>;

/// One stand-in provider and one layer shared by every session of the test.
struct Rig {
    server: ModelServer,
    layer: ModelLayer,
    settings: Settings,
    runs: Arc<AtomicUsize>,
}

impl Rig {
    async fn new(
        provider: Provider,
        settings: impl Fn(Model) -> Model + Send + Sync + 'static,
    ) -> Rig {
        logs(); // before anything is logged: tests read the log
        let server = ModelServer::start(provider).await.expect("a loopback port");
        let base = server.base_url();
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(5),
            gap: Duration::from_secs(5),
        };
        let model = match provider {
            Provider::Gemini => "bounds-gemini",
            Provider::OpenAi => "bounds-openai",
            Provider::Chat => "bounds-chat",
            _ => "bounds-other",
        };
        let layer: ModelLayer = crate::support::layer(provider, &base, model, timeouts);
        Rig {
            server,
            layer,
            settings: Arc::new(settings),
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A started session of the brain on the shared layer.
    async fn session(&self) -> Voqalize {
        let (layer, settings, runs) =
            (self.layer.clone(), self.settings.clone(), self.runs.clone());
        let mut v = driver(move || Teller {
            model: settings(Model::new(layer.clone())),
            runs: runs.clone(),
        })
        .await;
        v.start_silent().await.unwrap();
        v
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// The session `v` is answered, as is a new session on the same layer.
    async fn both_answered(&self, v: &mut Voqalize) {
        self.server.reply(Reply::new().text("Still here.").finish());
        assert_eq!(v.user_says("hello?").await.unwrap().text(), "Still here.");
        let mut bystander = self.session().await;
        self.server.reply(Reply::new().text("Hi there.").finish());
        assert_eq!(
            bystander.user_says("hi").await.unwrap().text(),
            "Hi there.",
            "a bystander on the same layer is answered"
        );
    }
}

/// The user says `text` on a turn that may speak nothing: waits for its `hops` model steps, then
/// for the session to go quiet, and finalizes what it spoke.
async fn silent_turn(v: &mut Voqalize, text: &str, hops: usize) -> u64 {
    let turn = v.send_user_message(text).await.unwrap();
    let stepped = v
        .wait_for(Duration::from_secs(5), |v| {
            v.turn_steps()
                .iter()
                .filter(|s| s.turn_id == turn && s.kind == "model")
                .count()
                >= hops
        })
        .await
        .unwrap();
    assert!(stepped, "turn {turn} reported {hops} model steps");
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

fn tool_steps(v: &Voqalize, turn: u64) -> usize {
    v.turn_steps()
        .iter()
        .filter(|s| s.turn_id == turn && s.kind == "tool")
        .count()
}

/// A chat completions SSE chunk with this delta.
fn chat_chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// The end of a chat stream whose response called tools.
fn chat_end() -> String {
    format!(
        "{}data: [DONE]\n\n",
        chat_chunk(json!({}), json!("tool_calls"))
    )
}

/// The chat `messages` of request `i`.
fn messages(server: &ModelServer, i: usize) -> Vec<Value> {
    server.requests()[i].body["messages"]
        .as_array()
        .expect("messages")
        .clone()
}

/// The tool results request `i` carries, parsed.
fn chat_results(server: &ModelServer, i: usize) -> Vec<Value> {
    messages(server, i)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect()
}

/// The one log line holding `needle`, checked to be a whole line: short, escaped, alone.
fn one_clean_line(needle: &str) -> String {
    let lines = logs().lines_with(needle);
    assert_eq!(lines.len(), 1, "one line holds {needle:?}: {lines:?}");
    let line = lines[0].clone();
    assert!(line.len() < 8 * 1024, "a {}-byte log line", line.len());
    assert!(
        !line.contains('\u{1b}'),
        "a raw ESC reached the log: {line}"
    );
    line
}

/// A call's arguments streamed as 200 fragments of a kilobyte: the call does not run, it is
/// answered with an error the model reads, and its arguments are not kept.
#[tokio::test]
async fn a_call_over_max_argument_bytes_does_not_run_and_keeps_no_arguments() {
    let rig = Rig::new(Provider::Chat, |m| m.max_argument_bytes(1000)).await;
    let fragment = |first: bool, arguments: &str| {
        let mut call = json!({"index": 0, "function": {"arguments": arguments}});
        if first {
            call["id"] = json!("call_1");
            call["function"]["name"] = json!("repeat");
        }
        chat_chunk(json!({"tool_calls": [call]}), Value::Null)
    };
    let mut reply = Reply::new()
        .text("Repeating. ")
        .raw(&fragment(true, "{\"name\": \""));
    let kilobyte = "x".repeat(1000);
    for _ in 0..200 {
        reply = reply.raw(&fragment(false, &kilobyte));
    }
    rig.server.reply(
        reply
            .raw(&fragment(false, "\", \"count\": 1}"))
            .raw(&chat_end()),
    );
    let mut v = rig.session().await;
    let turn = silent_turn(&mut v, "repeat it", 1).await;
    assert_eq!(rig.runs(), 0, "the tool did not run");
    assert_eq!(
        tool_steps(&v, turn),
        0,
        "no tool step for a call that did not run"
    );
    assert_eq!(
        v.turn(turn).unit_texts(),
        ["Repeating. "],
        "what was said stays"
    );
    rig.both_answered(&mut v).await;
    let history = messages(&rig.server, 1);
    let call = &history[1]["tool_calls"][0]["function"];
    assert_eq!(call["arguments"], "{}", "{history:?}");
    let results = chat_results(&rig.server, 1);
    let error = results[0]["error"].as_str().unwrap();
    assert!(error.contains("over 1000 bytes"), "{error}");
}

/// One event holding ten thousand calls: four run, the fifth is answered with an error, nothing
/// after it is read, and only the four that ran report a `tool` step.
#[tokio::test]
async fn ten_thousand_calls_in_one_response_stop_at_max_calls_per_response() {
    let rig = Rig::new(Provider::Gemini, |m| m.max_calls_per_response(4)).await;
    let parts: Vec<Value> = (0..10_000)
        .map(|i| json!({"functionCall": {"id": format!("c{i}"), "name": "show_help"}}))
        .collect();
    let event = json!({"candidates": [{"content": {"parts": parts, "role": "model"},
        "finishReason": "STOP", "index": 0}]});
    rig.server
        .reply(Reply::new().raw(&format!("data: {event}\r\n\r\n")));
    let mut v = rig.session().await;
    let turn = silent_turn(&mut v, "help", 1).await;
    assert_eq!(rig.runs(), 4);
    assert_eq!(tool_steps(&v, turn), 4);
    rig.both_answered(&mut v).await;
    let contents = rig.server.requests()[1].body["contents"].clone();
    let calls = contents[1]["parts"].as_array().unwrap();
    let answers = contents[2]["parts"].as_array().unwrap();
    assert_eq!(
        (calls.len(), answers.len()),
        (5, 5),
        "every call kept has one answer"
    );
    let last = &answers[4]["functionResponse"];
    assert_eq!(last["id"], "c4");
    let error = last["response"]["error"].as_str().unwrap();
    assert!(error.contains("more than 4 function calls"), "{error}");
}

/// A needs-result-now tool called three times per response, on every hop: the turn runs five
/// tools in all, refuses the sixth, and asks once more with tools off so the model speaks.
#[tokio::test]
async fn tool_runs_are_bounded_across_the_hops_of_a_turn() {
    let rig = Rig::new(Provider::OpenAi, |m| m.max_tool_runs(5)).await;
    for _ in 0..7 {
        let mut reply = Reply::new();
        for _ in 0..3 {
            reply = reply.call("get_balance", json!({}));
        }
        rig.server.reply(reply.finish());
    }
    let mut v = rig.session().await;
    let turn = silent_turn(&mut v, "balance?", 3).await;
    assert_eq!(rig.runs(), 5, "five tools ran over the turn's hops");
    assert_eq!(tool_steps(&v, turn), 5);
    let requests = rig.server.requests();
    assert_eq!(requests.len(), 3, "two hops, then the last request");
    assert_eq!(requests[2].body["tool_choice"], "none");
    let outputs: Vec<String> = requests[2].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        outputs.len(),
        6,
        "every call kept has one answer: {outputs:?}"
    );
    assert!(outputs[5].contains("already ran 5 tools"), "{outputs:?}");
}

/// Ten thousand one-letter deltas, a megabyte on the wire, against a 32 KiB bound: the response
/// is cut, what was said stays spoken and closed, and the turn logs one warning.
#[tokio::test]
async fn a_response_over_max_response_bytes_is_cut_and_what_was_said_stays() {
    let rig = Rig::new(Provider::Chat, |m| m.max_response_bytes(32 * 1024)).await;
    let deltas: String = (0..10_000)
        .map(|_| chat_chunk(json!({"content": "a"}), Value::Null))
        .collect();
    rig.server.reply(
        Reply::new()
            .text("Hello there. ")
            .raw(&deltas)
            .raw(&chat_end()),
    );
    let mut v = rig.session().await;
    let turn = v.user_says("talk").await.unwrap();
    let said = turn.text();
    assert!(said.starts_with("Hello there. a"), "{said}");
    assert!(
        said.len() < 1000,
        "{} bytes said past the bound",
        said.len()
    );
    assert!(turn.completed(), "its unit ended");
    rig.both_answered(&mut v).await;
    let kept = messages(&rig.server, 1)[1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(kept, said, "the history holds what was said");
    assert!(
        !logs()
            .lines_with("passed max_response_bytes (32768 bytes)")
            .is_empty()
    );
}

/// Three hundred one-letter deltas are one text part in the follow-up request (sent before any
/// Finalize could rewrite the turn); a part carrying a signature stays a part of its own.
#[tokio::test]
async fn consecutive_text_deltas_are_one_history_part() {
    let rig = Rig::new(Provider::Gemini, |m| m).await;
    let mut reply = Reply::new();
    for _ in 0..300 {
        reply = reply.text("a");
    }
    let signed = json!({"candidates": [{"content": {"parts": [
        {"text": " Signed.", "thoughtSignature": "c2ln"}], "role": "model"}, "index": 0}]});
    rig.server.reply(
        reply
            .raw(&format!("data: {signed}\r\n\r\n"))
            .call("get_balance", json!({}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("It is 12.50.").finish());
    let mut v = rig.session().await;
    v.user_says("go").await.unwrap();
    rig.both_answered(&mut v).await;
    let contents = rig.server.requests()[1].body["contents"].clone();
    assert_eq!(
        contents[1]["parts"],
        json!([{"text": "a".repeat(300)}, {"text": " Signed.", "thoughtSignature": "c2ln"},
               {"functionCall": {"id": "call_1", "name": "get_balance", "args": {}}}])
    );
}

/// A stream that sends a keep-alive every 20 ms and never its end holds the turn only until its
/// deadline: the stream is dropped, the fallback line is spoken when nothing was said, and a
/// bystander is answered meanwhile.
#[tokio::test]
async fn keep_alives_forever_end_at_the_turn_deadline() {
    let rig = Rig::new(Provider::Chat, |m| {
        m.turn_deadline(Duration::from_millis(500))
            .fallback_line("Sorry, say that again?")
    })
    .await;
    rig.server
        .reply(Reply::new().keep_alive(Duration::from_millis(20)));
    let mut v = rig.session().await;
    let turn = v.send_user_message("hello").await.unwrap();
    let requested = v
        .run_until(Duration::from_secs(5), rig.server.wait_requests(1))
        .await
        .unwrap();
    assert_eq!(requested, Some(true));
    let mut bystander = rig.session().await;
    rig.server.reply(Reply::new().text("Hi there.").finish());
    assert_eq!(bystander.user_says("hi").await.unwrap().text(), "Hi there.");
    let ended = v
        .wait_for(Duration::from_secs(5), |v| v.turn(turn).completed())
        .await
        .unwrap();
    assert!(ended, "the turn ended at its deadline");
    assert_eq!(v.turn(turn).text(), "Sorry, say that again?");
    // A turn that had spoken keeps its words and says no fallback.
    rig.server.reply(
        Reply::new()
            .text("One moment.")
            .keep_alive(Duration::from_millis(20)),
    );
    assert_eq!(v.user_says("and?").await.unwrap().text(), "One moment.");
    rig.both_answered(&mut v).await;
}

/// Eight exchanges of a kilobyte each against a 4 KiB history: the request carries the newest
/// whole exchanges only, from a user turn on.
#[tokio::test]
async fn the_history_is_bounded_in_bytes() {
    let rig = Rig::new(Provider::Chat, |m| m.max_history_bytes(4096)).await;
    let mut v = rig.session().await;
    let kilobyte = "k".repeat(1000);
    for i in 0..8 {
        rig.server.reply(Reply::new().text(&kilobyte).finish());
        v.user_says(&format!("question {i}")).await.unwrap();
    }
    rig.server.reply(Reply::new().text("Done.").finish());
    v.user_says("last").await.unwrap();
    let history = messages(&rig.server, 8);
    let bytes: usize = history.iter().map(|m| m.to_string().len()).sum();
    assert!(bytes < 5000, "{bytes} bytes of history");
    assert_eq!(history[0]["role"], "user");
    assert_eq!(history.last().unwrap()["content"], "last");
}

/// A provider's 3 MB error message, with a newline and an ESC in it, in a stream event and in an
/// HTTP error body: one short, escaped log line each, and the session goes on.
#[tokio::test]
async fn a_provider_error_message_is_one_short_escaped_log_line() {
    let rig = Rig::new(Provider::Gemini, |m| m.max_response_bytes(8 * 1024 * 1024)).await;
    let message = |tag: &str| {
        format!(
            "{tag} overloaded\n2026-01-01T00:00:00Z ERROR FORGED-{tag} \u{1b}[2J{}",
            "x".repeat(3_000_000)
        )
    };
    let event = json!({"error": {"code": 500, "message": message("stream-3mb")}});
    rig.server
        .reply(Reply::new().raw(&format!("data: {event}\r\n\r\n")));
    let mut v = rig.session().await;
    silent_turn(&mut v, "hello", 1).await;
    let line = one_clean_line("stream-3mb overloaded");
    assert!(
        line.contains("request failed") && line.contains("\\n2026"),
        "{line}"
    );
    assert!(
        logs().lines_with("FORGED-stream-3mb").len() == 1,
        "no forged line"
    );
    // A session logs its first failed request, then counts them: the HTTP error on a second one.
    let body = json!({"error": {"code": 400, "message": message("status-3mb")}});
    rig.server.reply(Reply::status(400, body));
    let mut w = rig.session().await;
    silent_turn(&mut w, "again", 1).await;
    one_clean_line("status-3mb overloaded");
    assert!(
        logs().lines_with("FORGED-status-3mb").len() == 1,
        "no forged line"
    );
    rig.both_answered(&mut v).await;
}

/// A tool name holding a newline and an ESC: the warning about it is one escaped line.
#[tokio::test]
async fn a_tool_name_with_a_newline_and_esc_cannot_forge_a_log_line() {
    let rig = Rig::new(Provider::Chat, |m| m).await;
    let name = "nope\n2026-01-01T00:00:00Z ERROR FORGED-by-name \u{1b}[2J";
    rig.server
        .reply(Reply::new().call(name, json!({})).finish());
    let mut v = rig.session().await;
    silent_turn(&mut v, "go", 1).await;
    let line = one_clean_line("FORGED-by-name");
    assert!(line.contains("tool nope\\n2026"), "{line}");
    rig.both_answered(&mut v).await;
}

/// A call to a name no tool can have (a space, a newline, an ESC, 100 bytes long): the history
/// replays it under a name every provider accepts, so the next request is not refused for it.
#[tokio::test]
async fn a_call_name_the_model_invented_is_replayed_as_a_name_providers_accept() {
    let rig = Rig::new(Provider::Chat, |m| m).await;
    let name = format!("get weather\n\u{1b}[2J{}", "x".repeat(100));
    rig.server
        .reply(Reply::new().call(&name, json!({})).finish());
    let mut v = rig.session().await;
    silent_turn(&mut v, "go", 1).await;
    rig.both_answered(&mut v).await;
    let replayed: Vec<String> = messages(&rig.server, 1)
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    let kept = &replayed[0];
    assert!(
        kept.len() <= 64
            && kept.starts_with("get_weather___2J")
            && kept
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')),
        "{kept}"
    );
}

/// Arguments whose wrong value is 50 KB: the error the model reads and the warning both name it
/// cut, never whole.
#[tokio::test]
async fn an_argument_error_never_repeats_the_whole_value() {
    let rig = Rig::new(Provider::Chat, |m| m).await;
    let value = format!("big-value-{}", "v".repeat(50_000));
    rig.server.reply(
        Reply::new()
            .call("repeat", json!({"name": "ab", "count": value}))
            .finish(),
    );
    let mut v = rig.session().await;
    silent_turn(&mut v, "go", 1).await;
    assert_eq!(rig.runs(), 0);
    rig.both_answered(&mut v).await;
    let error = chat_results(&rig.server, 1)[0]["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains("count") && error.contains("big-value-"),
        "{error}"
    );
    assert!(error.len() < 1000, "the model reads {} bytes", error.len());
    one_clean_line("big-value-");
}

// ---- Hostile review: a caller and a model cannot multiply what one call costs ----

/// A chat layer on `server` whose model name tags this test's log lines.
fn tagged_layer(server: &ModelServer, model: &str) -> ModelLayer {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(5),
    };
    Chat::builder(server.base_url(), model)
        .timeouts(timeouts)
        .build()
        .expect("a valid layer")
        .into()
}

/// A started session of [`Teller`] on `layer`.
async fn teller(layer: ModelLayer) -> Voqalize {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut v = driver(move || Teller {
        model: Model::new(layer.clone()),
        runs: runs.clone(),
    })
    .await;
    v.start_silent().await.unwrap();
    v
}

/// Has the user say `n` things, one turn after another, each turn waited for until it reported
/// `hops` model steps.
async fn many_turns(v: &mut Voqalize, n: usize, hops: usize) {
    for i in 0..n {
        v.send_user_message(&format!("question {i}")).await.unwrap();
        let stepped = v
            .wait_for(Duration::from_secs(5), |v| {
                v.turn_steps().iter().filter(|s| s.kind == "model").count() >= (i + 1) * hops
            })
            .await
            .unwrap();
        assert!(stepped, "turn {i} asked the model");
    }
}

/// Log lines holding every one of `needles`.
fn lines_with_all(needles: &[&str]) -> Vec<String> {
    logs()
        .lines_with(needles[0])
        .into_iter()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .collect()
}

// A UserMessage is 30 bytes, and a turn does not wait for the one before it: a caller that sends
// 64 at once makes one call hold 64 provider requests (and as many HTTP connections, request
// bodies carrying the whole history, and turn deadlines) at the same time. With a 900 KB message
// in the history that is 900 KB of request body per 30-byte frame. One call may not fan out so.
#[tokio::test]
async fn a_caller_cannot_open_a_provider_request_per_user_message_at_once() {
    logs();
    let server = ModelServer::start(Provider::Chat).await.unwrap();
    for _ in 0..64 {
        server.reply(Reply::new().hang());
    }
    let mut v = teller(tagged_layer(&server, "fanout-chat")).await;
    for i in 0..64 {
        v.send_user_message(&format!("question {i}")).await.unwrap();
    }
    // At most 8 at once (a few turns of one call in flight is plenty).
    let flooded = v
        .run_until(Duration::from_millis(1500), server.wait_requests(9))
        .await
        .unwrap();
    assert_ne!(
        flooded,
        Some(true),
        "one call holds {} provider requests at once",
        server.requests().len()
    );
}

// A provider that refuses every request (HTTP 400) writes one `request failed` error per turn,
// not summed up as cut responses and failed tools are: 40 turns, 40 lines.
#[tokio::test]
async fn a_provider_failing_every_turn_is_logged_once_then_counted() {
    logs();
    let server = ModelServer::start(Provider::Chat).await.unwrap();
    for _ in 0..40 {
        server.reply(Reply::status(
            400,
            json!({"error": {"message": "no such model"}}),
        ));
    }
    let mut v = teller(tagged_layer(&server, "failing-chat")).await;
    many_turns(&mut v, 40, 1).await;
    let lines = lines_with_all(&["model=failing-chat", "request failed"]);
    assert!(
        lines.len() <= 5,
        "{} `request failed` lines for one call",
        lines.len()
    );
}

// A model that writes a call as text on every request gets two warnings per turn (the retry,
// then giving up), never summed up: 30 turns, 60 lines.
#[tokio::test]
async fn a_model_writing_calls_as_text_every_turn_is_logged_once_then_counted() {
    logs();
    let server = ModelServer::start(Provider::Chat).await.unwrap();
    for _ in 0..60 {
        server.reply(Reply::new().text("functions.show_help({})").finish());
    }
    let mut v = teller(tagged_layer(&server, "astext-chat")).await;
    many_turns(&mut v, 30, 2).await;
    let lines = lines_with_all(&["model=astext-chat", "function call as text"]);
    assert!(
        lines.len() <= 5,
        "{} lines about calls written as text for one call",
        lines.len()
    );
}

// Every user message writes its `turn:` line: a caller that sends 150 short messages makes one
// call write 150 log lines (and 10,000 messages, 10,000 lines). No call may write more than 100.
#[tokio::test]
async fn user_messages_at_line_rate_do_not_write_a_log_line_each() {
    logs();
    let server = ModelServer::start(Provider::Chat).await.unwrap();
    for _ in 0..150 {
        server.reply(Reply::new().text("ok").finish());
    }
    let mut v = teller(tagged_layer(&server, "chatty-chat")).await;
    many_turns(&mut v, 150, 1).await;
    let lines = lines_with_all(&["model=chatty-chat"]);
    assert!(lines.len() <= 100, "{} log lines for one call", lines.len());
}

/// A brain whose one tool takes a little longer than the 20 ms tool budget.
struct Sluggish {
    model: Model,
}

impl Brain for Sluggish {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Sluggish {
    /// Look the order up (a database call).
    #[tool]
    async fn sluggish_lookup(&self) -> &'static str {
        tokio::time::sleep(Duration::from_millis(25)).await;
        "found"
    }
}

// The tool-budget warning is written for every call: a model that calls a 25 ms tool sixteen
// times a reply writes sixteen lines a turn, for as many turns as the caller asks.
#[tokio::test]
async fn a_slow_tool_called_sixteen_times_a_reply_is_warned_once_then_counted() {
    logs();
    let server = ModelServer::start(Provider::Chat).await.unwrap();
    let mut reply = Reply::new();
    for _ in 0..16 {
        reply = reply.call("sluggish_lookup", json!({}));
    }
    server.reply(reply.finish());
    server.reply(Reply::new().text("Found it.").finish());
    let layer = tagged_layer(&server, "sluggish-chat");
    let mut v = driver(move || Sluggish {
        model: Model::new(layer.clone()),
    })
    .await;
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "where is my order", 1).await;
    let lines = lines_with_all(&["tool Sluggish::sluggish_lookup took"]);
    assert!(
        lines.len() <= 2,
        "{} tool-budget warnings for one reply",
        lines.len()
    );
}

// ---- Hostile review: the history's byte bound counts what a part costs in memory ----

// A Gemini part the core does not know (`{"a":0}`, 8 bytes on the wire) is kept for replay as its
// own part: a JSON map, counted as 15 bytes, costing about a hundred times its wire size in
// memory. One 1 MB response of them held 75 MB of history a session in the release brain, and the
// history's 1 MiB bound never saw it (60,000 of them count as 900 KB). Here 40,000 such parts
// must not all reach the next turn's request.
#[tokio::test]
async fn tiny_unknown_parts_do_not_slip_past_the_history_bound() {
    let rig = Rig::new(Provider::Gemini, |m| m).await;
    let mut parts = vec![json!({"text": "Hi."})];
    parts.extend((0..40_000).map(|_| json!({"a": 0})));
    let event = json!({"candidates": [{"content": {"parts": parts, "role": "model"},
        "finishReason": "STOP", "index": 0}]});
    rig.server
        .reply(Reply::new().raw(&format!("data: {event}\r\n\r\n")));
    rig.server.reply(Reply::new().text("Still here.").finish());
    let mut v = rig.session().await;
    assert_eq!(v.user_says("hello").await.unwrap().text(), "Hi.");
    assert_eq!(v.user_says("and?").await.unwrap().text(), "Still here.");
    let contents = rig.server.requests()[1].body["contents"].clone();
    let replayed: usize = contents
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["parts"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(
        replayed <= 1000,
        "the next request replays {replayed} parts of history"
    );
}

// OpenAI reasoning items are kept for replay as they came, one part each (a JSON map of their
// own): a thousand tiny ones in one response must not all be kept and replayed.
#[tokio::test]
async fn tiny_reasoning_items_stop_at_max_parts_per_response() {
    let rig = Rig::new(Provider::OpenAi, |m| m).await;
    let event = |data: Value| format!("event: {0}\ndata: {data}\n\n", data["type"]);
    let mut body = event(json!({"type": "response.output_text.delta", "delta": "Hi."}));
    for i in 0..1000 {
        body += &event(json!({"type": "response.output_item.done", "item": {
            "type": "reasoning", "id": format!("rs_{i}"), "summary": [],
            "encrypted_content": "e"}}));
    }
    body += &event(json!({"type": "response.output_text.delta", "delta": " More."}));
    body += &event(json!({"type": "response.completed",
        "response": {"id": "resp_1", "status": "completed", "output": []}}));
    rig.server.reply(Reply::new().raw(&body));
    let mut v = rig.session().await;
    assert_eq!(v.user_says("hello").await.unwrap().text(), "Hi.");
    rig.both_answered(&mut v).await;
    let input = rig.server.requests()[1].body["input"]
        .as_array()
        .unwrap()
        .len();
    assert!(input <= 200, "the next request replays {input} items");
    let warned = lines_with_all(&["model=bounds-openai", "max_parts_per_response (128)"]);
    assert!(!warned.is_empty(), "the turn's one warning names the bound");
}

// One Gemini part the core does not know, holding twenty thousand tiny objects: 160 KB on the
// wire, some 9 MB held. What one response keeps is bounded in bytes as the history counts them,
// so the part is not kept, and never replayed.
#[tokio::test]
async fn one_part_of_tiny_objects_is_bounded_by_what_a_response_may_keep() {
    let rig = Rig::new(Provider::Gemini, |m| m).await;
    let part = json!({"x": vec![json!({"a": 0}); 20_000]});
    let event = json!({"candidates": [{"content": {"parts": [{"text": "Hi."}, part],
        "role": "model"}, "finishReason": "STOP", "index": 0}]});
    rig.server
        .reply(Reply::new().raw(&format!("data: {event}\r\n\r\n")));
    let mut v = rig.session().await;
    assert_eq!(v.user_says("hello").await.unwrap().text(), "Hi.");
    rig.both_answered(&mut v).await;
    let request = rig.server.requests()[1].body.to_string();
    assert!(
        request.len() < 10_000,
        "the next request is {} bytes",
        request.len()
    );
}

/// Ten thousand calls in one response from the newer layers (Anthropic `tool_use` blocks,
/// Interactions `function_call` steps, each streamed in fragments): four run, the fifth is
/// refused, nothing after it is read, and every call kept has one answer.
#[tokio::test]
async fn the_newer_layers_stop_ten_thousand_calls_at_max_calls_per_response() {
    for provider in [Provider::Anthropic, Provider::Interactions] {
        let rig = Rig::new(provider, |m| m.max_calls_per_response(4)).await;
        let mut reply = Reply::new();
        for _ in 0..10_000 {
            reply = reply.call("show_help", json!({}));
        }
        rig.server.reply(reply.finish());
        let mut v = rig.session().await;
        let turn = silent_turn(&mut v, "help", 1).await;
        assert_eq!(rig.runs(), 4, "{provider:?}");
        assert_eq!(tool_steps(&v, turn), 4, "{provider:?}");
        rig.both_answered(&mut v).await;
        let said = rig.server.read_back(1).expect("a second request").said;
        let calls = said
            .iter()
            .filter(|s| matches!(s, Said::Call { .. }))
            .count();
        let results: Vec<&str> = said
            .iter()
            .filter_map(|s| match s {
                Said::Result { output, .. } => Some(output.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!((calls, results.len()), (5, 5), "{provider:?}: {said:?}");
        assert!(
            results[4].contains("more than 4 function calls"),
            "{provider:?}: {results:?}"
        );
    }
}

/// A reasoning block streamed as twenty thousand 100-byte deltas (2 MB, Anthropic thinking and
/// an Interactions thought summary): the decoder never holds more than a response may keep; the
/// response is cut there, the words before it stay spoken, nothing of the reasoning is replayed.
#[tokio::test]
async fn a_reasoning_block_of_a_million_small_deltas_is_cut_not_held() {
    let piece = "x".repeat(100);
    for provider in [Provider::Anthropic, Provider::Interactions] {
        let rig = Rig::new(provider, |m| m).await;
        let mut writer = provider.writer();
        let mut body: String = writer.text("Hi.").concat();
        let event = |kind: &str, data: Value| format!("event: {kind}\ndata: {data}\n\n");
        if provider == Provider::Anthropic {
            body += &event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            );
            body += &event(
                "content_block_start",
                json!({"type": "content_block_start",
                "index": 1, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            );
            for _ in 0..20_000 {
                body += &event(
                    "content_block_delta",
                    json!({"type": "content_block_delta",
                    "index": 1, "delta": {"type": "thinking_delta", "thinking": piece}}),
                );
            }
        } else {
            body += &event("step.stop", json!({"event_type": "step.stop", "index": 0}));
            body += &event(
                "step.start",
                json!({"event_type": "step.start", "index": 1,
                "step": {"type": "thought"}}),
            );
            for _ in 0..20_000 {
                body += &event(
                    "step.delta",
                    json!({"event_type": "step.delta", "index": 1,
                    "delta": {"type": "thought_summary", "content": {"type": "text", "text": piece}}}),
                );
            }
        }
        body += &writer.text(" Never read.").concat();
        body += &writer.finish(false, None).concat();
        rig.server.reply(Reply::new().raw(&body));
        let mut v = rig.session().await;
        assert_eq!(
            v.user_says("hello").await.unwrap().text(),
            "Hi.",
            "{provider:?}"
        );
        rig.both_answered(&mut v).await;
        let request = rig.server.requests()[1].body.to_string();
        assert!(
            request.len() < 10_000 && !request.contains("xxxxxxxx"),
            "{provider:?}: the next request is {} bytes",
            request.len()
        );
    }
}

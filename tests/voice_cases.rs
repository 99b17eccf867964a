//! The voice core case by case, end to end: a `ModelBrain` on a real session socket talking to the
//! stand-in provider over real HTTP and SSE (docs/protocol.md §6 and §7). Each test proves one
//! behaviour; the doc comment names the case it covers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::testing::{ModelServer, Provider, Reply, Voqalize};
use voqalize::voice::{ModelLayer, ToolChoice};
use voqalize::wire::{Frame, Rtvi};

use crate::support::{Log, driver, logs};

/// A booking.
#[json_type]
struct Booking {
    /// The city.
    city: String,
}

/// A place.
#[json_type]
struct City {
    /// The city.
    city: String,
}

/// A time zone.
#[json_type]
struct Zone {
    /// The zone.
    tz: String,
}

/// Something to repeat.
#[json_type]
struct Repeat {
    /// The piece.
    name: String,
    /// How often.
    count: u32,
}

/// A guest.
#[json_type]
struct Guest {
    /// The guest's name.
    name: String,
    /// How many they are.
    party_size: u8,
}

/// A reservation.
#[json_type]
struct Reserve {
    /// Who comes.
    guest: Guest,
    /// Who else might.
    alt: Option<Guest>,
    /// A note.
    note: Option<String>,
}

/// How the brain answers a turn.
#[derive(Clone)]
enum Plan {
    Auto,
    With(ToolChoice),
    Line {
        line: &'static str,
        remember: bool,
        then: bool,
    },
}

struct Clerk {
    model: Model,
    log: Arc<Log>,
    release: Arc<Notify>,
    plan: Plan,
}

impl ModelBrain for Clerk {
    fn model(&self) -> &Model {
        &self.model
    }

    async fn respond(&self, turn: &mut Turn) -> BrainResult {
        match &self.plan {
            Plan::Auto => self.model.respond(self, turn).await,
            Plan::With(choice) => self.model.respond_with(self, turn, choice.clone()).await,
            Plan::Line {
                line,
                remember,
                then,
            } => {
                self.model.say_line(turn, line, *remember);
                if *then {
                    self.model.respond(self, turn).await
                } else {
                    Ok(())
                }
            }
        }
    }

    async fn on_rtvi(&self, _session: &Session, _message: Rtvi) -> BrainResult {
        self.model.append_note("(They opened the menu.)");
        Ok(())
    }
}

#[brain]
impl Clerk {
    /// Put the booking form on screen.
    #[tool]
    async fn open_booking(&self, args: Booking) -> String {
        self.log.push(format!("open_booking {}", args.city));
        "ok".into()
    }

    /// Show help.
    #[tool]
    async fn show_help(&self) -> &'static str {
        self.log.push("show_help");
        "shown"
    }

    /// The account balance.
    #[tool]
    #[needs_result_now]
    async fn get_balance(&self) -> &'static str {
        self.log.push("get_balance");
        "12.50"
    }

    /// Always fails.
    #[tool]
    async fn boom(&self) -> Result<&'static str, String> {
        self.log.push("boom");
        Err("kaput".into())
    }

    /// Always panics.
    #[tool]
    async fn crash(&self) -> &'static str {
        self.log.push("crash");
        panic!("kaput")
    }

    /// Repeats a piece.
    #[tool]
    async fn repeat(&self, args: Repeat) -> String {
        self.log
            .push(format!("repeat {} {}", args.name, args.count));
        args.name.repeat(args.count as usize)
    }

    /// Returns nothing.
    #[tool]
    async fn nothing(&self) -> Option<String> {
        self.log.push("nothing");
        None
    }

    /// The weather; Bergen waits for the back office.
    #[tool]
    async fn get_weather(&self, args: City) -> String {
        self.log.push(format!("get_weather {} started", args.city));
        if args.city == "Bergen" {
            self.release.notified().await;
        }
        self.log.push(format!("get_weather {} finished", args.city));
        format!("sunny in {}", args.city)
    }

    /// The time.
    #[tool]
    async fn get_time(&self, args: Zone) -> String {
        self.log.push(format!("get_time {}", args.tz));
        "noon".into()
    }

    /// Reserve a table.
    #[tool]
    async fn reserve(&self, args: Reserve) -> String {
        self.log.push(format!("reserve {}", args.guest.name));
        "reserved".into()
    }

    /// Waits for the back office.
    #[tool]
    async fn hang(&self) -> &'static str {
        self.log.push("hang started");
        self.release.notified().await;
        self.log.push("hang finished");
        "done"
    }
}

/// A brain without tools.
struct Plain {
    model: Model,
}

impl ModelBrain for Plain {
    fn model(&self) -> &Model {
        &self.model
    }
}

#[brain]
impl Plain {}

struct Rig {
    server: ModelServer,
    log: Arc<Log>,
    release: Arc<Notify>,
}

fn timeouts(first_byte: Duration) -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte,
        gap: Duration::from_secs(5),
    }
}

/// A layer for `provider` named `model` (unique per test, so its `turn:` line can be found).
fn layer(provider: Provider, base_url: &str, model: &str, first_byte: Duration) -> ModelLayer {
    let t = timeouts(first_byte);
    match provider {
        Provider::Gemini => Gemini::new("test-key")
            .model(model)
            .base_url(base_url)
            .timeouts(t)
            .build()
            .expect("a valid layer")
            .into(),
        Provider::OpenAi => OpenAi::new("test-key", model)
            .base_url(base_url)
            .timeouts(t)
            .build()
            .expect("a valid layer")
            .into(),
        Provider::Chat => Chat::new(base_url, model)
            .timeouts(t)
            .build()
            .expect("a valid layer")
            .into(),
    }
}

async fn rig_full(
    provider: Provider,
    plan: Plan,
    settings: impl Fn(Model) -> Model + Send + Sync + 'static,
    make: impl Fn(&str) -> ModelLayer + Send + Sync + 'static,
) -> (Rig, Voqalize) {
    let server = ModelServer::start(provider).await.expect("a loopback port");
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let base = server.base_url();
    let (l, n) = (log.clone(), release.clone());
    let v = driver(move || Clerk {
        model: settings(Model::new(make(&base)).instruction("Be brief.")),
        log: l.clone(),
        release: n.clone(),
        plan: plan.clone(),
    })
    .await;
    (
        Rig {
            server,
            log,
            release,
        },
        v,
    )
}

async fn rig_with(
    provider: Provider,
    model: &'static str,
    plan: Plan,
    settings: impl Fn(Model) -> Model + Send + Sync + 'static,
) -> (Rig, Voqalize) {
    rig_full(provider, plan, settings, move |base| {
        layer(provider, base, model, Duration::from_secs(5))
    })
    .await
}

async fn rig(provider: Provider, model: &'static str) -> (Rig, Voqalize) {
    rig_with(provider, model, Plan::Auto, |m| m).await
}

/// A Gemini SSE chunk with these parts.
fn gem_chunk(parts: Value) -> String {
    let c = json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]});
    format!("data: {c}\r\n\r\n")
}

/// A Gemini SSE chunk as given.
fn gem_raw(value: Value) -> String {
    format!("data: {value}\r\n\r\n")
}

/// A chat completions SSE chunk with this delta.
fn chat_chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// An OpenAI Responses SSE event.
fn oai_event(kind: &str, mut data: Value) -> String {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n")
}

fn oai_completed(usage: Value) -> String {
    oai_event(
        "response.completed",
        json!({"response": {"id": "resp_1", "status": "completed", "output": [], "usage": usage}}),
    )
}

/// The Gemini `contents` of request `i`, each as `role: part, part` (`Th(..)` a thought, `+sig`
/// a part carrying a signature, `C(name args)` a call, `R(name=response)` a result).
fn contents(server: &ModelServer, i: usize) -> Vec<String> {
    let body = &server.requests()[i].body;
    body["contents"]
        .as_array()
        .expect("contents")
        .iter()
        .map(|c| {
            let parts: Vec<String> = c["parts"]
                .as_array()
                .expect("parts")
                .iter()
                .map(|p| {
                    let sig = if p.get("thoughtSignature").is_some() {
                        "+sig"
                    } else {
                        ""
                    };
                    let shown = if let Some(f) = p.get("functionCall") {
                        format!(
                            "C({} {})",
                            f["name"].as_str().unwrap_or_default(),
                            f["args"]
                        )
                    } else if let Some(f) = p.get("functionResponse") {
                        format!(
                            "R({}={})",
                            f["name"].as_str().unwrap_or_default(),
                            f["response"]
                        )
                    } else if p.get("thought") == Some(&json!(true)) {
                        format!("Th({})", p["text"].as_str().unwrap_or_default())
                    } else if let Some(t) = p.get("text") {
                        format!("T({})", t.as_str().unwrap_or_default())
                    } else {
                        p.to_string()
                    };
                    format!("{shown}{sig}")
                })
                .collect();
            format!(
                "{}: {}",
                c["role"].as_str().unwrap_or_default(),
                parts.join(", ")
            )
        })
        .collect()
}

/// The OpenAI `input` of request `i`, each item as its type or role.
fn input_kinds(server: &ModelServer, i: usize) -> Vec<String> {
    server.requests()[i].body["input"]
        .as_array()
        .expect("input")
        .iter()
        .map(|i| {
            i.get("type")
                .and_then(Value::as_str)
                .filter(|t| *t != "message")
                .or_else(|| i.get("role").and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The chat `messages` of request `i`.
fn messages(server: &ModelServer, i: usize) -> Value {
    server.requests()[i].body["messages"].clone()
}

/// Waits until the log has a line with every needle; gives it.
async fn line_with(v: &mut Voqalize, needles: &[&str]) -> String {
    let find = || {
        logs()
            .lines_with(needles[0])
            .into_iter()
            .find(|l| needles.iter().all(|n| l.contains(n)))
    };
    let _ = v
        .wait_for(Duration::from_secs(5), |_| find().is_some())
        .await;
    find().unwrap_or_else(|| panic!("no log line with {needles:?}"))
}

/// Waits for `n` requests to reach the server.
async fn requests(v: &mut Voqalize, server: &ModelServer, n: usize) {
    assert!(
        v.run_until(Duration::from_secs(5), server.wait_requests(n))
            .await
            .unwrap()
            .unwrap_or(false),
        "{n} requests arrived"
    );
}

async fn events(v: &mut Voqalize, log: &Log, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    assert!(
        log.wait(v, |l| check(&l.events())).await,
        "log: {:?}",
        log.events()
    );
    log.events()
}

/// Finalizes every unit of `turn` with all of its text.
async fn finalize_all(v: &mut Voqalize, turn: u64) {
    let units: Vec<(u64, String)> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| (u.speech_id, u.text()))
        .collect();
    for (id, text) in units {
        v.finalize(id, &text).await.unwrap();
    }
}

/// The speech id of the first unit of `turn`, once it spoke a chunk.
async fn first_unit(v: &mut Voqalize, turn: u64) -> u64 {
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn && !u.chunks.is_empty()))
            .await
            .unwrap()
    );
    v.units()
        .find(|u| u.turn_id == turn)
        .map(|u| u.speech_id)
        .unwrap()
}

/// The user says `text` on a turn that may speak nothing: waits for the turn's last `model` step
/// (`hops` of them), then for the session to go quiet.
async fn silent_turn(v: &mut Voqalize, text: &str, hops: usize) -> u64 {
    let turn = v.send_user_message(text).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .turn_steps()
            .iter()
            .filter(|s| s.turn_id == turn && s.kind == "model")
            .count()
            >= hops)
            .await
            .unwrap(),
        "turn {turn} reported {hops} model steps"
    );
    v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
        .await
        .unwrap();
    finalize_all(v, turn).await;
    turn
}

fn steps_of(v: &Voqalize, turn: u64) -> Vec<(String, String)> {
    v.turn_steps()
        .iter()
        .filter(|s| s.turn_id == turn)
        .map(|s| (s.kind.clone(), s.name.clone()))
        .collect()
}

// ---- Turn shape ----

/// case 2: a reply that only calls a tool speaks nothing; the tool runs and its result is filed.
#[tokio::test]
async fn a_reply_that_only_calls_speaks_nothing_and_files_the_result() {
    logs();
    let (rig, mut v) = rig(Provider::Chat, "case-2-chat").await;
    rig.server
        .reply(Reply::new().call("show_help", json!({})).finish());
    v.start_silent().await.unwrap();
    let turn = silent_turn(&mut v, "help", 1).await;
    assert_eq!(
        v.units().filter(|u| u.turn_id == turn).count(),
        0,
        "no speech"
    );
    assert_eq!(rig.log.events(), ["show_help"]);
    let line = line_with(&mut v, &["model=case-2-chat", "hops=1"]).await;
    assert!(line.contains("calls=1 awaited=0 speechless=yes"), "{line}");
    assert!(line.contains("no usage reported"), "{line}");
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    let m = messages(&rig.server, 1);
    let roles: Vec<&str> = m
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "show_help");
    assert_eq!(m[3]["content"], "{\"result\":\"shown\"}");
    assert_eq!(m[3]["tool_call_id"], m[2]["tool_calls"][0]["id"]);
}

/// case 3 and the Decisions row "Speech before a call": text and a call in one chunk — the text is
/// on the wire while the tool still runs.
#[tokio::test]
async fn decision_speech_before_a_call_is_sent_before_the_tool_runs() {
    let (rig, mut v) = rig(Provider::Gemini, "case-3").await;
    rig.server.reply(
        Reply::new()
            .raw(&gem_chunk(json!([
                {"text": "Opening."},
                {"functionCall": {"id": "c1", "name": "hang", "args": {}}}
            ])))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("open").await.unwrap();
    events(&mut v, &rig.log, |e| e.contains(&"hang started".to_owned())).await;
    // The tool is still waiting: the words before its call must reach the session anyway.
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn && u.text() == "Opening."))
            .await
            .unwrap(),
        "the speech before the call was held back while the tool ran"
    );
    assert!(!rig.log.events().contains(&"hang finished".to_owned()));
    rig.release.notify_one();
    events(&mut v, &rig.log, |e| {
        e.contains(&"hang finished".to_owned())
    })
    .await;
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn && u.ended))
            .await
            .unwrap()
    );
}

/// case 4 with case 40/43: text, a call, more text is one unit; heard in full, the model turn
/// holds the heard text as one part, then the call, and the results follow it.
#[tokio::test]
async fn text_around_a_call_is_one_unit_and_one_model_turn_in_order() {
    let (rig, mut v) = rig(Provider::Gemini, "case-4").await;
    rig.server.reply(
        Reply::new()
            .text("A. ")
            .call("show_help", json!({}))
            .text("B.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("go").await.unwrap();
    assert_eq!(turn.unit_texts(), ["A. B."]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(go)",
            "model: T(A. B.), C(show_help {})",
            "user: R(show_help={\"result\":\"shown\"})",
            "user: T(next)"
        ]
    );
}

/// case 5 (as decided here): a Gemini finish is the stream's terminal event — what follows it is
/// neither spoken nor kept, and the turn still ends cleanly with one request.
#[tokio::test]
async fn nothing_after_a_gemini_finish_is_spoken_or_kept() {
    let (rig, mut v) = rig(Provider::Gemini, "case-5").await;
    rig.server
        .reply(Reply::new().text("One.").finish().text("Two.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("count").await.unwrap();
    assert_eq!(turn.unit_texts(), ["One."]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(rig.server.requests().len(), 2);
    assert_eq!(
        contents(&rig.server, 1),
        ["user: T(count)", "model: T(One.)", "user: T(next)"]
    );
}

/// case 7: several calls in one chunk run in order and share one results turn.
#[tokio::test]
async fn calls_in_one_chunk_run_in_order_and_share_one_results_turn() {
    let (rig, mut v) = rig(Provider::Gemini, "case-7").await;
    rig.server.reply(
        Reply::new()
            .raw(&gem_chunk(json!([
                {"functionCall": {"id": "a", "name": "open_booking", "args": {"city": "Rome"}}},
                {"functionCall": {"id": "b", "name": "show_help", "args": {}}}
            ])))
            .finish(),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "both", 1).await;
    assert_eq!(rig.log.events(), ["open_booking Rome", "show_help"]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(both)",
            "model: C(open_booking {\"city\":\"Rome\"}), C(show_help {})",
            "user: R(open_booking={\"result\":\"ok\"}), R(show_help={\"result\":\"shown\"})",
            "user: T(next)"
        ]
    );
}

/// case 8 and the Decisions row "Usage": Gemini reports running totals, the last one wins.
#[tokio::test]
async fn decision_usage_the_last_report_of_a_request_wins() {
    let (rig, mut v) = rig(Provider::Gemini, "case-8").await;
    rig.server.reply(
        Reply::new()
            .raw(&gem_raw(json!({
                "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}],
                "usageMetadata": {"promptTokenCount": 10}
            })))
            .raw(&gem_raw(json!({
                "candidates": [{"content": {"parts": [{"text": " there."}], "role": "model"},
                    "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}
            }))),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("hi").await.unwrap();
    assert_eq!(turn.text(), "Hi there.");
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.kind == "model")
        .cloned()
        .unwrap();
    assert_eq!(step.counts.get("input_tokens"), Some(&10));
    assert_eq!(step.counts.get("output_tokens"), Some(&5));
}

/// case 9 and the Decisions row "Usage": a marked tool makes a second request; the turn line sums
/// the usage of both requests and each request reports its own model step.
#[tokio::test]
async fn decision_usage_is_summed_over_the_requests_of_a_turn() {
    logs();
    let (rig, mut v) = rig(Provider::OpenAi, "case-9").await;
    rig.server.reply(
        Reply::new()
            .text("Let me check.")
            .call("get_balance", json!({}))
            .finish()
            .usage(10, 3),
    );
    rig.server
        .reply(Reply::new().text("It is 12.50.").finish().usage(20, 4));
    v.start_silent().await.unwrap();
    let turn = v.user_says("balance?").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Let me check.", "It is 12.50."]);
    let line = line_with(&mut v, &["model=case-9", "hops="]).await;
    assert!(line.contains("hops=2 calls=1 awaited=1"), "{line}");
    assert!(line.contains("prompt=30 cached=0 output=7"), "{line}");
    let models: Vec<(Option<u64>, Option<u64>)> = v
        .turn_steps()
        .iter()
        .filter(|s| s.kind == "model" && s.turn_id == turn.turn_id)
        .map(|s| {
            (
                s.counts.get("input_tokens").copied(),
                s.counts.get("output_tokens").copied(),
            )
        })
        .collect();
    assert_eq!(models, [(Some(10), Some(3)), (Some(20), Some(4))]);
}

/// case 10: a tool without `#[needs_result_now]` never makes the turn ask again.
#[tokio::test]
async fn an_unmarked_tool_makes_one_request_per_turn() {
    let (rig, mut v) = rig(Provider::OpenAi, "case-10").await;
    rig.server.reply(
        Reply::new()
            .call("show_help", json!({}))
            .call("open_booking", json!({"city": "Oslo"}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "help", 1).await;
    assert_eq!(rig.log.events(), ["show_help", "open_booking Oslo"]);
    assert_eq!(rig.server.requests().len(), 1);
}

//! The voice core case by case, end to end: a model-backed `Brain` on a real session socket talking to the
//! stand-in provider over real HTTP and SSE (docs/protocol.md §6 and §7). Each test proves one
//! behaviour; the doc comment names the case it covers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::voice::{ModelLayer, ToolChoice};
use voqalize::wire::{Frame, Rtvi};
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

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
    /// A greeting when the session starts; the model on every turn.
    Greet,
    /// A line on the first turn (then maybe the model); the model on every later turn.
    Line {
        line: &'static str,
        remember: bool,
        then: bool,
    },
    /// This line, spoken by the brain itself (`turn.say`), on the first turn; the model on every
    /// later turn.
    Say(&'static str),
}

struct Clerk {
    model: Model,
    log: Arc<Log>,
    release: Arc<Notify>,
    plan: Plan,
    turns: std::sync::atomic::AtomicUsize,
}

impl Brain for Clerk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        let first = self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        match &self.plan {
            Plan::Line { .. } | Plan::Say(_) if !first => self.model.respond(self, turn).await,
            Plan::Say(line) => {
                turn.say(line);
                Ok(())
            }
            Plan::Auto | Plan::Greet => self.model.respond(self, turn).await,
            Plan::With(choice) => self.model.respond_with(self, turn, choice.clone()).await,
            Plan::Line {
                line,
                remember,
                then,
            } => {
                if *remember {
                    self.model.say_line(turn, line);
                } else {
                    self.model.say_aside(turn, line);
                }
                if *then {
                    self.model.respond(self, turn).await
                } else {
                    Ok(())
                }
            }
        }
    }

    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(matches!(self.plan, Plan::Greet).then(|| "Hi! What can I do?".to_owned()))
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

    /// Takes longer than the tool budget.
    #[tool]
    async fn slow(&self) -> &'static str {
        // The subject of the test is a tool that takes time: nothing to await instead.
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.log.push("slow");
        "late"
    }

    /// Waits for the back office; a lookup, so a barge-in cancels it.
    #[tool(on_barge_in = cancel)]
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

impl Brain for Plain {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
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
    crate::support::layer(provider, base_url, model, timeouts(first_byte))
}

async fn rig_full(
    provider: Provider,
    plan: Plan,
    settings: impl Fn(Model) -> Model + Send + Sync + 'static,
    make: impl Fn(&str) -> ModelLayer + Send + Sync + 'static,
) -> (Rig, Voqalize) {
    logs(); // before anything is logged: tests read their `turn:` lines
    let server = ModelServer::start(provider).await.expect("a loopback port");
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let base = server.base_url();
    let (l, n) = (log.clone(), release.clone());
    let v = driver(move || Clerk {
        model: settings(Model::new(make(&base)).instruction("Be brief.")),
        log: l.clone(),
        release: n.clone(),
        plan: plan.clone(),
        turns: Default::default(),
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

/// One exchange on Gemini as a table row: the model answers the user's `says` with `reply`; the
/// turn speaks `spoken` and runs `ran` (with `barge_in`, the user talks over it once the tools
/// have started); the user hears `heard` of its first unit (all of it when `None`); then the user
/// says `then`, and that request (the second, with no retry between) reads `next` (as
/// [`contents`] shows it).
struct Exchange {
    model: &'static str,
    says: &'static str,
    reply: Reply,
    spoken: &'static [&'static str],
    ran: &'static [&'static str],
    barge_in: bool,
    heard: Option<&'static str>,
    then: &'static str,
    next: &'static [&'static str],
}

impl Exchange {
    async fn check(self) {
        let (rig, mut v) = rig(Provider::Gemini, self.model).await;
        rig.server.reply(self.reply);
        v.start_silent().await.unwrap();
        let turn = if self.spoken.is_empty() {
            silent_turn(&mut v, self.says, 1).await
        } else if self.barge_in {
            let turn = v.send_user_message(self.says).await.unwrap();
            let unit = first_unit(&mut v, turn).await;
            events(&mut v, &rig.log, |e| e.len() >= self.ran.len()).await;
            v.send(Frame::Interruption { through_turn: turn })
                .await
                .unwrap();
            v.finalize(unit, self.heard.unwrap_or_default())
                .await
                .unwrap();
            turn
        } else {
            let turn = v.send_user_message(self.says).await.unwrap();
            let unit = first_unit(&mut v, turn).await;
            assert!(
                v.wait_for(Duration::from_secs(5), |v| v
                    .units()
                    .filter(|u| u.turn_id == turn)
                    .all(|u| u.ended))
                    .await
                    .unwrap()
            );
            let text = v.units().find(|u| u.speech_id == unit).map(|u| u.text());
            v.finalize(unit, self.heard.unwrap_or(&text.unwrap_or_default()))
                .await
                .unwrap();
            turn
        };
        let spoken: Vec<String> = v
            .units()
            .filter(|u| u.turn_id == turn)
            .map(|u| u.text())
            .collect();
        assert_eq!(spoken, self.spoken, "{}: what the turn spoke", self.model);
        events(&mut v, &rig.log, |e| e.len() >= self.ran.len()).await;
        assert_eq!(
            rig.log.events(),
            self.ran,
            "{}: the tools that ran",
            self.model
        );
        rig.server.reply(Reply::new().text("OK.").finish());
        v.user_says(self.then).await.unwrap();
        assert_eq!(rig.server.requests().len(), 2, "{}: no retry", self.model);
        assert_eq!(
            contents(&rig.server, 1),
            self.next,
            "{}: the next request",
            self.model
        );
    }
}

/// Exchanges as a table: each row is a test of its own.
macro_rules! exchanges {
    ($($(#[$doc:meta])* $name:ident: $case:expr;)*) => {$(
        $(#[$doc])*
        #[tokio::test]
        async fn $name() {
            $case.check().await;
        }
    )*};
}

exchanges! {
    /// case 4 with case 40/43: text, a call, more text is one unit; heard in full, the model
    /// turn holds the heard text as one part, then the call, and the results follow it.
    text_around_a_call_is_one_unit_and_one_model_turn_in_order: Exchange {
        model: "case-4",
        says: "go",
        reply: Reply::new().text("A. ").call("show_help", json!({})).text("B.").finish(),
        spoken: &["A. B."],
        barge_in: false,
        heard: None,
        then: "next",
        ran: &["show_help"],
        next: &[
            "user: T(go)",
            "model: T(A. B.), C(show_help {})",
            "user: R(show_help={\"result\":\"shown\"})",
            "user: T(next)",
        ],
    };

    /// case 5 (as decided here): a Gemini finish is the stream's terminal event — what follows
    /// it is neither spoken nor kept, and the turn still ends cleanly with one request.
    nothing_after_a_gemini_finish_is_spoken_or_kept: Exchange {
        model: "case-5",
        says: "count",
        reply: Reply::new().text("One.").finish().text("Two.").finish(),
        spoken: &["One."],
        barge_in: false,
        heard: None,
        then: "next",
        ran: &[],
        next: &["user: T(count)", "model: T(One.)", "user: T(next)"],
    };

    /// case 7: several calls in one chunk run in order and share one results turn.
    calls_in_one_chunk_run_in_order_and_share_one_results_turn: Exchange {
        model: "case-7",
        says: "both",
        reply: Reply::new()
            .raw(&gem_chunk(json!([
                {"functionCall": {"id": "a", "name": "open_booking", "args": {"city": "Rome"}}},
                {"functionCall": {"id": "b", "name": "show_help", "args": {}}}
            ])))
            .finish(),
        spoken: &[],
        barge_in: false,
        heard: None,
        then: "next",
        ran: &["open_booking Rome", "show_help"],
        next: &[
            "user: T(both)",
            "model: C(open_booking {\"city\":\"Rome\"}), C(show_help {})",
            "user: R(open_booking={\"result\":\"ok\"}), R(show_help={\"result\":\"shown\"})",
            "user: T(next)",
        ],
    };

    /// case 35: a code fence opening followed by a real call: nothing spoken, the call runs, no
    /// retry.
    a_code_fence_before_a_real_call_is_stripped_without_retry: Exchange {
        model: "case-35",
        says: "help",
        reply: Reply::new().text("```tool_code").call("show_help", json!({})).finish(),
        spoken: &[],
        barge_in: false,
        heard: None,
        then: "next",
        ran: &["show_help"],
        next: &[
            "user: T(help)",
            "model: C(show_help {})",
            "user: R(show_help={\"result\":\"shown\"})",
            "user: T(next)",
        ],
    };

    /// case 39: heard truth cuts the text of a model turn and keeps its call and results.
    heard_truth_cuts_the_text_and_keeps_the_call_and_its_result: Exchange {
        model: "case-39",
        says: "book Paris",
        reply: Reply::new()
            .text("Opening")
            .text(" it now.")
            .call("open_booking", json!({"city": "Paris"}))
            .finish(),
        spoken: &["Opening it now."],
        barge_in: false,
        heard: Some("Opening it"),
        then: "next",
        ran: &["open_booking Paris"],
        next: &[
            "user: T(book Paris)",
            "model: T(Opening it), C(open_booking {\"city\":\"Paris\"})",
            "user: R(open_booking={\"result\":\"ok\"})",
            "user: T(next)",
        ],
    };

    /// case 42 and the Decisions row "Thoughts": nothing heard of `[thought, text, call]` leaves
    /// `[thought, call]`, the thought untouched.
    decision_thoughts_survive_heard_truth_that_removes_the_text: Exchange {
        model: "case-42",
        says: "help",
        reply: Reply::new()
            .raw(&gem_chunk(json!([
                {"text": "Weighing.", "thought": true, "thoughtSignature": "c2ln"},
                {"text": "A. "},
                {"functionCall": {"id": "c1", "name": "show_help", "args": {}}}
            ])))
            .finish(),
        spoken: &["A. "],
        barge_in: false,
        heard: Some(""),
        then: "next",
        ran: &["show_help"],
        next: &[
            "user: T(help)",
            "model: Th(Weighing.)+sig, C(show_help {})",
            "user: R(show_help={\"result\":\"shown\"})",
            "user: T(next)",
        ],
    };

    /// F11: Gemini never gets a model content with no parts or an empty text part after
    /// truncation (an empty part would show as `T()`).
    f11_gemini_gets_no_empty_model_content_after_truncation: Exchange {
        model: "f11",
        says: "Hi, what's your name?",
        reply: Reply::new().text("I am Ada.").call("show_help", json!({})).finish(),
        spoken: &["I am Ada."],
        ran: &["show_help"],
        barge_in: true,
        heard: Some(""),
        then: "Please come again?",
        next: &[
            "user: T(Hi, what's your name?)",
            "model: C(show_help {})",
            "user: R(show_help={\"result\":\"shown\"})",
            "user: T(Please come again?)",
        ],
    };

    /// F13 (same kind, Gemini) and the Decisions row "Unanswered calls": a call cut by a
    /// barge-in goes with the thought that led to it; the words before it stay.
    f13_a_cancelled_gemini_call_stays_with_its_thought_and_is_answered: Exchange {
        model: "f13-gemini",
        says: "check",
        reply: Reply::new()
            .text("Checking. ")
            .raw(&gem_chunk(json!([
                {"text": "Need the back office.", "thought": true, "thoughtSignature": "c2lnLVQ="},
                {"functionCall": {"id": "h1", "name": "hang", "args": {}}}
            ])))
            .finish(),
        spoken: &["Checking. "],
        ran: &["hang started"],
        barge_in: true,
        heard: Some("Checking. "),
        then: "never mind",
        next: &[
            "user: T(check)",
            "model: T(Checking. ), Th(Need the back office.)+sig, C(hang {})",
            "user: R(hang={\"error\":\"the user interrupted, so 'hang' was cancelled before it finished: it did not complete\"})",
            "user: T(never mind)"
        ],
    };
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
    let line = line_with(&mut v, &["model=case-2-chat", " hops=1"]).await;
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
    let line = line_with(&mut v, &["model=case-9", " hops="]).await;
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

// ---- needs_result_now, max_tool_hops, ToolChoice ----

/// case 13 and the Decisions row "`max_tool_hops = 0`": never ask again, but the first request
/// keeps its tools.
#[tokio::test]
async fn decision_max_tool_hops_zero_keeps_the_tools_of_the_first_request() {
    let (rig, mut v) = rig_with(Provider::Chat, "case-13", Plan::Auto, |m| {
        m.max_tool_hops(0)
    })
    .await;
    rig.server
        .reply(Reply::new().call("get_balance", json!({})).finish());
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "balance?", 1).await;
    assert_eq!(rig.log.events(), ["get_balance"], "the marked tool ran");
    assert_eq!(rig.server.requests().len(), 1, "never asked again");
    let body = &rig.server.requests()[0].body;
    assert_eq!(body["tool_choice"], "auto");
    assert!(
        body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "get_balance"))
    );
}

/// case 14: `respond_with(ToolChoice::None)` sends choice none on every provider; the tools stay
/// declared.
#[tokio::test]
async fn tool_choice_none_is_sent_and_tools_stay_declared() {
    for provider in [
        Provider::Gemini,
        Provider::OpenAi,
        Provider::Chat,
        Provider::Anthropic,
        Provider::Interactions,
    ] {
        let (rig, mut v) = rig_with(provider, "case-14", Plan::With(ToolChoice::None), |m| m).await;
        rig.server.reply(Reply::new().text("Sure.").finish());
        v.start_silent().await.unwrap();
        v.user_says("hi").await.unwrap();
        let body = &rig.server.requests()[0].body;
        match provider {
            Provider::Gemini => {
                assert_eq!(
                    body["toolConfig"]["functionCallingConfig"]["mode"], "NONE",
                    "{body}"
                );
                assert!(body["tools"][0]["functionDeclarations"].is_array());
            }
            Provider::OpenAi | Provider::Chat => {
                assert_eq!(body["tool_choice"], "none", "{provider:?}");
                assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
            }
            Provider::Anthropic => {
                assert_eq!(body["tool_choice"], json!({"type": "none"}), "{provider:?}");
                assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
            }
            _ => {
                assert_eq!(
                    body["generation_config"]["tool_choice"], "none",
                    "{provider:?}"
                );
                assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
            }
        }
    }
}

/// case 15: `ToolChoice::only` in each provider's form.
#[tokio::test]
async fn tool_choice_only_is_each_providers_form() {
    for provider in [
        Provider::Gemini,
        Provider::OpenAi,
        Provider::Chat,
        Provider::Anthropic,
        Provider::Interactions,
    ] {
        let (rig, mut v) = rig_with(
            provider,
            "case-15",
            Plan::With(ToolChoice::only("show_help")),
            |m| m,
        )
        .await;
        rig.server.reply(Reply::new().text("Sure.").finish());
        v.start_silent().await.unwrap();
        v.user_says("hi").await.unwrap();
        let body = &rig.server.requests()[0].body;
        match provider {
            Provider::Gemini => assert_eq!(
                body["toolConfig"]["functionCallingConfig"],
                json!({"mode": "ANY", "allowedFunctionNames": ["show_help"]})
            ),
            Provider::OpenAi => assert_eq!(
                body["tool_choice"],
                json!({"type": "function", "name": "show_help"})
            ),
            Provider::Chat => assert_eq!(
                body["tool_choice"],
                json!({"type": "function", "function": {"name": "show_help"}})
            ),
            Provider::Anthropic => assert_eq!(
                body["tool_choice"],
                json!({"type": "tool", "name": "show_help"})
            ),
            _ => assert_eq!(
                body["generation_config"]["tool_choice"],
                json!({"allowed_tools": {"mode": "any", "tools": ["show_help"]}})
            ),
        }
    }
}

/// case 16: `only(get_balance)` with `max_tool_hops = 3`: only, only, only, then none.
#[tokio::test]
async fn tool_choice_only_holds_until_the_forced_last_request() {
    logs();
    let (rig, mut v) = rig_with(
        Provider::Chat,
        "case-16",
        Plan::With(ToolChoice::only("get_balance")),
        |m| m.max_tool_hops(3),
    )
    .await;
    for _ in 0..3 {
        rig.server
            .reply(Reply::new().call("get_balance", json!({})).finish());
    }
    rig.server
        .reply(Reply::new().text("Twelve fifty.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("balance?").await.unwrap();
    assert_eq!(turn.text(), "Twelve fifty.");
    let only = json!({"type": "function", "function": {"name": "get_balance"}});
    let choices: Vec<Value> = rig
        .server
        .requests()
        .iter()
        .map(|r| r.body["tool_choice"].clone())
        .collect();
    assert_eq!(choices, [only.clone(), only.clone(), only, json!("none")]);
    let line = line_with(&mut v, &["model=case-16", " hops="]).await;
    assert!(line.contains("hops=4 calls=3 awaited=3"), "{line}");
}

/// case 17: `only(get_balance)` with `max_tool_hops = 1`: the second request is forced to speak.
#[tokio::test]
async fn tool_choice_only_with_one_hop_forces_the_second_request_to_speak() {
    logs();
    let (rig, mut v) = rig_with(
        Provider::OpenAi,
        "case-17",
        Plan::With(ToolChoice::only("get_balance")),
        |m| m.max_tool_hops(1),
    )
    .await;
    rig.server
        .reply(Reply::new().call("get_balance", json!({})).finish());
    rig.server.reply(Reply::new().text("Twelve.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("balance?").await.unwrap();
    assert_eq!(turn.text(), "Twelve.");
    let requests = rig.server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["tool_choice"], "none");
    let line = line_with(&mut v, &["model=case-17", " hops="]).await;
    assert!(line.contains("hops=2 calls=1 awaited=1"), "{line}");
    let warning = line_with(&mut v, &["model=case-17", "reached max_tool_hops=1"]).await;
    assert!(warning.contains("WARN"), "{warning}");
}

/// case 12 as decided here, and the Decisions row "A call on a request whose tools were off": the
/// call is not run and is answered with an error the model reads.
#[tokio::test]
async fn decision_a_call_on_a_request_whose_tools_were_off_is_not_run() {
    let (rig, mut v) = rig_with(
        Provider::Gemini,
        "case-12",
        Plan::With(ToolChoice::None),
        |m| m,
    )
    .await;
    rig.server.reply(
        Reply::new()
            .text("Opening.")
            .call("open_booking", json!({"city": "Oslo"}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.user_says("open it").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert!(
        rig.log.events().is_empty(),
        "nothing ran: {:?}",
        rig.log.events()
    );
    let c = contents(&rig.server, 1);
    assert_eq!(
        c[1],
        "model: T(Opening.), C(open_booking {\"city\":\"Oslo\"})"
    );
    assert!(
        c[2].starts_with("user: R(open_booking={\"error\":")
            && c[2].contains("no tool may be called"),
        "{c:?}"
    );
}

/// case 19: a brain without tools sends no tools: OpenAI's body keys are exactly the five, chat and
/// Gemini have no tools and no choice.
#[tokio::test]
async fn a_brain_without_tools_declares_none() {
    for provider in [
        Provider::Gemini,
        Provider::OpenAi,
        Provider::Chat,
        Provider::Anthropic,
        Provider::Interactions,
    ] {
        let server = ModelServer::start(provider).await.unwrap();
        let base = server.base_url();
        let mut v = driver(move || Plain {
            model: Model::new(layer(provider, &base, "case-19", Duration::from_secs(5)))
                .instruction("Be brief."),
        })
        .await;
        server.reply(Reply::new().text("Hi.").finish());
        v.start_silent().await.unwrap();
        assert_eq!(v.user_says("hi").await.unwrap().text(), "Hi.");
        let body = &server.requests()[0].body;
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        match provider {
            Provider::OpenAi => {
                let mut keys = keys;
                keys.sort_unstable();
                assert_eq!(keys, ["input", "instructions", "model", "store", "stream"]);
            }
            Provider::Gemini => {
                assert!(
                    !keys.contains(&"tools") && !keys.contains(&"toolConfig"),
                    "{keys:?}"
                );
            }
            _ => {
                assert!(
                    !keys.contains(&"tools") && !keys.contains(&"tool_choice"),
                    "{provider:?}: {keys:?}"
                );
            }
        }
    }
}

// ---- Tool errors, as Rust defines them ----

/// The result the model reads for the first tool call, in request `i` of a chat server.
fn chat_tool_result(server: &ModelServer, i: usize) -> Value {
    let m = messages(server, i);
    let tool = m
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or_else(|| panic!("a tool message: {m}"));
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap()
}

/// Runs one chat turn whose reply is `reply`, then a second turn; gives the first tool result the
/// second request carries.
async fn chat_result_of(model: &'static str, reply: Reply) -> (Rig, Voqalize, Value) {
    let (rig, mut v) = rig(Provider::Chat, model).await;
    rig.server.reply(reply);
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "go", 1).await;
    rig.server.reply(Reply::new().text("OK.").finish());
    assert_eq!(
        v.user_says("and?").await.unwrap().text(),
        "OK.",
        "the session goes on"
    );
    let result = chat_tool_result(&rig.server, 1);
    (rig, v, result)
}

/// case 20: arguments that do not fit the struct: an error result, a warning, a tool step, and the
/// turn goes on.
#[tokio::test]
async fn arguments_that_do_not_fit_are_an_error_result_the_model_reads() {
    logs();
    let (rig, v, result) = chat_result_of(
        "case-20",
        Reply::new()
            .call("open_booking", json!({"nights": "x"}))
            .finish(),
    )
    .await;
    let error = result["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"));
    assert!(error.contains("city"), "{error}");
    assert!(rig.log.events().is_empty(), "the tool did not run");
    assert_eq!(
        steps_of(&v, 2)[0],
        ("tool".to_owned(), "open_booking".to_owned())
    );
    assert!(!logs().lines_with("tool open_booking failed: ").is_empty());
}

/// case 21: a call to a tool that does not exist.
#[tokio::test]
async fn an_unknown_tool_is_an_error_result_named_in_its_step() {
    let (_rig, v, result) =
        chat_result_of("case-21", Reply::new().call("nope", json!({})).finish()).await;
    assert_eq!(result, json!({"error": "there is no tool named 'nope'"}));
    assert_eq!(steps_of(&v, 2)[0], ("tool".to_owned(), "nope".to_owned()));
}

/// case 22: a tool returning `Err` — its text is the error the model reads.
#[tokio::test]
async fn a_tool_returning_err_is_an_error_result_with_its_text() {
    let (rig, _v, result) =
        chat_result_of("case-22", Reply::new().call("boom", json!({})).finish()).await;
    assert_eq!(result, json!({"error": "kaput"}));
    assert_eq!(rig.log.events(), ["boom"]);
}

/// case 22 (a panic): a panicking tool is an error result; the session survives.
#[tokio::test]
async fn a_panicking_tool_is_an_error_result_and_the_session_goes_on() {
    let (rig, v, result) =
        chat_result_of("case-22p", Reply::new().call("crash", json!({})).finish()).await;
    let error = result["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"));
    assert!(error.contains("kaput"), "{error}");
    assert_eq!(rig.log.events(), ["crash"]);
    v.assert_clean();
}

/// case 23: arguments that are not an object, not JSON, or empty.
#[tokio::test]
async fn arguments_not_an_object_not_json_or_empty() {
    let call = |args: &str| {
        chat_chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "open_booking", "arguments": args}}]}),
            Value::Null,
        )
    };
    let end = format!(
        "{}data: [DONE]\n\n",
        chat_chunk(json!({}), json!("tool_calls"))
    );
    let (_r, _v, array) =
        chat_result_of("case-23a", Reply::new().raw(&call("[1]")).raw(&end)).await;
    let error = array["error"].as_str().unwrap_or_else(|| panic!("{array}"));
    assert!(
        error.contains("must be a JSON object") && error.contains("[1]"),
        "{error}"
    );
    let (_r, _v, garbage) =
        chat_result_of("case-23b", Reply::new().raw(&call("not json")).raw(&end)).await;
    let error = garbage["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{garbage}"));
    assert!(error.contains("not valid JSON"), "{error}");
    // An empty string is `{}`: the struct then misses its field (not a JSON error).
    let (_r, _v, empty) = chat_result_of("case-23c", Reply::new().raw(&call("")).raw(&end)).await;
    let error = empty["error"].as_str().unwrap_or_else(|| panic!("{empty}"));
    assert!(error.contains("city") && !error.contains("JSON"), "{error}");
}

/// case 24: Gemini sends integers as floats: `3.0` is 3; a number for a string is an error.
#[tokio::test]
async fn gemini_integral_floats_are_integers_and_a_wrong_type_is_an_error() {
    let (rig, mut v) = rig(Provider::Gemini, "case-24").await;
    rig.server.reply(
        Reply::new()
            .call("repeat", json!({"name": "ab", "count": 3.0}))
            .call("repeat", json!({"name": 5, "count": 1}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "repeat", 1).await;
    assert_eq!(rig.log.events(), ["repeat ab 3"]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and?").await.unwrap();
    let c = contents(&rig.server, 1);
    assert!(
        c[2].starts_with("user: R(repeat={\"result\":\"ababab\"}), R(repeat={\"error\":"),
        "{c:?}"
    );
}

/// A pace, from a fixed set of integers.
#[json_type]
struct Pace {
    /// How fast.
    #[schemars(extend("enum" = [1, 2, 3]))]
    speed: u8,
    /// More of them, any depth.
    #[serde(default)]
    #[schemars(extend("items" = {"type": "integer", "enum": [1, 2, 3]}))]
    more: Vec<u8>,
}

/// A brain with one tool whose argument is an integer enum.
struct Pacer {
    model: Model,
    log: Arc<Log>,
}

impl Brain for Pacer {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Pacer {
    /// Set the pace.
    #[tool]
    async fn set_pace(&self, args: Pace) -> &'static str {
        self.log
            .push(format!("set_pace {} {:?}", args.speed, args.more));
        "set"
    }
}

/// Issue 16 (2): Gemini takes enums only of strings. An integer enum goes out as the strings of
/// its values, so the model keeps the constraint, and the model's `"2"` reaches the tool as `2`;
/// OpenAI keeps the integers, and a string there stays the error it is.
#[tokio::test]
async fn gemini_integer_enums_are_declared_as_strings_and_read_back_as_integers() {
    for provider in [Provider::Gemini, Provider::OpenAi] {
        let server = ModelServer::start(provider).await.unwrap();
        let log = Arc::new(Log::default());
        let base = server.base_url();
        let l = log.clone();
        let mut v = driver(move || Pacer {
            model: Model::new(layer(provider, &base, "enums", Duration::from_secs(5))),
            log: l.clone(),
        })
        .await;
        server.reply(
            Reply::new()
                .call("set_pace", json!({"speed": "2", "more": ["3", "1"]}))
                .finish(),
        );
        server.reply(Reply::new().text("OK.").finish());
        v.start_silent().await.unwrap();
        silent_turn(&mut v, "faster", 1).await;
        v.user_says("and?").await.unwrap();
        let first = server.requests()[0].body.clone();
        if provider == Provider::Gemini {
            let speed =
                &first["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]["speed"];
            assert_eq!(speed["type"], "string", "{speed}");
            assert_eq!(speed["enum"], json!(["1", "2", "3"]), "{speed}");
            assert_eq!(log.events(), ["set_pace 2 [3, 1]"]);
        } else {
            let speed = &first["tools"][0]["parameters"]["properties"]["speed"];
            assert_eq!(speed["enum"], json!([1, 2, 3]), "{speed}");
            assert!(log.events().is_empty(), "{:?}", log.events());
        }
    }
}

/// How steep.
#[json_type]
#[derive(Debug)]
enum Grade {
    Down = -1,
    Flat = 0,
    Up = 1,
}

/// A climb.
#[json_type]
struct Climb {
    /// The grade.
    grade: Grade,
}

/// A brain whose tool takes a `#[json_type]` integer enum.
struct Climber {
    model: Model,
    log: Arc<Log>,
}

impl Brain for Climber {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Climber {
    /// Set the grade.
    #[tool]
    async fn set_grade(&self, args: Climb) -> &'static str {
        self.log.push(format!("set_grade {:?}", args.grade));
        "set"
    }
}

/// Issue 21 (3.9): a `#[json_type]` integer enum (`Up = 1`) reaches a tool through Gemini, which
/// declares it as strings and sends `"-1"`, read back as the variant; no serde_repr needed.
#[tokio::test]
async fn a_json_type_integer_enum_runs_through_gemini() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let log = Arc::new(Log::default());
    let base = server.base_url();
    let l = log.clone();
    let mut v = driver(move || Climber {
        model: Model::new(layer(
            Provider::Gemini,
            &base,
            "grades",
            Duration::from_secs(5),
        )),
        log: l.clone(),
    })
    .await;
    server.reply(
        Reply::new()
            .call("set_grade", json!({"grade": "-1"}))
            .finish(),
    );
    server.reply(Reply::new().text("OK.").finish());
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "downhill", 1).await;
    v.user_says("and?").await.unwrap();
    let first = server.requests()[0].body.clone();
    let grade = &first["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]["grade"];
    assert_eq!(grade["enum"], json!(["-1", "0", "1"]), "{grade}");
    assert_eq!(log.events(), ["set_grade Down"]);
}

/// Issue 16 (3): chat `content` sent as a list of typed parts (Mistral's reasoning models) speaks
/// its `text` parts, never its `thinking` ones; reasoning beside the content is never spoken; a
/// shape no server is known to send is not spoken either, and is said once in the log.
#[tokio::test]
async fn chat_content_parts_speak_text_only_and_an_unknown_shape_is_logged() {
    logs();
    let (rig, mut v) = rig(Provider::Chat, "content-parts").await;
    rig.server.reply(
        Reply::new()
            .raw(&chat_chunk(json!({"reasoning_content": "Let me think."}), Value::Null))
            .raw(&chat_chunk(
                json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}]}),
                Value::Null,
            ))
            .raw(&chat_chunk(
                json!({"content": [{"type": "text", "text": "Sure, "}]}),
                Value::Null,
            ))
            .raw(&chat_chunk(
                json!({"content": [{"type": "hologram", "text": "never said"}]}),
                Value::Null,
            ))
            .raw(&chat_chunk(json!({"content": "here it is."}), json!("stop")))
            .raw("data: [DONE]\n\n"),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("go").await.unwrap();
    assert_eq!(turn.text(), "Sure, here it is.");
    let line = line_with(&mut v, &["a delta's content has a shape"]).await;
    assert!(line.contains("hologram"), "{line}");
}

/// case 29: a tool returning nothing is `{"result": null}`.
#[tokio::test]
async fn a_tool_returning_nothing_is_a_null_result() {
    let (_rig, _v, result) =
        chat_result_of("case-29", Reply::new().call("nothing", json!({})).finish()).await;
    assert_eq!(result, json!({"result": null}));
}

// ---- Calls written as text ----

/// case 30 (OpenAI): a call written as text is never spoken, the retry carries the note, the turn
/// line counts two requests and no call.
#[tokio::test]
async fn a_call_written_as_text_on_openai_is_retried_once_and_logged() {
    logs();
    let (rig, mut v) = rig(Provider::OpenAi, "case-30").await;
    rig.server
        .reply(Reply::new().text("functions.show_help({})").finish());
    rig.server.reply(Reply::new().text("Here it is.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Here it is."]);
    assert_eq!(
        input_kinds(&rig.server, 1),
        ["user", "user"],
        "the user, then the note"
    );
    let line = line_with(&mut v, &["model=case-30", " hops="]).await;
    assert!(line.contains("hops=2 calls=0"), "{line}");
    line_with(&mut v, &["model=case-30", "asking once more"]).await;
}

/// case 31: a call written as text after speech began: the words before it are spoken and the
/// unit ends there; the retry reads them; the real call then runs.
#[tokio::test]
async fn a_call_written_as_text_mid_speech_keeps_the_words_before_it() {
    logs();
    let (rig, mut v) = rig(Provider::Gemini, "case-31").await;
    rig.server.reply(
        Reply::new()
            .text("Opening it now. ")
            .text("{\"name\": \"open_booking\"}")
            .finish(),
    );
    rig.server.reply(
        Reply::new()
            .call("open_booking", json!({"city": "Rome"}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = silent_turn(&mut v, "book Rome", 2).await;
    let texts: Vec<String> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| u.text())
        .collect();
    assert_eq!(texts, ["Opening it now. "]);
    assert_eq!(rig.log.events(), ["open_booking Rome"]);
    let retry = contents(&rig.server, 1);
    assert_eq!(retry.len(), 3, "{retry:?}");
    assert_eq!(retry[1], "model: T(Opening it now. )");
    assert!(retry[2].starts_with("user: T("), "the note: {retry:?}");
    line_with(&mut v, &["model=case-31", "after speech began"]).await;
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(
        contents(&rig.server, 2),
        [
            "user: T(book Rome)",
            "model: T(Opening it now. )",
            "model: C(open_booking {\"city\":\"Rome\"})",
            "user: R(open_booking={\"result\":\"ok\"})",
            "user: T(next)"
        ]
    );
}

/// A call written as text after speech began, then the stream breaks off before its finish: the
/// words the user heard stay in the history (the unit book is the record of what was said, even
/// after the unit closed at the leak).
#[tokio::test]
async fn words_before_a_call_written_as_text_stay_when_the_stream_then_fails() {
    logs();
    let (rig, mut v) = rig(Provider::Gemini, "leak-then-fail").await;
    rig.server.reply(
        Reply::new()
            .text("Opening it now. ")
            .text("{\"name\": \"open_booking\"}"),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("book Rome").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Opening it now. "]);
    line_with(&mut v, &["model=leak-then-fail", "request failed"]).await;
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(book Rome)",
            "model: T(Opening it now. )",
            "user: T(next)"
        ]
    );
}

/// case 32: a malformed finish with nothing, twice: two warnings, no speech, the history keeps
/// only the user.
#[tokio::test]
async fn a_malformed_finish_twice_ends_the_turn_silently() {
    logs();
    let (rig, mut v) = rig(Provider::Gemini, "case-32").await;
    rig.server.reply(Reply::new().malformed());
    rig.server.reply(Reply::new().malformed());
    v.start_silent().await.unwrap();
    let turn = silent_turn(&mut v, "go", 2).await;
    assert_eq!(v.units().filter(|u| u.turn_id == turn).count(), 0);
    let line = line_with(&mut v, &["model=case-32", " hops="]).await;
    assert!(
        line.contains("hops=2 calls=0 awaited=0 speechless=yes"),
        "{line}"
    );
    line_with(&mut v, &["model=case-32", "asking once more"]).await;
    line_with(
        &mut v,
        &["model=case-32", "again; the turn ends without it"],
    )
    .await;
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(contents(&rig.server, 2), ["user: T(go), T(next)"]);
}

/// case 33: a word that starts like a call name is held, then spoken whole.
#[tokio::test]
async fn a_held_opening_is_spoken_once_it_is_plainly_words() {
    let (rig, mut v) = rig(Provider::Chat, "case-33").await;
    rig.server
        .reply(Reply::new().text("Tool").text("s are ready.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("status").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Tools are ready."]);
    assert_eq!(rig.server.requests().len(), 1, "no retry");
}

/// case 34: a word that could begin a call is held only as long as needed.
#[tokio::test]
async fn a_possible_call_prefix_is_released_in_pieces() {
    let (rig, mut v) = rig(Provider::Chat, "case-34").await;
    rig.server
        .reply(Reply::new().text("Say default").text(" value.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("say").await.unwrap();
    assert_eq!(turn.units.len(), 1);
    assert_eq!(turn.units[0].chunks, ["Say ", "default", " value."]);
}

/// case 36: a brace that turns out to be plain JSON text (no call key) is spoken.
#[tokio::test]
async fn a_brace_without_a_call_key_is_spoken() {
    let (rig, mut v) = rig(Provider::OpenAi, "case-36").await;
    rig.server
        .reply(Reply::new().text("{").text("\"city\": \"Paris\"}").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("json").await.unwrap();
    assert_eq!(turn.text(), "{\"city\": \"Paris\"}");
    assert_eq!(rig.server.requests().len(), 1);
}

/// case 37: words then a malformed finish: the words are spoken and the turn asks once more.
#[tokio::test]
async fn words_then_a_malformed_finish_are_spoken_and_retried_once() {
    let (rig, mut v) = rig(Provider::Gemini, "case-37").await;
    rig.server.reply(Reply::new().text("Hello").malformed());
    rig.server.reply(Reply::new().text("There.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("hi").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Hello", "There."]);
    assert_eq!(rig.server.requests().len(), 2);
}

// ---- Heard truth, say_line, notes ----

/// case 43: `["A. ", call, "B."]` heard "A. B" is `["A. B", call]`.
#[tokio::test]
async fn heard_truth_across_a_call_puts_the_heard_words_first() {
    let (rig, mut v) = rig(Provider::Chat, "case-43").await;
    rig.server.reply(
        Reply::new()
            .text("A. ")
            .call("show_help", json!({}))
            .text("B.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("go").await.unwrap();
    let unit = first_unit(&mut v, turn).await;
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.units().any(|u| u.ended))
            .await
            .unwrap()
    );
    v.finalize(unit, "A. B").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let m = messages(&rig.server, 1);
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(m[2]["content"], "A. B");
    assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "show_help");
    assert_eq!(m[3]["role"], "tool");
}

/// case 45: a line not remembered is spoken but never read by the model; the model's own words
/// heard as nothing are removed.
#[tokio::test]
async fn a_line_not_remembered_is_never_read_by_the_model() {
    let (rig, mut v) = rig_with(
        Provider::Gemini,
        "case-45",
        Plan::Line {
            line: "One moment.",
            remember: false,
            then: true,
        },
        |m| m,
    )
    .await;
    rig.server.reply(Reply::new().text("Done.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("go").await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .filter(|u| u.turn_id == turn && u.ended)
            .count()
            == 2)
            .await
            .unwrap()
    );
    let units: Vec<(u64, String)> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| (u.speech_id, u.text()))
        .collect();
    assert_eq!(units[0].1, "One moment.");
    assert_eq!(units[1].1, "Done.");
    assert_eq!(
        contents(&rig.server, 0),
        ["user: T(go)"],
        "the line is not in the request"
    );
    v.finalize(units[0].0, "One moment.").await.unwrap();
    v.finalize(units[1].0, "").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(contents(&rig.server, 1), ["user: T(go), T(next)"]);
}

/// A turn the brain answers itself (`turn.say`, no model): the model's next request still reads
/// the user's words and what was heard of the reply, in order. A brain holding a `Model` writes
/// nothing to feed it.
#[tokio::test]
async fn a_turn_answered_without_the_model_is_still_in_its_history() {
    let (rig, mut v) = rig_with(
        Provider::Gemini,
        "said-itself",
        Plan::Say("One moment."),
        |m| m,
    )
    .await;
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("hold on").await.unwrap();
    let unit = first_unit(&mut v, turn).await;
    v.finalize(unit, "One moment.").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(
        contents(&rig.server, 0),
        ["user: T(hold on)", "model: T(One moment.)", "user: T(next)"]
    );
}

/// case 46: a remembered line is the model's words, cut to what was heard.
#[tokio::test]
async fn a_remembered_line_is_history_cut_to_what_was_heard() {
    let (rig, mut v) = rig_with(
        Provider::OpenAi,
        "case-46",
        Plan::Line {
            line: "Which trip?",
            remember: true,
            then: false,
        },
        |m| m,
    )
    .await;
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("my trip").await.unwrap();
    let unit = first_unit(&mut v, turn).await;
    v.finalize(unit, "Which").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("Lisbon").await.unwrap();
    let input = &rig.server.requests()[0].body["input"];
    assert_eq!(input_kinds(&rig.server, 0), ["user", "assistant", "user"]);
    assert_eq!(input[1]["content"].to_string().matches("Which").count(), 1);
    assert!(!input[1]["content"].to_string().contains("trip"), "{input}");
}

/// case 48: a note outside a turn (from an app event) is one user turn the next request reads;
/// heard truth never rewrites it.
#[tokio::test]
async fn a_note_outside_a_turn_is_read_by_the_next_request() {
    let (rig, mut v) = rig(Provider::Gemini, "case-48").await;
    rig.server.reply(Reply::new().text("Hello.").finish());
    v.start_silent().await.unwrap();
    v.user_says("hi").await.unwrap();
    v.send_ui_event("menu", json!({})).await.unwrap();
    v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
        .await
        .unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and?").await.unwrap();
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(hi)",
            "model: T(Hello.)",
            "user: T((They opened the menu.)), T(and?)"
        ]
    );
}

// ---- Barge-in and errors ----

/// case 49: a cut mid-stream keeps what was heard; the request is still reported.
#[tokio::test]
async fn a_cut_mid_stream_keeps_the_heard_words_and_reports_the_request() {
    logs();
    let (rig, mut v) = rig(Provider::OpenAi, "case-49").await;
    let (reply, gate) = Reply::new().text("First sentence. ").pause();
    rig.server.reply(reply.text("Second sentence.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("talk").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), gate.reached())
            .await
            .unwrap()
            .is_some()
    );
    let unit = first_unit(&mut v, turn).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "First sen").await.unwrap();
    gate.release();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("wait").await.unwrap();
    let input = &rig.server.requests()[1].body["input"];
    assert_eq!(input_kinds(&rig.server, 1), ["user", "assistant", "user"]);
    assert!(
        input[1]["content"].to_string().contains("\"First sen\""),
        "{input}"
    );
    assert!(
        v.turn_steps()
            .iter()
            .any(|s| s.turn_id == turn && s.kind == "model"),
        "the cut request is reported"
    );
    line_with(&mut v, &["model=case-49", " hops=1"]).await;
    assert!(
        !v.units()
            .any(|u| u.turn_id == turn && u.text().contains("Second"))
    );
}

/// case 52: a cut while the opening word is held: no unit ever opened, nothing in the history.
#[tokio::test]
async fn a_cut_while_the_opening_is_held_leaves_nothing() {
    logs();
    let (rig, mut v) = rig(Provider::Gemini, "case-52").await;
    let (reply, gate) = Reply::new().text("Tool").pause();
    rig.server.reply(reply.text("s are ready.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("status").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), gate.reached())
            .await
            .unwrap()
            .is_some()
    );
    v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        v.units().filter(|u| u.turn_id == turn).count(),
        0,
        "the opening is held"
    );
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    gate.release();
    let line = line_with(&mut v, &["model=case-52", " hops="]).await;
    assert!(line.contains("speechless=yes"), "{line}");
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("again").await.unwrap();
    assert_eq!(contents(&rig.server, 1), ["user: T(status), T(again)"]);
}

/// case 54 and the Decisions row "Stream assembly": an unparseable chunk ends the turn with a
/// logged error; what was said stays said and in the history.
#[tokio::test]
async fn decision_an_unparseable_chunk_ends_the_turn_with_a_logged_error() {
    logs();
    let (rig, mut v) = rig(Provider::Chat, "case-54").await;
    rig.server
        .reply(Reply::new().text("Hello ").raw("data: {not json\n\n"));
    v.start_silent().await.unwrap();
    let turn = v.user_says("hi").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Hello "]);
    line_with(&mut v, &["model=case-54", "request failed"]).await;
    assert!(
        v.turn_steps()
            .iter()
            .any(|s| s.turn_id == turn.turn_id && s.kind == "model")
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and?").await.unwrap();
    let m = messages(&rig.server, 1);
    assert_eq!(m[2], json!({"role": "assistant", "content": "Hello "}));
}

/// case 55: an HTTP error before any chunk: no retry for a 4xx, a model step with no output and
/// no counts, the turn line shows nothing opened or spoken.
#[tokio::test]
async fn an_http_error_before_any_chunk_is_reported_without_output() {
    logs();
    let (rig, mut v) = rig(Provider::Gemini, "case-55").await;
    rig.server.reply(Reply::status(
        401,
        json!({"error": {"code": 401, "message": "bad key", "status": "UNAUTHENTICATED"}}),
    ));
    v.start_silent().await.unwrap();
    let turn = silent_turn(&mut v, "hi", 1).await;
    assert_eq!(rig.server.requests().len(), 1, "a 4xx is not retried");
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.turn_id == turn && s.kind == "model")
        .cloned()
        .unwrap();
    assert_eq!(step.first_output_ms, None);
    assert!(step.counts.is_empty(), "{:?}", step.counts);
    let line = line_with(&mut v, &["model=case-55", " hops="]).await;
    assert!(line.contains("open=none speak=none"), "{line}");
    let error = line_with(&mut v, &["model=case-55", "request failed"]).await;
    assert!(
        error.contains("401") && error.contains("bad key"),
        "{error}"
    );
}

/// case 56: a Gemini SAFETY finish with no content is a silent turn without retry; a blocked
/// prompt too, with its usage still counted.
#[tokio::test]
async fn a_gemini_safety_stop_or_blocked_prompt_is_a_silent_turn() {
    logs();
    let (rig, mut v) = rig(Provider::Gemini, "case-56").await;
    rig.server.reply(Reply::new().raw(&gem_raw(
        json!({"candidates": [{"finishReason": "SAFETY", "index": 0}]}),
    )));
    rig.server.reply(Reply::new().raw(&gem_raw(json!({
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 7}
    }))));
    v.start_silent().await.unwrap();
    let first = silent_turn(&mut v, "bad", 1).await;
    assert_eq!(rig.server.requests().len(), 1, "no retry");
    let second = silent_turn(&mut v, "worse", 1).await;
    assert_eq!(rig.server.requests().len(), 2, "no retry");
    assert_eq!(v.units().filter(|u| u.turn_id >= first).count(), 0);
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.turn_id == second && s.kind == "model")
        .cloned()
        .unwrap();
    assert_eq!(step.counts.get("input_tokens"), Some(&7));
    assert!(
        logs().lines_with("model=case-56 provider=").is_empty(),
        "no error logged"
    );
}

/// case 57: OpenAI `response.incomplete` finishes the reply normally, with its usage.
#[tokio::test]
async fn openai_incomplete_finishes_normally_with_usage() {
    let (rig, mut v) = rig(Provider::OpenAi, "case-57").await;
    rig.server
        .reply(Reply::new().text("Cut short").raw(&oai_event(
            "response.incomplete",
            json!({"response": {"id": "resp_1", "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"}, "output": [],
                "usage": {"input_tokens": 9, "output_tokens": 2}}}),
        )));
    v.start_silent().await.unwrap();
    let turn = v.user_says("go").await.unwrap();
    assert_eq!(turn.text(), "Cut short");
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.turn_id == turn.turn_id && s.kind == "model")
        .cloned()
        .unwrap();
    assert_eq!(step.counts.get("input_tokens"), Some(&9));
    assert_eq!(step.counts.get("output_tokens"), Some(&2));
}

/// case 58: OpenAI `response.failed` and an `error` event end the turn with a logged error that
/// carries the provider's message; the session goes on. One session each: a session logs its
/// first failed request and counts the others (docs/protocol.md §6.14).
#[tokio::test]
async fn openai_failed_and_error_events_are_logged_errors() {
    logs();
    let cases = [
        (
            "case-58-failed",
            oai_event(
                "response.failed",
                json!({"response": {"id": "resp_1", "status": "failed",
                    "error": {"code": "server_error", "message": "The model broke"}}}),
            ),
            "response failed",
            "The model broke",
        ),
        (
            "case-58-error",
            oai_event(
                "error",
                json!({"code": "rate_limit_exceeded", "message": "Rate limit reached",
                    "param": null}),
            ),
            "stream error",
            "Rate limit reached",
        ),
    ];
    for (model, event, kind, message) in cases {
        let (rig, mut v) = rig(Provider::OpenAi, model).await;
        rig.server.reply(Reply::new().raw(&event));
        v.start_silent().await.unwrap();
        silent_turn(&mut v, "one", 1).await;
        let line = line_with(&mut v, &[&format!("model={model} "), kind]).await;
        assert!(line.contains(message), "{line}");
        rig.server.reply(Reply::new().text("Back.").finish());
        assert_eq!(v.user_says("two").await.unwrap().text(), "Back.");
    }
}

/// case 59: with steps off, no TurnStep is sent; the turn line is unchanged.
#[tokio::test]
async fn with_steps_off_no_turn_step_is_sent() {
    logs();
    let (rig, mut v) = rig_with(Provider::Chat, "case-59", Plan::Auto, |m| {
        m.report_steps(false)
    })
    .await;
    rig.server.reply(
        Reply::new()
            .text("Sure.")
            .call("show_help", json!({}))
            .finish()
            .usage(3, 1),
    );
    v.start_silent().await.unwrap();
    v.user_says("help").await.unwrap();
    assert!(v.turn_steps().is_empty(), "{:?}", v.turn_steps());
    let line = line_with(&mut v, &["model=case-59", " hops="]).await;
    assert!(
        line.contains("hops=1 calls=1") && line.contains("prompt=3"),
        "{line}"
    );
}

/// The Decisions row "Timeouts": no first byte in time ends the turn with a logged error and a
/// `model` step; the session goes on.
#[tokio::test]
async fn decision_timeouts_no_first_byte_ends_the_turn_and_the_session_goes_on() {
    logs();
    let (rig, mut v) = rig_full(
        Provider::Gemini,
        Plan::Auto,
        |m| m,
        |base| {
            layer(
                Provider::Gemini,
                base,
                "decision-timeouts",
                Duration::from_millis(200),
            )
        },
    )
    .await;
    let (reply, gate) = Reply::new().pause();
    rig.server.reply(reply.text("Late.").finish());
    v.start_silent().await.unwrap();
    let turn = silent_turn(&mut v, "hi", 1).await;
    gate.release();
    let error = line_with(&mut v, &["model=decision-timeouts", "request failed"]).await;
    assert!(error.contains("sent nothing within"), "{error}");
    assert!(
        v.turn_steps()
            .iter()
            .any(|s| s.turn_id == turn && s.kind == "model")
    );
    assert_eq!(v.units().filter(|u| u.turn_id == turn).count(), 0);
    rig.server.reply(Reply::new().text("Here.").finish());
    assert_eq!(v.user_says("hello?").await.unwrap().text(), "Here.");
}

/// The Decisions row "User options": options cannot override what the SDK builds; a clash is an
/// error at construction, and an allowed option reaches the body.
#[tokio::test]
async fn decision_user_options_cannot_override_the_sdks_context() {
    let url = "http://127.0.0.1:9/v1";
    assert!(
        OpenAi::builder("k", "m")
            .base_url(url)
            .option("store", json!(true))
            .build()
            .is_err()
    );
    assert!(
        OpenAi::builder("k", "m")
            .base_url(url)
            .option("stream", json!(false))
            .build()
            .is_err()
    );
    assert!(
        OpenAi::builder("k", "m")
            .base_url(url)
            .option("input", json!([]))
            .build()
            .is_err()
    );
    assert!(
        Chat::builder(url, "m")
            .option("stream", json!(false))
            .build()
            .is_err()
    );
    assert!(
        Chat::builder(url, "m")
            .option("messages", json!([]))
            .build()
            .is_err()
    );
    assert!(
        Gemini::builder("k")
            .base_url("http://127.0.0.1:9")
            .option("contents", json!([]))
            .build()
            .is_err()
    );
    let (rig, mut v) = rig_full(
        Provider::OpenAi,
        Plan::Auto,
        |m| m,
        |base| {
            OpenAi::builder("k", "decision-options")
                .base_url(base)
                .option("temperature", json!(0.25))
                .build()
                .unwrap()
                .into()
        },
    )
    .await;
    rig.server.reply(Reply::new().text("Hi.").finish());
    v.start_silent().await.unwrap();
    v.user_says("hi").await.unwrap();
    let body = &rig.server.requests()[0].body;
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["store"], false);
    assert_eq!(body["stream"], true);
}

// ---- Provider wire checks ----

/// case 60: the Gemini request: the system instruction, every declaration in one tools entry, the
/// minimal thinking level, a signature replayed verbatim, and each response matching its call's
/// id and name in a user content.
#[tokio::test]
async fn gemini_request_carries_its_context_as_the_api_wants_it() {
    let (rig, mut v) = rig(Provider::Gemini, "case-60").await;
    rig.server.reply(
        Reply::new()
            .raw(&gem_chunk(json!([
                {"text": "Opening.", "thoughtSignature": "c2lnLTI="},
                {"functionCall": {"id": "fc-7", "name": "open_booking", "args": {"city": "Oslo"}}}
            ])))
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.user_says("book").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let r = &rig.server.requests()[1];
    assert_eq!(r.target, "/v1/models/case-60:streamGenerateContent?alt=sse");
    assert_eq!(r.header("x-goog-api-key"), Some("test-key"));
    let body = &r.body;
    assert_eq!(
        body["systemInstruction"]["parts"],
        json!([{"text": "Be brief."}])
    );
    assert_eq!(body["systemInstruction"]["role"], "user");
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "one tools entry: {tools:?}");
    assert_eq!(
        tools[0]["functionDeclarations"].as_array().unwrap().len(),
        12
    );
    assert_eq!(
        body["generationConfig"]["thinkingConfig"]["thinkingLevel"]
            .as_str()
            .map(str::to_ascii_uppercase)
            .as_deref(),
        Some("MINIMAL")
    );
    let model = &body["contents"][1];
    assert_eq!(model["role"], "model");
    assert_eq!(
        model["parts"][0],
        json!({"text": "Opening.", "thoughtSignature": "c2lnLTI="})
    );
    let results = &body["contents"][2];
    assert_eq!(results["role"], "user");
    assert_eq!(results["parts"][0]["functionResponse"]["id"], "fc-7");
    assert_eq!(
        results["parts"][0]["functionResponse"]["name"],
        "open_booking"
    );
}

/// case 61: Gemini usage with cached and thought tokens, and with the prompt only.
#[tokio::test]
async fn gemini_usage_maps_cached_and_thought_tokens() {
    let (rig, mut v) = rig(Provider::Gemini, "case-61").await;
    rig.server.reply(Reply::new().raw(&gem_raw(json!({
        "candidates": [{"content": {"parts": [{"text": "Hi."}], "role": "model"},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 2,
            "thoughtsTokenCount": 7, "cachedContentTokenCount": 64}
    }))));
    rig.server.reply(Reply::new().raw(&gem_raw(json!({
        "candidates": [{"content": {"parts": [{"text": "Yo."}], "role": "model"},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 5}
    }))));
    v.start_silent().await.unwrap();
    let a = v.user_says("hi").await.unwrap().turn_id;
    let b = v.user_says("yo").await.unwrap().turn_id;
    let counts = |turn: u64| {
        v.turn_steps()
            .iter()
            .find(|s| s.turn_id == turn && s.kind == "model")
            .map(|s| s.counts.clone())
            .unwrap()
    };
    let first = counts(a);
    assert_eq!(first.get("input_tokens"), Some(&80));
    assert_eq!(first.get("cached_input_tokens"), Some(&64));
    assert_eq!(first.get("output_tokens"), Some(&2));
    assert_eq!(first.get("reasoning_tokens"), Some(&7));
    let second = counts(b);
    assert_eq!(second.get("input_tokens"), Some(&5));
    assert!(
        second.get("output_tokens").is_none_or(|o| *o == 0),
        "{second:?}"
    );
}

/// case 62: the OpenAI request: no stored state, instructions, flat tools with `strict: false`;
/// with reasoning on, its effort and the encrypted content.
#[tokio::test]
async fn openai_request_is_stateless_with_flat_tools() {
    let (rig, mut v) = rig_full(
        Provider::OpenAi,
        Plan::Auto,
        |m| m,
        |base| {
            OpenAi::builder("test-key", "case-62")
                .base_url(base)
                .reasoning("low")
                .build()
                .unwrap()
                .into()
        },
    )
    .await;
    rig.server.reply(Reply::new().text("Hi.").finish());
    v.start_silent().await.unwrap();
    v.user_says("hi").await.unwrap();
    let r = &rig.server.requests()[0];
    assert_eq!(r.target, "/v1/responses");
    assert_eq!(r.header("authorization"), Some("Bearer test-key"));
    let body = &r.body;
    assert_eq!(body["store"], false);
    assert!(body.get("previous_response_id").is_none());
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["reasoning"], json!({"effort": "low"}));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    let open = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "open_booking")
        .unwrap();
    assert_eq!(open["type"], "function");
    assert_eq!(open["strict"], false);
    assert_eq!(open["parameters"]["properties"]["city"]["type"], "string");
}

/// case 63: OpenAI input from a model turn: text, call, text become assistant, function_call,
/// assistant in order; a reasoning-only turn is not replayed.
#[tokio::test]
async fn openai_input_keeps_the_order_of_a_model_turn() {
    let (rig, mut v) = rig(Provider::OpenAi, "case-63").await;
    rig.server
        .reply(Reply::new().thought("only thinking").finish());
    rig.server.reply(
        Reply::new()
            .text("A. ")
            .call("show_help", json!({}))
            .text("B.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "think", 1).await;
    let turn = v.send_user_message("go").await.unwrap();
    // Heard in full, but as two separate finalizes would not apply: finalize the one unit.
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn && u.ended))
            .await
            .unwrap()
    );
    finalize_all(&mut v, turn).await;
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(
        input_kinds(&rig.server, 2),
        [
            "user",
            "user",
            "assistant",
            "function_call",
            "function_call_output",
            "user"
        ],
        "{}",
        rig.server.requests()[2].body["input"]
    );
}

/// case 64: OpenAI usage details: cached input, and output net of reasoning.
#[tokio::test]
async fn openai_usage_splits_reasoning_from_output() {
    logs();
    let (rig, mut v) = rig(Provider::OpenAi, "case-64").await;
    rig.server.reply(Reply::new().text("Hi.").raw(&oai_completed(json!({
        "input_tokens": 200, "input_tokens_details": {"cached_tokens": 128, "cache_write_tokens": 0},
        "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 240
    }))));
    v.start_silent().await.unwrap();
    let turn = v.user_says("hi").await.unwrap();
    let counts = v
        .turn_steps()
        .iter()
        .find(|s| s.turn_id == turn.turn_id && s.kind == "model")
        .map(|s| s.counts.clone())
        .unwrap();
    let expected: std::collections::BTreeMap<String, u64> = [
        ("input_tokens", 200),
        ("cached_input_tokens", 128),
        ("cache_write_tokens", 0),
        ("output_tokens", 28),
        ("reasoning_tokens", 12),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counts, expected);
    let line = line_with(&mut v, &["model=case-64", " hops="]).await;
    assert!(line.contains("output=28 thoughts=12"), "{line}");
}

/// case 65: chat text deltas are spoken as they come; a call without id or arguments gets
/// `call_0` and `{}`; usage comes from the final chunk with no choices; calls run after the end.
#[tokio::test]
async fn chat_stream_fills_in_a_missing_id_and_arguments() {
    let (rig, mut v) = rig(Provider::Chat, "case-65").await;
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2,
        "total_tokens": 6}});
    rig.server.reply(
        Reply::new()
            .text("One ")
            .text("two.")
            .raw(&chat_chunk(
                json!({"tool_calls": [{"index": 0, "type": "function",
                    "function": {"name": "show_help"}}]}),
                Value::Null,
            ))
            .raw(&chat_chunk(json!({}), json!("tool_calls")))
            .raw(&format!("data: {usage}\n\ndata: [DONE]\n\n")),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("go").await.unwrap();
    assert_eq!(turn.units[0].chunks, ["One ", "two."]);
    assert_eq!(rig.log.events(), ["show_help"]);
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.turn_id == turn.turn_id && s.kind == "model")
        .cloned()
        .unwrap();
    assert_eq!(step.counts.get("input_tokens"), Some(&4));
    assert_eq!(step.counts.get("output_tokens"), Some(&2));
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let m = messages(&rig.server, 1);
    assert_eq!(m[2]["tool_calls"][0]["id"], "call_0");
    assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], "{}");
    assert_eq!(m[3]["tool_call_id"], "call_0");
}

/// case 66: chat messages: text before and after a call is one assistant message with its
/// `tool_calls`; results are `role: tool`; an empty instruction sends no system message.
#[tokio::test]
async fn chat_messages_merge_text_around_a_call_and_omit_an_empty_system() {
    let (rig, mut v) = rig_with(Provider::Chat, "case-66", Plan::Auto, |m| {
        m.instruction("  ")
    })
    .await;
    rig.server.reply(
        Reply::new()
            .text("A. ")
            .call("show_help", json!({}))
            .text("B.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.user_says("go").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let m = messages(&rig.server, 1);
    let roles: Vec<&str> = m
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
    assert_eq!(m[1]["content"], "A. B.");
    assert_eq!(m[1]["tool_calls"].as_array().unwrap().len(), 1);
}

/// case 67: the provider a chat model's route names, in its steps.
#[tokio::test]
async fn chat_steps_name_the_provider_the_route_names() {
    for (model, provider) in [
        ("gemini/x", "google"),
        ("vertex_ai/x", "google"),
        ("azure/x", "microsoft"),
        ("bedrock/x", "amazon"),
        ("openai/responses/x", "openai"),
    ] {
        let (rig, mut v) = rig(Provider::Chat, model).await;
        rig.server.reply(Reply::new().text("Hi.").finish());
        v.start_silent().await.unwrap();
        let turn = v.user_says("hi").await.unwrap();
        let step = v
            .turn_steps()
            .iter()
            .find(|s| s.turn_id == turn.turn_id && s.kind == "model")
            .cloned()
            .unwrap();
        assert_eq!(step.provider, provider, "{model}");
        assert_eq!(step.name, model);
    }
}

// ---- Decisions for voqalize-rs ----

/// Every node of a JSON value, with its path.
fn walk<'a>(value: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    out.push((path.clone(), value));
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                walk(v, format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The tools each provider declared in its first request, as (name, parameters).
async fn declared(provider: Provider) -> Vec<(String, Value)> {
    let (rig, mut v) = rig(provider, "decision-schemas").await;
    rig.server.reply(Reply::new().text("Hi.").finish());
    v.start_silent().await.unwrap();
    v.user_says("hi").await.unwrap();
    let body = rig.server.requests()[0].body.clone();
    match provider {
        Provider::Gemini => body["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["name"].as_str().unwrap().to_owned(),
                    d.get("parameters").cloned().unwrap_or(Value::Null),
                )
            })
            .collect(),
        Provider::OpenAi => body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["name"].as_str().unwrap().to_owned(),
                    d["parameters"].clone(),
                )
            })
            .collect(),
        Provider::Chat => body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["function"]["name"].as_str().unwrap().to_owned(),
                    d["function"]["parameters"].clone(),
                )
            })
            .collect(),
        _ => body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let schema = if provider == Provider::Anthropic {
                    "input_schema"
                } else {
                    "parameters"
                };
                (d["name"].as_str().unwrap().to_owned(), d[schema].clone())
            })
            .collect(),
    }
}

/// Decisions row "Tool arguments": the argument struct is the parameter object on every provider,
/// and the call's arguments are flat; a tool without argument has no parameters on Gemini and an
/// empty object elsewhere.
#[tokio::test]
async fn decision_tool_arguments_are_the_flat_parameter_object_everywhere() {
    for provider in [Provider::Gemini, Provider::OpenAi, Provider::Chat] {
        let tools = declared(provider).await;
        let params = |name: &str| tools.iter().find(|(n, _)| n == name).unwrap().1.clone();
        let open = params("open_booking");
        assert_eq!(
            open["type"]
                .as_str()
                .map(str::to_ascii_lowercase)
                .as_deref(),
            Some("object"),
            "{provider:?}"
        );
        assert_eq!(
            open["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["city"],
            "{provider:?}: flat, not under a parameter name"
        );
        let help = params("show_help");
        match provider {
            Provider::Gemini => assert_eq!(help, Value::Null, "no parameters"),
            _ => {
                assert_eq!(help["type"], "object", "{provider:?}");
                assert_eq!(help["properties"], json!({}), "{provider:?}");
            }
        }
        // And a flat call runs.
        let (rig, mut v) = rig(provider, "decision-flat").await;
        rig.server.reply(
            Reply::new()
                .call("open_booking", json!({"city": "Paris"}))
                .finish(),
        );
        v.start_silent().await.unwrap();
        silent_turn(&mut v, "book", 1).await;
        assert_eq!(rig.log.events(), ["open_booking Paris"], "{provider:?}");
    }
}

/// Decisions row "Schemas": the Gemini declarations hold none of the keys Gemini rejects, at any
/// depth; nested structs are inline; `Option` is `nullable`; OpenAI and chat keep `strict: false`
/// and no `$ref`, and so does Anthropic's `input_schema`.
#[tokio::test]
async fn decision_schemas_are_rewritten_for_each_provider() {
    let gemini = declared(Provider::Gemini).await;
    let mut nodes = Vec::new();
    let all = Value::Array(gemini.iter().map(|(_, p)| p.clone()).collect());
    walk(&all, String::new(), &mut nodes);
    for (path, node) in &nodes {
        if let Some(map) = node.as_object() {
            for bad in [
                "$schema",
                "$ref",
                "$defs",
                "definitions",
                "additionalProperties",
                "const",
                "title",
                "default",
            ] {
                // `properties` maps field names to schemas: a field may be called anything.
                if !path.ends_with("/properties") {
                    assert!(!map.contains_key(bad), "Gemini {bad} at {path}: {node}");
                }
            }
            if !path.ends_with("/properties") {
                assert!(
                    !map.get("type").is_some_and(Value::is_array),
                    "a type array at {path}"
                );
                if let Some(f) = map.get("format").and_then(Value::as_str) {
                    assert!(["date-time", "enum"].contains(&f), "format {f} at {path}");
                }
            }
        }
    }
    let reserve = &gemini.iter().find(|(n, _)| n == "reserve").unwrap().1;
    let guest = &reserve["properties"]["guest"];
    assert_eq!(
        guest["properties"]["name"]["type"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("string")
    );
    assert_eq!(
        guest["properties"]["name"]["description"],
        "The guest's name."
    );
    assert_eq!(reserve["properties"]["alt"]["nullable"], true);
    assert_eq!(reserve["properties"]["note"]["nullable"], true);
    assert_eq!(reserve["required"], json!(["guest"]));
    for provider in [
        Provider::OpenAi,
        Provider::Chat,
        Provider::Anthropic,
        Provider::Interactions,
    ] {
        let tools = declared(provider).await;
        let all = Value::Array(tools.iter().map(|(_, p)| p.clone()).collect());
        let text = all.to_string();
        assert!(
            !text.contains("$ref") && !text.contains("$defs"),
            "{provider:?}: {text}"
        );
    }
}

/// Decisions row "Reasoning replay": with reasoning on, a reasoning item followed by words heard
/// as sent is replayed with its encrypted content; one whose words were cut by heard truth is
/// dropped and the heard words are a plain assistant message; one without encrypted content is
/// never replayed.
#[tokio::test]
async fn decision_reasoning_is_replayed_only_whole_and_encrypted() {
    let (rig, mut v) = rig_full(
        Provider::OpenAi,
        Plan::Auto,
        |m| m,
        |base| {
            OpenAi::builder("test-key", "decision-reasoning")
                .base_url(base)
                .reasoning("low")
                .build()
                .unwrap()
                .into()
        },
    )
    .await;
    rig.server
        .reply(Reply::new().thought("t1").text("Sure thing.").finish());
    let (cut, gate) = Reply::new().thought("t2").text("A long answer. ").pause();
    rig.server.reply(cut.text("More.").finish());
    v.start_silent().await.unwrap();
    v.user_says("one").await.unwrap();
    let turn = v.send_user_message("two").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), gate.reached())
            .await
            .unwrap()
            .is_some()
    );
    let unit = first_unit(&mut v, turn).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "A long").await.unwrap();
    gate.release();
    rig.server.reply(
        Reply::new()
            .raw(&oai_event(
                "response.output_item.done",
                json!({"output_index": 0, "item": {"id": "rs_plain", "type": "reasoning", "summary": []}}),
            ))
            .text("Three.")
            .finish(),
    );
    v.user_says("three").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("four").await.unwrap();
    let input = rig.server.requests()[3].body["input"].clone();
    assert_eq!(
        input_kinds(&rig.server, 3),
        [
            "user",
            "reasoning",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ],
        "{input}"
    );
    assert_eq!(input[1]["encrypted_content"], "gAAAAenc");
    // The reply heard in full follows its reasoning as the message item it was, id and all.
    assert_eq!(input[2]["type"], "message", "{input}");
    assert!(
        input[2]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("msg_")),
        "{input}"
    );
    assert_eq!(input[2]["content"][0]["text"], "Sure thing.", "{input}");
    assert!(
        input[4]["content"].to_string().contains("A long"),
        "{input}"
    );
    assert!(!input.to_string().contains("rs_plain"), "{input}");
}

/// Decisions row "Heard truth": a unit nobody heard leaves no assistant text on any provider —
/// never an empty message or part — and adjacent user turns are merged where alternation is
/// required.
#[tokio::test]
async fn decision_heard_truth_leaves_nothing_for_a_unit_nobody_heard() {
    for provider in [
        Provider::Gemini,
        Provider::OpenAi,
        Provider::Chat,
        Provider::Anthropic,
        Provider::Interactions,
    ] {
        let (rig, mut v) = rig(provider, "decision-heard").await;
        rig.server
            .reply(Reply::new().text("Would you like Friday?").finish());
        v.start_silent().await.unwrap();
        let turn = v.send_user_message("slot?").await.unwrap();
        let unit = first_unit(&mut v, turn).await;
        v.send(Frame::Interruption { through_turn: turn })
            .await
            .unwrap();
        v.finalize(unit, "").await.unwrap();
        rig.server.reply(Reply::new().text("OK.").finish());
        v.user_says("again?").await.unwrap();
        let body = rig.server.requests()[1].body.clone();
        match provider {
            Provider::Gemini => assert_eq!(contents(&rig.server, 1), ["user: T(slot?), T(again?)"]),
            Provider::OpenAi => assert_eq!(input_kinds(&rig.server, 1), ["user", "user"], "{body}"),
            Provider::Chat => assert_eq!(
                messages(&rig.server, 1),
                json!([{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "slot?"}, {"role": "user", "content": "again?"}])
            ),
            Provider::Anthropic => assert_eq!(
                messages(&rig.server, 1),
                json!([{"role": "user", "content": [{"type": "text", "text": "slot?"},
                    {"type": "text", "text": "again?", "cache_control": {"type": "ephemeral"}}]}]),
                "{provider:?}: one user message, as the API requires"
            ),
            _ => assert_eq!(
                body["input"],
                json!([
                    {"type": "user_input", "content": [{"type": "text", "text": "slot?"}]},
                    {"type": "user_input", "content": [{"type": "text", "text": "again?"}]}
                ]),
                "{provider:?}"
            ),
        }
        assert!(!body.to_string().contains("Friday"), "{provider:?}: {body}");
    }
}

/// Decisions row "Unanswered calls": a call whose tool finished keeps its result even when the
/// speech after it is cut, so the tool never runs twice; the results match the calls left.
#[tokio::test]
async fn decision_a_finished_call_keeps_its_result_when_the_speech_after_it_is_cut() {
    let (rig, mut v) = rig(Provider::Gemini, "decision-unanswered").await;
    let (reply, gate) = Reply::new()
        .text("A. ")
        .call("open_booking", json!({"city": "Oslo"}))
        .text("Then B. ")
        .pause();
    rig.server.reply(reply.text("And C.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("book").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), gate.reached())
            .await
            .unwrap()
            .is_some()
    );
    events(&mut v, &rig.log, |e| !e.is_empty()).await;
    let unit = first_unit(&mut v, turn).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "A. ").await.unwrap();
    gate.release();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    assert_eq!(rig.log.events(), ["open_booking Oslo"], "ran once");
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(book)",
            "model: T(A. ), C(open_booking {\"city\":\"Oslo\"})",
            "user: R(open_booking={\"result\":\"ok\"})",
            "user: T(next)"
        ]
    );
}

/// Decisions row "Stream assembly (chat completions)": arguments given as an object are
/// re-serialised; a usage-only chunk is accepted; whether tools ran is decided from the assembled
/// calls, not from `finish_reason`.
#[tokio::test]
async fn decision_chat_stream_assembly_trusts_the_calls_not_the_finish_reason() {
    let (rig, mut v) = rig(Provider::Chat, "decision-assembly").await;
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}});
    rig.server.reply(
        Reply::new()
            .raw(&chat_chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_obj", "type": "function",
                    "function": {"name": "open_booking", "arguments": {"city": "Lima"}}}]}),
                Value::Null,
            ))
            .raw(&chat_chunk(json!({}), json!("stop")))
            .raw(&format!("data: {usage}\n\ndata: [DONE]\n\n")),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "book", 1).await;
    assert_eq!(rig.log.events(), ["open_booking Lima"]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let m = messages(&rig.server, 1);
    let args = m[2]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!({"city": "Lima"})
    );
}

// ---- Field faults ----

/// The chat tool calls of request `i` as (id, name, parsed arguments).
fn chat_calls(server: &ModelServer, i: usize) -> Vec<(String, String, Value)> {
    messages(server, i)
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_owned(),
                c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap_or("null"))
                    .unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// F07: parallel chat tool-call fragments interleaved by index, and two calls on one index with
/// different ids, are separate calls with whole arguments, in index order.
#[tokio::test]
async fn f07_parallel_chat_call_fragments_are_never_glued_together() {
    let (rig, mut v) = rig(Provider::Chat, "f07").await;
    let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut c = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        if let Some(name) = name {
            c["function"]["name"] = json!(name);
        }
        chat_chunk(json!({"tool_calls": [c]}), Value::Null)
    };
    let end = format!(
        "{}data: [DONE]\n\n",
        chat_chunk(json!({}), json!("tool_calls"))
    );
    rig.server.reply(
        Reply::new()
            .raw(&call(0, Some("call_A"), Some("get_weather"), "{\"ci"))
            .raw(&call(
                1,
                Some("call_B"),
                Some("get_time"),
                "{\"tz\":\"UTC\"}",
            ))
            .raw(&call(0, None, None, "ty\":\"Oslo\"}"))
            .raw(&end),
    );
    rig.server.reply(
        Reply::new()
            .raw(&call(
                0,
                Some("call_C"),
                Some("get_weather"),
                "{\"city\":\"Rome\"}",
            ))
            .raw(&call(
                0,
                Some("call_D"),
                Some("get_time"),
                "{\"tz\":\"CET\"}",
            ))
            .raw(&end),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "weather and time", 1).await;
    silent_turn(&mut v, "and in Rome", 1).await;
    assert_eq!(
        rig.log.events(),
        [
            "get_weather Oslo started",
            "get_weather Oslo finished",
            "get_time UTC",
            "get_weather Rome started",
            "get_weather Rome finished",
            "get_time CET"
        ]
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        chat_calls(&rig.server, 2),
        [
            (s("call_A"), s("get_weather"), json!({"city": "Oslo"})),
            (s("call_B"), s("get_time"), json!({"tz": "UTC"})),
            (s("call_C"), s("get_weather"), json!({"city": "Rome"})),
            (s("call_D"), s("get_time"), json!({"tz": "CET"})),
        ]
    );
}

/// F08: a Gemini thought part is neither spoken nor history text; no empty chunk is spoken; the
/// signature-only part is kept for replay.
#[tokio::test]
async fn f08_gemini_thought_parts_are_never_spoken_and_signatures_are_kept() {
    let (rig, mut v) = rig(Provider::Gemini, "f08").await;
    rig.server.reply(
        Reply::new()
            .raw(&gem_chunk(json!([
                {"text": "Weighing options...", "thought": true},
                {"text": "Your order ships tomorrow."},
                {"text": "", "thoughtSignature": "c2lnLTE="}
            ])))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("where is my order").await.unwrap();
    assert_eq!(turn.units.len(), 1);
    assert_eq!(turn.units[0].chunks, ["Your order ships tomorrow."]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    let model = rig.server.requests()[1].body["contents"][1].clone();
    assert_eq!(model["role"], "model");
    let texts: Vec<&str> = model["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.get("thought") != Some(&json!(true)))
        .filter_map(|p| p["text"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(texts, ["Your order ships tomorrow."], "{model}");
    assert!(
        model["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["thoughtSignature"] == "c2lnLTE="),
        "the signature is replayed: {model}"
    );
}

/// F09: A — an interrupted reply stores exactly the heard prefix; B — a reply played in full is
/// kept whole when the user speaks next.
#[tokio::test]
async fn f09_the_heard_prefix_is_stored_and_a_fully_played_reply_is_kept() {
    let (rig, mut v) = rig(Provider::OpenAi, "f09").await;
    let (reply, gate) = Reply::new().text("One, two, three, four, five,").pause();
    rig.server.reply(reply.text(" six, seven...").finish());
    rig.server
        .reply(Reply::new().text("All of this was played.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("count").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), gate.reached())
            .await
            .unwrap()
            .is_some()
    );
    let unit = first_unit(&mut v, turn).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "One, two, three, four, five,")
        .await
        .unwrap();
    gate.release();
    v.user_says("again").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let input = rig.server.requests()[2].body["input"].clone();
    assert_eq!(input[1]["role"], "assistant");
    assert_eq!(
        input[1]["content"], "One, two, three, four, five,",
        "A: {input}"
    );
    assert_eq!(input[3]["content"], "All of this was played.", "B: {input}");
}

/// F10: a unit heard as nothing leaves no assistant text in the next request.
#[tokio::test]
async fn f10_a_unit_heard_as_nothing_stores_no_assistant_text() {
    let (rig, mut v) = rig(Provider::OpenAi, "f10").await;
    rig.server.reply(
        Reply::new()
            .text("Would you like the Friday slot?")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("slot").await.unwrap();
    let unit = first_unit(&mut v, turn).await;
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.units().any(|u| u.ended))
            .await
            .unwrap()
    );
    v.finalize(unit, "").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("hm?").await.unwrap();
    let body = rig.server.requests()[1].body.clone();
    assert_eq!(input_kinds(&rig.server, 1), ["user", "user"], "{body}");
    assert!(!body.to_string().contains("Friday"));
}

/// F12 (chat completions): a call a barge-in cancelled has exactly one reply in the next request
/// (its cancellation), so no later request fails on `tool_calls` without replies; the words
/// before it are kept; the tool never finishes.
#[tokio::test]
async fn f12_a_chat_call_cancelled_by_a_barge_in_has_one_reply_in_the_next_request() {
    logs();
    let (rig, mut v) = rig(Provider::Chat, "f12").await;
    rig.server.reply(
        Reply::new()
            .text("Let me look. ")
            .call("hang", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("what time is it").await.unwrap();
    events(&mut v, &rig.log, |e| e.contains(&"hang started".to_owned())).await;
    let unit = first_unit(&mut v, turn).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "Let me look. ").await.unwrap();
    // The cut turn has ended (its line is logged): only now may the back office answer.
    line_with(&mut v, &["model=f12", " hops="]).await;
    rig.release.notify_one();
    rig.server.reply(Reply::new().text("Sunny.").finish());
    v.user_says("and the weather?").await.unwrap();
    let messages = messages(&rig.server, 1);
    let call_id = messages[2]["tool_calls"][0]["id"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "what time is it"},
            {"role": "assistant", "content": "Let me look. ", "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": "hang", "arguments": "{}"}
            }]},
            {"role": "tool", "tool_call_id": call_id,
                "content": "{\"error\":\"the user interrupted, so 'hang' was cancelled before it finished: it did not complete\"}"},
            {"role": "user", "content": "and the weather?"}
        ])
    );
    assert!(!rig.log.events().contains(&"hang finished".to_owned()));
}

/// F13: a Responses `function_call` whose tool a barge-in cancelled goes back with the reasoning
/// before it and its `function_call_output` (so the API never finds it without output); every
/// call goes back right after its reasoning as it was made (its item id with it), and its result
/// is sent under the `call_id`.
#[tokio::test]
async fn f13_a_cancelled_responses_call_keeps_its_reasoning_and_outputs_use_the_call_id() {
    let (rig, mut v) = rig_full(
        Provider::OpenAi,
        Plan::Auto,
        |m| m,
        |base| {
            OpenAi::builder("test-key", "f13")
                .base_url(base)
                .reasoning("low")
                .build()
                .unwrap()
                .into()
        },
    )
    .await;
    let item = |item: Value| {
        oai_event(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        )
    };
    let reasoning =
        json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA1"});
    let call = |name: &str, fc: &str, call: &str| {
        json!({"id": fc, "type": "function_call", "status": "completed", "name": name,
            "arguments": "{}", "call_id": call})
    };
    rig.server.reply(
        Reply::new()
            .raw(&item(reasoning.clone()))
            .raw(&item(call("hang", "fc_9", "call_9")))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("wait for it").await.unwrap();
    events(&mut v, &rig.log, |e| e.contains(&"hang started".to_owned())).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
        .await
        .unwrap();
    rig.server.reply(
        Reply::new()
            .raw(&item(json!({"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAA2"})))
            .raw(&item(call("show_help", "fc_10", "call_10")))
            .finish(),
    );
    silent_turn(&mut v, "help then", 1).await;
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let after_cut = rig.server.requests()[1].body["input"].clone();
    assert_eq!(
        input_kinds(&rig.server, 1),
        [
            "user",
            "reasoning",
            "function_call",
            "function_call_output",
            "user"
        ],
        "{after_cut}"
    );
    assert_eq!(after_cut[1]["id"], "rs_1", "{after_cut}");
    assert_eq!(after_cut[2]["id"], "fc_9", "{after_cut}");
    assert_eq!(after_cut[3]["call_id"], "call_9", "{after_cut}");
    assert!(
        after_cut[3]["output"]
            .as_str()
            .is_some_and(|o| o.contains("cancelled")),
        "{after_cut}"
    );
    let last = rig.server.requests()[2].body["input"].clone();
    assert_eq!(
        input_kinds(&rig.server, 2),
        [
            "user",
            "reasoning",
            "function_call",
            "function_call_output",
            "user",
            "reasoning",
            "function_call",
            "function_call_output",
            "user"
        ],
        "{last}"
    );
    assert_eq!(last[6]["call_id"], "call_10");
    assert_eq!(last[6]["id"], "fc_10", "{last}");
    assert_eq!(last[7]["call_id"], "call_10");
}

/// F14: Gemini parallel calls are answered in one user content, in call order; a call still
/// running when the user barges in runs on, and its result joins that content in its place, the
/// first call's signature intact.
#[tokio::test]
async fn f14_gemini_parallel_calls_are_answered_together_even_across_a_barge_in() {
    logs();
    let calls = gem_chunk(json!([
        {"functionCall": {"id": "w1", "name": "get_weather", "args": {"city": "Oslo"}},
            "thoughtSignature": "c2lnLU9zbG8="},
        {"functionCall": {"id": "w2", "name": "get_weather", "args": {"city": "Bergen"}}}
    ]));
    // (a) both finish.
    let (rig, mut v) = rig(Provider::Gemini, "f14a").await;
    rig.server.reply(Reply::new().raw(&calls).finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("weather").await.unwrap();
    events(&mut v, &rig.log, |e| {
        e.contains(&"get_weather Bergen started".to_owned())
    })
    .await;
    rig.release.notify_one();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .turn_steps()
            .iter()
            .any(|s| s.turn_id == turn && s.kind == "model"))
            .await
            .unwrap()
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(weather)",
            "model: C(get_weather {\"city\":\"Oslo\"})+sig, C(get_weather {\"city\":\"Bergen\"})",
            "user: R(get_weather={\"result\":\"sunny in Oslo\"}), R(get_weather={\"result\":\"sunny in Bergen\"})",
            "user: T(thanks)"
        ]
    );
    let body = rig.server.requests()[1].body.clone();
    assert_eq!(
        body["contents"][1]["parts"][0]["thoughtSignature"],
        "c2lnLU9zbG8="
    );
    assert_eq!(
        body["contents"][2]["parts"][0]["functionResponse"]["id"],
        "w1"
    );
    assert_eq!(
        body["contents"][2]["parts"][1]["functionResponse"]["id"],
        "w2"
    );

    // (b) The user barges in while Bergen runs.
    let (rig, mut v) = self::rig(Provider::Gemini, "f14b").await;
    rig.server.reply(Reply::new().raw(&calls).finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("weather").await.unwrap();
    events(&mut v, &rig.log, |e| {
        e.contains(&"get_weather Bergen started".to_owned())
    })
    .await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    line_with(&mut v, &["model=f14b", " hops="]).await;
    rig.release.notify_one();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    assert_eq!(
        contents(&rig.server, 1),
        [
            "user: T(weather)",
            "model: C(get_weather {\"city\":\"Oslo\"})+sig, C(get_weather {\"city\":\"Bergen\"})",
            "user: R(get_weather={\"result\":\"sunny in Oslo\"}), R(get_weather={\"result\":\"sunny in Bergen\"})",
            "user: T(thanks)"
        ]
    );
    let body = rig.server.requests()[1].body.clone();
    assert_eq!(
        body["contents"][1]["parts"][0]["thoughtSignature"],
        "c2lnLU9zbG8="
    );
    assert!(
        rig.log
            .events()
            .contains(&"get_weather Bergen finished".to_owned())
    );
}

/// case 18: a chat route onto the Responses API with `only(name)`: only that tool is declared and
/// a call is required.
#[tokio::test]
async fn chat_route_to_responses_declares_only_the_chosen_tool_and_requires_a_call() {
    let (rig, mut v) = rig_with(
        Provider::Chat,
        "openai/responses/case-18",
        Plan::With(ToolChoice::only("show_help")),
        |m| m,
    )
    .await;
    rig.server.reply(Reply::new().text("Sure.").finish());
    v.start_silent().await.unwrap();
    v.user_says("help").await.unwrap();
    let body = &rig.server.requests()[0].body;
    assert_eq!(body["tool_choice"], "required");
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["show_help"]);
}

/// F07 (same kind): a provider that repeats the call's id on every fragment still makes one call.
#[tokio::test]
async fn f07_a_call_id_repeated_on_every_fragment_is_one_call() {
    let (rig, mut v) = rig(Provider::Chat, "f07-repeat").await;
    let frag = |args: &str, name: Option<&str>| {
        let mut c = json!({"index": 0, "id": "call_R", "type": "function",
            "function": {"arguments": args}});
        if let Some(name) = name {
            c["function"]["name"] = json!(name);
        }
        chat_chunk(json!({"tool_calls": [c]}), Value::Null)
    };
    rig.server.reply(
        Reply::new()
            .raw(&frag("{\"ci", Some("open_booking")))
            .raw(&frag("ty\":\"Oslo\"}", None))
            .raw(&format!(
                "{}data: [DONE]\n\n",
                chat_chunk(json!({}), json!("tool_calls"))
            )),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "book", 1).await;
    assert_eq!(rig.log.events(), ["open_booking Oslo"]);
}

/// The Decisions row "Thoughts" (signatures): heard truth that trims signed text keeps every
/// signature on the part that carried it.
#[tokio::test]
async fn decision_thoughts_signatures_survive_heard_truth_trimming() {
    let (rig, mut v) = rig(Provider::Gemini, "decision-signatures").await;
    let (reply, gate) = Reply::new()
        .raw(&gem_chunk(
            json!([{"text": "Opening", "thoughtSignature": "c2lnLUE="}]),
        ))
        .raw(&gem_chunk(
            json!([{"text": " it now. ", "thoughtSignature": "c2lnLUI="}]),
        ))
        .pause();
    rig.server.reply(reply.text("Done.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("open").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), gate.reached())
            .await
            .unwrap()
            .is_some()
    );
    let unit = first_unit(&mut v, turn).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "Opening it").await.unwrap();
    gate.release();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let model = rig.server.requests()[1].body["contents"][1].clone();
    let parts = model["parts"].as_array().unwrap();
    assert_eq!(
        parts[0],
        json!({"text": "Opening it", "thoughtSignature": "c2lnLUE="}),
        "{model}"
    );
    assert!(
        parts.iter().any(|p| p["thoughtSignature"] == "c2lnLUI="),
        "the second signature is kept: {model}"
    );
    assert!(!model.to_string().contains("now"), "{model}");
}

/// F07 (same kind): a server that sends whole calls without ids, all on index 0, makes separate
/// calls with their own ids — never one call with concatenated arguments.
#[tokio::test]
async fn f07_whole_calls_without_ids_on_one_index_are_separate_calls() {
    let (rig, mut v) = rig(Provider::Chat, "f07-no-ids").await;
    let call = |name: &str, args: &str| {
        chat_chunk(
            json!({"tool_calls": [{"index": 0, "type": "function",
                "function": {"name": name, "arguments": args}}]}),
            Value::Null,
        )
    };
    rig.server.reply(
        Reply::new()
            .raw(&call("get_weather", "{\"city\":\"Oslo\"}"))
            .raw(&call("get_time", "{\"tz\":\"UTC\"}"))
            .raw(&format!(
                "{}data: [DONE]\n\n",
                chat_chunk(json!({}), json!("tool_calls"))
            )),
    );
    v.start_silent().await.unwrap();
    silent_turn(&mut v, "weather and time", 1).await;
    assert_eq!(
        rig.log.events(),
        [
            "get_weather Oslo started",
            "get_weather Oslo finished",
            "get_time UTC"
        ]
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    let calls = chat_calls(&rig.server, 1);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].1, "get_weather");
    assert_eq!(calls[0].2, json!({"city": "Oslo"}));
    assert_eq!(calls[1].1, "get_time");
    assert_eq!(calls[1].2, json!({"tz": "UTC"}));
    assert_ne!(calls[0].0, calls[1].0, "each call has its own id");
    let m = messages(&rig.server, 1);
    let answered: Vec<&Value> = m
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| &m["tool_call_id"])
        .collect();
    assert_eq!(answered, [&json!(calls[0].0), &json!(calls[1].0)]);
}

/// A bounded history never separates a call from its result, and never starts with the model's
/// words, even when one turn's tool chain outgrows the bound.
#[tokio::test]
async fn a_bounded_history_never_separates_a_call_from_its_result() {
    let (rig, mut v) = rig_with(Provider::Chat, "bounded-history", Plan::Auto, |m| {
        m.max_history(8).max_tool_hops(6)
    })
    .await;
    for _ in 0..5 {
        rig.server
            .reply(Reply::new().call("get_balance", json!({})).finish());
    }
    rig.server.reply(Reply::new().text("It is 12.50.").finish());
    v.start_silent().await.unwrap();
    assert_eq!(
        v.user_says("balance?").await.unwrap().text(),
        "It is 12.50."
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    for (i, request) in rig.server.requests().iter().enumerate() {
        let messages = request.body["messages"].as_array().unwrap();
        let mut called = Vec::new();
        for m in messages {
            if let Some(calls) = m["tool_calls"].as_array() {
                called.extend(calls.iter().map(|c| c["id"].clone()));
            }
            if m["role"] == "tool" {
                assert!(
                    called.contains(&m["tool_call_id"]),
                    "request {i}: a result without its call: {messages:?}"
                );
            }
        }
        let first = messages.iter().find(|m| m["role"] != "system").unwrap();
        assert_eq!(first["role"], "user", "request {i} starts with {first}");
    }
}

/// case 44: a greeting nobody heard leaves nothing in the history; one heard in part is history as
/// heard.
#[tokio::test]
async fn a_greeting_is_history_only_as_far_as_it_was_heard() {
    for (heard, expected) in [
        ("", vec!["user: T(hello?)"]),
        ("Hi!", vec!["model: T(Hi!)", "user: T(hello?)"]),
    ] {
        let (rig, mut v) = rig_with(Provider::Gemini, "case-44", Plan::Greet, |m| m).await;
        v.start_silent().await.unwrap();
        assert!(
            v.wait_for(Duration::from_secs(5), |v| v
                .units()
                .any(|u| u.turn_id == 1 && u.ended))
                .await
                .unwrap()
        );
        let unit = v.units().find(|u| u.turn_id == 1).unwrap();
        assert_eq!(unit.text(), "Hi! What can I do?");
        let id = unit.speech_id;
        v.finalize(id, heard).await.unwrap();
        rig.server.reply(Reply::new().text("Yes?").finish());
        v.user_says("hello?").await.unwrap();
        assert_eq!(contents(&rig.server, 0), expected, "heard {heard:?}");
    }
}

/// The Decisions row "Reasoning replay": reasoning whose words were heard as nothing is not
/// replayed in front of the call that followed them.
#[tokio::test]
async fn decision_reasoning_before_unheard_words_is_not_replayed() {
    let (rig, mut v) = rig_full(
        Provider::OpenAi,
        Plan::Auto,
        |m| m,
        |base| {
            OpenAi::builder("test-key", "decision-reasoning-unheard")
                .base_url(base)
                .reasoning("low")
                .build()
                .unwrap()
                .into()
        },
    )
    .await;
    rig.server.reply(
        Reply::new()
            .thought("t1")
            .text("Showing help. ")
            .call("show_help", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("help").await.unwrap();
    let unit = first_unit(&mut v, turn).await;
    events(&mut v, &rig.log, |e| !e.is_empty()).await;
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, "").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("next").await.unwrap();
    let input = rig.server.requests()[1].body["input"].clone();
    assert_eq!(
        input_kinds(&rig.server, 1),
        ["user", "function_call", "function_call_output", "user"],
        "{input}"
    );
}

/// F08 (same kind, chat completions): reasoning deltas (`reasoning_content`, `reasoning`) are
/// never spoken nor stored as the assistant's words.
#[tokio::test]
async fn f08_chat_reasoning_deltas_are_never_spoken() {
    let (rig, mut v) = rig(Provider::Chat, "f08-chat").await;
    rig.server.reply(
        Reply::new()
            .raw(&chat_chunk(
                json!({"reasoning_content": "Weighing options..."}),
                Value::Null,
            ))
            .raw(&chat_chunk(
                json!({"reasoning": "Still weighing..."}),
                Value::Null,
            ))
            .text("Your order ships tomorrow.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.user_says("where is my order").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Your order ships tomorrow."]);
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("thanks").await.unwrap();
    let m = messages(&rig.server, 1);
    assert_eq!(
        m[2],
        json!({"role": "assistant", "content": "Your order ships tomorrow."})
    );
}

/// The Decisions row "Speech before a call", with the guard holding a tail: a word held because
/// it could begin a call written as text is spoken before the real call's tool runs.
#[tokio::test]
async fn decision_speech_before_a_call_includes_a_held_tail() {
    let (rig, mut v) = rig(Provider::Gemini, "decision-held-tail").await;
    rig.server.reply(
        Reply::new()
            .text("Checking the default")
            .call("hang", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("check").await.unwrap();
    events(&mut v, &rig.log, |e| e.contains(&"hang started".to_owned())).await;
    let spoke = v
        .wait_for(Duration::from_secs(2), |v| {
            v.units()
                .any(|u| u.turn_id == turn && u.text() == "Checking the default")
        })
        .await
        .unwrap();
    let said: Vec<String> = v.units().map(|u| u.text()).collect();
    rig.release.notify_one();
    assert!(spoke, "spoken while the tool ran: {said:?}");
}

/// case 26: a tool over the time budget is logged as such; its result is still filed and the turn
/// goes on.
#[tokio::test]
async fn a_tool_over_its_budget_is_logged_and_its_result_filed() {
    let (_rig, mut v, result) = chat_result_of(
        "case-26",
        Reply::new().call("slow", json!({})).text("Done.").finish(),
    )
    .await;
    assert_eq!(result, json!({"result": "late"}));
    let line = line_with(&mut v, &["slow took", "over the 20ms budget"]).await;
    assert!(line.contains("the user waited for it"), "{line}");
}

/// The Decisions row "Speech before a call", with the opening still undecided: a first word held
/// because it could begin a call written as text is spoken before the real call's tool runs, and
/// the words after the call follow it.
#[tokio::test]
async fn decision_speech_before_a_call_includes_an_undecided_opening() {
    let (rig, mut v) = rig(Provider::Gemini, "decision-held-opening").await;
    rig.server.reply(
        Reply::new()
            .text("Default")
            .call("hang", json!({}))
            .text(" is set.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("check").await.unwrap();
    events(&mut v, &rig.log, |e| e.contains(&"hang started".to_owned())).await;
    let spoke = v
        .wait_for(Duration::from_secs(2), |v| {
            v.units()
                .any(|u| u.turn_id == turn && u.text() == "Default")
        })
        .await
        .unwrap();
    let said: Vec<String> = v.units().map(|u| u.text()).collect();
    rig.release.notify_one();
    assert!(spoke, "spoken while the tool ran: {said:?}");
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn
                && u.ended
                && u.text() == "Default is set."))
            .await
            .unwrap()
    );
}

/// Anthropic's "overloaded" answer, HTTP 529 with an `overloaded_error` body, is retried once
/// before the first byte; once words were spoken, an `overloaded_error` event ends the turn and
/// keeps them, with the provider's words in the log; and the turn's thinking block is replayed
/// with its signature on the next request.
#[tokio::test]
async fn anthropic_overloaded_is_retried_before_the_first_byte_and_ends_the_turn_after_it() {
    let (rig, mut v) = rig(Provider::Anthropic, "case-anthropic-529").await;
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    rig.server.reply(Reply::status(529, overloaded));
    rig.server
        .reply(Reply::new().thought("They greet.").text("Hello.").finish());
    v.start_silent().await.unwrap();
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Hello.");
    assert_eq!(rig.server.requests().len(), 2, "one retry");
    rig.server
        .reply(Reply::new().text("Let me").error("Overloaded right now"));
    assert_eq!(v.user_says("and?").await.unwrap().text(), "Let me");
    line_with(&mut v, &["anthropic", "Overloaded right now"]).await;
    let replayed = &messages(&rig.server, 2)[1]["content"][0];
    assert_eq!(
        replayed,
        &json!({"type": "thinking", "thinking": "They greet.", "signature": "EqQBc2ln"})
    );
}

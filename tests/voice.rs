//! Model-backed brains end to end: a model-backed `Brain` on a real session socket, talking to the
//! stand-in provider of `voqalize_testing` over real HTTP and SSE (docs/protocol.md §6).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize::wire::Frame;
use voqalize_testing::{BargeAt, BargeIn, ModelServer, Provider, Reply, Voqalize};

use crate::support::{Log, MetricLog, driver, logs};

/// A booking.
#[json_type]
struct Booking {
    /// The city.
    city: String,
}

/// The test brain: tools that count their runs, one that hangs until released.
struct Desk {
    model: Model,
    log: Arc<Log>,
    runs: Arc<AtomicUsize>,
    release: Arc<Notify>,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }

    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("Hi! What can I do?".into()))
    }
}

#[brain]
impl Desk {
    /// Put the booking form on screen.
    #[tool]
    async fn open_booking(&self, args: Booking) -> String {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.log.push(format!("open_booking {}", args.city));
        "ok".into()
    }

    /// Show help.
    #[tool]
    async fn show_help(&self) -> &'static str {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.log.push("show_help");
        "shown"
    }

    /// The account balance.
    #[tool]
    #[needs_result_now]
    async fn get_balance(&self) -> &'static str {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.log.push("get_balance");
        "12.50"
    }

    /// Note that the user tapped the screen.
    #[tool]
    async fn tap(&self) -> &'static str {
        self.model.append_note("(They tapped X.)");
        "noted"
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

struct Rig {
    server: ModelServer,
    log: Arc<Log>,
    runs: Arc<AtomicUsize>,
    release: Arc<Notify>,
}

fn layer(provider: Provider, base_url: &str, gap: Duration) -> ModelLayer {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap,
    };
    let model = match provider {
        Provider::Gemini => "gemini-test",
        Provider::Chat => "openai/gpt-test",
        _ => "gpt-test",
    };
    crate::support::layer(provider, base_url, model, timeouts)
}

async fn rig_with(
    provider: Provider,
    settings: impl Fn(Model) -> Model + Send + Sync + 'static,
    gap: Duration,
) -> (Rig, Voqalize) {
    let server = ModelServer::start(provider).await.expect("a loopback port");
    let (log, runs, release) = (
        Arc::new(Log::default()),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Notify::new()),
    );
    let base = server.base_url();
    let (l, r, n) = (log.clone(), runs.clone(), release.clone());
    let v = driver(move || Desk {
        model: settings(Model::new(layer(provider, &base, gap)).instruction("Be brief.")),
        log: l.clone(),
        runs: r.clone(),
        release: n.clone(),
    })
    .await;
    (
        Rig {
            server,
            log,
            runs,
            release,
        },
        v,
    )
}

async fn rig(provider: Provider) -> (Rig, Voqalize) {
    rig_with(provider, |m| m, Duration::from_secs(10)).await
}

/// Barges in on `turn` once its first text is on the wire: `Interruption`, then the unit's
/// `Finalize` with `heard`.
async fn barge_in_once_speaking(v: &mut Voqalize, turn: u64, heard: &str) {
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn && !u.chunks.is_empty()))
            .await
            .unwrap()
    );
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    let unit = v
        .units()
        .find(|u| u.turn_id == turn)
        .map(|u| u.speech_id)
        .unwrap();
    v.finalize(unit, heard).await.unwrap();
}

/// The Gemini `contents` of request `i`, each as `role: part, part`.
fn gemini_contents(server: &ModelServer, i: usize) -> Vec<String> {
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
                    if let Some(t) = p.get("text") {
                        format!("T({})", t.as_str().unwrap_or_default())
                    } else if let Some(f) = p.get("functionCall") {
                        format!("C({})", f["name"].as_str().unwrap_or_default())
                    } else if let Some(f) = p.get("functionResponse") {
                        format!(
                            "R({}={})",
                            f["name"].as_str().unwrap_or_default(),
                            f["response"]
                        )
                    } else {
                        p.to_string()
                    }
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

/// Waits until turn `turn` has opened `units` units and ended them all, then finalizes each with
/// all of its text; gives their texts.
async fn play(v: &mut Voqalize, turn: u64, units: usize) -> Vec<String> {
    let done = v
        .wait_for(Duration::from_secs(5), |v| {
            let of_turn: Vec<_> = v.units().filter(|u| u.turn_id == turn).collect();
            of_turn.len() >= units && of_turn.iter().all(|u| u.ended)
        })
        .await
        .unwrap();
    assert!(done, "turn {turn} spoke {units} units");
    let texts: Vec<(u64, String)> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| (u.speech_id, u.text()))
        .collect();
    for (id, text) in &texts {
        v.finalize(*id, text).await.unwrap();
    }
    texts.into_iter().map(|(_, t)| t).collect()
}

#[tokio::test]
async fn a_turn_speaks_runs_the_tool_in_order_and_files_its_result() {
    let (rig, mut v) = rig(Provider::Gemini).await;
    rig.server.reply(
        Reply::new()
            .text("Opening")
            .text(" it now.")
            .call("open_booking", json!({"city": "Paris"}))
            .finish()
            .usage(10, 5),
    );
    v.start_silent().await.unwrap();
    let first = v.user_says("book Paris").await.unwrap();
    assert_eq!(first.unit_texts(), ["Opening it now."]);
    assert_eq!(rig.runs.load(Ordering::SeqCst), 1, "the tool ran once");

    rig.server.reply(Reply::new().text("Sure.").finish());
    let second = v.user_says("thanks").await.unwrap();
    assert_eq!(second.text(), "Sure.");
    let request = &rig.server.requests()[1];
    assert!(
        request
            .target
            .contains("/models/gemini-test:streamGenerateContent?alt=sse")
    );
    assert_eq!(request.header("x-goog-api-key"), Some("test-key"));
    assert_eq!(
        request.body["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );
    assert_eq!(
        gemini_contents(&rig.server, 1),
        [
            "user: T(book Paris)",
            "model: T(Opening it now.), C(open_booking)",
            "user: R(open_booking={\"result\":\"ok\"})",
            "user: T(thanks)"
        ]
    );
    // A tool step when the tool finished, then the request's model step with its usage.
    let steps: Vec<(String, String)> = v
        .turn_steps()
        .iter()
        .filter(|s| s.turn_id == 2)
        .map(|s| (s.kind.clone(), s.name.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            ("tool".to_owned(), "open_booking".to_owned()),
            ("model".to_owned(), "gemini-test".to_owned())
        ]
    );
    let model_step = v
        .turn_steps()
        .iter()
        .find(|s| s.kind == "model")
        .cloned()
        .unwrap();
    assert_eq!(model_step.provider, "google");
    assert_eq!(model_step.counts.get("input_tokens"), Some(&10));
    assert_eq!(model_step.counts.get("output_tokens"), Some(&5));
    v.assert_clean();
}

#[tokio::test]
async fn a_marked_tool_makes_the_model_read_its_result_at_once() {
    let (rig, mut v) = rig(Provider::OpenAi).await;
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
    let turn = v.send_user_message("balance?").await.unwrap();
    assert_eq!(
        play(&mut v, turn, 2).await,
        ["Let me check.", "It is 12.50."]
    );
    assert_eq!(rig.server.requests().len(), 2);
    let second = &rig.server.requests()[1].body;
    assert_eq!(second["store"], false);
    assert_eq!(second["stream"], true);
    let input = second["input"].as_array().unwrap();
    let kinds: Vec<String> = input
        .iter()
        .map(|i| {
            i.get("type")
                .and_then(Value::as_str)
                .or_else(|| i.get("role").and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        ["user", "assistant", "function_call", "function_call_output"]
    );
    assert_eq!(input[3]["output"], "{\"result\":\"12.50\"}");
    assert_eq!(input[3]["call_id"], input[2]["call_id"]);
}

#[tokio::test]
async fn max_tool_hops_forces_the_last_request_to_speak_and_refuses_its_call() {
    logs();
    let (rig, mut v) = rig_with(
        Provider::Chat,
        |m| m.max_tool_hops(2),
        Duration::from_secs(10),
    )
    .await;
    for _ in 0..3 {
        rig.server
            .reply(Reply::new().call("get_balance", json!({})).finish());
    }
    v.start_silent().await.unwrap();
    v.send_user_message("balance?").await.unwrap();
    assert!(
        v.run_until(Duration::from_secs(5), rig.server.wait_requests(3))
            .await
            .unwrap()
            .unwrap_or(false)
    );
    assert!(rig.log.wait(&mut v, |l| l.events().len() == 2).await);
    let choices: Vec<Value> = rig
        .server
        .requests()
        .iter()
        .map(|r| r.body["tool_choice"].clone())
        .collect();
    assert_eq!(choices, [json!("auto"), json!("auto"), json!("none")]);
    // The call on the forced request did not run: two runs, not three.
    v.quiesce(Duration::from_millis(200), Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(rig.runs.load(Ordering::SeqCst), 2);
    let lines = logs().lines_with("hops=3 calls=3 awaited=2");
    assert!(
        !lines.is_empty(),
        "the turn line counts every call: {lines:?}"
    );
}

#[tokio::test]
async fn a_barge_in_while_a_tool_runs_lets_it_finish_and_the_next_request_reads_its_result() {
    let (rig, mut v) = rig(Provider::Gemini).await;
    rig.server.reply(
        Reply::new()
            .text("Opening. ")
            .call("hang", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("open it").await.unwrap();
    assert!(
        rig.log
            .wait(&mut v, |l| l.events().contains(&"hang started".to_owned()))
            .await
    );
    barge_in_once_speaking(&mut v, turn, "Opening.").await;

    // The user's next words arrive while the tool still runs: their request waits for it.
    rig.server
        .reply(Reply::new().text("What's the weather?").finish());
    let next = v.send_user_message("what about the weather").await.unwrap();
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        rig.server.requests().len(),
        1,
        "the next request waits for the running tool"
    );
    rig.release.notify_waiters();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(next).completed())
            .await
            .unwrap()
    );
    assert!(rig.log.events().contains(&"hang finished".to_owned()));
    let contents = gemini_contents(&rig.server, 1);
    assert_eq!(
        contents,
        [
            "user: T(open it)",
            "model: T(Opening.), C(hang)",
            r#"user: R(hang={"result":"done"})"#,
            "user: T(what about the weather)"
        ],
        "the call ran on after the barge-in and is answered once, before the next words"
    );
}

#[tokio::test]
async fn heard_truth_keeps_exactly_the_heard_prefix() {
    let (rig, mut v) = rig(Provider::Chat).await;
    rig.server.reply(
        Reply::new()
            .text("One, two, three, four, five,")
            .text(" six, seven...")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let barge = BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some("One, two, three, four, five,".into()),
    };
    v.barge_in("count", barge).await.unwrap();
    rig.server.reply(
        Reply::new()
            .text("Would you like the Friday slot?")
            .finish(),
    );
    let cut = v
        .barge_in(
            "again",
            BargeIn {
                at: BargeAt::FirstText,
                heard_prefix: Some(String::new()),
            },
        )
        .await
        .unwrap();
    assert!(cut.interrupted);
    rig.server.reply(Reply::new().text("Sure.").finish());
    v.user_says("please come again?").await.unwrap();
    let messages = rig.server.requests()[2].body["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "count"},
            {"role": "assistant", "content": "One, two, three, four, five,"},
            {"role": "user", "content": "again"},
            {"role": "user", "content": "please come again?"}
        ]),
        "F09: the heard prefix; F10/F11: nothing for a unit nobody heard"
    );
}

#[tokio::test]
async fn a_failed_request_is_logged_reported_and_covered_by_the_fallback_line() {
    logs();
    let (rig, mut v) = rig_with(
        Provider::OpenAi,
        |m| m.fallback_line("Sorry, say that again?"),
        Duration::from_secs(10),
    )
    .await;
    let overloaded = json!({"error": {"message": "overloaded", "type": "server_error"}});
    rig.server.reply(Reply::status(503, overloaded.clone()));
    rig.server.reply(Reply::status(503, overloaded));
    v.start_silent().await.unwrap();
    let turn = v.user_says("hello").await.unwrap();
    assert_eq!(turn.text(), "Sorry, say that again?");
    assert_eq!(
        rig.server.requests().len(),
        2,
        "one retry before the first byte"
    );
    assert!(
        v.turn_steps()
            .iter()
            .any(|s| s.kind == "model" && s.counts.is_empty())
    );
    assert!(!logs().lines_with("request failed: ").is_empty());
    // The session goes on.
    rig.server.reply(Reply::new().text("Hi!").finish());
    assert_eq!(v.user_says("hello?").await.unwrap().text(), "Hi!");
}

#[tokio::test]
async fn a_stream_that_stalls_or_ends_early_ends_the_turn_and_keeps_what_was_said() {
    let (rig, mut v) = rig_with(Provider::Gemini, |m| m, Duration::from_millis(300)).await;
    rig.server.reply(Reply::new().text("Half").hang());
    v.start_silent().await.unwrap();
    let turn = v.user_says("go").await.unwrap();
    assert_eq!(
        turn.text(),
        "Half",
        "what was spoken stays spoken, and the unit is closed"
    );
    // A stream that ends without its finish is an error, not a success.
    rig.server.reply(Reply::new().text("Also half"));
    assert_eq!(v.user_says("again").await.unwrap().text(), "Also half");
    rig.server.reply(Reply::new().text("Fine.").finish());
    v.user_says("and?").await.unwrap();
    assert_eq!(
        gemini_contents(&rig.server, 2),
        [
            "user: T(go)",
            "model: T(Half)",
            "user: T(again)",
            "model: T(Also half)",
            "user: T(and?)"
        ]
    );
    v.assert_clean();
}

#[tokio::test]
async fn a_call_written_as_text_is_never_spoken_and_the_model_is_asked_once_more() {
    let (rig, mut v) = rig(Provider::Gemini).await;
    rig.server
        .reply(Reply::new().text("default_api:show_help()").finish());
    rig.server.reply(Reply::new().text("Here it is.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(turn.unit_texts(), ["Here it is."]);
    let retry = gemini_contents(&rig.server, 1);
    assert_eq!(
        retry.len(),
        1,
        "the user turn with the note after it: {retry:?}"
    );
    assert!(retry[0].starts_with("user: T(help), T("), "{retry:?}");
    rig.server.reply(Reply::new().text("Bye.").finish());
    v.user_says("bye").await.unwrap();
    let contents = gemini_contents(&rig.server, 2);
    assert_eq!(
        contents,
        ["user: T(help)", "model: T(Here it is.)", "user: T(bye)"],
        "no trace of the call written as text, nor of the note"
    );
}

/// Every cut of a turn, at each point of its stream, leaves every call in the history with exactly
/// one answer: a call whose tool finished before the cut keeps its result, and the one still
/// running when the user cut in runs on and answers with its own.
#[tokio::test]
async fn a_cut_at_every_point_of_the_stream_leaves_every_call_answered_once() {
    for cut in 0..6 {
        let (rig, mut v) = rig(Provider::Gemini).await;
        let mut reply = Reply::new();
        let mut gates = Vec::new();
        let script: [&dyn Fn(Reply) -> Reply; 6] = [
            &|r| r.text("First. "),
            &|r| r.call("show_help", json!({})),
            &|r| r.text("Then. "),
            &|r| r.call("hang", json!({})),
            &|r| r.call("open_booking", json!({"city": "Rome"})),
            &|r| r.text("Done.").finish(),
        ];
        for (i, step) in script.iter().enumerate() {
            if i == cut {
                let (r, g) = reply.pause();
                reply = r;
                gates.push(g);
            }
            reply = step(reply);
        }
        rig.server.reply(reply);
        v.start_silent().await.unwrap();
        let turn = v.send_user_message("go").await.unwrap();
        let gate = gates.pop().unwrap();
        assert!(
            v.run_until(Duration::from_secs(5), gate.reached())
                .await
                .unwrap()
                .is_some()
        );
        if cut > 3 {
            // The hanging tool is what the turn awaits: cut there.
            assert!(
                rig.log
                    .wait(&mut v, |l| l.events().contains(&"hang started".to_owned()))
                    .await
            );
        }
        v.quiesce(Duration::from_millis(100), Duration::from_secs(2))
            .await
            .unwrap();
        v.send(Frame::Interruption { through_turn: turn })
            .await
            .unwrap();
        gate.release();
        // The hanging tool runs on after the barge-in: the back office answers now.
        rig.release.notify_waiters();
        let units: Vec<(u64, String)> = v
            .units()
            .filter(|u| u.turn_id == turn)
            .map(|u| (u.speech_id, u.text()))
            .collect();
        for (id, text) in units {
            v.finalize(id, &text).await.unwrap();
        }
        rig.server.reply(Reply::new().text("OK.").finish());
        v.user_says("next").await.unwrap();
        let body = &rig.server.requests()[1].body;
        let mut calls = Vec::new();
        let mut answers = Vec::new();
        for content in body["contents"].as_array().unwrap() {
            for part in content["parts"].as_array().unwrap() {
                if let Some(c) = part.get("functionCall") {
                    calls.push(c["id"].clone());
                }
                if let Some(r) = part.get("functionResponse") {
                    answers.push(r["id"].clone());
                }
                assert_ne!(
                    part.get("text"),
                    Some(&json!("")),
                    "cut {cut}: no empty text part"
                );
            }
        }
        assert_eq!(
            calls, answers,
            "cut {cut}: every call has exactly one answer: {body}"
        );
        let hung = cut > 3;
        assert_eq!(
            calls.contains(&json!("call_2")),
            hung,
            "cut {cut}: the hanging call is in the history iff it started: {body}"
        );
        assert_eq!(
            rig.log.events().contains(&"hang finished".to_owned()),
            hung,
            "cut {cut}: it ran on to its end"
        );
    }
}

#[tokio::test]
async fn the_greeting_is_history_as_heard_and_a_note_from_a_tool_lands_after_its_result() {
    let (rig, mut v) = rig(Provider::Gemini).await;
    rig.server
        .reply(Reply::new().text("Done.").call("tap", json!({})).finish());
    let greeting = v.start().await.unwrap();
    assert_eq!(greeting.text(), "Hi! What can I do?");
    v.user_says("tap it").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and now?").await.unwrap();
    assert_eq!(
        gemini_contents(&rig.server, 1),
        [
            "model: T(Hi! What can I do?)",
            "user: T(tap it)",
            "model: T(Done.), C(tap)",
            "user: R(tap={\"result\":\"noted\"})",
            "user: T((They tapped X.)), T(and now?)"
        ]
    );
}

/// The guard TurnSteps of turn `turn`: (name, counts as `k=v` joined).
fn guard_steps(v: &Voqalize, turn: u64) -> Vec<(String, String)> {
    v.turn_steps()
        .iter()
        .filter(|s| s.turn_id == turn && s.kind == "guard")
        .map(|s| {
            let counts: Vec<String> = s.counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
            (s.name.clone(), counts.join(","))
        })
        .collect()
}

#[tokio::test]
async fn a_guard_before_a_tool_refuses_a_call_the_model_then_reads() {
    let (rig, mut v) = rig_with(
        Provider::Gemini,
        |m| {
            m.before_tool(|call| match call.arguments["city"].as_str() {
                Some("Paris") => Err(Refusal::new(
                    "bookings in Paris need the user's consent first",
                )),
                _ => Ok(()),
            })
        },
        Duration::from_secs(10),
    )
    .await;
    rig.server.reply(
        Reply::new()
            .text("Booking.")
            .call("open_booking", json!({"city": "Paris"}))
            .call("open_booking", json!({"city": "Rome"}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.user_says("book Paris and Rome").await.unwrap();
    assert_eq!(
        rig.log.events(),
        ["open_booking Rome"],
        "only the allowed call ran"
    );
    assert_eq!(
        guard_steps(&v, 2),
        [("open_booking".to_owned(), "before=1,refused=1".to_owned())]
    );
    let tools: Vec<String> = v
        .turn_steps()
        .iter()
        .filter(|s| s.kind == "tool")
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(tools, ["open_booking"], "no tool step for the refused call");

    rig.server.reply(Reply::new().text("Done.").finish());
    v.user_says("thanks").await.unwrap();
    assert_eq!(
        gemini_contents(&rig.server, 1)[2],
        "user: R(open_booking={\"error\":\"bookings in Paris need the user's consent first\"}), \
         R(open_booking={\"result\":\"ok\"})"
    );
    v.assert_clean();
}

#[tokio::test]
async fn a_guard_that_fails_or_panics_fails_closed() {
    logs();
    let (rig, mut v) = rig_with(
        Provider::Gemini,
        |m| {
            m.before_tool(|call| match call.name {
                "show_help" => Err(Refusal::failed("the policy store is down")),
                "open_booking" => panic!("a bug in the guard"),
                _ => Ok(()),
            })
        },
        Duration::from_secs(10),
    )
    .await;
    rig.server.reply(
        Reply::new()
            .call("show_help", json!({}))
            .call("open_booking", json!({"city": "Oslo"}))
            .text("One moment.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.user_says("help me book").await.unwrap();
    assert_eq!(rig.runs.load(Ordering::SeqCst), 0, "neither tool ran");
    assert_eq!(
        guard_steps(&v, 2),
        [
            ("show_help".to_owned(), "before=1,failed=1".to_owned()),
            ("open_booking".to_owned(), "before=1,failed=1".to_owned())
        ]
    );
    rig.server.reply(Reply::new().text("Done.").finish());
    v.user_says("ok").await.unwrap();
    // The model reads only that the check failed; the guard's own error stays in the log.
    let results = &gemini_contents(&rig.server, 1)[2];
    assert!(
        results.contains("the check before 'show_help' failed, so it did not run")
            && results.contains("the check before 'open_booking' failed, so it did not run")
            && !results.contains("policy store"),
        "{results}"
    );
    // Logged once (the panic after it is counted with it, not logged per call).
    assert_eq!(logs().lines_with("the policy store is down").len(), 1);
    assert!(logs().lines_with("a bug in the guard").is_empty());
    v.assert_clean();
}

#[tokio::test]
async fn a_guard_after_a_tool_redacts_or_withholds_the_result() {
    let (rig, mut v) = rig_with(
        Provider::OpenAi,
        |m| {
            m.after_tool(|call, response| match call.name {
                "get_balance" => {
                    response["result"] = json!("[redacted]");
                    Ok(())
                }
                "show_help" => Err(Refusal::failed("the redaction service timed out")),
                _ => Ok(()),
            })
        },
        Duration::from_secs(10),
    )
    .await;
    rig.server.reply(
        Reply::new()
            .call("show_help", json!({}))
            .call("get_balance", json!({}))
            .finish(),
    );
    rig.server
        .reply(Reply::new().text("It is private.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("balance?").await.unwrap();
    assert_eq!(play(&mut v, turn, 1).await, ["It is private."]);
    assert_eq!(rig.runs.load(Ordering::SeqCst), 2, "both tools ran");
    let input = rig.server.requests()[1].body["input"].clone();
    let outputs: Vec<String> = input
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        outputs,
        [
            "{\"error\":\"the check of 'show_help''s result failed, so its result was withheld\"}",
            "{\"result\":\"[redacted]\"}"
        ]
    );
    assert_eq!(
        guard_steps(&v, turn),
        [("show_help".to_owned(), "after=1,failed=1".to_owned())]
    );
    v.assert_clean();
}

/// A closed span: its name and fields (values as text).
type ClosedSpan = (String, std::collections::BTreeMap<String, String>);

/// Every span closed under it, in closing order.
#[derive(Clone, Default)]
struct SpanLog(Arc<std::sync::Mutex<Vec<ClosedSpan>>>);

#[derive(Default)]
struct SpanFields(std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for SpanFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanLog
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = SpanFields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<SpanFields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span
                .extensions()
                .get::<SpanFields>()
                .map(|f| f.0.clone())
                .unwrap_or_default();
            self.0
                .lock()
                .unwrap()
                .push((span.name().to_owned(), fields));
        }
    }
}

#[tokio::test]
async fn model_requests_and_tool_runs_are_gen_ai_spans() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = SpanLog::default();
    // This test's own subscriber, on its thread (the session, the stand-in and the HTTP client
    // all run on the test's one-thread runtime). The global capture is installed first: while a
    // scoped subscriber is the only one registered, tracing-core caches a span's interest from
    // whichever thread reaches it first, and another test's thread, with no subscriber, would
    // cache "never" for this test's spans.
    logs();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let (rig, mut v) = rig(Provider::Gemini).await;
    rig.server.reply(
        Reply::new()
            .text("Booking.")
            .call("open_booking", json!({"city": "Secret City"}))
            .finish()
            .usage(12, 7),
    );
    v.start_silent().await.unwrap();
    v.user_says("book it").await.unwrap();
    let closed = spans.0.lock().unwrap().clone();
    let named = |name: &str| {
        closed
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
            .collect::<Vec<_>>()
    };
    let chat = named("chat");
    assert_eq!(chat.len(), 1, "one request: {closed:?}");
    let field = |f: &std::collections::BTreeMap<String, String>, k: &str| f.get(k).cloned();
    let chat = &chat[0];
    for (key, value) in [
        ("otel.name", "chat gemini-test"),
        ("otel.kind", "client"),
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "gcp.gemini"),
        ("gen_ai.request.model", "gemini-test"),
        ("gen_ai.response.id", "stand-in-response"),
        ("gen_ai.response.finish_reasons", "STOP"),
        ("gen_ai.usage.input_tokens", "12"),
        ("gen_ai.usage.output_tokens", "7"),
    ] {
        assert_eq!(field(chat, key).as_deref(), Some(value), "{key}: {chat:?}");
    }
    assert!(field(chat, "voqalize.first_chunk_ms").is_some(), "{chat:?}");
    assert!(field(chat, "error.type").is_none(), "{chat:?}");

    let tools = named("execute_tool");
    assert_eq!(tools.len(), 1, "{closed:?}");
    assert_eq!(
        field(&tools[0], "gen_ai.tool.name").as_deref(),
        Some("open_booking")
    );
    assert_eq!(
        field(&tools[0], "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        field(&tools[0], "voqalize.tool.end").as_deref(),
        Some("in_turn"),
        "when the call was answered"
    );
    // Never the arguments or the result (the TurnStep rule).
    let all = format!("{closed:?}");
    assert!(
        !all.contains("Secret City") && !all.contains("\"ok\""),
        "{all}"
    );

    // A failed request carries its error type.
    rig.server.reply(Reply::error_status(503, "overloaded"));
    rig.server.reply(Reply::error_status(503, "overloaded"));
    v.send_user_message("again").await.unwrap();
    v.wait_for(Duration::from_secs(5), |v| {
        v.turn_steps().iter().filter(|s| s.kind == "model").count() >= 2
    })
    .await
    .unwrap();
    let errors: Vec<Option<String>> = spans
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n == "chat")
        .map(|(_, f)| f.get("error.type").cloned())
        .collect();
    assert_eq!(errors, [None, Some("503".to_owned())]);
}

// The metrics of a scripted call: a model turn with a tool, a barge-in mid-stream, a
// failed request, then Voqalize ending the call. Recorded by a test recorder on this test's thread
// (the session, the stand-in and the HTTP client all run on the test's one-thread runtime).
#[tokio::test]
async fn a_scripted_call_records_its_metrics() {
    let metrics = MetricLog::default();
    let _recording = metrics::set_default_local_recorder(&metrics);
    let (rig, mut v) = rig(Provider::Gemini).await;
    rig.server.reply(
        Reply::new()
            .text("Booking.")
            .call("open_booking", json!({"city": "Paris"}))
            .finish()
            .usage(12, 7),
    );
    v.start_silent().await.unwrap();
    v.user_says("book it").await.unwrap();
    assert_eq!(metrics.value("voqalize_calls_open{leg=direct}"), 1.0);

    // A barge-in while the stream is still coming: the request in flight is counted as
    // cancelled.
    rig.server.reply(Reply::new().text("Opening. ").hang());
    let turn = v.send_user_message("open it").await.unwrap();
    barge_in_once_speaking(&mut v, turn, "Opening.").await;

    // A request the provider refuses (503, then 503 again on the retry).
    rig.server.reply(Reply::error_status(503, "overloaded"));
    rig.server.reply(Reply::error_status(503, "overloaded"));
    v.send_user_message("again").await.unwrap();
    let failed = "voqalize_model_requests_total{outcome=status_5xx,provider=gcp.gemini}";
    assert!(
        v.wait_for(Duration::from_secs(5), |_| metrics.value(failed) == 1.0)
            .await
            .unwrap()
    );
    v.end().await.unwrap();
    let ended = "voqalize_calls_ended_total{leg=direct,reason=ended}";
    assert!(
        v.wait_for(Duration::from_secs(5), |_| metrics.value(ended) == 1.0)
            .await
            .unwrap(),
        "{:?}",
        metrics.names()
    );

    for (name, want) in [
        ("voqalize_calls_started_total{leg=direct}", 1.0),
        ("voqalize_calls_open{leg=direct}", 0.0),
        ("voqalize_turns_total", 3.0),
        ("voqalize_barge_ins_total", 1.0),
        (
            "voqalize_model_requests_total{outcome=ok,provider=gcp.gemini}",
            1.0,
        ),
        (
            "voqalize_model_requests_total{outcome=cancelled,provider=gcp.gemini}",
            1.0,
        ),
        (
            "voqalize_model_requests_total{outcome=status_5xx,provider=gcp.gemini}",
            1.0,
        ),
        (
            "voqalize_model_tokens_total{kind=input,provider=gcp.gemini}",
            12.0,
        ),
        (
            "voqalize_model_tokens_total{kind=output,provider=gcp.gemini}",
            7.0,
        ),
        (
            "voqalize_tool_runs_total{end=in_turn,outcome=ok,tool=open_booking}",
            1.0,
        ),
    ] {
        assert_eq!(metrics.value(name), want, "{name}: {:?}", metrics.names());
    }
    // The two turns that spoke: the answer, the words before the barge-in.
    assert_eq!(metrics.samples("voqalize_first_chunk_seconds").len(), 2);
    // Two requests had a first chunk: the one that ended and the one cut by the barge-in.
    assert_eq!(
        metrics
            .samples("voqalize_model_first_byte_seconds{provider=gcp.gemini}")
            .len(),
        2
    );
    assert_eq!(
        metrics
            .samples("voqalize_tool_run_seconds{tool=open_booking}")
            .len(),
        1
    );
    // No label carries a call's own values: no session id, no city.
    let all = metrics.names().join(" ");
    assert!(!all.contains("Paris") && !all.contains("session"), "{all}");
}

// ---- Parallel tool calls (Model::parallel_tools) ----

/// Gates a test opens to let each lookup end.
#[derive(Default)]
struct Gates {
    weather: Notify,
    calendar: Notify,
    traffic: Notify,
}

/// Lookups that each wait for their own gate, so a test decides when each ends.
struct Lookups {
    model: Model,
    log: Arc<Log>,
    gates: Arc<Gates>,
}

impl Brain for Lookups {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Lookups {
    /// Today's weather.
    #[tool(on_barge_in = cancel)]
    #[needs_result_now]
    async fn weather(&self) -> &'static str {
        self.gated("weather", &self.gates.weather).await;
        "sunny"
    }

    /// The user's calendar.
    #[tool(on_barge_in = cancel)]
    #[needs_result_now]
    async fn calendar(&self) -> &'static str {
        self.gated("calendar", &self.gates.calendar).await;
        "free at 3"
    }

    /// A lookup that takes 300 ms (past a short turn deadline).
    #[tool]
    async fn slow(&self) -> &'static str {
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.log.push("slow finished");
        "slow done"
    }

    /// The traffic on the way.
    #[tool]
    async fn traffic(&self) -> &'static str {
        self.gated("traffic", &self.gates.traffic).await;
        "clear"
    }
}

impl Lookups {
    /// Logs `name started`, waits for `gate`, logs `name finished`.
    async fn gated(&self, name: &str, gate: &Notify) {
        self.log.push(format!("{name} started"));
        gate.notified().await;
        self.log.push(format!("{name} finished"));
    }
}

/// A `Lookups` brain whose model runs up to `parallel` tools at once, against the stand-in Gemini.
async fn lookups(parallel: usize) -> (ModelServer, Arc<Log>, Arc<Gates>, Voqalize) {
    lookups_with(move |m| m.parallel_tools(parallel)).await
}

/// A `Lookups` brain with these model settings, against the stand-in Gemini.
async fn lookups_with(
    settings: impl Fn(Model) -> Model + Send + Sync + 'static,
) -> (ModelServer, Arc<Log>, Arc<Gates>, Voqalize) {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    let (log, gates) = (Arc::new(Log::default()), Arc::new(Gates::default()));
    let base = server.base_url();
    let (l, g) = (log.clone(), gates.clone());
    let v = driver(move || Lookups {
        model: settings(Model::new(layer(
            Provider::Gemini,
            &base,
            Duration::from_secs(10),
        ))),
        log: l.clone(),
        gates: g.clone(),
    })
    .await;
    (server, log, gates, v)
}

fn logged(log: &Log, event: &str) -> bool {
    log.events().iter().any(|e| e == event)
}

// Up to `n` tools run at once, each once the speech before it is out; the next call waits for a
// place. Results are filed in call order whichever ends first, and the needs_result_now
// follow-up is asked once, after the response ended and every call has its result.
#[tokio::test]
async fn parallel_tools_run_at_once_and_file_their_results_in_call_order() {
    let (server, log, gates, mut v) = lookups(2).await;
    server.reply(
        Reply::new()
            .text("Checking all three. ")
            .call("weather", json!({}))
            .call("calendar", json!({}))
            .call("traffic", json!({}))
            .finish(),
    );
    server.reply(Reply::new().text("Sunny, free at 3, roads clear.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("plan my afternoon").await.unwrap();
    assert!(
        log.wait(&mut v, |l| logged(l, "weather started")
            && logged(l, "calendar started"))
            .await,
        "two tools run at once: {:?}",
        log.events()
    );
    assert!(
        !logged(&log, "traffic started"),
        "the third waits for a place"
    );
    // The later call ends first: the third takes its place; still no follow-up.
    gates.calendar.notify_one();
    assert!(log.wait(&mut v, |l| logged(l, "traffic started")).await);
    gates.traffic.notify_one();
    assert!(log.wait(&mut v, |l| logged(l, "traffic finished")).await);
    assert_eq!(server.requests().len(), 1, "weather has no result yet");
    gates.weather.notify_one();
    assert_eq!(
        play(&mut v, turn, 2).await,
        ["Checking all three. ", "Sunny, free at 3, roads clear."]
    );
    assert_eq!(server.requests().len(), 2, "one follow-up");
    assert_eq!(
        gemini_contents(&server, 1),
        [
            "user: T(plan my afternoon)",
            "model: T(Checking all three. ), C(weather), C(calendar), C(traffic)",
            "user: R(weather={\"result\":\"sunny\"}), R(calendar={\"result\":\"free at 3\"}), \
             R(traffic={\"result\":\"clear\"})",
        ]
    );
    v.assert_clean();
}

// While a tool runs, the stream is read on and what follows the call is spoken.
#[tokio::test]
async fn with_parallel_tools_the_words_after_a_call_are_spoken_while_it_runs() {
    let (server, log, gates, mut v) = lookups(2).await;
    server.reply(
        Reply::new()
            .text("Let me look. ")
            .call("weather", json!({}))
            .text("This takes a second.")
            .finish(),
    );
    server.reply(Reply::new().text("Sunny.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("weather?").await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.units().any(|u| u.turn_id
            == turn
            && u.text() == "Let me look. This takes a second."))
            .await
            .unwrap(),
        "spoken while the tool runs"
    );
    assert!(!logged(&log, "weather finished"));
    gates.weather.notify_one();
    assert_eq!(
        play(&mut v, turn, 2).await,
        ["Let me look. This takes a second.", "Sunny."]
    );
}

// A barge-in on tools running in parallel: a lookup marked `on_barge_in = cancel` is stopped and
// its call answered as cancelled, a tool that finishes runs on; the next request reads both calls
// answered once, in call order, and the heard words.
#[tokio::test]
async fn a_barge_in_cancels_the_cancellable_runs_and_lets_the_others_finish_in_parallel() {
    let (server, log, gates, mut v) = lookups(2).await;
    server.reply(
        Reply::new()
            .text("Checking. ")
            .call("weather", json!({}))
            .call("traffic", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("weather and traffic").await.unwrap();
    assert!(
        log.wait(&mut v, |l| logged(l, "weather started")
            && logged(l, "traffic started"))
            .await
    );
    barge_in_once_speaking(&mut v, turn, "Checking.").await;
    server.reply(Reply::new().text("Sure.").finish());
    let next = v.send_user_message("never mind").await.unwrap();
    gates.traffic.notify_waiters();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(next).completed())
            .await
            .unwrap()
    );
    let contents = gemini_contents(&server, 1);
    assert_eq!(contents.len(), 4, "{contents:?}");
    assert_eq!(contents[1], "model: T(Checking.), C(weather), C(traffic)");
    assert!(
        contents[2].starts_with(
            "user: R(weather={\"error\":\"the user interrupted, so 'weather' was cancelled"
        ) && contents[2].ends_with(r#"R(traffic={"result":"clear"})"#),
        "{contents:?}"
    );
    assert_eq!(contents[3], "user: T(never mind)");
    assert!(
        !logged(&log, "weather finished") && logged(&log, "traffic finished"),
        "{:?}",
        log.events()
    );
}

// The turn deadline stops the stream's reading, never a tool that is running, with tools in
// parallel as with one at a time: the tool runs to its end and its call stays answered.
#[tokio::test]
async fn the_turn_deadline_never_cuts_a_running_tool_in_parallel() {
    let (server, log, _gates, mut v) = lookups_with(|m| {
        m.parallel_tools(2)
            .turn_deadline(Duration::from_millis(100))
    })
    .await;
    server.reply(
        Reply::new()
            .text("Checking. ")
            .call("slow", json!({}))
            .keep_alive(Duration::from_millis(20)),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("go").await.unwrap();
    assert!(log.wait(&mut v, |l| logged(l, "slow finished")).await);
    assert_eq!(play(&mut v, turn, 1).await, ["Checking. "]);
    server.reply(Reply::new().text("Done.").finish());
    v.user_says("again").await.unwrap();
    let contents = gemini_contents(&server, 1);
    assert!(
        contents.contains(&"model: T(Checking. ), C(slow)".to_owned())
            && contents
                .iter()
                .any(|c| c.contains("R(slow={\"result\":\"slow done\"})")),
        "the call and its result stay: {contents:?}"
    );
}

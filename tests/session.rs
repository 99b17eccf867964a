//! The session runtime against docs/protocol.md §4 and §7, driven in-process
//! by `voqalize_testing::Voqalize` through the real codec and session loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use voqalize::prelude::*;
use voqalize::wire::{Capabilities, ErrorFrame, Frame, Response, SessionStart};
use voqalize_testing::{BargeAt, BargeIn, Start, Voqalize};

use crate::support::{Log, driver, driver_with};

/// How a scripted hook fails.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fail {
    Err,
    Panic,
}

/// Knobs for [`Scripted`].
#[derive(Clone, Default)]
struct Cfg {
    greeting: Option<String>,
    start_fails: Option<Fail>,
    greet_fails: Option<Fail>,
    /// on_session_start waits for this before returning.
    start_gate: Option<Arc<Notify>>,
    configure_on_start: Option<Config>,
    /// on_finalize waits for this before returning.
    finalize_gate: Option<Arc<Notify>>,
    /// on_rtvi waits for this before returning.
    rtvi_gate: Option<Arc<Notify>>,
}

/// A brain whose turns follow a small command language, logging every callback.
struct Scripted {
    log: Arc<Log>,
    cfg: Cfg,
}

fn fail(how: Fail, what: &str) -> BrainResult {
    match how {
        Fail::Err => Err(what.into()),
        Fail::Panic => panic!("{what}"),
    }
}

/// Logs when the turn future is dropped before it finished (a barge-in or teardown).
struct CutGuard(Arc<Log>, u64, bool);
impl Drop for CutGuard {
    fn drop(&mut self) {
        if !self.2 {
            self.0.push(format!("cut {}", self.1));
        }
    }
}

impl Brain for Scripted {
    async fn on_session_start(&self, session: &Session) -> BrainResult {
        self.log.push("start");
        if let Some(gate) = &self.cfg.start_gate {
            gate.notified().await;
        }
        if let Some(config) = self.cfg.configure_on_start.clone() {
            session.configure(config).await?;
            self.log.push("configured");
        }
        match self.cfg.start_fails {
            Some(how) => fail(how, "boom"),
            None => Ok(()),
        }
    }

    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        self.log.push("greet");
        if let Some(how) = self.cfg.greet_fails {
            fail(how, "nope")?;
        }
        Ok(self.cfg.greeting.clone())
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        let text = message.text.clone();
        self.log.push(format!("message {} {text}", message.turn_id));
        let mut guard = CutGuard(self.log.clone(), turn.id(), false);
        let words: Vec<&str> = text.splitn(2, ' ').collect();
        let rest = words.get(1).copied().unwrap_or("");
        match words[0] {
            "say" => {
                turn.say(rest);
            }
            "chunks" => {
                let mut unit = turn.open_unit();
                for c in rest.split(',') {
                    unit.write(c);
                }
            }
            "two" => {
                turn.say("first");
                turn.say("second");
            }
            "slow" => {
                let ms: u64 = rest.parse()?;
                let mut unit = turn.open_unit();
                unit.write("s");
                tokio::time::sleep(Duration::from_millis(ms)).await;
                unit.write("late");
            }
            "fail" | "panic" => {
                let mut unit = turn.open_unit();
                unit.write(rest);
                let how = if words[0] == "fail" {
                    Fail::Err
                } else {
                    Fail::Panic
                };
                guard.2 = true;
                return fail(how, "turn broke");
            }
            "dispatch" => {
                turn.session().dispatch(&OpenPanel {
                    foo: "bar".into(),
                    note: None,
                })?;
            }
            "rtvi" => {
                turn.say("before");
                turn.session()
                    .send_rtvi(RtviType::ServerMessage, Some(&json!({"x": 1})), None)?;
                turn.say("after");
            }
            "goodbye" => {
                turn.say("bye");
                turn.session().end("done");
                turn.session().end("again");
                turn.say("after end");
            }
            "cancel" => {
                let fin = {
                    let mut unit = turn.open_unit();
                    unit.write("one ");
                    let id = unit.id();
                    let fin = unit.session().cancel_speech(id).await?;
                    let again = unit.session().cancel_speech(id).await?;
                    assert_eq!(fin, again);
                    unit.write("dropped");
                    fin
                };
                self.log.push(format!(
                    "cancelled {} heard={:?} generated={:?}",
                    fin.speech_id, fin.heard, fin.generated
                ));
                turn.say("fix");
            }
            "configure" => {
                let config = Config::builder().language(rest).build()?;
                match turn.session().configure(config).await {
                    Ok(()) => self.log.push("configure ok"),
                    Err(e) => self.log.push(format!("configure error: {e}")),
                }
            }
            "step" => {
                turn.session().report_step(
                    Step::new("model", "g")
                        .duration_ms(20)
                        .count("output_tokens", 3),
                    None,
                )?;
            }
            _ => {
                turn.say(&format!("you said {text}"));
            }
        }
        guard.2 = true;
        Ok(())
    }

    async fn on_user_idle(&self, turn: &mut Turn, idle: UserIdle) -> BrainResult {
        self.log.push(format!("idle {}", idle.level));
        if idle.level >= 2 {
            turn.session().end("idle");
        }
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, f: Finalized) -> BrainResult {
        if let Some(gate) = &self.cfg.finalize_gate {
            gate.notified().await;
        }
        self.log.push(format!(
            "finalize {} heard={:?} generated={:?} interrupted={}",
            f.speech_id,
            f.heard,
            f.generated,
            f.interrupted()
        ));
        Ok(())
    }

    async fn on_rtvi(&self, _session: &Session, message: Rtvi) -> BrainResult {
        if let Some(gate) = &self.cfg.rtvi_gate {
            gate.notified().await;
        }
        self.log.push(format!(
            "rtvi {} {}",
            message.kind,
            message.data.unwrap_or(Value::Null)
        ));
        Ok(())
    }

    async fn on_error(&self, _session: &Session, error: ErrorFrame) -> BrainResult {
        self.log.push(format!(
            "error {} {} fatal={}",
            error.code, error.message, error.fatal
        ));
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, reason: EndReason) {
        self.log.end_because(&reason);
    }
}

#[derive(serde::Serialize)]
struct OpenPanel {
    foo: String,
    note: Option<String>,
}

impl Action for OpenPanel {
    const NAME: &'static str = "open_panel";
}

async fn scripted(cfg: Cfg) -> (Voqalize, Arc<Log>) {
    let log = Arc::new(Log::default());
    let l = log.clone();
    (
        driver(move || Scripted {
            log: l.clone(),
            cfg: cfg.clone(),
        })
        .await,
        log,
    )
}

fn greeting(text: &str) -> Cfg {
    Cfg {
        greeting: Some(text.into()),
        ..Cfg::default()
    }
}

fn speech(frames: &[Frame]) -> Vec<Frame> {
    frames
        .iter()
        .filter(|f| {
            matches!(
                f,
                Frame::SpeechStart { .. } | Frame::SpeechChunk { .. } | Frame::SpeechEnd { .. }
            )
        })
        .cloned()
        .collect()
}

/// Starts a session whose runtime advertises no capability, without waiting for a greeting.
async fn start_without_capabilities(v: &mut Voqalize) {
    v.start_with(Start {
        capabilities: Capabilities::new(),
        expect_greeting: false,
        ..Start::default()
    })
    .await
    .unwrap();
}

/// A SessionStart (wire 3, turn 1) advertising no capabilities, for the session the drivers dial
/// (`test-session`).
fn bare_start() -> Frame {
    Frame::SessionStart(
        SessionStart::new("test-session", 1)
            .with_init(Default::default())
            .with_wire_version(3)
            .with_capabilities(Capabilities::new()),
    )
}

fn message(turn_id: u64, text: &str) -> Frame {
    Frame::UserMessage(UserMessage::new(turn_id, text))
}

fn start(id: u64, turn: u64) -> Frame {
    Frame::SpeechStart {
        speech_id: id,
        turn_id: turn,
    }
}
fn chunk(id: u64, text: &str) -> Frame {
    Frame::SpeechChunk {
        speech_id: id,
        text: text.into(),
    }
}
fn end(id: u64) -> Frame {
    Frame::SpeechEnd { speech_id: id }
}

/// Waits until the log holds an event starting with `prefix`.
async fn logged(v: &mut Voqalize, log: &Log, prefix: &str) -> bool {
    log.wait(v, |l| l.events().iter().any(|e| e.starts_with(prefix)))
        .await
}

// ---- Start and greeting (docs/protocol.md §4.3) ----

#[tokio::test]
async fn greeting_is_one_unit_on_the_start_turn() {
    let (mut v, _) = scripted(greeting("Hi")).await;
    let turn = v.start().await.unwrap();
    assert_eq!(turn.unit_texts(), ["Hi"]);
    assert_eq!(
        v.received(),
        &[start(1, 1), chunk(1, "Hi"), end(1)],
        "case 11"
    );
    v.assert_clean();
}

#[tokio::test]
async fn no_greeting_sends_nothing() {
    for g in [None, Some(String::new())] {
        let (mut v, log) = scripted(Cfg {
            greeting: g,
            ..Cfg::default()
        })
        .await;
        v.start_silent().await.unwrap();
        assert!(logged(&mut v, &log, "greet").await);
        v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
            .await
            .unwrap();
        assert!(v.received().is_empty(), "case 12: {:?}", v.received());
    }
}

#[tokio::test]
async fn wrong_wire_version_is_refused_and_the_session_stays_quiet() {
    for version in [2, 0] {
        let (mut v, log) = scripted(greeting("Hi")).await;
        v.start_with(Start {
            wire_version: version,
            ..Start::default()
        })
        .await
        .unwrap();
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await
            .unwrap();
        let refusal =
            format!("wire version mismatch: Voqalize speaks {version}, this SDK speaks 3");
        assert_eq!(
            v.received(),
            &[
                Frame::Error(ErrorFrame {
                    code: ErrorCode::WireVersion,
                    message: refusal,
                    fatal: true
                }),
                Frame::End
            ],
            "cases 13/14"
        );
        assert!(!log.events().iter().any(|e| e == "start" || e == "greet"));
        // docs/protocol.md §7 D1: no further callbacks after the refusal.
        v.send(message(2, "say x")).await.unwrap();
        v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(v.received().len(), 2);
        assert!(!log.events().iter().any(|e| e.starts_with("message")));
        v.hang_up().await;
        v.brain_result().await.unwrap().unwrap();
        assert_eq!(log.ended(), 1, "on_session_end still runs once");
    }
}

#[tokio::test]
async fn failing_start_hooks_end_the_call_with_a_fatal_error() {
    let cases = [
        (Some(Fail::Err), None, "on_session_start failed: boom"),
        (
            Some(Fail::Panic),
            None,
            "on_session_start failed: panicked: boom",
        ),
        (None, Some(Fail::Err), "greet failed: nope"),
        (None, Some(Fail::Panic), "greet failed: panicked: nope"),
    ];
    for (start_fails, greet_fails, message) in cases {
        let (mut v, log) = scripted(Cfg {
            greeting: Some("Hi".into()),
            start_fails,
            greet_fails,
            ..Cfg::default()
        })
        .await;
        v.start_silent().await.unwrap();
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await
            .unwrap();
        assert_eq!(
            v.received(),
            &[
                Frame::Error(ErrorFrame {
                    code: ErrorCode::Internal,
                    message: message.into(),
                    fatal: true
                }),
                Frame::End
            ],
            "cases 15/16"
        );
        if start_fails.is_some() {
            assert!(!log.events().contains(&"greet".to_owned()));
        }
    }
}

#[tokio::test]
async fn configure_inside_on_session_start_goes_out_before_the_greeting() {
    let config = Config::builder().patience(5).build().unwrap();
    let (mut v, log) = scripted(Cfg {
        greeting: Some("Hi".into()),
        configure_on_start: Some(config),
        ..Cfg::default()
    })
    .await;
    v.start().await.unwrap();
    assert!(
        matches!(v.received()[0], Frame::Request { request_id: 1, .. }),
        "case 17"
    );
    assert_eq!(v.received()[1], start(1, 1));
    let events = log.events();
    let configured = events.iter().position(|e| e == "configured").unwrap();
    let greeted = events.iter().position(|e| e == "greet").unwrap();
    assert!(configured < greeted);
}

#[tokio::test]
async fn a_user_message_waits_for_the_start_hooks() {
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        greeting: Some("Hi".into()),
        start_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    v.send(bare_start()).await.unwrap();
    v.send(message(2, "say q")).await.unwrap();
    assert!(logged(&mut v, &log, "start").await);
    assert!(
        !log.events().iter().any(|e| e.starts_with("message")),
        "case 18"
    );
    gate.notify_one();
    assert!(logged(&mut v, &log, "message 2").await);
    let events = log.events();
    let greet = events.iter().position(|e| e == "greet").unwrap();
    let message = events
        .iter()
        .position(|e| e.starts_with("message"))
        .unwrap();
    assert!(greet < message);
}

#[tokio::test]
async fn an_interruption_right_behind_session_start_cancels_the_greeting() {
    // Case 19, made deterministic over a real socket: the Interruption is read while the start
    // hooks still run (with fast hooks, whether it lands before the greeting starts is a race on
    // any transport with more than one thread).
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        greeting: Some("Hello".into()),
        start_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    v.send(bare_start()).await.unwrap();
    v.send(Frame::Interruption { through_turn: 1 })
        .await
        .unwrap();
    assert!(logged(&mut v, &log, "start").await);
    // Nothing on the wire shows that the reader applied the Interruption; give it a margin far
    // above loopback latency before the hooks return.
    v.quiesce(Duration::from_millis(150), Duration::from_millis(150))
        .await
        .unwrap();
    gate.notify_one();
    assert!(logged(&mut v, &log, "greet").await);
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(v.received().is_empty(), "case 19: {:?}", v.received());
}

// ---- Turns and speech (docs/protocol.md §4.4–4.6) ----

#[tokio::test]
async fn empty_chunks_are_never_sent() {
    let (mut v, _) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let turn = v.user_says("chunks a,,b").await.unwrap();
    assert_eq!(turn.units[0].chunks, ["a", "b"], "case 20");
    assert_eq!(
        speech(v.received()),
        [start(1, 2), chunk(1, "a"), chunk(1, "b"), end(1)]
    );
    v.assert_clean();
}

#[tokio::test]
async fn speech_ids_are_session_monotonic_across_turns() {
    let (mut v, _) = scripted(greeting("Hi")).await;
    v.start().await.unwrap();
    let t2 = v.user_says("two").await.unwrap();
    let ids: Vec<u64> = t2.units.iter().map(|u| u.speech_id).collect();
    assert_eq!(ids, [2, 3], "case 21");
    let t3 = v.user_says("say x").await.unwrap();
    assert_eq!(t3.units[0].speech_id, 4);
    v.assert_clean();
}

#[tokio::test]
async fn a_failing_turn_closes_its_unit_and_the_session_goes_on() {
    for verb in ["fail", "panic"] {
        let (mut v, log) = scripted(Cfg::default()).await;
        v.start_silent().await.unwrap();
        let t = v.user_says(&format!("{verb} x")).await.unwrap();
        assert_eq!(
            speech(v.received()),
            [start(1, 2), chunk(1, "x"), end(1)],
            "case 24 ({verb})"
        );
        assert!(t.completed());
        let next = v.user_says("say ok").await.unwrap();
        assert_eq!(next.text(), "ok");
        assert!(!log.events().iter().any(|e| e.starts_with("cut")));
        v.assert_clean();
    }
}

#[tokio::test]
async fn a_turn_may_only_dispatch() {
    let (mut v, _) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    v.send(message(2, "dispatch")).await.unwrap();
    let commands = v.collect_ui_commands(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        commands,
        [json!({"command": "open_panel", "payload": {"foo": "bar", "note": null}})],
        "cases 26 and 55: every field, null included"
    );
    assert!(speech(v.received()).is_empty());
    let rtvi = v.rtvi()[0].clone();
    assert_eq!(rtvi.turn_id, Some(2));
}

#[tokio::test]
async fn turns_run_concurrently_and_only_interruption_cancels() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    for (turn_id, text) in [(2, "slow 400"), (3, "slow 50")] {
        v.send(Frame::UserMessage(UserMessage::new(turn_id, text)))
            .await
            .unwrap();
    }
    v.next_turn_id();
    v.next_turn_id();
    // Turn 3 completes while turn 2 is still sleeping: they run concurrently (case 27).
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(3).completed())
            .await
            .unwrap()
    );
    assert!(!v.turn(2).completed());
    // Case 28: Interruption{2} stops turn 2 without a SpeechEnd for its open unit.
    v.send(Frame::Interruption { through_turn: 2 })
        .await
        .unwrap();
    assert!(logged(&mut v, &log, "cut 2").await);
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    let t2 = v.turn(2);
    assert_eq!(t2.units[0].chunks, ["s"]);
    assert!(!t2.units[0].ended);
    assert!(v.turn(3).completed());
    assert!(!log.events().contains(&"cut 3".to_owned()));
}

#[tokio::test]
async fn stimuli_at_or_below_the_watermark_never_start() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    v.send(Frame::Interruption { through_turn: 5 })
        .await
        .unwrap();
    v.send(Frame::Interruption { through_turn: 3 })
        .await
        .unwrap();
    for turn_id in [4, 5] {
        v.send(message(turn_id, "say no")).await.unwrap();
    }
    v.send(message(6, "say yes")).await.unwrap();
    for _ in 0..5 {
        v.next_turn_id();
    }
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(6).completed())
            .await
            .unwrap()
    );
    assert!(
        v.turn(4).units.is_empty() && v.turn(5).units.is_empty(),
        "cases 29/30"
    );
    assert!(!log.events().iter().any(|e| e.contains("say no")));
}

#[tokio::test]
async fn user_idle_default_is_silent_and_a_level_two_nudge_may_end() {
    struct Quiet;
    impl Brain for Quiet {
        async fn on_user_message(&self, _t: &mut Turn, _m: UserMessage) -> BrainResult {
            Ok(())
        }
    }
    let mut v = driver(|| Quiet).await;
    v.start_silent().await.unwrap();
    v.send(Frame::UserIdle(UserIdle::new(2, 1, 5)))
        .await
        .unwrap();
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(v.received().is_empty(), "case 31");

    let (mut v, _) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    v.send(Frame::UserIdle(UserIdle::new(2, 2, 30_000)))
        .await
        .unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await
            .unwrap()
    );
    assert_eq!(v.received(), &[Frame::End]);
}

// ---- Finalize (docs/protocol.md §4.7) ----

#[tokio::test]
async fn finalize_reports_heard_and_generated() {
    let (mut v, log) = scripted(greeting("Hi")).await;
    v.send(bare_start()).await.unwrap();
    v.next_turn_id();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.units().any(|u| u.ended))
            .await
            .unwrap()
    );
    v.finalize(99, "zz").await.unwrap();
    v.finalize(1, "H").await.unwrap();
    assert!(logged(&mut v, &log, "finalize 1").await);
    let events = log.events();
    assert!(
        events.contains(&r#"finalize 1 heard="H" generated="Hi" interrupted=true"#.to_owned()),
        "case 32: {events:?}"
    );
    assert!(
        !events.iter().any(|e| e.starts_with("finalize 99")),
        "a Finalize for a unit never opened is not delivered (docs/protocol.md §4.7): {events:?}"
    );
}

#[tokio::test]
async fn a_finalize_mid_stream_closes_the_unit() {
    struct Streamer(Arc<Notify>);
    impl Brain for Streamer {
        async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
            {
                let mut unit = turn.open_unit();
                unit.write("a");
                self.0.notified().await;
                unit.write("b");
            }
            turn.say("c");
            Ok(())
        }
    }
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let mut v = driver(move || Streamer(g.clone())).await;
    v.start_silent().await.unwrap();
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "go")).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| !u.chunks.is_empty()))
            .await
            .unwrap()
    );
    v.finalize(1, "a").await.unwrap();
    // The Finalize is handled before the next frame: a later frame proves it was applied.
    v.send(Frame::Error(ErrorFrame {
        code: ErrorCode::Protocol,
        message: "sync".into(),
        fatal: false,
    }))
    .await
    .unwrap();
    v.quiesce(Duration::from_millis(60), Duration::from_secs(1))
        .await
        .unwrap();
    gate.notify_one();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .turn(turn_id)
            .units
            .get(1)
            .is_some_and(|u| u.ended))
            .await
            .unwrap()
    );
    assert_eq!(
        speech(v.received()),
        [
            start(1, 2),
            chunk(1, "a"),
            start(2, 2),
            chunk(2, "c"),
            end(2)
        ],
        "case 34: no chunk b and no End for unit 1"
    );
}

// ---- SpeechCancel (docs/protocol.md §4.8) ----

#[tokio::test]
async fn cancel_speech_returns_what_was_heard_and_closes_the_unit() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let turn = v.user_says("cancel").await.unwrap();
    assert_eq!(v.speech_cancels(), [1], "cases 35/36: one SpeechCancel");
    assert_eq!(turn.unit_texts(), ["one ", "fix"]);
    assert!(
        log.events()
            .contains(&r#"cancelled 1 heard="one " generated="one ""#.to_owned())
    );
    assert_eq!(
        speech(v.received()),
        [
            start(1, 2),
            chunk(1, "one "),
            start(2, 2),
            chunk(2, "fix"),
            end(2)
        ]
    );
    v.assert_clean();
}

#[tokio::test]
async fn cancel_speech_errors() {
    struct Canceller(Arc<Log>);
    impl Brain for Canceller {
        async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
            let s = turn.session().clone();
            match s.cancel_speech(999).await {
                Err(e) => self.0.push(format!("999: {e}")),
                Ok(_) => self.0.push("999: ok"),
            }
            let id = turn.say(&m.text);
            match s.cancel_speech(id).await {
                Err(e) => self.0.push(format!("own: {e}")),
                Ok(f) => self.0.push(format!("own: heard {:?}", f.heard)),
            }
            Ok(())
        }
    }
    // Without the capability: Unsupported, nothing sent (case 38).
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Canceller(l.clone())).await;
    start_without_capabilities(&mut v).await;
    v.user_says("x").await.unwrap();
    assert!(v.speech_cancels().is_empty());
    assert!(
        log.events()
            .iter()
            .all(|e| e.ends_with("this session does not have")),
        "{:?}",
        log.events()
    );

    // With it: an unknown id is refused (case 37); a unit whose End went out is still cancelled (39).
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Canceller(l.clone())).await;
    v.start_silent().await.unwrap();
    v.user_says("x").await.unwrap();
    let events = log.events();
    assert_eq!(
        events[0],
        "999: speech 999 was never opened by this session"
    );
    assert_eq!(events[1], r#"own: heard "x""#);
    assert_eq!(v.speech_cancels(), [1]);
}

#[tokio::test]
async fn an_unanswered_cancel_times_out_and_releases_the_withheld_end() {
    struct Withheld(Arc<Log>);
    impl Brain for Withheld {
        async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
            let s = turn.session().clone();
            let mut unit = turn.open_unit();
            unit.write("x");
            let id = unit.id();
            let (a, b) = tokio::join!(s.cancel_speech(id), async {
                // The brain ends the unit after cancelling it: its End is held back.
                tokio::task::yield_now().await;
                s.cancel_speech(id).await
            });
            self.0
                .push(format!("a: {:?}", a.map(|_| ()).map_err(|e| e.to_string())));
            self.0
                .push(format!("b: {:?}", b.map(|_| ()).map_err(|e| e.to_string())));
            unit.close();
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver_with(
        move || Withheld(l.clone()),
        HostOptions::builder()
            .allow_unverified()
            .request_timeout(Duration::from_millis(300))
            .build()
            .expect("options"),
    )
    .await;
    v.start_silent().await.unwrap();
    // A runtime that never answers SpeechCancel.
    v.auto_answer = false;
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "go")).await.unwrap();
    assert!(logged(&mut v, &log, "b:").await);
    let events = log.events();
    assert!(events[0].contains("did not answer"), "case 40: {events:?}");
    assert!(events[1].contains("did not answer"));
    assert_eq!(
        v.speech_cancels(),
        [1],
        "case 41: one SpeechCancel for two callers"
    );
}

// ---- Configure (docs/protocol.md §4.9) ----

#[tokio::test]
async fn configure_round_trip_and_errors() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "configure ta")).await.unwrap();
    assert!(logged(&mut v, &log, "configure ok").await, "case 42");
    let (id, config) = v.requests()[0].clone();
    assert_eq!(id, 1);
    assert_eq!(config, Config::builder().language("ta").build().unwrap());

    // Without string_config: Unsupported before sending (case 44).
    let (mut v, log) = scripted(Cfg::default()).await;
    start_without_capabilities(&mut v).await;
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "configure ta")).await.unwrap();
    assert!(logged(&mut v, &log, "configure error").await);
    assert!(v.requests().is_empty());
    assert!(log.events().iter().any(|e| e.contains("string_config")));
}

#[tokio::test]
async fn configure_rejected_carries_detail_and_code() {
    struct Configurer(Arc<Log>);
    impl Brain for Configurer {
        async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
            let config = Config::builder()
                .language(Language::Ta)
                .voice(Voice::OmnivoiceGauri)
                .build()?;
            match turn.session().configure(config).await {
                Err(SessionError::Rejected { detail, code, .. }) => {
                    self.0.push(format!("rejected {detail} {code:?}"))
                }
                other => self.0.push(format!("{other:?}")),
            }
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Configurer(l.clone())).await;
    // Catalog members need no string_config (case 45).
    start_without_capabilities(&mut v).await;
    v.auto_answer = false;
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "go")).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| !v.requests().is_empty())
            .await
            .unwrap()
    );
    let (request_id, _) = v.requests()[0].clone();
    // A Response nobody waits for is logged and changes nothing (case 48).
    v.send(Frame::Response(Response::new(7, true, String::new(), None)))
        .await
        .unwrap();
    v.send(Frame::Response(Response::new(
        request_id,
        false,
        "no tamil",
        Some(ErrorCode::UnsupportedLanguage),
    )))
    .await
    .unwrap();
    assert!(logged(&mut v, &log, "rejected").await, "{:?}", log.events());
    assert_eq!(
        log.events(),
        ["rejected no tamil Some(UnsupportedLanguage)"],
        "case 43"
    );
}

#[tokio::test]
async fn config_validation() {
    assert!(matches!(
        Config::builder().tts_language("ta").build(),
        Err(ConfigError::OneLanguageLeg { .. })
    ));
    assert!(matches!(
        Config::builder().patience(11).build(),
        Err(ConfigError::Patience(11))
    ));
    assert!(matches!(
        Config::builder().voice("  ").build(),
        Err(ConfigError::EmptyString { .. })
    ));
}

use voqalize::wire::ConfigError;

// ---- TurnStep, RTVI (docs/protocol.md §4.10–4.11) ----

#[tokio::test]
async fn report_step_inside_a_turn() {
    let (mut v, _) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "step")).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| !v.turn_steps().is_empty())
            .await
            .unwrap()
    );
    let step = &v.turn_steps()[0];
    assert_eq!(step.turn_id, 2, "case 49");
    assert_eq!(step.duration_ms, 20);
    assert_eq!(step.first_output_ms, None);
    assert_eq!(step.counts.get("output_tokens"), Some(&3));
    assert_eq!(step.counts.len(), 1);
}

#[tokio::test]
async fn report_step_needs_a_turn_and_the_capability() {
    struct Stepper(Arc<Log>);
    impl Brain for Stepper {
        async fn on_user_message(&self, _t: &mut Turn, _m: UserMessage) -> BrainResult {
            Ok(())
        }
        async fn on_rtvi(&self, session: &Session, _m: Rtvi) -> BrainResult {
            let step = || Step::new("tool", "t").duration_ms(1);
            let r1 = session.report_step(step(), None);
            let r2 = session.report_step(step(), Some(1));
            let r3 = session.report_step(step(), Some(77));
            let r4 = session.report_step(step().start_ms(0), Some(77));
            for r in [r1, r2, r3, r4] {
                self.0.push(format!("{:?}", r.map_err(|e| e.to_string())));
            }
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Stepper(l.clone())).await;
    v.start_silent().await.unwrap();
    v.send_ui_event("x", json!({})).await.unwrap();
    assert!(log.wait(&mut v, |l| l.events().len() == 4).await);
    let e = log.events();
    assert!(e[0].contains("outside a turn"), "case 50: {e:?}");
    assert_eq!(e[1], "Ok(())");
    assert!(e[2].contains("too long ago"));
    assert_eq!(e[3], "Ok(())");

    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Stepper(l.clone())).await;
    start_without_capabilities(&mut v).await;
    v.send_ui_event("x", json!({})).await.unwrap();
    assert!(log.wait(&mut v, |l| l.events().len() == 4).await);
    assert!(
        log.events().iter().all(|e| e.contains("turn_steps")),
        "case 51"
    );
}

#[tokio::test]
async fn send_rtvi_lands_between_speech_and_carries_the_turn() {
    let (mut v, _) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    v.user_says("rtvi").await.unwrap();
    let frames = v.received();
    assert!(matches!(frames[2], Frame::SpeechEnd { .. }));
    match &frames[3] {
        Frame::Rtvi(r) => {
            assert_eq!(r.kind, RtviType::ServerMessage);
            assert_eq!(r.data, Some(json!({"x": 1})));
            assert_eq!(r.turn_id, Some(2), "case 52");
        }
        other => panic!("expected RTVI, got {other:?}"),
    }
    assert!(matches!(frames[4], Frame::SpeechStart { .. }));
}

#[tokio::test]
async fn app_only_rtvi_types_cannot_be_sent() {
    struct Sender(Arc<Log>);
    impl Brain for Sender {
        async fn on_user_message(&self, _t: &mut Turn, _m: UserMessage) -> BrainResult {
            Ok(())
        }
        async fn on_rtvi(&self, session: &Session, _m: Rtvi) -> BrainResult {
            let bad = session.send_rtvi(RtviType::ClientMessage, Some(&json!({})), None);
            self.0.push(format!("{:?}", bad.map_err(|e| e.to_string())));
            session.send_rtvi(
                RtviType::ServerResponse,
                Some(&json!({"ok": true})),
                Some("r1".into()),
            )?;
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Sender(l.clone())).await;
    v.start_silent().await.unwrap();
    v.send_ui_event("x", json!({})).await.unwrap();
    v.wait_for(Duration::from_secs(5), |v| !v.rtvi().is_empty())
        .await
        .unwrap();
    assert!(
        log.events()[0].contains("may not send RTVI client-message"),
        "case 54"
    );
    let r = &v.rtvi()[0];
    assert_eq!(r.id.as_deref(), Some("r1"), "case 53");
    assert_eq!(r.turn_id, None);
    assert_eq!(v.rtvi().len(), 1);
}

#[tokio::test]
async fn on_rtvi_is_not_cancelled_by_a_barge_in_and_sees_messages_in_order() {
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        rtvi_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    v.start_silent().await.unwrap();
    v.send_client_message("cart_opened", json!({"page": "checkout"}))
        .await
        .unwrap();
    v.send_ui_event("quantity_set", json!({"quantity": 5}))
        .await
        .unwrap();
    v.send(Frame::Interruption { through_turn: 9 })
        .await
        .unwrap();
    gate.notify_one();
    assert!(logged(&mut v, &log, "rtvi client-message").await, "case 56");
    gate.notify_one();
    assert!(logged(&mut v, &log, "rtvi ui-event").await);
    let events = log.events();
    let a = events
        .iter()
        .position(|e| e.starts_with("rtvi client"))
        .unwrap();
    let b = events
        .iter()
        .position(|e| e.starts_with("rtvi ui-event"))
        .unwrap();
    assert!(a < b);
}

/// Counts app messages; each `on_rtvi` waits for a permit.
struct SlowApp {
    log: Arc<Log>,
    permits: Arc<tokio::sync::Semaphore>,
}

impl Brain for SlowApp {
    async fn on_user_message(&self, _turn: &mut Turn, _m: UserMessage) -> BrainResult {
        Ok(())
    }

    async fn on_rtvi(&self, _session: &Session, message: Rtvi) -> BrainResult {
        self.permits.acquire().await?.forget();
        let last = message.data.is_some_and(|d| d["event"] == "last");
        self.log.push(if last { "last" } else { "rtvi" });
        Ok(())
    }

    async fn on_error(&self, _session: &Session, e: ErrorFrame) -> BrainResult {
        self.log.push(format!("error {}", e.message));
        Ok(())
    }
}

// App messages waiting for `on_rtvi` are bounded in bytes: 300 events of 60 KB behind a stuck
// `on_rtvi` keep about `max_lane_bytes` (2 MiB) of them, not 256 (15 MB).
#[tokio::test]
async fn app_messages_waiting_for_on_rtvi_are_bounded_in_bytes() {
    let (log, permits) = (
        Arc::new(Log::default()),
        Arc::new(tokio::sync::Semaphore::new(0)),
    );
    let (l, p) = (log.clone(), permits.clone());
    let mut v = Voqalize::in_process(move || SlowApp {
        log: l.clone(),
        permits: p.clone(),
    });
    v.start_silent().await.unwrap();
    let big = "x".repeat(60_000);
    for _ in 0..300 {
        v.send_ui_event("big", json!({ "blob": big }))
            .await
            .unwrap();
    }
    v.send(Frame::Error(ErrorFrame {
        code: ErrorCode::Protocol,
        message: "sync".into(),
        fatal: false,
    }))
    .await
    .unwrap();
    assert!(logged(&mut v, &log, "error sync").await);
    permits.add_permits(10_000);
    v.send_ui_event("last", json!({})).await.unwrap();
    assert!(logged(&mut v, &log, "last").await);
    let delivered = log.events().iter().filter(|e| *e == "rtvi").count();
    assert!(
        (20..=40).contains(&delivered),
        "about 2 MiB of 60 KB events waited, not {delivered}"
    );
}

#[tokio::test]
async fn brain_only_rtvi_types_inbound_are_dropped() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    v.send_rtvi(RtviType::UiCommand, json!({"command": "x"}))
        .await
        .unwrap();
    v.send_ui_event("after", json!({})).await.unwrap();
    assert!(logged(&mut v, &log, "rtvi ui-event").await);
    assert!(
        !log.events()
            .iter()
            .any(|e| e.starts_with("rtvi ui-command")),
        "docs/protocol.md §7 D13"
    );
}

// App events (case 57).
#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct QuantitySet {
    item_id: String,
    quantity: u32,
}

impl AppEvent for QuantitySet {
    const NAMES: &'static [&'static str] = &["quantity_set"];
    fn from_payload(_name: &str, payload: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(payload)
    }
}

#[test]
fn app_events_parse_and_never_fail() {
    let rtvi = |kind, data: Value| Rtvi {
        kind,
        data: Some(data),
        id: None,
        turn_id: None,
    };
    let good = rtvi(
        RtviType::UiEvent,
        json!({"event": "quantity_set", "payload": {"item_id": "li3", "quantity": 5}}),
    );
    assert_eq!(
        parse_app_event::<QuantitySet>(&good),
        Some(QuantitySet {
            item_id: "li3".into(),
            quantity: 5
        })
    );
    let extra = rtvi(
        RtviType::UiEvent,
        json!({"event": "quantity_set", "payload": {"item_id": "li3", "quantity": 5, "x": 1}}),
    );
    assert_eq!(parse_app_event::<QuantitySet>(&extra), None);
    let legacy = rtvi(
        RtviType::ClientMessage,
        json!({"t": "quantity_set", "d": {"item_id": "a", "quantity": 1}}),
    );
    assert!(parse_app_event::<QuantitySet>(&legacy).is_some());
    for bad in [
        rtvi(
            RtviType::SendText,
            json!({"event": "quantity_set", "payload": {}}),
        ),
        rtvi(RtviType::UiEvent, json!([1])),
        rtvi(RtviType::UiEvent, json!({"event": 5})),
        rtvi(RtviType::UiEvent, json!({"event": "unknown"})),
        rtvi(
            RtviType::UiEvent,
            json!({"event": "quantity_set", "payload": "x"}),
        ),
    ] {
        assert_eq!(parse_app_event::<QuantitySet>(&bad), None);
    }
}

// ---- Errors, congestion, lifecycle (docs/protocol.md §4.12–4.13) ----

#[tokio::test]
async fn a_fatal_error_from_voqalize_is_not_terminal() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    v.send(Frame::Error(ErrorFrame {
        code: ErrorCode::Protocol,
        message: "m".into(),
        fatal: true,
    }))
    .await
    .unwrap();
    let t = v.user_says("say still here").await.unwrap();
    assert_eq!(t.text(), "still here", "case 58");
    assert!(
        log.events()
            .contains(&"error protocol m fatal=true".to_owned())
    );
}

#[tokio::test]
async fn inbound_congestion_sheds_rtvi_and_signals_once() {
    let gate = Arc::new(Notify::new());
    let log = Arc::new(Log::default());
    let (l, g) = (log.clone(), gate.clone());
    let cfg = Cfg {
        start_gate: Some(g),
        ..Cfg::default()
    };
    let mut v = driver_with(
        move || Scripted {
            log: l.clone(),
            cfg: cfg.clone(),
        },
        HostOptions::builder()
            .allow_unverified()
            .max_lane_frames(4)
            .build()
            .expect("options"),
    )
    .await;
    v.send(bare_start()).await.unwrap();
    assert!(logged(&mut v, &log, "start").await);
    for i in 0..10 {
        v.send_ui_event("n", json!({"i": i})).await.unwrap();
    }
    v.send(message(2, "say after")).await.unwrap();
    v.next_turn_id();
    assert!(logged(&mut v, &log, "error overload").await, "case 59");
    gate.notify_one();
    assert!(logged(&mut v, &log, "message 2").await);
    assert!(
        logged(
            &mut v,
            &log,
            r#"rtvi ui-event {"event":"n","payload":{"i":3}}"#
        )
        .await
    );
    let events = log.events();
    let rtvi: Vec<&String> = events.iter().filter(|e| e.starts_with("rtvi")).collect();
    assert_eq!(rtvi.len(), 4, "{events:?}");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("error overload"))
            .count(),
        1
    );
    assert!(
        events[1].starts_with("error overload"),
        "beside the blocked feeder"
    );
}

#[tokio::test]
async fn end_is_the_last_frame_and_sent_once() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let _ = v.user_says("goodbye").await;
    v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
        .await
        .unwrap();
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        v.received(),
        &[start(1, 2), chunk(1, "bye"), end(1), Frame::End],
        "case 60 and docs/protocol.md §7 D2"
    );
    // Voqalize answers the brain's End with its own; the brain is told it ended the call, with
    // the reason it gave first.
    v.send(Frame::End).await.unwrap();
    v.wait_closed().await.unwrap();
    assert!(log.until(|l| l.ended() == 1).await);
    assert_eq!(
        log.end_reasons(),
        [EndReason::ByBrain {
            reason: "done".into()
        }]
    );
}

#[tokio::test]
async fn end_from_voqalize_delivers_queued_frames_then_ends_once() {
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        greeting: Some("Hi".into()),
        rtvi_gate: None,
        finalize_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    // The greeting's Finalize holds the feeder in on_finalize.
    v.start().await.unwrap();
    v.send_ui_event("queued", json!({})).await.unwrap();
    v.send(Frame::End).await.unwrap();
    gate.notify_one();
    v.wait_closed().await.unwrap();
    v.brain_result().await.unwrap().unwrap();
    assert_eq!(log.ended(), 1, "case 61");
    assert!(log.events().iter().any(|e| e.contains("queued")));
}

#[tokio::test]
async fn cancel_drops_queued_frames_and_ends_once() {
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        greeting: Some("Hi".into()),
        finalize_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    // The greeting's Finalize holds the feeder in on_finalize.
    v.start().await.unwrap();
    v.send_ui_event("queued", json!({})).await.unwrap();
    v.send(Frame::Cancel { reason: None }).await.unwrap();
    assert!(log.wait(&mut v, |l| l.ended() == 1).await);
    gate.notify_one();
    v.brain_result().await.unwrap().unwrap();
    assert_eq!(log.ended(), 1, "case 62");
    assert!(!log.events().iter().any(|e| e.contains("queued")));
}

#[tokio::test]
async fn frames_before_session_start_are_ignored() {
    let (mut v, log) = scripted(greeting("Hi")).await;
    v.send(message(2, "say early")).await.unwrap();
    v.start().await.unwrap();
    assert!(
        !log.events().iter().any(|e| e.starts_with("message")),
        "case 64"
    );
    assert_eq!(v.received(), &[start(1, 1), chunk(1, "Hi"), end(1)]);
}

// ---- Where this SDK differs from the Python package (docs/protocol.md §7) ----

#[tokio::test]
async fn init_that_is_not_an_object_is_refused() {
    for init in ["[1]", "null", "5", "x"] {
        let (mut v, log) = scripted(greeting("Hi")).await;
        let mut bytes = voqalize::wire::encode(&bare_start());
        // Swap the `{}` init for the bad text, fixing up the two length prefixes.
        let pos = bytes.windows(3).position(|w| w == b"\x1a\x02{").unwrap();
        let mut inner = bytes[2..pos].to_vec();
        inner.push(0x1a);
        inner.push(init.len() as u8);
        inner.extend_from_slice(init.as_bytes());
        inner.extend_from_slice(&bytes[pos + 4..]);
        bytes = vec![0x0a, inner.len() as u8];
        bytes.extend(inner);
        v.send_bytes(bytes).await.unwrap();
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await
            .unwrap();
        assert_eq!(
            v.received(),
            &[
                Frame::Error(ErrorFrame {
                    code: ErrorCode::Protocol,
                    message: "SessionStart.init must be a JSON object".into(),
                    fatal: true
                }),
                Frame::End
            ],
            "docs/protocol.md §7 D3 for {init}"
        );
        v.hang_up().await;
        v.brain_result().await.unwrap().unwrap();
        assert!(log.events().is_empty(), "no brain built, no callbacks");
        assert_eq!(log.ended(), 0);
    }
}

#[tokio::test]
async fn a_second_session_start_is_answered_with_a_protocol_error() {
    let (mut v, _) = scripted(greeting("Hi")).await;
    v.start().await.unwrap();
    v.send(bare_start()).await.unwrap();
    v.wait_for(Duration::from_secs(5), |v| !v.errors().is_empty())
        .await
        .unwrap();
    assert_eq!(
        v.errors()[0].code,
        ErrorCode::Protocol,
        "docs/protocol.md §7 D4"
    );
    assert!(!v.errors()[0].fatal);
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(v.units().count(), 1, "no second greeting");
}

#[tokio::test]
async fn a_thousand_interruptions_during_a_blocked_start_are_survived() {
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        greeting: Some("Hi".into()),
        start_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    v.send(bare_start()).await.unwrap();
    assert!(logged(&mut v, &log, "start").await);
    for t in 1..=1000 {
        v.send(Frame::Interruption { through_turn: t })
            .await
            .unwrap();
    }
    // Let the reader take all 1,000 in while the hook still blocks (no wire signal shows it).
    v.quiesce(Duration::from_millis(150), Duration::from_millis(150))
        .await
        .unwrap();
    gate.notify_one();
    v.send(message(1001, "say alive")).await.unwrap();
    for _ in 0..1000 {
        v.next_turn_id();
    }
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(1001).completed())
            .await
            .unwrap(),
        "docs/protocol.md §7 D8"
    );
    assert_eq!(v.turn(1001).text(), "alive");
    assert!(v.turn(1).units.is_empty(), "the greeting turn was cut");
}

#[tokio::test]
async fn interruption_applies_while_on_finalize_blocks() {
    let gate = Arc::new(Notify::new());
    let (mut v, log) = scripted(Cfg {
        finalize_gate: Some(gate.clone()),
        ..Cfg::default()
    })
    .await;
    v.start_silent().await.unwrap();
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "slow 2000")).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| !v
            .turn(turn_id)
            .units
            .is_empty())
            .await
            .unwrap()
    );
    v.finalize(1, "").await.unwrap(); // on_finalize now blocks the feeder
    v.send(Frame::Interruption {
        through_turn: turn_id,
    })
    .await
    .unwrap();
    assert!(
        logged(&mut v, &log, &format!("cut {turn_id}")).await,
        "docs/protocol.md §7 D14"
    );
    gate.notify_one();
}

#[tokio::test]
async fn barge_in_with_a_heard_prefix_and_nothing_after_it() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let turn = v
        .barge_in(
            "slow 5000",
            BargeIn {
                at: BargeAt::FirstText,
                heard_prefix: Some(String::new()),
            },
        )
        .await
        .unwrap();
    assert!(turn.interrupted);
    assert_eq!(turn.heard.as_deref(), Some(""));
    assert!(log.events().iter().any(|e| e.starts_with("cut 2")));
    assert!(
        log.events()
            .iter()
            .any(|e| e == r#"finalize 1 heard="" generated="s" interrupted=true"#)
    );
    v.assert_clean();
}

#[tokio::test]
async fn a_panicking_factory_fails_its_session_only() {
    let armed = Arc::new(AtomicBool::new(true));
    let a = armed.clone();
    let factory = move || {
        if a.swap(false, Ordering::SeqCst) {
            panic!("constructor broke");
        }
        Scripted {
            log: Arc::new(Log::default()),
            cfg: greeting("Hi"),
        }
    };
    let factory = Arc::new(factory);
    let f1 = factory.clone();
    let mut first = driver(move || f1()).await;
    first.start().await.unwrap();
    first
        .wait_for(Duration::from_secs(5), |v| v.brain_ended())
        .await
        .unwrap();
    assert_eq!(first.errors()[0].code, ErrorCode::Internal);
    assert!(first.errors()[0].fatal);
    let f2 = factory.clone();
    let mut second = driver(move || f2()).await;
    let greeting = second.start().await.unwrap();
    assert_eq!(greeting.text(), "Hi");
}

/// A transport whose sends wait for permits, to back the outbound lane up.
struct Gated {
    to_brain: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    from_brain: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    permits: Arc<tokio::sync::Semaphore>,
}
struct GatedSender(
    tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    Arc<tokio::sync::Semaphore>,
);
struct GatedReceiver(tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>);

#[derive(Debug, thiserror::Error)]
#[error("gone")]
struct Gone;

impl voqalize::host::Channel for Gated {
    type Sender = GatedSender;
    type Receiver = GatedReceiver;
    fn split(self) -> (GatedSender, GatedReceiver) {
        (
            GatedSender(self.from_brain, self.permits),
            GatedReceiver(self.to_brain),
        )
    }
}

impl voqalize::host::ChannelSender for GatedSender {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), voqalize::host::ChannelError> {
        let permit = self
            .1
            .acquire()
            .await
            .map_err(voqalize::host::ChannelError::new)?;
        permit.forget();
        self.0
            .send(frame)
            .map_err(|_| voqalize::host::ChannelError::new(Gone))
    }
    async fn close(&mut self, _code: u16, _reason: &str) {}
}

impl voqalize::host::ChannelReceiver for GatedReceiver {
    async fn recv(
        &mut self,
    ) -> Option<Result<voqalize::host::Incoming, voqalize::host::ChannelError>> {
        self.0
            .recv()
            .await
            .map(|b| Ok(voqalize::host::Incoming::Binary(b.into())))
    }
}

/// A session over the gated transport: what the test sends the brain, what the brain sent, and
/// the task hosting the call.
struct GatedCall {
    to_brain: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    from_brain: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    host: tokio::task::JoinHandle<Result<(), voqalize::HostError>>,
}

/// Hosts `factory`'s brain over a gated transport with `permits` for its sends.
fn gated_call<M: MakeBrain>(
    factory: M,
    options: HostOptions,
    permits: &Arc<tokio::sync::Semaphore>,
) -> GatedCall {
    let (to_brain, to_brain_rx) = tokio::sync::mpsc::unbounded_channel();
    let (from_brain_tx, from_brain) = tokio::sync::mpsc::unbounded_channel();
    let channel = Gated {
        to_brain: to_brain_rx,
        from_brain: from_brain_tx,
        permits: permits.clone(),
    };
    let host = tokio::spawn(async move {
        let upgrade = Upgrade {
            session_id: Some("test-session".into()),
            authorization: None,
        };
        voqalize::run_session(channel, Arc::new(factory), upgrade, &options).await
    });
    GatedCall {
        to_brain,
        from_brain,
        host,
    }
}

impl GatedCall {
    fn send(&self, frame: Frame) {
        self.to_brain.send(voqalize::wire::encode(&frame)).unwrap();
    }

    /// The next frame the brain sent, within 5 s.
    async fn next(&mut self) -> Option<Frame> {
        let bytes = tokio::time::timeout(Duration::from_secs(5), self.from_brain.recv())
            .await
            .ok()??;
        voqalize::wire::decode(&bytes).unwrap()
    }
}

#[tokio::test]
async fn a_chunk_shed_by_outbound_congestion_is_not_generated_text() {
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let log = Arc::new(Log::default());
    let l = log.clone();
    let factory = move || Scripted {
        log: l.clone(),
        cfg: Cfg::default(),
    };
    let options = HostOptions::builder()
        .allow_unverified()
        .max_lane_frames(4)
        .build()
        .expect("options");
    let mut call = gated_call(factory, options, &permits);
    call.send(bare_start());
    call.send(message(2, "chunks a,b,c,d,e,f,g,h"));
    assert!(
        log.until(|l| l.events().iter().any(|e| e.starts_with("error overload")))
            .await
    );
    // Let everything through and read what was sent.
    permits.add_permits(1000);
    let mut sent = Vec::new();
    while let Some(frame) = call.next().await {
        sent.push(frame);
        if sent.last() == Some(&end(1)) {
            break;
        }
    }
    let chunks: String = sent
        .iter()
        .filter_map(|f| match f {
            Frame::SpeechChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(chunks.len() < 8, "some chunks were shed: {sent:?}");
    assert_eq!(sent.last(), Some(&end(1)), "SpeechEnd is never shed");
    call.send(Frame::Finalize {
        speech_id: 1,
        heard_text: chunks.clone(),
    });
    assert!(
        log.until(|l| l.events().iter().any(|e| e.starts_with("finalize 1")))
            .await
    );
    let expected = format!("finalize 1 heard={chunks:?} generated={chunks:?} interrupted=false");
    assert!(
        log.events().contains(&expected),
        "docs/protocol.md §7 D9: {:?}",
        log.events()
    );
    assert_eq!(
        log.events()
            .iter()
            .filter(|e| e.starts_with("error overload"))
            .count(),
        1,
        "one signal per episode"
    );
    drop(call.to_brain);
    call.host.await.unwrap().unwrap();
}

/// Sends 300 app messages of 100 KB each in one turn, then speaks.
struct Bulky {
    log: Arc<Log>,
}

impl Brain for Bulky {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        let blob = json!({ "blob": "x".repeat(100_000) });
        for _ in 0..300 {
            turn.session()
                .send_rtvi(RtviType::ServerMessage, Some(&blob), None)?;
        }
        turn.say("done");
        Ok(())
    }

    async fn on_error(&self, _session: &Session, e: ErrorFrame) -> BrainResult {
        self.log.push(format!("error {}", e.message));
        Ok(())
    }
}

// The outbound lane is bounded in bytes, not only in frames: 300 app messages of 100 KB behind a
// transport that takes nothing hold about `max_lane_bytes` (2 MiB), not 256 of them (25 MB).
#[tokio::test]
async fn the_outbound_lane_is_bounded_in_bytes() {
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let log = Arc::new(Log::default());
    let l = log.clone();
    let factory = move || Bulky { log: l.clone() };
    let mut call = gated_call(factory, HostOptions::allow_unverified(), &permits);
    call.send(bare_start());
    call.send(message(2, "go"));
    assert!(
        log.until(|l| l
            .events()
            .iter()
            .any(|e| e.starts_with("error voqalize: outbound")))
            .await
    );
    permits.add_permits(1000);
    let mut rtvi = 0;
    loop {
        match call.next().await.expect("the brain speaks") {
            Frame::Rtvi(_) => rtvi += 1,
            Frame::SpeechEnd { .. } => break,
            _ => {}
        }
    }
    assert!(
        (15..=30).contains(&rtvi),
        "about 2 MiB of 100 KB messages went out, not {rtvi}"
    );
    drop(call.to_brain);
    call.host.await.unwrap().unwrap();
}

// The inbound lane is bounded in bytes too: while `on_session_start` is stuck, ten user messages
// of 900 KB pass twice `max_lane_bytes` (4 MiB) and end the call with a fatal OVERLOAD, where 2,048
// of them (1.8 GB) used to be queued first.
#[tokio::test]
async fn the_inbound_lane_is_bounded_in_bytes() {
    let permits = Arc::new(tokio::sync::Semaphore::new(1000));
    let log = Arc::new(Log::default());
    let l = log.clone();
    let factory = move || Hung {
        at: "start",
        log: l.clone(),
    };
    let mut call = gated_call(factory, HostOptions::allow_unverified(), &permits);
    call.send(bare_start());
    let text = "x".repeat(900_000);
    for turn in 0..10 {
        call.send(message(2 + turn, &text));
    }
    let mut sent = Vec::new();
    while let Some(frame) = call.next().await {
        let end = frame == Frame::End;
        sent.push(frame);
        if end {
            break;
        }
    }
    assert!(
        matches!(
            sent.as_slice(),
            [.., Frame::Error(e), Frame::End] if e.code == ErrorCode::Overload && e.fatal
        ),
        "{sent:?}"
    );
    assert!(log.until(|l| l.ended() == 1).await, "on_session_end ran");
    drop(call.to_brain);
    let _ = call.host.await.unwrap();
}

/// Each turn says when it began, then waits forever (until a barge-in cancels it).
struct Stuck {
    log: Arc<Log>,
}

impl Brain for Stuck {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        self.log.push(format!("began {}", turn.id()));
        std::future::pending::<()>().await;
        Ok(())
    }
}

// At most `max_turns` (4) turns of a call run at once: a stimulus past it waits for one to end,
// a barge-in makes room at once, and one that a barge-in passed while it waited never starts.
#[tokio::test]
async fn at_most_max_turns_run_at_once() {
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = Voqalize::in_process(move || Stuck { log: l.clone() });
    v.start_silent().await.unwrap();
    for turn_id in 2..=7 {
        v.send(message(turn_id, "hold")).await.unwrap();
    }
    let began = |log: &Log| {
        log.events()
            .iter()
            .filter(|e| e.starts_with("began"))
            .count()
    };
    assert!(log.wait(&mut v, |l| began(l) == 4).await);
    v.send(Frame::Interruption { through_turn: 2 })
        .await
        .unwrap();
    assert!(
        log.wait(&mut v, |l| l.events().contains(&"began 6".into()))
            .await
    );
    assert_eq!(began(&log), 5, "{:?}", log.events());
    // Turn 7 still waits; a barge-in through it means it never starts.
    v.send(Frame::Interruption { through_turn: 7 })
        .await
        .unwrap();
    v.send(message(8, "hold")).await.unwrap();
    assert!(
        log.wait(&mut v, |l| l.events().contains(&"began 8".into()))
            .await
    );
    assert!(
        !log.events().contains(&"began 7".into()),
        "{:?}",
        log.events()
    );
}

// ---- Findings of the break-it pass, kept as regressions ----

/// A brain whose chosen hook never returns.
struct Hung {
    at: &'static str,
    log: Arc<Log>,
}

impl Brain for Hung {
    async fn on_session_start(&self, _s: &Session) -> BrainResult {
        if self.at == "start" {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
    async fn greet(&self, _s: &Session) -> BrainResult<Option<String>> {
        if self.at == "greet" {
            std::future::pending::<()>().await;
        }
        Ok(None)
    }
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        // A unit for the runtime to finalize.
        turn.say("x");
        Ok(())
    }
    async fn on_finalize(&self, _s: &Session, _f: Finalized) -> BrainResult {
        self.log.push("finalize");
        std::future::pending::<()>().await;
        Ok(())
    }
    async fn on_session_end(&self, _s: &Session, reason: EndReason) {
        self.log.end_because(&reason);
    }
}

#[tokio::test]
async fn a_callback_that_never_returns_does_not_keep_the_session_alive() {
    for (at, ending) in [
        ("start", "hang up"),
        ("greet", "cancel"),
        ("finalize", "hang up"),
        ("start", "end"),
    ] {
        let log = Arc::new(Log::default());
        let l = log.clone();
        let mut v = driver_with(
            move || Hung { at, log: l.clone() },
            // An End behind a stuck callback ends the session after the request timeout.
            HostOptions::builder()
                .allow_unverified()
                .request_timeout(Duration::from_millis(200))
                .build()
                .expect("options"),
        )
        .await;
        v.start_silent().await.unwrap();
        if at == "finalize" {
            v.user_says("hi").await.unwrap();
            assert!(logged(&mut v, &log, "finalize").await);
        }
        match ending {
            "hang up" => v.hang_up().await,
            "cancel" => v.send(Frame::Cancel { reason: None }).await.unwrap(),
            _ => v.send(Frame::End).await.unwrap(),
        }
        let result = v.brain_result().await;
        assert!(
            matches!(result, Ok(Ok(()))),
            "{at}/{ending}: run_session must return: {result:?}"
        );
        assert_eq!(log.ended(), 1, "{at}/{ending}: on_session_end runs once");
        let reason = &log.end_reasons()[0];
        let told = match ending {
            "hang up" => matches!(reason, EndReason::TransportLost(_)),
            "cancel" => *reason == EndReason::Cancelled,
            _ => *reason == EndReason::Ended,
        };
        assert!(told, "{at}/{ending}: told {reason:?}");
    }
}

#[derive(serde::Serialize)]
struct Ping;
impl Action for Ping {
    const NAME: &'static str = "ping";
}

/// Keeps computing (without an await) past the barge-in, then tries to send everything.
struct Busy;
impl Brain for Busy {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        let mut unit = turn.open_unit();
        unit.write("thinking ");
        tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(600)));
        unit.write("after the barge-in");
        drop(unit);
        turn.session().dispatch(&Ping)?;
        turn.session()
            .report_step(Step::new("model", "m").duration_ms(1), None)?;
        turn.session().end("done");
        tokio::task::yield_now().await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barged_turn_sends_nothing_at_all_after_the_barge_in() {
    let mut v = driver(|| Busy).await;
    v.start_silent().await.unwrap();
    v.barge_in("go", BargeIn::default()).await.unwrap();
    let names: Vec<&str> = v.received().iter().map(Frame::name).collect();
    assert_eq!(
        names,
        ["SpeechStart", "SpeechChunk"],
        "no UI command, TurnStep or End from a cancelled turn"
    );
    v.assert_clean();
}

#[tokio::test]
async fn requests_after_end_fail_at_once() {
    struct Late(Arc<Log>);
    impl Brain for Late {
        async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
            let s = turn.session().clone();
            let id = turn.say("bye");
            s.end("done");
            let c = s.configure(Config::builder().patience(3).build()?).await;
            self.0
                .push(format!("configure: {:?}", c.map_err(|e| e.to_string())));
            let x = s.cancel_speech(id).await;
            self.0
                .push(format!("cancel: {:?}", x.map_err(|e| e.to_string())));
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Late(l.clone())).await;
    v.start_silent().await.unwrap();
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "go")).await.unwrap();
    assert!(log.wait(&mut v, |l| l.events().len() == 2).await);
    for e in log.events() {
        assert!(e.contains("was not sent"), "{e}");
    }
    assert!(v.requests().is_empty() && v.speech_cancels().is_empty());
}

#[tokio::test]
async fn a_fallible_factory_that_fails_refuses_that_call() {
    let mut v = driver(fallible(|| -> Result<Scripted, std::io::Error> {
        Err(std::io::Error::other("database unreachable"))
    }))
    .await;
    v.start().await.unwrap();
    assert_eq!(
        v.received(),
        &[
            Frame::Error(ErrorFrame {
                code: ErrorCode::Internal,
                message: "brain factory failed: database unreachable".into(),
                fatal: true
            }),
            Frame::End
        ]
    );
}

// Frames that are never shed still meet a hard bound: a peer that floods the inbound lane while
// the feeder is busy gets a fatal OVERLOAD and End, and the call ends.
#[tokio::test]
async fn an_inbound_flood_past_the_hard_bound_ends_the_call() {
    let gate = Arc::new(Notify::new());
    let log = Arc::new(Log::default());
    let (l, cfg) = (
        log.clone(),
        Cfg {
            start_gate: Some(gate.clone()),
            ..Cfg::default()
        },
    );
    let mut v = driver_with(
        move || Scripted {
            log: l.clone(),
            cfg: cfg.clone(),
        },
        HostOptions::builder()
            .allow_unverified()
            .max_lane_frames(4)
            .build()
            .expect("options"),
    )
    .await;
    v.send(bare_start()).await.unwrap();
    assert!(logged(&mut v, &log, "start").await);
    for speech_id in 1..=200 {
        v.send(Frame::Finalize {
            speech_id,
            heard_text: String::new(),
        })
        .await
        .unwrap();
    }
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await
            .unwrap()
    );
    let fatal = v.errors().last().cloned().expect("a fatal error");
    assert_eq!(fatal.code, ErrorCode::Overload);
    assert!(fatal.fatal);
    gate.notify_one();
}

// JSON text is limited before it is parsed: RTVI data over the limit is skipped (the session goes
// on), an `init` over it refuses the session.
#[tokio::test]
async fn json_over_the_limit_is_refused_before_parsing() {
    let log = Arc::new(Log::default());
    let l = log.clone();
    let options = HostOptions::builder()
        .allow_unverified()
        .max_json_bytes(1024)
        .build()
        .expect("options");
    let mut v = driver_with(
        move || Scripted {
            log: l.clone(),
            cfg: Cfg::default(),
        },
        options.clone(),
    )
    .await;
    v.start_silent().await.unwrap();
    v.send_ui_event("big", json!({"blob": "x".repeat(4096)}))
        .await
        .unwrap();
    v.send_ui_event("small", json!({"n": 1})).await.unwrap();
    assert!(
        log.wait(&mut v, |l| l.events().iter().any(|e| e.starts_with("rtvi")))
            .await
    );
    let rtvi: Vec<String> = log
        .events()
        .into_iter()
        .filter(|e| e.starts_with("rtvi"))
        .collect();
    assert_eq!(rtvi.len(), 1, "only the small event arrived: {rtvi:?}");
    assert!(rtvi[0].contains("small"), "{rtvi:?}");

    let l = log.clone();
    let mut v = driver_with(
        move || Scripted {
            log: l.clone(),
            cfg: Cfg::default(),
        },
        options,
    )
    .await;
    let mut init = serde_json::Map::new();
    init.insert("notes".into(), json!("y".repeat(4096)));
    v.start_with(Start {
        init,
        expect_greeting: false,
        ..Start::default()
    })
    .await
    .unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await
            .unwrap()
    );
    assert_eq!(v.errors()[0].code, ErrorCode::Protocol);
    assert!(v.errors()[0].fatal);
}

// ---- Hostile peers and models: frames within the socket's limits, heard truth checked ----

/// Speaks a text far over the chunk limit, reports a step named by a "model" that named it 1 MB
/// long, sends a configure or an RTVI over the socket's limit on demand, and echoes otherwise.
struct Oversized(Arc<Log>);

/// 1.5 MB of text, with two-byte characters so that a cut in the wrong place would split one.
fn long_text() -> String {
    "voilà, déjà ".repeat(1_500_000 / 14)
}

impl Brain for Oversized {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        match m.text.as_str() {
            "long" => {
                turn.say(&long_text());
            }
            "step" => {
                let huge = "n".repeat(1 << 20);
                let mut step = Step::new("tool", huge.as_str())
                    .provider(huge.as_str())
                    .count(huge.as_str(), 7)
                    .duration_ms(3);
                for i in 0..100 {
                    step = step.count(format!("count_{i:03}"), i);
                }
                turn.session().report_step(step, None)?;
                turn.say("stepped");
            }
            "rtvi" => {
                let blob = json!({"blob": "x".repeat(2 << 20)});
                match turn
                    .session()
                    .send_rtvi(RtviType::ServerMessage, Some(&blob), None)
                {
                    Err(e) => self.0.push(format!("rtvi refused: {e}")),
                    Ok(()) => self.0.push("rtvi sent"),
                }
                turn.say("refused");
            }
            "configure" => {
                let config = Config::builder().voice("v".repeat(2 << 20)).build()?;
                turn.say("configuring");
                let answer = turn.session().configure(config).await;
                self.0.push(format!("configure: {answer:?}"));
            }
            other => {
                turn.say(other);
            }
        }
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, f: Finalized) -> BrainResult {
        self.0.push(format!(
            "finalize {} {} of {} bytes heard",
            f.speech_id,
            f.heard.len(),
            f.generated.len()
        ));
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, reason: EndReason) {
        self.0.end_because(&reason);
    }
}

async fn oversized() -> (Voqalize, Arc<Log>) {
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v = driver(move || Oversized(l.clone())).await;
    v.start_silent().await.unwrap();
    (v, log)
}

// A text delta far over a frame (1.5 MB) goes out as several chunks, each within the chunk limit
// and cut between characters, whose concatenation is the text; the call goes on.
#[tokio::test]
async fn a_text_longer_than_the_chunk_limit_goes_out_as_several_chunks() {
    let (mut v, log) = oversized().await;
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "long")).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.units().any(|u| u.ended))
            .await
            .unwrap()
    );
    let unit = v.turn(turn_id).units[0].clone();
    assert!(unit.chunks.len() > 1);
    assert!(
        unit.chunks.iter().all(|c| c.len() <= 16 * 1024),
        "every chunk within the default 16 KiB"
    );
    assert!(
        unit.text() == long_text(),
        "the chunks are the text, in order"
    );
    // Heard in part (the whole text could not come back over a 1 MiB socket either).
    let said = "voilà, déjà voilà";
    v.finalize(1, said).await.unwrap();
    let heard = format!(
        "finalize 1 {} of {} bytes heard",
        said.len(),
        long_text().len()
    );
    assert!(logged(&mut v, &log, &heard).await, "{:?}", log.events());
    assert_eq!(
        v.user_says("still here").await.unwrap().text(),
        "still here"
    );
    v.assert_clean();
}

// A step named after 1 MB (a tool name a model invented) goes out cut to the documented bounds,
// and the call goes on.
#[tokio::test]
async fn a_step_named_after_a_megabyte_is_cut_and_the_call_goes_on() {
    let (mut v, _log) = oversized().await;
    assert_eq!(v.user_says("step").await.unwrap().text(), "stepped");
    let step = v.turn_steps()[0].clone();
    assert_eq!(step.name, "n".repeat(Step::MAX_TEXT_BYTES));
    assert_eq!(step.provider, "n".repeat(Step::MAX_TEXT_BYTES));
    assert_eq!(step.kind, "tool");
    assert_eq!(step.counts.len(), Step::MAX_COUNTS);
    assert_eq!(
        step.counts.get(&"n".repeat(Step::MAX_KEY_BYTES)),
        Some(&7),
        "the long key, cut"
    );
    assert_eq!(v.user_says("after").await.unwrap().text(), "after");
}

// RTVI data that could never fit a frame is refused where it is sent, and the call goes on.
#[tokio::test]
async fn rtvi_data_over_the_socket_limit_is_refused_before_it_is_sent() {
    let (mut v, log) = oversized().await;
    assert_eq!(v.user_says("rtvi").await.unwrap().text(), "refused");
    let events = log.events();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("rtvi refused: send_rtvi: the frame would be over")),
        "{events:?}"
    );
    assert!(v.rtvi().is_empty());
    assert_eq!(v.user_says("after").await.unwrap().text(), "after");
}

// A frame the brain built over the socket's limit is never handed to the socket: the call ends
// with a fatal Error, End and a close frame (1011), and on_session_end runs.
#[tokio::test]
async fn a_frame_over_the_socket_limit_ends_the_call_with_end_and_a_close_frame() {
    let (mut v, log) = oversized().await;
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "configure")).await.unwrap();
    assert_eq!(v.wait_closed().await.unwrap(), Some(1011));
    let error = v
        .errors()
        .last()
        .cloned()
        .expect("a fatal error before End");
    assert_eq!((error.code, error.fatal), (ErrorCode::Internal, true));
    assert!(error.message.contains("Request frame"), "{error:?}");
    assert_eq!(v.received().last(), Some(&Frame::End));
    assert_eq!(
        v.turn(turn_id).unit_texts(),
        ["configuring"],
        "what came before it went out"
    );
    assert!(log.until(|l| l.ended() == 1).await, "on_session_end ran");
}

// A Finalize for a unit the brain has not opened yet is ignored: it reaches neither on_finalize
// nor a later cancel_speech, which still sends its SpeechCancel and gets the real Finalize.
#[tokio::test]
async fn a_finalize_for_a_unit_never_opened_is_ignored_and_cancel_still_asks() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    // Unit 1 is the next the brain will open.
    v.finalize(1, "words the brain never said").await.unwrap();
    let turn = v.user_says("cancel").await.unwrap();
    assert_eq!(v.speech_cancels(), [1], "the cancel went out");
    assert_eq!(turn.unit_texts(), ["one ", "fix"]);
    let events = log.events();
    assert!(
        events.contains(&r#"cancelled 1 heard="one " generated="one ""#.to_owned()),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.contains("never said")),
        "{events:?}"
    );
}

/// Sends an app message first (held by the gated transport), then opens a unit whose SpeechStart
/// therefore waits behind it; cancels the unit once the test says so.
struct Held {
    log: Arc<Log>,
    go: Arc<Notify>,
}

impl Brain for Held {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        turn.session().dispatch(&Ping)?;
        let mut unit = turn.open_unit();
        unit.write("hello there");
        self.log.push(format!("opened {}", unit.id()));
        self.go.notified().await;
        let fin = unit.session().cancel_speech(unit.id()).await?;
        self.log.push(format!(
            "cancelled heard={:?} generated={:?}",
            fin.heard, fin.generated
        ));
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, f: Finalized) -> BrainResult {
        self.log
            .push(format!("finalize {} heard={:?}", f.speech_id, f.heard));
        Ok(())
    }

    async fn on_error(&self, _session: &Session, e: ErrorFrame) -> BrainResult {
        self.log.push(format!("error {}", e.message));
        Ok(())
    }
}

// A Finalize that arrives before its unit's SpeechStart has gone out (the peer cannot have heard
// a word of it) is ignored; the cancel that follows still asks, and its Finalize is applied.
#[tokio::test]
async fn a_finalize_before_its_speech_start_went_out_is_ignored() {
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let (log, go) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let (l, g) = (log.clone(), go.clone());
    let factory = move || Held {
        log: l.clone(),
        go: g.clone(),
    };
    let mut call = gated_call(factory, HostOptions::allow_unverified(), &permits);
    let send = |f: Frame| call.send(f);
    let mut start = bare_start();
    if let Frame::SessionStart(s) = &mut start {
        s.capabilities = Start::default().capabilities;
    }
    send(start);
    send(message(2, "go"));
    assert!(log.until(|l| l.events().contains(&"opened 1".into())).await);
    // The writer holds the app message; the SpeechStart waits behind it.
    send(Frame::Finalize {
        speech_id: 1,
        heard_text: "hello there".into(),
    });
    send(Frame::Error(ErrorFrame {
        code: ErrorCode::Protocol,
        message: "sync".into(),
        fatal: false,
    }));
    assert!(
        log.until(|l| l.events().contains(&"error sync".into()))
            .await
    );
    assert!(
        !log.events().iter().any(|e| e.starts_with("finalize")),
        "{:?}",
        log.events()
    );
    go.notify_one();
    permits.add_permits(1000);
    let mut cancelled = false;
    while let Some(frame) = call.next().await {
        if frame == (Frame::SpeechCancel { speech_id: 1 }) {
            cancelled = true;
            break;
        }
    }
    assert!(cancelled, "the cancel asked the runtime");
    call.send(Frame::Finalize {
        speech_id: 1,
        heard_text: "hello".into(),
    });
    assert!(
        log.until(|l| l
            .events()
            .contains(&r#"cancelled heard="hello" generated="hello there""#.into()))
            .await,
        "{:?}",
        log.events()
    );
    assert!(log.events().contains(&r#"finalize 1 heard="hello""#.into()));
    drop(call.to_brain);
    call.host.await.unwrap().unwrap();
}

// Heard text that is not a prefix of what the unit said is cut to the longest prefix they share:
// the brain never records a word it did not say.
#[tokio::test]
async fn heard_text_that_is_not_a_prefix_is_cut_to_what_was_said() {
    let (mut v, log) = scripted(Cfg::default()).await;
    v.start_silent().await.unwrap();
    let turn_id = v.next_turn_id();
    v.send(message(turn_id, "say déjà vu")).await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.units().any(|u| u.ended))
            .await
            .unwrap()
    );
    v.finalize(1, "déjè and then words never said")
        .await
        .unwrap();
    assert!(logged(&mut v, &log, "finalize 1").await);
    let events = log.events();
    assert!(
        events.contains(&r#"finalize 1 heard="déj" generated="déjà vu" interrupted=true"#.into()),
        "{events:?}"
    );
}

// ---- Hostile review: speech text a session keeps is bounded in bytes, not only in units ----

/// Speaks `speak N` as one unit of N bytes; `recall K` asks `cancel_speech` for units 1..=K and
/// records how many bytes of heard and generated text the session still had for them; counts the
/// generated bytes `on_finalize` receives.
struct Keeper {
    log: Arc<Log>,
    finalized_bytes: Arc<std::sync::atomic::AtomicUsize>,
}

impl Brain for Keeper {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        if let Some(n) = message.text.strip_prefix("speak ") {
            turn.say(&"x".repeat(n.parse()?));
        } else if let Some(k) = message.text.strip_prefix("recall ") {
            let mut kept = 0;
            for id in 1..=k.parse::<u64>()? {
                if let Ok(fin) = turn.session().cancel_speech(id).await {
                    kept += fin.heard.len() + fin.generated.len();
                }
            }
            self.log.push(format!("kept {kept}"));
        }
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, f: Finalized) -> BrainResult {
        self.finalized_bytes
            .fetch_add(f.generated.len(), Ordering::SeqCst);
        self.log.push(format!("finalize {}", f.speech_id));
        Ok(())
    }
}

async fn keeper() -> (Voqalize, Arc<Log>, Arc<std::sync::atomic::AtomicUsize>) {
    let log = Arc::new(Log::default());
    let bytes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (l, b) = (log.clone(), bytes.clone());
    let mut v = driver(move || Keeper {
        log: l.clone(),
        finalized_bytes: b.clone(),
    })
    .await;
    v.start_silent().await.unwrap();
    (v, log, bytes)
}

/// Has the brain speak `units` units of 256 KiB, one turn each, each read to its SpeechEnd and,
/// with `finalize`, finalized with all of its text before the next turn.
async fn speak_units(v: &mut Voqalize, units: usize, finalize: bool) {
    for n in 1..=units {
        let turn_id = v.next_turn_id();
        v.send(message(turn_id, &format!("speak {}", 256 * 1024)))
            .await
            .unwrap();
        let ended = v
            .wait_for(Duration::from_secs(5), |v| {
                v.units().filter(|u| u.ended).count() == n
            })
            .await
            .unwrap();
        assert!(ended, "unit {n} ended");
        if finalize {
            let text = v.units().last().unwrap().text();
            assert_eq!(text.len(), 256 * 1024);
            v.finalize(n as u64, &text).await.unwrap();
        }
    }
}

/// At most this much speech text one session may keep for its units, settled or open (a few
/// lanes' worth; today it is bounded only by counts: 64 settled units, 1,024 open ones, each as
/// long as a turn can speak).
const SESSION_TEXT_BOUND: usize = 8 * 1024 * 1024;

// A caller that finalizes every unit with all of its text makes the session keep, in its cache of
// the newest 64 settled units, each unit's heard and generated text: 64 units of 1 MB are 128 MB a
// session, for the rest of the call. Here 48 units of 256 KiB (24 MiB kept) must stay within the
// session's text bound.
#[tokio::test]
async fn settled_units_keep_no_more_than_a_bounded_amount_of_text() {
    let (mut v, log, _) = keeper().await;
    let units = 48;
    speak_units(&mut v, units, true).await;
    v.send_user_message(&format!("recall {units}"))
        .await
        .unwrap();
    assert!(logged(&mut v, &log, "kept ").await);
    let kept: usize = log
        .events()
        .iter()
        .find_map(|e| e.strip_prefix("kept ").map(|n| n.parse().unwrap()))
        .unwrap();
    assert!(
        kept <= SESSION_TEXT_BOUND,
        "the session still holds {kept} bytes of settled speech text"
    );
}

// A caller that reads every unit but never finalizes one makes the book of open units keep each
// unit's generated text: up to 1,024 units of 1 MB, a gigabyte a session. Here 64 units of 256
// KiB (16 MiB) are left open, then all finalized: the text the session still had for them must
// stay within the bound.
#[tokio::test]
async fn open_units_keep_no_more_than_a_bounded_amount_of_text() {
    let (mut v, log, finalized_bytes) = keeper().await;
    speak_units(&mut v, 64, false).await;
    let spoken: Vec<(u64, String)> = v.units().map(|u| (u.speech_id, u.text())).collect();
    for (id, text) in &spoken {
        v.finalize(*id, text).await.unwrap();
    }
    // A marker turn after every Finalize: its unit's Finalize is handled after theirs.
    let marker = v.user_says("speak 1").await.unwrap();
    assert_eq!(marker.text(), "x");
    let last = spoken.len() as u64 + 1;
    assert!(logged(&mut v, &log, &format!("finalize {last}")).await);
    let held = finalized_bytes.load(Ordering::SeqCst) - 1;
    assert!(
        held <= SESSION_TEXT_BOUND,
        "the session held {held} bytes of unfinalized speech text"
    );
}

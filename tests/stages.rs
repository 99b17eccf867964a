//! Stages and handoffs in a call: what each request declares and is told, each context a
//! transition carries across (keep, fresh, summary), a transition the stage refuses, the cap on
//! transitions per turn, a stage's own provider and fallback line, entry lines and hooks, brain
//! code moving the call, a barge-in during a handoff, and a recording's replay. Over a real session
//! socket, against stand-in model servers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Semaphore;
use voqalize::prelude::*;
use voqalize::stages::Context;
use voqalize_testing::{BargeAt, BargeIn, ModelServer, Provider, Reply, Voqalize};

use crate::support::{Log, driver, layer, logs, said, says};

/// The clinic line, stage by stage.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Clinic {
    /// Ask for the caller's name and check it with `find_patient`.
    #[stage(tools(find_patient), to(Booking))]
    Verify,
    /// Offer the open slots and book the one the caller picks.
    #[stage(tools(open_slots, book), to(Confirm, Verify))]
    Booking,
    /// Read the booking back and say goodbye.
    #[stage(end)]
    Confirm,
}

/// Who the caller is.
#[json_type]
struct Verified {
    /// The patient's id.
    patient: String,
}

/// The desk: tools log what they did; `verified_slowly` waits for the test's gate.
pub(crate) struct Desk {
    model: Model,
    log: Arc<Log>,
    gate: Arc<Semaphore>,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        if message.text == "skip to the end" {
            let moved =
                self.model
                    .move_to(Clinic::Confirm, Context::Fresh, "Skipped by the brain.");
            self.log.push(format!("moved {}", moved.is_ok()));
        }
        let stage = self.model.stage::<Clinic>();
        self.log.push(format!("turn in {stage:?}"));
        self.model.respond(self, turn).await
    }
}

#[brain(stages = Clinic, visible = shown)]
impl Desk {
    /// Every tool the stage offers is shown; asking the `Model` where the call is, from here,
    /// must not block (the stage is read without the call's lock held).
    fn shown(&self, _: &ToolDecl) -> bool {
        self.model.stage::<Clinic>().is_some()
    }

    /// Finds a patient by name.
    #[tool]
    async fn find_patient(&self) -> &'static str {
        "p-17"
    }

    /// The open slots.
    #[tool]
    async fn open_slots(&self) -> Vec<&'static str> {
        vec!["Tue 10:00", "Wed 15:00"]
    }

    /// Books a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        self.log.push("booked");
        "booked"
    }

    /// The caller is verified: start booking afresh.
    #[transition(to = Booking, context = fresh)]
    async fn verified(&self, who: Verified) -> String {
        format!("The caller is patient {}.", who.patient)
    }

    /// The caller is verified: go on booking with the conversation as it is.
    #[transition(to = Booking)]
    async fn verified_keep(&self) -> &'static str {
        "kept"
    }

    /// The caller is verified: start booking from a summary.
    #[transition(to = Booking, context = summary)]
    async fn verified_summary(&self) -> &'static str {
        "Patient p-17."
    }

    /// The caller is verified, once the back office agrees (it takes a while).
    #[transition(to = Booking, context = fresh)]
    async fn verified_slowly(&self) -> &'static str {
        self.log.push("verifying");
        if let Ok(permit) = self.gate.acquire().await {
            permit.forget();
        }
        self.log.push("verified");
        "Verified by the back office."
    }

    /// Booked: read it back.
    #[transition(to = Confirm)]
    async fn booked(&self) -> &'static str {
        "Tue 10:00"
    }

    /// Start over: the caller is someone else.
    #[transition(to = Verify, context = fresh)]
    async fn start_over(&self) -> &'static str {
        "Someone else is calling."
    }
}

fn timeouts() -> voqalize::model::Timeouts {
    voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    }
}

struct Rig {
    server: ModelServer,
    /// A second provider: the Booking stage's, or the summarizer.
    other: ModelServer,
    log: Arc<Log>,
    gate: Arc<Semaphore>,
}

/// A desk on the stand-in, with `workflow` made from the second server's base URL.
async fn rig(
    workflow: impl Fn(String) -> Option<Workflow<Clinic>> + Send + Sync + 'static,
) -> (Rig, Voqalize) {
    rig_with(|m| m, workflow).await
}

/// [`rig`] with the `Model`'s own settings.
async fn rig_with(
    settings: impl Fn(Model) -> Model + Send + Sync + 'static,
    workflow: impl Fn(String) -> Option<Workflow<Clinic>> + Send + Sync + 'static,
) -> (Rig, Voqalize) {
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    let other = ModelServer::start(Provider::OpenAi).await.expect("a port");
    let (log, gate) = (Arc::new(Log::default()), Arc::new(Semaphore::new(0)));
    let (base, other_base) = (server.base_url(), other.base_url());
    let (l, g) = (log.clone(), gate.clone());
    let v = driver(move || {
        let model = settings(
            Model::new(layer(Provider::Gemini, &base, "gemini-test", timeouts()))
                .instruction("You answer the Elm Street Clinic's phone."),
        );
        let model = match workflow(other_base.clone()) {
            Some(w) => model.workflow(w),
            None => model,
        };
        Desk {
            model,
            log: l.clone(),
            gate: g.clone(),
        }
    })
    .await;
    let rig = Rig {
        server,
        other,
        log,
        gate,
    };
    (rig, v)
}

/// The layer of the second server.
fn other_layer(base: &str) -> voqalize::voice::ModelLayer {
    layer(Provider::OpenAi, base, "gpt-test", timeouts())
}

#[tokio::test]
async fn each_request_declares_the_stage_s_tools_and_instruction_and_a_fresh_handoff_starts_from_the_note()
 {
    let (rig, mut v) = rig(|_| None).await;
    rig.server.reply(
        Reply::new()
            .text("One moment.")
            .call("verified", json!({"patient": "p-17"}))
            .finish(),
    );
    rig.server
        .reply(Reply::new().text("Which day suits you?").finish());
    v.start_silent().await.unwrap();
    let turn = says(&mut v, "I'm Ana Lima", 2).await;
    assert_eq!(turn.text(), "One moment. Which day suits you?");

    let first = rig.server.read_back(0).expect("the first request");
    assert_eq!(
        first.tools,
        [
            "find_patient",
            "verified",
            "verified_keep",
            "verified_summary",
            "verified_slowly"
        ]
    );
    assert_eq!(
        first.instruction.as_deref(),
        Some(
            "You answer the Elm Street Clinic's phone.\n\n\
             Ask for the caller's name and check it with `find_patient`."
        )
    );
    let second = rig.server.read_back(1).expect("the follow-up");
    assert_eq!(second.tools, ["open_slots", "book", "booked", "start_over"]);
    assert!(
        second
            .instruction
            .as_deref()
            .is_some_and(|i| i.ends_with("Offer the open slots and book the one the caller picks.")),
        "{:?}",
        second.instruction
    );
    // Nothing of the Verify stage crosses but the note: not the caller's words, not the unheard
    // "One moment." (its unit was still speaking when the call moved).
    assert_eq!(
        said(&rig.server, 1),
        [
            "user: (The call moved from stage Verify to stage Booking. Note: The caller is patient p-17.)"
        ]
    );
    let steps: Vec<(String, String, String)> = v
        .turn_steps()
        .iter()
        .filter(|s| s.turn_id == turn.turn_id && matches!(s.kind.as_str(), "stage" | "transition"))
        .map(|s| (s.kind.clone(), s.name.clone(), s.provider.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            ("stage".into(), "Verify".into(), "Clinic".into()),
            ("transition".into(), "Booking".into(), "Verify".into())
        ]
    );
    // The next turn starts in Booking.
    rig.server.reply(Reply::new().text("Booked.").finish());
    v.user_says("Tuesday").await.unwrap();
    assert!(
        rig.log
            .events()
            .contains(&"turn in Some(Booking)".to_owned())
    );
    assert_eq!(
        said(&rig.server, 2)[2..],
        ["user: Tuesday"],
        "the handoff's note, the Booking stage's words, then the caller's"
    );
}

#[tokio::test]
async fn a_keep_handoff_keeps_the_conversation_and_a_summary_handoff_starts_from_what_was_heard() {
    let (rig, mut v) = rig(|base| Some(Workflow::new().summarizer(other_layer(&base)))).await;
    v.start_silent().await.unwrap();
    // Keep: the follow-up reads everything, the call and its result included.
    rig.server
        .reply(Reply::new().call("verified_keep", json!({})).finish());
    rig.server.reply(Reply::new().text("Which day?").finish());
    v.user_says("I'm Ana Lima").await.unwrap();
    assert_eq!(
        said(&rig.server, 1),
        [
            "user: I'm Ana Lima",
            "call: verified_keep",
            r#"result: {"result":"kept"}"#
        ]
    );
    // Back to Verify (fresh), then a summary handoff: the summary request reads the transcript of
    // what the caller heard, and the next stage starts from its summary and the note.
    rig.server
        .reply(Reply::new().call("start_over", json!({})).finish());
    rig.server
        .reply(Reply::new().text("Who is calling?").finish());
    v.user_says("My wife is calling now").await.unwrap();
    rig.other.reply(
        Reply::new()
            .text("Bea Lima calls to book for herself.")
            .finish(),
    );
    rig.server
        .reply(Reply::new().call("verified_summary", json!({})).finish());
    rig.server
        .reply(Reply::new().text("Which day, Bea?").finish());
    v.user_says("I'm Bea Lima").await.unwrap();
    let summary = rig.other.read_back(0).expect("the summary request");
    assert!(summary.tools.is_empty());
    assert!(
        summary
            .instruction
            .as_deref()
            .is_some_and(|i| i.contains("hand a phone call over")),
        "{summary:?}"
    );
    let transcript = said(&rig.other, 0);
    assert_eq!(transcript.len(), 1, "{transcript:#?}");
    assert!(
        transcript[0].contains("Caller: I'm Bea Lima")
            && transcript[0].contains("Agent: Who is calling?"),
        "{transcript:#?}"
    );
    let last = rig.server.requests().len() - 1;
    assert_eq!(
        said(&rig.server, last),
        [
            "user: (The call moved from stage Verify to stage Booking. What was said before: Bea Lima calls to book for herself. Note: Patient p-17.)"
        ]
    );
}

#[tokio::test]
async fn a_summary_that_fails_falls_back_to_the_note_and_says_so_once() {
    let logs = logs();
    let (rig, mut v) = rig(|base| Some(Workflow::new().summarizer(other_layer(&base)))).await;
    v.start_silent().await.unwrap();
    // The request is tried again once after a 5xx: both fail.
    for _ in 0..2 {
        rig.other
            .reply(Reply::error_status(500, "summaries are down"));
    }
    rig.server
        .reply(Reply::new().call("verified_summary", json!({})).finish());
    rig.server.reply(Reply::new().text("Which day?").finish());
    v.user_says("I'm Ana Lima").await.unwrap();
    assert_eq!(
        said(&rig.server, 1),
        ["user: (The call moved from stage Verify to stage Booking. Note: Patient p-17.)"]
    );
    assert!(
        logs.lines_with("summaries are down")
            .iter()
            .any(|l| l.contains("the handoff summary failed")),
        "{:#?}",
        logs.lines_with("handoff summary")
    );
}

#[tokio::test]
async fn a_transition_the_stage_does_not_offer_is_refused_and_the_model_reads_why() {
    let (rig, mut v) = rig(|_| None).await;
    v.start_silent().await.unwrap();
    rig.server.reply(
        Reply::new()
            .call("booked", json!({}))
            .call("book", json!({}))
            .finish(),
    );
    rig.server
        .reply(Reply::new().text("Let me check you first.").finish());
    let turn = v.user_says("book me on Tuesday").await.unwrap();
    assert_eq!(turn.text(), "Let me check you first.");
    let results: Vec<String> = said(&rig.server, 1)
        .into_iter()
        .filter(|l| l.starts_with("result:"))
        .collect();
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[0].contains("'booked' did not run: it moves the call to Confirm, and stage Verify does not lead there (its tools: find_patient; it leads to Booking)"),
        "{results:#?}"
    );
    assert!(
        results[1].contains("'book' did not run: it is not a tool of stage Verify"),
        "{results:#?}"
    );
    assert!(!rig.log.events().contains(&"booked".to_owned()));
    rig.server
        .reply(Reply::new().text("Still checking.").finish());
    v.user_says("hello?").await.unwrap();
    assert!(
        rig.log
            .events()
            .contains(&"turn in Some(Verify)".to_owned())
    );
}

#[tokio::test]
async fn a_model_that_calls_transitions_in_a_loop_is_stopped_at_the_cap() {
    let (rig, mut v) = rig(|_| Some(Workflow::new().max_transitions_per_turn(2))).await;
    v.start_silent().await.unwrap();
    rig.server
        .reply(Reply::new().call("verified_keep", json!({})).finish());
    rig.server
        .reply(Reply::new().call("start_over", json!({})).finish());
    rig.server
        .reply(Reply::new().call("verified_keep", json!({})).finish());
    rig.server
        .reply(Reply::new().text("Sorry, where were we?").finish());
    let turn = v.user_says("hi").await.unwrap();
    assert_eq!(turn.text(), "Sorry, where were we?");
    let third = said(&rig.server, 3);
    assert!(
        third
            .last()
            .is_some_and(|l| l.contains("this turn already moved the call 2 times, the most a turn may; answer the caller in stage Verify")),
        "{third:#?}"
    );
    assert_eq!(rig.server.requests().len(), 4);
}

#[tokio::test]
async fn a_stage_on_another_provider_speaks_its_own_fallback_and_entry_line_and_hooks_run() {
    let (rig, mut v) = rig(|base| {
        Some(
            Workflow::new()
                .layer(Clinic::Booking, other_layer(&base))
                .enter_line(Clinic::Booking, "Let's find you a slot.")
                .fallback_line(Clinic::Booking, "Booking is slow today, sorry.")
                .on_exit(Clinic::Verify, |c| {
                    let _ = c.session.id();
                })
                .on_enter(Clinic::Booking, |c| {
                    assert_eq!((c.from, c.to), (Clinic::Verify, Clinic::Booking));
                }),
        )
    })
    .await;
    v.start_silent().await.unwrap();
    rig.server
        .reply(Reply::new().call("verified_keep", json!({})).finish());
    rig.other
        .reply(Reply::new().text("Tuesday or Wednesday?").finish());
    let turn = says(&mut v, "I'm Ana Lima", 2).await;
    assert_eq!(turn.text(), "Let's find you a slot. Tuesday or Wednesday?");
    let booking = rig.other.read_back(0).expect("the Booking stage's request");
    assert_eq!(
        booking.tools,
        ["open_slots", "book", "booked", "start_over"]
    );
    assert_eq!(
        said(&rig.other, 0).last().map(String::as_str),
        Some("model: Let's find you a slot.")
    );
    assert_eq!(
        rig.server.requests().len(),
        1,
        "Booking never asks the first provider"
    );
    // The Booking stage's provider fails: its own fallback line is spoken.
    rig.other.reply(Reply::error_status(503, "overloaded"));
    let failed = v.user_says("Tuesday").await.unwrap();
    assert_eq!(failed.text(), "Booking is slow today, sorry.");
}

#[tokio::test]
async fn brain_code_moves_the_call_and_the_next_request_follows() {
    let (rig, mut v) = rig(|_| None).await;
    v.start_silent().await.unwrap();
    rig.server.reply(Reply::new().text("Hello.").finish());
    v.user_says("hi").await.unwrap();
    rig.server.reply(Reply::new().text("Goodbye.").finish());
    v.user_says("skip to the end").await.unwrap();
    assert!(rig.log.events().contains(&"moved true".to_owned()));
    assert!(
        rig.log
            .events()
            .contains(&"turn in Some(Confirm)".to_owned())
    );
    let request = rig.server.read_back(1).expect("the request");
    assert!(
        request.tools.is_empty(),
        "Confirm offers nothing: {:?}",
        request.tools
    );
    assert_eq!(
        said(&rig.server, 1),
        [
            "user: (The call moved from stage Verify to stage Confirm. Note: Skipped by the brain.)",
            "user: skip to the end"
        ]
    );
}

#[tokio::test]
async fn a_transition_the_caller_barged_in_on_finishes_and_the_next_turn_starts_in_the_new_stage() {
    let (rig, mut v) = rig(|_| None).await;
    v.start_silent().await.unwrap();
    rig.server.reply(
        Reply::new()
            .text("Checking with the office. ")
            .call("verified_slowly", json!({}))
            .finish(),
    );
    let barge = BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some("Checking".into()),
    };
    let log = rig.log.clone();
    let waiting = tokio::spawn(async move {
        log.until(|l| l.events().contains(&"verifying".to_owned()))
            .await
    });
    let turn = v.barge_in("I'm Ana Lima", barge).await.unwrap();
    assert!(turn.interrupted);
    assert!(waiting.await.unwrap());
    // The transition runs on after the barge-in (a `Finish` run), then moves the call.
    rig.gate.add_permits(1);
    assert!(
        rig.log
            .wait(&mut v, |l| l.events().contains(&"verified".to_owned()))
            .await
    );
    rig.server
        .reply(Reply::new().text("Which day suits you?").finish());
    v.user_says("hello?").await.unwrap();
    assert!(
        rig.log
            .events()
            .contains(&"turn in Some(Booking)".to_owned())
    );
    let last = rig.server.requests().len() - 1;
    let request = rig.server.read_back(last).expect("the request");
    assert_eq!(
        request.tools,
        ["open_slots", "book", "booked", "start_over"]
    );
    // The handoff's note first, then the caller's words since the move: nothing else crosses.
    assert_eq!(
        said(&rig.server, last),
        [
            "user: (The call moved from stage Verify to stage Booking. Note: Verified by the back office.)",
            "user: hello?"
        ]
    );
    let moved = v
        .turn_steps()
        .iter()
        .any(|s| s.turn_id == turn.turn_id && s.kind == "transition" && s.name == "Booking");
    assert!(moved, "{:#?}", v.turn_steps());
}

/// Desks on the stand-in at `base`, with `workflow`'s settings.
pub(crate) fn desks(
    base: String,
    workflow: impl Fn() -> Workflow<Clinic> + Send + Sync + 'static,
) -> impl Fn() -> Desk + Send + Sync + 'static {
    move || Desk {
        model: Model::new(layer(Provider::Gemini, &base, "gemini-test", timeouts()))
            .instruction("You answer the Elm Street Clinic's phone.")
            .workflow(workflow()),
        log: Arc::new(Log::default()),
        gate: Arc::new(Semaphore::new(0)),
    }
}

#[tokio::test]
async fn a_recorded_call_replays_its_transitions_and_a_replay_that_moves_otherwise_says_where() {
    use voqalize_testing::Replay;
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    server.reply(Reply::new().call("verified_keep", json!({})).finish());
    server.reply(Reply::new().call("start_over", json!({})).finish());
    server.reply(Reply::new().text("Who is calling, then?").finish());
    server.reply(Reply::new().text("Hello Bea.").finish());
    let recording = crate::replay::recorded(desks(server.base_url(), Workflow::new), async |v| {
        v.user_says("I'm Ana").await.unwrap();
        v.user_says("I'm Bea").await.unwrap();
    })
    .await;
    let moves: Vec<(&str, &str, &str)> = recording
        .stages
        .iter()
        .map(|m| (m.from.as_str(), m.to.as_str(), m.context.as_str()))
        .collect();
    assert_eq!(
        moves,
        [
            ("Verify", "Booking", "keep"),
            ("Booking", "Verify", "fresh")
        ]
    );
    let mut replay = Replay::start(recording.clone()).await.unwrap();
    let same = replay
        .run(desks(replay.base_url(), Workflow::new))
        .await
        .unwrap();
    assert!(same.is_same(), "{same}");
    // A build that allows one transition per turn moves the call otherwise: the report names the
    // turn and the steps that differ.
    // Its turns say nothing past the point they differ: they are cut at a short timeout (what
    // is asserted is in the recorded side, whatever the replay managed).
    let mut replay = Replay::start(recording)
        .await
        .unwrap()
        .turn_timeout(Duration::from_secs(2));
    let capped = || Workflow::new().max_transitions_per_turn(1);
    let report = replay.run(desks(replay.base_url(), capped)).await.unwrap();
    assert!(!report.is_same(), "{report}");
    let text = report.to_string();
    assert!(text.contains("turn 1 (I'm Ana)"), "{text}");
    assert!(text.contains("transition Verify"), "{text}");
}

#[tokio::test]
async fn one_transition_moves_the_call_at_a_time_and_one_that_fails_lets_the_next_run() {
    let (rig, mut v) = rig_with(
        |m| {
            m.parallel_tools(2).before_tool(|call| match call.name {
                "verified" => Err(Refusal::new("not before the date of birth")),
                _ => Ok(()),
            })
        },
        |_| None,
    )
    .await;
    v.start_silent().await.unwrap();
    // Two at once: the second is refused while the first runs.
    rig.server.reply(
        Reply::new()
            .call("verified_slowly", json!({}))
            .call("verified_keep", json!({}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("Which day?").finish());
    let log = rig.log.clone();
    let gate = rig.gate.clone();
    tokio::spawn(async move {
        if log
            .until(|l| l.events().contains(&"verifying".to_owned()))
            .await
        {
            gate.add_permits(1);
        }
    });
    let turn = v.user_says("I'm Ana").await.unwrap();
    let outcomes: Vec<(&str, &str)> = turn
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [("verified_keep", "refused"), ("verified_slowly", "ok")]
    );
    assert!(rig.log.events().contains(&"verified".to_owned()));
    // The one that ran moved the call (fresh): the follow-up starts from its note.
    assert_eq!(
        said(&rig.server, 1),
        [
            "user: (The call moved from stage Verify to stage Booking. Note: Verified by the back office.)"
        ]
    );
    // Back to Verify; a transition a guard refuses does not move the call, and does not stop the
    // next one.
    rig.server
        .reply(Reply::new().call("start_over", json!({})).finish());
    rig.server.reply(Reply::new().text("Who is it?").finish());
    v.user_says("someone else").await.unwrap();
    rig.server.reply(
        Reply::new()
            .call("verified", json!({"patient": "p-1"}))
            .finish(),
    );
    rig.server
        .reply(Reply::new().call("verified_keep", json!({})).finish());
    rig.server.reply(Reply::new().text("Which day?").finish());
    v.user_says("I'm Bea").await.unwrap();
    let last = rig.server.requests().len() - 1;
    let request = rig.server.read_back(last).expect("the request");
    assert_eq!(
        request.tools,
        ["open_slots", "book", "booked", "start_over"]
    );
    assert!(
        said(&rig.server, last)
            .iter()
            .any(|l| l.contains("not before the date of birth")),
        "{:#?}",
        said(&rig.server, last)
    );
}

#[tokio::test]
async fn a_long_note_is_cut_to_its_bound() {
    let (rig, mut v) = rig(|_| Some(Workflow::new().max_note_bytes(64))).await;
    v.start_silent().await.unwrap();
    let patient = "p".repeat(500);
    rig.server.reply(
        Reply::new()
            .call("verified", json!({"patient": patient}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("Which day?").finish());
    v.user_says("I'm Ana").await.unwrap();
    let note = said(&rig.server, 1).remove(0);
    assert!(
        note.starts_with("user: (The call moved from stage Verify to stage Booking. Note: The caller is patient pppp")
            && note.ends_with("... (523 bytes))"),
        "{note}"
    );
    assert!(note.len() < 200, "{note}");
}

#[tokio::test]
async fn after_a_summary_handoff_the_anthropic_prompt_prefix_stays_the_same_from_turn_to_turn() {
    let server = ModelServer::start(Provider::Anthropic)
        .await
        .expect("a port");
    let base = server.base_url();
    let mut v = driver(move || Desk {
        model: Model::new(layer(Provider::Anthropic, &base, "claude-test", timeouts()))
            .instruction("You answer the Elm Street Clinic's phone."),
        log: Arc::new(Log::default()),
        gate: Arc::new(Semaphore::new(0)),
    })
    .await;
    v.start_silent().await.unwrap();
    server.reply(Reply::new().text("Hello, who is calling?").finish());
    v.user_says("hi").await.unwrap();
    // The summary (by the stage's own layer), then the Booking stage's answers.
    server.reply(Reply::new().call("verified_summary", json!({})).finish());
    server.reply(Reply::new().text("Ana calls to book.").finish());
    server.reply(Reply::new().text("Which day?").finish());
    v.user_says("I'm Ana").await.unwrap();
    server.reply(Reply::new().text("Tuesday it is.").finish());
    v.user_says("Tuesday").await.unwrap();
    let bodies: Vec<serde_json::Value> = server.requests().into_iter().map(|r| r.body).collect();
    let (first, second) = (&bodies[bodies.len() - 2], &bodies[bodies.len() - 1]);
    // The cached prefix: the tools, the system prompt, and the summary note that opens the
    // conversation, unchanged from one request of the stage to the next.
    assert_eq!(first["tools"], second["tools"]);
    assert_eq!(first["system"], second["system"]);
    let opening = |b: &serde_json::Value| b["messages"][0]["content"][0]["text"].clone();
    assert_eq!(opening(first), opening(second));
    assert!(
        opening(first)
            .as_str()
            .is_some_and(|t| t.contains("What was said before: Ana calls to book.")),
        "{first}"
    );
}

#[tokio::test]
async fn a_move_in_brain_code_before_the_model_speaks_the_entered_stage_s_line() {
    let (rig, mut v) =
        rig(|_| Some(Workflow::new().enter_line(Clinic::Confirm, "Let's confirm."))).await;
    v.start_silent().await.unwrap();
    rig.server.reply(Reply::new().text("Hello.").finish());
    v.user_says("hi").await.unwrap();
    rig.server.reply(Reply::new().text("Goodbye.").finish());
    let turn = v.user_says("skip to the end").await.unwrap();
    assert_eq!(turn.text(), "Let's confirm. Goodbye.");
}

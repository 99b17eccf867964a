//! Stages attacked as a hostile model or provider would: summaries that are huge, never end or
//! hold only a call; transitions that panic, time out, fail, or are called with arguments that do
//! not fit; a tool of the next stage called in the response that moves the call; two moves at once
//! (brain code during a transition); a brain whose stages differ from its `Model`'s; the app
//! moving the call outside a turn. Summaries attacked: `stage_summaries.rs`. Over a real session socket, against stand-in model servers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Semaphore;
use voqalize::prelude::*;
use voqalize::stages::Context;
use voqalize::voice::Workflow;
use voqalize::wire::{Rtvi, RtviType};
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::stages::Clinic;
use crate::support::{Log, driver, layer, logs, said};

/// A help line: the front desk, the back office, goodbye.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Line {
    /// Find out what the caller needs.
    #[stage(tools(lookup, skip_ahead), to(Back, Done))]
    Front,
    /// File the caller's ticket.
    #[stage(tools(file_ticket), to(Front, Done))]
    Back,
    /// Say goodbye.
    #[stage(end)]
    Done,
}

/// Who the ticket is for.
#[json_type]
struct Who {
    /// The caller's id.
    id: String,
}

/// The lab: transitions that misbehave on purpose; tools log what they did.
struct Lab {
    model: Model,
    log: Arc<Log>,
    gate: Arc<Semaphore>,
}

impl Brain for Lab {
    async fn on_user_message(&self, turn: &mut Turn, _message: UserMessage) -> BrainResult {
        self.log
            .push(format!("turn in {:?}", self.model.stage::<Line>()));
        self.model.respond(self, turn).await
    }

    async fn on_rtvi(&self, _session: &Session, _message: Rtvi) -> BrainResult {
        let moved = self
            .model
            .move_to(Line::Back, Context::Fresh, "The app opened a ticket.");
        self.log.push(format!("app moved {}", moved.is_ok()));
        Ok(())
    }
}

#[brain(stages = Line)]
impl Lab {
    /// Looks the caller up.
    #[tool]
    async fn lookup(&self) -> &'static str {
        "c-9"
    }

    /// Brain code moves the call to the end, from inside a tool.
    #[tool]
    async fn skip_ahead(&self) -> &'static str {
        let moved = self
            .model
            .move_to(Line::Done, Context::Fresh, "Skipped by the brain.");
        self.log.push(format!("skipped {}", moved.is_ok()));
        "skipped"
    }

    /// Files a ticket.
    #[tool]
    async fn file_ticket(&self) -> &'static str {
        self.log.push("filed");
        "filed"
    }

    /// To the back office.
    #[transition(to = Back)]
    async fn to_back(&self) -> &'static str {
        "To the back office."
    }

    /// To the back office, for someone.
    #[transition(to = Back, context = fresh)]
    async fn to_back_for(&self, who: Who) -> String {
        format!("For caller {}.", who.id)
    }

    /// To the back office, with a summary.
    #[transition(to = Back, context = summary)]
    async fn to_back_summary(&self) -> &'static str {
        "Summarised."
    }

    /// To the back office: panics.
    #[transition(to = Back)]
    async fn to_back_panics(&self) -> &'static str {
        panic!("the back office is on fire")
    }

    /// To the back office: never answers.
    #[transition(to = Back, timeout = "100ms")]
    async fn to_back_stuck(&self) -> &'static str {
        self.log.push("stuck started");
        std::future::pending::<()>().await;
        "never"
    }

    /// To the back office: refused.
    #[transition(to = Back)]
    async fn to_back_fails(&self) -> Result<&'static str, String> {
        Err("the back office is closed".to_owned())
    }

    /// To the back office, once the test lets it.
    #[transition(to = Back)]
    async fn to_back_waits(&self) -> &'static str {
        self.log.push("waiting");
        if let Ok(permit) = self.gate.acquire().await {
            permit.forget();
        }
        "Waited."
    }

    /// Back to the front desk.
    #[transition(to = Front)]
    async fn to_front(&self) -> &'static str {
        ""
    }

    /// Done.
    #[transition(to = Done)]
    async fn done(&self) -> &'static str {
        ""
    }
}

fn timeouts() -> voqalize::model::Timeouts {
    voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    }
}

pub(crate) struct Rig {
    pub(crate) server: ModelServer,
    /// The summarizer.
    pub(crate) other: ModelServer,
    pub(crate) log: Arc<Log>,
    gate: Arc<Semaphore>,
}

/// A lab on the stand-in; `model` finishes its `Model` (given the summarizer's base URL).
pub(crate) async fn rig(
    model: impl Fn(Model, String) -> Model + Send + Sync + 'static,
) -> (Rig, Voqalize) {
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    let other = ModelServer::start(Provider::OpenAi).await.expect("a port");
    let (log, gate) = (Arc::new(Log::default()), Arc::new(Semaphore::new(0)));
    let (base, other_base) = (server.base_url(), other.base_url());
    let (l, g) = (log.clone(), gate.clone());
    let v = driver(move || Lab {
        model: model(
            Model::new(layer(Provider::Gemini, &base, "gemini-test", timeouts()))
                .instruction("You answer the help line."),
            other_base.clone(),
        ),
        log: l.clone(),
        gate: g.clone(),
    })
    .await;
    (
        Rig {
            server,
            other,
            log,
            gate,
        },
        v,
    )
}

/// The summarizer's layer.
pub(crate) fn summarizer(base: &str) -> voqalize::voice::ModelLayer {
    layer(Provider::OpenAi, base, "gpt-test", timeouts())
}

/// What the front desk declares.
fn front_tools() -> Vec<&'static str> {
    vec![
        "lookup",
        "skip_ahead",
        "to_back",
        "to_back_for",
        "to_back_summary",
        "to_back_panics",
        "to_back_stuck",
        "to_back_fails",
        "to_back_waits",
        "done",
    ]
}

fn outcomes(turn: &voqalize_testing::TurnRecord) -> Vec<(String, String)> {
    turn.tools
        .iter()
        .map(|t| (t.name.clone(), t.outcome.clone()))
        .collect()
}

/// The results the model read in request `i`.
fn results(server: &ModelServer, i: usize) -> Vec<String> {
    said(server, i)
        .into_iter()
        .filter(|l| l.starts_with("result:"))
        .collect()
}

#[tokio::test]
async fn a_transition_that_panics_times_out_or_fails_leaves_the_call_in_its_stage_and_the_next_one_runs()
 {
    let (rig, mut v) = rig(|m, _| m).await;
    v.start_silent().await.unwrap();
    for (name, outcome) in [
        ("to_back_panics", "panicked"),
        ("to_back_stuck", "timeout"),
        ("to_back_fails", "failed"),
    ] {
        rig.server
            .reply(Reply::new().call(name, json!({})).finish());
        rig.server.reply(Reply::new().text("Still here.").finish());
        let turn = v.user_says("help").await.unwrap();
        assert_eq!(turn.text(), "Still here.", "{name}");
        let seen = outcomes(&turn);
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert!(
            seen[0].0 == name && seen[0].1 != "ok",
            "{name} should end as {outcome}: {seen:#?}"
        );
        let last = rig.server.requests().len() - 1;
        assert_eq!(
            rig.server.read_back(last).expect("the follow-up").tools,
            front_tools(),
            "{name}: the call stays at the front"
        );
    }
    // Each ran and was answered: the next transition is not refused as "another is running".
    rig.server
        .reply(Reply::new().call("to_back", json!({})).finish());
    rig.server.reply(Reply::new().text("Filed soon.").finish());
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(
        outcomes(&turn),
        [("to_back".to_owned(), "ok".to_owned())],
        "{:#?}",
        results(&rig.server, rig.server.requests().len() - 1)
    );
    let last = rig.server.requests().len() - 1;
    assert_eq!(
        rig.server.read_back(last).expect("the follow-up").tools,
        ["file_ticket", "to_front", "done"]
    );
}

#[tokio::test]
async fn transitions_with_arguments_that_do_not_fit_or_a_wrong_case_move_nothing_and_a_huge_note_is_cut()
 {
    let (rig, mut v) = rig(|m, _| m).await;
    v.start_silent().await.unwrap();
    // Arguments that do not fit the struct; a name differing only by case; both in one response.
    rig.server.reply(
        Reply::new()
            .call("to_back_for", json!({"id": 5}))
            .call("TO_BACK", json!({}))
            .call("to_back_for", json!({"who": {"id": "c-9"}}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("Still here.").finish());
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(turn.text(), "Still here.");
    assert!(
        turn.tools.iter().all(|t| t.outcome != "ok"),
        "{:#?}",
        outcomes(&turn)
    );
    assert_eq!(
        rig.server.read_back(1).expect("the follow-up").tools,
        front_tools()
    );
    // Megabytes of arguments: past the call's bound (`max_argument_bytes`), nothing runs.
    let huge = "x".repeat(3 * 1024 * 1024);
    rig.server.reply(
        Reply::new()
            .text("Let me see.")
            .call("to_back_for", json!({"id": huge}))
            .finish(),
    );
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(turn.text(), "Let me see.");
    assert!(
        turn.tools.iter().all(|t| t.outcome != "ok"),
        "{:#?}",
        outcomes(&turn)
    );
    // Within that bound, the transition runs: what crosses is its note, cut to `max_note_bytes`.
    let big = "x".repeat(48 * 1024);
    rig.server.reply(
        Reply::new()
            .call("to_back_for", json!({"id": big}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("Filed soon.").finish());
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(
        outcomes(&turn),
        [("to_back_for".to_owned(), "ok".to_owned())]
    );
    assert!(
        !rig.log.events().iter().any(|e| e == "turn in Some(Back)"),
        "no turn started in Back: {:#?}",
        rig.log.events()
    );
    let last = rig.server.requests().len() - 1;
    let read = said(&rig.server, last);
    assert_eq!(read.len(), 1, "only the note crosses");
    assert!(
        read[0].starts_with(
            "user: (The call moved from stage Front to stage Back. Note: For caller xxx"
        ) && read[0].len() < 2 * 1024 + 200,
        "{}",
        read[0].len()
    );
    assert_eq!(
        rig.server.read_back(last).expect("the follow-up").tools,
        ["file_ticket", "to_front", "done"]
    );
}

#[tokio::test]
async fn a_tool_of_the_next_stage_called_with_the_transition_is_refused_and_the_model_reads_why() {
    let (rig, mut v) = rig(|m, _| m).await;
    v.start_silent().await.unwrap();
    rig.server.reply(
        Reply::new()
            .call("to_back", json!({}))
            .call("file_ticket", json!({}))
            .call("done", json!({}))
            .finish(),
    );
    rig.server
        .reply(Reply::new().text("Filing it now.").finish());
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(
        outcomes(&turn)
            .into_iter()
            .map(|(n, o)| format!("{n} {o}"))
            .collect::<Vec<_>>(),
        ["to_back ok", "file_ticket refused", "done refused"]
    );
    assert!(!rig.log.events().contains(&"filed".to_owned()));
    let read = results(&rig.server, 1);
    assert_eq!(read.len(), 3, "{read:#?}");
    // The model is not told that stage Back lacks the tool it offers: it was not declared yet.
    assert!(
        read[1].contains("'file_ticket' did not run: it was not declared in this request")
            && read[1].contains("stage Back offers it now"),
        "{read:#?}"
    );
    assert!(
        read[2].contains("'done' did not run: the call is already moving to Back"),
        "{read:#?}"
    );
    assert_eq!(
        rig.server.read_back(1).expect("the follow-up").tools,
        ["file_ticket", "to_front", "done"]
    );
}

#[tokio::test]
async fn a_second_transition_while_one_runs_reads_a_clean_refusal() {
    let (rig, mut v) = rig(|m, _| m.parallel_tools(2)).await;
    v.start_silent().await.unwrap();
    rig.server.reply(
        Reply::new()
            .call("to_back_waits", json!({}))
            .call("to_back", json!({}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("Filing.").finish());
    let (log, gate) = (rig.log.clone(), rig.gate.clone());
    tokio::spawn(async move {
        if log
            .until(|l| l.events().contains(&"waiting".to_owned()))
            .await
        {
            gate.add_permits(1);
        }
    });
    v.user_says("help").await.unwrap();
    let read = results(&rig.server, 1);
    assert!(
        read.iter().any(|r| r.contains(
            "'to_back' did not run: another transition is running; one moves the call at a time"
        )),
        "{read:#?}"
    );
}

#[tokio::test]
async fn brain_code_that_moves_the_call_while_a_transition_runs_wins() {
    let (rig, mut v) = rig(|m, _| m.parallel_tools(2)).await;
    v.start_silent().await.unwrap();
    rig.server.reply(
        Reply::new()
            .call("to_back_waits", json!({}))
            .call("skip_ahead", json!({}))
            .finish(),
    );
    rig.server.reply(Reply::new().text("Goodbye.").finish());
    let (log, gate) = (rig.log.clone(), rig.gate.clone());
    tokio::spawn(async move {
        if log
            .until(|l| l.events().contains(&"skipped true".to_owned()))
            .await
        {
            gate.add_permits(1);
        }
    });
    let turn = v.user_says("I'm done").await.unwrap();
    assert_eq!(turn.text(), "Goodbye.");
    // The brain moved the call to the end stage while the model's transition ran: the transition
    // ends well but does not take the call out of a stage with no way out.
    let follow_up = rig.server.read_back(1).expect("the follow-up");
    assert!(follow_up.tools.is_empty(), "{:?}", follow_up.tools);
    // The turn's own words and calls stay behind the brain's note (a move inside a turn).
    assert_eq!(
        said(&rig.server, 1)[0],
        "user: (The call moved from stage Front to stage Done. Note: Skipped by the brain.)"
    );
    rig.server.reply(Reply::new().text("Bye.").finish());
    v.user_says("bye").await.unwrap();
    assert_eq!(
        rig.log.events().last().map(String::as_str),
        Some("turn in Some(Done)")
    );
}

/// Entries into Back the app's move made.
static ENTERED: AtomicUsize = AtomicUsize::new(0);

#[tokio::test]
async fn the_app_moves_the_call_outside_a_turn_and_the_hooks_run() {
    let (rig, mut v) = rig(|m, _| {
        m.workflow(Workflow::<Line>::new().on_enter(Line::Back, |c| {
            let _ = c.session.id();
            ENTERED.fetch_add(1, Ordering::Relaxed);
        }))
    })
    .await;
    v.start_silent().await.unwrap();
    v.send_rtvi(RtviType::ClientMessage, json!({"t": "open-ticket"}))
        .await
        .unwrap();
    assert!(
        rig.log
            .wait(&mut v, |l| l
                .events()
                .contains(&"app moved true".to_owned()))
            .await
    );
    rig.server.reply(Reply::new().text("Your ticket?").finish());
    v.user_says("hello").await.unwrap();
    assert_eq!(
        rig.server.read_back(0).expect("the request").tools,
        ["file_ticket", "to_front", "done"]
    );
    assert_eq!(ENTERED.load(Ordering::Relaxed), 1, "the hook ran once");
    assert_eq!(
        said(&rig.server, 0),
        [
            "user: (The call moved from stage Front to stage Back. Note: The app opened a ticket.)",
            "user: hello"
        ]
    );
}

#[tokio::test]
async fn hooks_that_panic_are_logged_and_the_call_moves_and_an_entry_line_is_said_per_entry() {
    let logs = logs();
    let (rig, mut v) = rig(|m, _| {
        m.workflow(
            Workflow::<Line>::new()
                .on_exit(Line::Front, |_| panic!("exit hook of the lab"))
                .on_enter(Line::Back, |_| panic!("enter hook of the lab"))
                .enter_line(Line::Back, "Back office here."),
        )
    })
    .await;
    v.start_silent().await.unwrap();
    // Into Back, out, and in again in one turn: the line is said at each entry (the cap on
    // transitions per turn bounds how often).
    rig.server
        .reply(Reply::new().call("to_back", json!({})).finish());
    rig.server
        .reply(Reply::new().call("to_front", json!({})).finish());
    rig.server
        .reply(Reply::new().call("to_back", json!({})).finish());
    rig.server.reply(Reply::new().text("Ticket?").finish());
    let turn = v.user_says("help").await.unwrap();
    assert_eq!(turn.text(), "Back office here. Back office here. Ticket?");
    assert_eq!(
        rig.server.read_back(3).expect("the last request").tools,
        ["file_ticket", "to_front", "done"]
    );
    for hook in ["exit hook of the lab", "enter hook of the lab"] {
        let lines = logs.lines_with(hook);
        assert_eq!(lines.len(), 2, "{hook}: {lines:#?}");
        assert!(
            lines.iter().all(|l| l.contains("a stage hook")),
            "{lines:#?}"
        );
    }
}

#[tokio::test]
async fn a_model_given_other_stages_than_its_brain_s_logs_once_and_declares_the_brain_s_tools_every_turn()
 {
    let logs = logs();
    let (rig, mut v) = rig(|m, _| m.workflow(Workflow::<Clinic>::new())).await;
    v.start_silent().await.unwrap();
    for n in 0..3 {
        rig.server.reply(Reply::new().text("Hello.").finish());
        let turn = v.user_says("hi").await.unwrap();
        assert_eq!(turn.text(), "Hello.");
        let tools = rig.server.read_back(n).expect("the request").tools;
        assert_eq!(
            tools.len(),
            12,
            "turn {n}: every tool of the brain: {tools:?}"
        );
    }
    let lines =
        logs.lines_with("follows the stages of `Clinic`, but the brain it answers declares `Line`");
    assert_eq!(lines.len(), 1, "{lines:#?}");
}

#[tokio::test]
async fn a_call_bounced_between_two_stages_for_many_turns_does_not_grow() {
    let (rig, mut v) = rig(|m, _| m).await;
    v.start_silent().await.unwrap();
    let mut back_requests = Vec::new();
    for n in 0..8 {
        // Into Back afresh, then back to the front keeping the conversation.
        rig.server.reply(
            Reply::new()
                .call("to_back_for", json!({"id": format!("c-{n}")}))
                .finish(),
        );
        rig.server.reply(Reply::new().text("Back office.").finish());
        v.user_says("to the back").await.unwrap();
        back_requests.push(rig.server.requests().len() - 1);
        rig.server
            .reply(Reply::new().call("to_front", json!({})).finish());
        rig.server.reply(Reply::new().text("Front desk.").finish());
        v.user_says("to the front").await.unwrap();
    }
    // Each fresh entry into Back starts from its note alone, however often the call bounced;
    // the instruction is the same text each time.
    let first = rig.server.read_back(back_requests[0]).expect("a request");
    for (n, &i) in back_requests.iter().enumerate() {
        assert_eq!(
            said(&rig.server, i),
            [format!(
                "user: (The call moved from stage Front to stage Back. Note: For caller c-{n}.)"
            )]
        );
        let request = rig.server.read_back(i).expect("a request");
        assert_eq!(request.instruction, first.instruction);
        assert_eq!(request.tools, first.tools);
    }
    // The front desk's request after the last bounce holds that one stretch only.
    let last = said(&rig.server, rig.server.requests().len() - 1);
    assert!(last.len() <= 7, "{last:#?}");
}

//! Tools under attack: what a hostile model, a careless caller and a careless brain author can do
//! to a tool's life in a call, each over a real session socket against the stand-in model server.
//! Two turns sharing one model while a tool runs, two responds in one turn, results built to
//! defeat the byte bound, settings at their extremes, a tool that speaks its progress right
//! before it returns or in a loop, a background result landing mid-turn on a full history, a
//! caller who cuts in on turn after turn or hangs up while a tool runs, and the replay of a call
//! with a background tool.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use voqalize::prelude::*;
use voqalize_testing::{ModelServer, Provider, Reply, Said, Voqalize};

use crate::support::{Log, driver, layer};

/// Lets a tool go on, once per permit.
struct Gate(Semaphore);

impl Gate {
    async fn pass(&self) {
        if let Ok(permit) = self.0.acquire().await {
            permit.forget();
        }
    }

    fn open(&self) {
        self.0.add_permits(1);
    }
}

/// How many progress lines `chatty` tries to say.
const CHATTY_LINES: usize = 2_000;

struct Target {
    model: Model,
    log: Arc<Log>,
    gate: Arc<Gate>,
}

impl Brain for Target {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }

    /// Asks the model twice in one turn: its calls are numbered over both.
    async fn on_user_idle(&self, turn: &mut Turn, _: UserIdle) -> BrainResult {
        self.model.respond(self, turn).await?;
        self.model.respond(self, turn).await
    }

    async fn on_session_end(&self, _session: &Session, _reason: EndReason) {
        self.log.push("session ended");
    }
}

#[brain]
impl Target {
    /// Names the call it serves.
    #[tool]
    async fn whoami(&self) -> String {
        let id = self
            .session()
            .tool_call()
            .map_or_else(|| "none".to_owned(), |c| c.id().to_owned());
        self.log.push(format!("call {id}"));
        id
    }

    /// A page of quotation marks: every byte of it is two in JSON.
    #[tool]
    async fn quotes(&self) -> String {
        "\"".repeat(100_000)
    }

    /// A page of control characters: every byte of it is six in JSON.
    #[tool]
    async fn controls(&self) -> String {
        "\u{1}".repeat(100_000)
    }

    /// A long list of quoted words (a result that is not a string).
    #[tool]
    async fn listing(&self) -> Vec<String> {
        vec!["\"q\"".to_owned(); 20_000]
    }

    /// Says where it got, and returns at once.
    #[tool]
    async fn quick(&self) -> Result<&'static str, SessionError> {
        let spoken = self.session().say_progress("Found it.")?;
        self.log.push(format!("progress spoken={spoken}"));
        Ok("done")
    }

    /// Says its progress for every item of a long list.
    #[tool]
    #[needs_result_now]
    async fn chatty(&self) -> Result<&'static str, SessionError> {
        for i in 0..CHATTY_LINES {
            self.session().say_progress(&format!(
                "Checked item {i} of the list; still going through the rest of them."
            ))?;
            tokio::task::yield_now().await;
        }
        self.log.push("chatty finished");
        Ok("all checked")
    }

    /// Emails the confirmation, once the mail server answers, in the background.
    #[tool(background)]
    async fn mail(&self) -> &'static str {
        self.gate.pass().await;
        self.log.push("mail finished");
        "mailed"
    }

    /// Looks the booking up; the model reads the long record at once.
    #[tool]
    #[needs_result_now]
    async fn lookup(&self) -> String {
        self.log.push("lookup ran");
        "x".repeat(10_000)
    }

    /// Pings the back office, in the background; it answers at once.
    #[tool(background)]
    async fn ping(&self) -> &'static str {
        "pong"
    }

    /// Looks tables up in an archive that never answers; stopped if the caller cuts in.
    #[tool(on_barge_in = cancel)]
    async fn look(&self) -> &'static str {
        self.log.push("look started");
        std::future::pending::<()>().await;
        "never"
    }

    /// Books a table, once the back office answers; runs on if the caller cuts in.
    #[tool(filler = "One moment.")]
    async fn book(&self) -> &'static str {
        self.log.push("book started");
        self.gate.pass().await;
        self.log.push("book finished");
        "booked"
    }
}

struct Rig {
    server: ModelServer,
    log: Arc<Log>,
    gate: Arc<Gate>,
}

async fn rig(settings: impl Fn(Model) -> Model + Send + Sync + 'static) -> (Rig, Voqalize) {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    let (log, gate) = (Arc::new(Log::default()), Arc::new(Gate(Semaphore::new(0))));
    let base = server.base_url();
    let (l, g) = (log.clone(), gate.clone());
    let timeouts = voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let v = driver(move || Target {
        model: settings(Model::new(layer(
            Provider::Gemini,
            &base,
            "gemini-attack",
            timeouts,
        ))),
        log: l.clone(),
        gate: g.clone(),
    })
    .await;
    (Rig { server, log, gate }, v)
}

/// A factory of targets on the stand-in at `base`, writing to `log`.
fn target(base: String, log: Arc<Log>) -> impl Fn() -> Target + Send + Sync + 'static {
    let timeouts = voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let layer = layer(Provider::Gemini, &base, "gemini-attack", timeouts);
    move || Target {
        model: Model::new(layer.clone()),
        log: log.clone(),
        gate: Arc::new(Gate(Semaphore::new(0))),
    }
}

/// The results of request `i`, as JSON.
fn results(server: &ModelServer, i: usize) -> Vec<Value> {
    server
        .read_back(i)
        .expect("the request")
        .said
        .iter()
        .filter_map(|s| match s {
            Said::Result { output, .. } => serde_json::from_str(output).ok(),
            _ => None,
        })
        .collect()
}

/// What the model said in request `i`, joined.
fn model_words(server: &ModelServer, i: usize) -> String {
    server
        .read_back(i)
        .expect("the request")
        .said
        .iter()
        .filter_map(|s| match s {
            Said::Model(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn ids(log: &Log) -> Vec<String> {
    log.events()
        .into_iter()
        .filter_map(|e| e.strip_prefix("call ").map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn call_ids_stay_unique_when_two_turns_share_the_model() {
    let (rig, mut v) = rig(|m| m).await;
    // Turn 1 calls, pauses, and calls again; turn 2 calls in between (the host runs up to four
    // turns of a call at once).
    let (first, pause) = Reply::new().call("whoami", json!({})).pause();
    rig.server
        .reply(first.call("whoami", json!({})).text("Both.").finish());
    rig.server
        .reply(Reply::new().call("whoami", json!({})).text("Me.").finish());
    v.start_silent().await.unwrap();
    let one = v.send_user_message("who first").await.unwrap();
    assert!(rig.log.wait(&mut v, |l| ids(l).len() == 1).await);
    v.run_until(Duration::from_secs(5), pause.reached())
        .await
        .unwrap();
    let two = v.send_user_message("who second").await.unwrap();
    assert!(rig.log.wait(&mut v, |l| ids(l).len() == 2).await);
    pause.release();
    assert!(rig.log.wait(&mut v, |l| ids(l).len() == 3).await);
    let session = v.session_id().to_owned();
    assert_eq!(
        ids(&rig.log),
        [
            format!("{session}/{one}/0"),
            format!("{session}/{two}/0"),
            format!("{session}/{one}/1"),
        ],
        "each call's id names it and no other"
    );
}

#[tokio::test]
async fn call_ids_stay_unique_over_two_responds_of_one_turn() {
    let (rig, mut v) = rig(|m| m).await;
    for words in ["Still there?", "Take your time."] {
        rig.server
            .reply(Reply::new().call("whoami", json!({})).text(words).finish());
    }
    v.start_silent().await.unwrap();
    let turn = v.user_idle(1, 5_000).await.unwrap();
    let session = v.session_id().to_owned();
    let id = turn.turn_id;
    assert_eq!(
        ids(&rig.log),
        [format!("{session}/{id}/0"), format!("{session}/{id}/1")]
    );
}

#[tokio::test]
async fn a_result_of_characters_json_escapes_is_cut_within_max_result_bytes() {
    let (rig, mut v) = rig(|m| m.max_result_bytes(1_000)).await;
    rig.server.reply(
        Reply::new()
            .call("quotes", json!({}))
            .call("controls", json!({}))
            .call("listing", json!({}))
            .text("Here.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.user_says("everything").await.unwrap();
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and?").await.unwrap();
    let results = results(&rig.server, 1);
    assert_eq!(results.len(), 3, "{results:?}");
    for result in &results {
        let bytes = serde_json::to_vec(result).expect("JSON").len();
        assert!(bytes <= 1_000, "{bytes} bytes: {result}");
        assert!(
            result["cut"]
                .as_str()
                .is_some_and(|c| c.starts_with("the result was")),
            "{result}"
        );
    }
}

/// One setting at its extreme, on a turn that calls two tools (the second with a filler).
async fn extreme(name: &str, setting: fn(Model) -> Model) {
    let (rig, mut v) = rig(setting).await;
    rig.server.reply(
        Reply::new()
            .call("whoami", json!({}))
            .call("book", json!({}))
            .text("Booked.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("book it").await.unwrap();
    assert!(
        rig.log
            .wait(&mut v, |l| l.events().iter().any(|e| e == "book started"))
            .await,
        "{name}: the tools ran"
    );
    rig.gate.open();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).completed())
            .await
            .unwrap(),
        "{name}: the turn ended"
    );
    assert_eq!(v.turn(turn).text(), "Booked.", "{name}");
    assert_eq!(
        v.turn(turn)
            .tools
            .iter()
            .map(|t| t.outcome.as_str())
            .collect::<Vec<_>>(),
        ["ok", "ok"],
        "{name}"
    );
}

#[tokio::test]
async fn settings_at_their_extremes_neither_panic_nor_leave_a_call_unanswered() {
    extreme("tool_timeout", |m| m.tool_timeout(Duration::MAX)).await;
    extreme("filler_after", |m| m.filler_after(Duration::MAX)).await;
    extreme("turn_deadline", |m| m.turn_deadline(Duration::MAX)).await;
}

#[tokio::test]
async fn a_progress_line_said_right_before_the_tool_returns_is_spoken() {
    let (rig, mut v) = rig(|m| m).await;
    rig.server
        .reply(Reply::new().call("quick", json!({})).text("Done.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("find it").await.unwrap();
    assert_eq!(rig.log.events(), ["progress spoken=true"]);
    assert_eq!(
        turn.text(),
        "Found it. Done.",
        "a line queued to be spoken is spoken"
    );
}

#[tokio::test]
async fn progress_lines_in_a_loop_are_held_to_the_responses_byte_bound() {
    let bound = 16 * 1024;
    let (rig, mut v) = rig(move |m| m.max_response_bytes(bound)).await;
    rig.server
        .reply(Reply::new().call("chatty", json!({})).finish());
    rig.server.reply(Reply::new().text("All checked.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("check them all").await.unwrap();
    assert!(
        rig.log
            .wait(&mut v, |l| l
                .events()
                .iter()
                .any(|e| e == "chatty finished"))
            .await
    );
    assert!(rig.server.wait_requests(2).await);
    // The follow-up reads the response as the history keeps it: its words within the bound.
    let kept = model_words(&rig.server, 1);
    assert!(kept.len() <= bound, "{} bytes kept", kept.len());
    assert!(
        kept.starts_with("Checked item 0 of the list"),
        "{kept:.200}"
    );
    assert!(
        v.wait_for(Duration::from_secs(10), |v| v.turn(turn).completed())
            .await
            .unwrap()
    );
    let spoken = v.turn(turn).text();
    assert!(
        spoken.len() <= bound + "All checked.".len() + 1,
        "{} bytes spoken",
        spoken.len()
    );
}

#[tokio::test]
async fn a_background_note_never_drops_the_exchange_in_progress_from_the_history() {
    let (rig, mut v) = rig(|m| m.max_history_bytes(8 * 1024)).await;
    rig.server.reply(
        Reply::new()
            .call("mail", json!({}))
            .text("Sending.")
            .finish(),
    );
    let (lookup, pause) = Reply::new().call("lookup", json!({})).pause();
    rig.server.reply(lookup.finish());
    rig.server.reply(Reply::new().text("Found it.").finish());
    v.start_silent().await.unwrap();
    v.user_says("mail me").await.unwrap();
    // The exchange in progress alone is past the history's bound: it is kept whole.
    let turn = v.send_user_message("look it up").await.unwrap();
    assert!(
        rig.log
            .wait(&mut v, |l| l.events().iter().any(|e| e == "lookup ran"))
            .await
    );
    v.run_until(Duration::from_secs(5), pause.reached())
        .await
        .unwrap();
    // The mail ends meanwhile: its note joins the history while the turn still reads its reply.
    rig.gate.open();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .tool_calls()
            .iter()
            .any(|(_, t)| t.end == "background"))
            .await
            .unwrap()
    );
    pause.release();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).completed())
            .await
            .unwrap()
    );
    // The follow-up reads the user's words and the call it follows up, and the note after them.
    let said = rig.server.read_back(2).expect("the follow-up").said;
    let at = |want: &dyn Fn(&Said) -> bool| said.iter().position(want);
    let asked = at(&|s| matches!(s, Said::User(t) if t == "look it up"));
    let called = at(&|s| matches!(s, Said::Call { name, .. } if name == "lookup"));
    let noted = at(&|s| matches!(s, Said::User(t) if t.contains("background tool mail finished")));
    assert!(
        asked.is_some() && asked < called && called < noted,
        "{said:#?}"
    );
}

#[tokio::test]
async fn a_caller_who_cuts_in_on_every_turn_leaves_every_call_answered_once() {
    const TURNS: usize = 10;
    let (rig, mut v) = rig(|m| m.parallel_tools(2)).await;
    v.start_silent().await.unwrap();
    let count = |l: &Log, what: &str| l.events().iter().filter(|e| *e == what).count();
    for i in 0..TURNS {
        rig.server.reply(
            Reply::new()
                .text("Working on it. ")
                .call("look", json!({}))
                .call("book", json!({}))
                .text("Done.")
                .finish(),
        );
        let turn = v.send_user_message(&format!("book {i}")).await.unwrap();
        assert!(
            rig.log
                .wait(&mut v, |l| count(l, "book started") == i + 1
                    && count(l, "look started") == i + 1)
                .await,
            "turn {i}: the tools started"
        );
        assert!(
            v.wait_for(Duration::from_secs(5), |v| v
                .units()
                .any(|u| u.turn_id == turn && !u.chunks.is_empty()))
                .await
                .unwrap(),
            "turn {i}: it spoke"
        );
        let unit = v
            .units()
            .find(|u| u.turn_id == turn)
            .map(|u| u.speech_id)
            .expect("a unit");
        v.send(voqalize::wire::Frame::Interruption { through_turn: turn })
            .await
            .unwrap();
        v.finalize(unit, "Working on").await.unwrap();
        // Every other turn the booking ends before the caller's next words; else the next
        // turn's request waits for it.
        if i % 2 == 0 {
            rig.gate.open();
            assert!(
                rig.log
                    .wait(&mut v, |l| count(l, "book finished") == i + 1)
                    .await
            );
        } else {
            rig.gate.open();
        }
    }
    rig.server
        .reply(Reply::new().text("Anything else?").finish());
    let last = v.user_says("that's all").await.unwrap();
    assert_eq!(last.text(), "Anything else?");
    assert_eq!(
        count(&rig.log, "book finished"),
        TURNS,
        "one booking a call"
    );
    let said = rig
        .server
        .read_back(rig.server.requests().len() - 1)
        .expect("the last request")
        .said;
    let mut open: Vec<String> = Vec::new();
    let (mut booked, mut cancelled) = (0, 0);
    for item in &said {
        match item {
            Said::Call { name, .. } => open.push(name.clone()),
            Said::Result { output, .. } => {
                assert!(!open.is_empty(), "a result for no call: {said:#?}");
                let call = open.remove(0);
                match call.as_str() {
                    "book" if output.contains("booked") => booked += 1,
                    "look" if output.contains("cancelled before it finished") => cancelled += 1,
                    _ => panic!("{call} answered {output}"),
                }
            }
            Said::User(text) => assert!(open.is_empty(), "unanswered before {text:?}: {said:#?}"),
            Said::Model(text) => assert!(
                text.trim().is_empty() || text.trim() == "Working on",
                "the model reads words never heard: {text:?}"
            ),
        }
    }
    assert!(open.is_empty(), "{said:#?}");
    assert_eq!((booked, cancelled), (TURNS, TURNS), "{said:#?}");
}

#[tokio::test]
async fn a_caller_who_hangs_up_while_a_tool_runs_ends_the_call_and_the_tool_still_answers() {
    let answered = Arc::new(Log::default());
    let seen = answered.clone();
    let (rig, mut v) = rig(move |m| {
        let seen = seen.clone();
        m.on_tool_run(move |run| {
            seen.push(format!("{} {} {}", run.name, run.outcome, run.end.name()));
        })
    })
    .await;
    rig.server.reply(
        Reply::new()
            .text("Booking.")
            .call("book", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    v.send_user_message("book it").await.unwrap();
    assert!(
        rig.log
            .wait(&mut v, |l| l.events().iter().any(|e| e == "book started"))
            .await
    );
    v.hang_up().await;
    assert!(
        rig.log
            .until(|l| l.events().iter().any(|e| e == "session ended"))
            .await,
        "the call ends while its tool runs"
    );
    rig.gate.open();
    assert!(
        rig.log
            .until(|l| l.events().iter().any(|e| e == "book finished"))
            .await
    );
    // The run answers its call once, after the cut the hang-up made.
    assert!(answered.until(|l| !l.events().is_empty()).await);
    assert_eq!(answered.events(), ["book ok after_barge_in"]);
}

#[tokio::test]
async fn a_recorded_call_with_a_background_tool_replays_the_same() {
    use voqalize_testing::Replay;
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.reply(
        Reply::new()
            .call("ping", json!({}))
            .call("whoami", json!({}))
            .text("Pinging.")
            .finish(),
    );
    server.reply(Reply::new().text("It answered.").finish());
    let recorded_log = Arc::new(Log::default());
    let recording = crate::replay::recorded(
        target(server.base_url(), recorded_log.clone()),
        async |v: &mut Voqalize| {
            v.user_says("ping it").await.unwrap();
            assert!(
                v.wait_for(Duration::from_secs(5), |v| v
                    .tool_calls()
                    .iter()
                    .any(|(_, t)| t.end == "background"))
                    .await
                    .unwrap()
            );
            v.user_says("did it answer").await.unwrap();
        },
    )
    .await;
    let mut runs: Vec<(&str, &str, &str)> = recording
        .tool_runs
        .iter()
        .map(|r| (r.name.as_str(), r.outcome.as_str(), r.end.as_str()))
        .collect();
    runs.sort_unstable();
    assert_eq!(
        runs,
        [("ping", "ok", "background"), ("whoami", "ok", "in_turn")]
    );
    let mut replay = Replay::start(recording).await.unwrap();
    let replayed_log = Arc::new(Log::default());
    let report = replay
        .run(target(replay.base_url(), replayed_log.clone()))
        .await
        .unwrap();
    assert!(report.is_same(), "{report}");
    assert_eq!(ids(&replayed_log), ids(&recorded_log));
}

//! A tool's life in a call, each outcome as the model reads it: a background run and its note, a
//! timeout, a filler while the caller waits, a tool's progress, the call's id inside the tool,
//! several observers, and the bounds on what a tool returns. Over a real session socket, against
//! the stand-in model server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use voqalize::prelude::*;
use voqalize_testing::{ModelServer, Provider, Reply, Said, Voqalize};

use crate::support::{Log, driver, layer, said};

/// Lets a tool go on, once per permit: a permit given before the tool waits is not lost.
struct Gate(Semaphore);

impl Default for Gate {
    fn default() -> Self {
        Gate(Semaphore::new(0))
    }
}

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

/// A booking desk: each tool logs what it did.
struct Desk {
    model: Model,
    log: Arc<Log>,
    gate: Arc<Gate>,
    progress_outside: Arc<AtomicUsize>,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        // Progress from outside a tool is an error, never a panic.
        if matches!(
            turn.session().say_progress("never spoken"),
            Err(SessionError::NotInTool)
        ) {
            self.progress_outside.fetch_add(1, Ordering::SeqCst);
        }
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Desk {
    /// Books the table, once the back office answers.
    #[tool(filler = "One moment, booking that.")]
    async fn book(&self) -> &'static str {
        self.log.push("book started");
        self.gate.pass().await;
        self.log.push("book finished");
        "booked"
    }

    /// Emails the confirmation, in the background.
    #[tool(background)]
    async fn mail(&self) -> &'static str {
        self.log.push("mail started");
        self.gate.pass().await;
        self.log.push("mail finished");
        "mailed"
    }

    /// Asks a system that never answers.
    #[tool(timeout = "200ms")]
    async fn stuck(&self) -> &'static str {
        self.log.push("stuck started");
        std::future::pending::<()>().await;
        "never"
    }

    /// Finds tables, saying how far it got.
    #[tool]
    async fn find(&self) -> Result<&'static str, SessionError> {
        let spoken = self.session().say_progress("Found three tables so far.")?;
        self.log.push(format!("progress spoken={spoken}"));
        self.gate.pass().await;
        Ok("three tables")
    }

    /// Names the call it serves.
    #[tool]
    async fn whoami(&self) -> String {
        let call = self.session().tool_call();
        let id = call.as_ref().map_or("none", |c| c.id()).to_owned();
        self.log.push(format!("call {id}"));
        id
    }

    /// Searches the archive, which never answers; a lookup, so a barge-in cancels it.
    #[tool(on_barge_in = cancel)]
    async fn search(&self) -> &'static str {
        self.log.push("search started");
        std::future::pending::<()>().await;
        "never"
    }

    /// Returns a long list.
    #[tool]
    async fn everything(&self) -> String {
        "x".repeat(100_000)
    }
}

struct Rig {
    server: ModelServer,
    log: Arc<Log>,
    gate: Arc<Gate>,
    progress_outside: Arc<AtomicUsize>,
}

/// A factory of desks on the stand-in at `base`, writing to `log`.
fn desk(base: String, log: Arc<Log>) -> impl Fn() -> Desk + Send + Sync + 'static {
    let timeouts = voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let layer = layer(Provider::Gemini, &base, "gemini-test", timeouts);
    move || Desk {
        model: Model::new(layer.clone()),
        log: log.clone(),
        gate: Arc::new(Gate::default()),
        progress_outside: Arc::new(AtomicUsize::new(0)),
    }
}

async fn rig(settings: impl Fn(Model) -> Model + Send + Sync + 'static) -> (Rig, Voqalize) {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    let (log, gate, outside) = (
        Arc::new(Log::default()),
        Arc::new(Gate::default()),
        Arc::new(AtomicUsize::new(0)),
    );
    let base = server.base_url();
    let (l, g, o) = (log.clone(), gate.clone(), outside.clone());
    let timeouts = voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let v = driver(move || Desk {
        model: settings(Model::new(layer(
            Provider::Gemini,
            &base,
            "gemini-test",
            timeouts,
        ))),
        log: l.clone(),
        gate: g.clone(),
        progress_outside: o.clone(),
    })
    .await;
    (
        Rig {
            server,
            log,
            gate,
            progress_outside: outside,
        },
        v,
    )
}

fn logged(log: &Log, event: &str) -> bool {
    log.events().iter().any(|e| e == event)
}

#[tokio::test]
async fn a_background_tool_is_answered_at_once_and_its_result_follows_as_a_note() {
    let (rig, mut v) = rig(|m| m).await;
    rig.server.reply(
        Reply::new()
            .call("mail", json!({}))
            .text("I'm sending it.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    // The turn does not wait for the mail: it speaks and ends while the tool still runs.
    let turn = v.user_says("email me").await.unwrap();
    assert_eq!(turn.text(), "I'm sending it.");
    assert!(logged(&rig.log, "mail started") && !logged(&rig.log, "mail finished"));
    rig.gate.open();
    assert!(rig.log.wait(&mut v, |l| logged(l, "mail finished")).await);
    assert!(
        v.wait_for(Duration::from_secs(5), |v| !v.tool_calls().is_empty())
            .await
            .unwrap()
    );
    rig.server.reply(Reply::new().text("It's sent.").finish());
    let next = v.user_says("did it go?").await.unwrap();
    assert_eq!(next.text(), "It's sent.");
    let lines = said(&rig.server, 1);
    assert_eq!(lines.len(), 6, "{lines:#?}");
    assert_eq!(
        lines[..3],
        ["user: email me", "call: mail", "model: I'm sending it."]
    );
    assert!(lines[3].contains("started in the background"), "{lines:#?}");
    assert_eq!(
        lines[4],
        r#"user: (The background tool mail finished (call call_1): {"result":"mailed"})"#
    );
    assert_eq!(lines[5], "user: did it go?");
    let calls = v.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (
            calls[0].0,
            calls[0].1.outcome.as_str(),
            calls[0].1.end.as_str()
        ),
        (turn.turn_id, "ok", "background")
    );
}

#[tokio::test]
async fn a_tool_that_never_returns_times_out_and_the_model_reads_it() {
    let (rig, mut v) = rig(|m| m).await;
    rig.server
        .reply(Reply::new().call("stuck", json!({})).finish());
    rig.server
        .reply(Reply::new().text("The system is slow today.").finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("check it").await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .turn(turn)
            .tools
            .iter()
            .any(|t| t.outcome == "timed_out"))
            .await
            .unwrap()
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and?").await.unwrap();
    let lines = said(&rig.server, 1);
    assert!(
        lines.iter().any(|l| l.starts_with("result:")
            && l.contains("'stuck' did not finish within 200 ms and was stopped")),
        "{lines:#?}"
    );
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.kind == "tool" && s.name == "stuck")
        .cloned()
        .expect("a tool step");
    assert_eq!(step.counts.get("timed_out"), Some(&1), "{step:?}");
}

#[tokio::test]
async fn a_slow_tool_has_its_filler_spoken_once_as_the_models_words() {
    let (rig, mut v) = rig(|m| m.filler_after(Duration::from_millis(50))).await;
    rig.server.reply(
        Reply::new()
            .call("book", json!({}))
            .call("book", json!({}))
            .text("Booked, twice.")
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("book it").await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).text()
            == "One moment, booking that.")
            .await
            .unwrap()
    );
    rig.gate.open();
    // The second booking keeps the caller waiting too: nothing was said since its call but the
    // filler, which is never spoken twice in a row.
    assert!(
        rig.log
            .wait(&mut v, |l| l
                .events()
                .iter()
                .filter(|e| *e == "book started")
                .count()
                == 2)
            .await
    );
    v.quiesce(Duration::from_millis(200), Duration::from_secs(2))
        .await
        .unwrap();
    rig.gate.open();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).completed()
            && v.turn(turn).text().ends_with("Booked, twice."))
            .await
            .unwrap()
    );
    let record = v.turn(turn);
    assert_eq!(
        record.unit_texts(),
        ["One moment, booking that. Booked, twice."]
    );
    let unit = record.units[0].speech_id;
    v.finalize(unit, &record.text()).await.unwrap();
    rig.server
        .reply(Reply::new().text("Anything else?").finish());
    v.user_says("thanks").await.unwrap();
    let lines = said(&rig.server, 1);
    assert_eq!(
        lines[1], "model: One moment, booking that. Booked, twice.",
        "the model reads the filler as its words: {lines:#?}"
    );
}

#[tokio::test]
async fn a_tools_progress_is_spoken_and_progress_outside_a_tool_is_an_error() {
    let (rig, mut v) = rig(|m| m).await;
    rig.server.reply(
        Reply::new()
            .text("Let me look.")
            .call("find", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("any tables?").await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).text()
            == "Let me look. Found three tables so far.")
            .await
            .unwrap()
    );
    assert!(logged(&rig.log, "progress spoken=true"));
    assert_eq!(rig.progress_outside.load(Ordering::SeqCst), 1);
    rig.gate.open();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).completed())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_tool_reads_its_calls_id_which_names_the_turn_and_the_call() {
    let (rig, mut v) = rig(|m| m).await;
    rig.server.reply(
        Reply::new()
            .call("whoami", json!({}))
            .call("whoami", json!({}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("who").await.unwrap();
    assert!(rig.log.wait(&mut v, |l| l.events().len() == 2).await);
    let session = v.session_id().to_owned();
    assert_eq!(
        rig.log.events(),
        [
            format!("call {session}/{turn}/0"),
            format!("call {session}/{turn}/1")
        ]
    );
}

#[tokio::test]
async fn every_observer_sees_every_answered_call() {
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let (a, b) = (seen.clone(), seen.clone());
    let (rig, mut v) = rig(move |m| {
        let (a, b) = (a.clone(), b.clone());
        m.on_tool_run(move |run| {
            let mut seen = a.lock().unwrap_or_else(|p| p.into_inner());
            seen.push(format!("first {} {}", run.name, run.outcome));
        })
        .on_tool_run(move |run| {
            let mut seen = b.lock().unwrap_or_else(|p| p.into_inner());
            seen.push(format!("second {} {}", run.name, run.end.name()));
        })
    })
    .await;
    rig.server
        .reply(Reply::new().call("whoami", json!({})).finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("who").await.unwrap();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| !v.turn(turn).tools.is_empty())
            .await
            .unwrap()
    );
    assert_eq!(
        *seen.lock().unwrap_or_else(|p| p.into_inner()),
        ["first whoami ok", "second whoami in_turn"]
    );
}

#[tokio::test]
async fn a_result_past_max_result_bytes_is_cut_and_a_flood_of_background_calls_is_bounded() {
    let (rig, mut v) = rig(|m| m.max_result_bytes(1_000).max_tool_runs(3)).await;
    let mut reply = Reply::new().call("everything", json!({}));
    for _ in 0..1_000 {
        reply = reply.call("mail", json!({}));
    }
    rig.server.reply(reply.finish());
    v.start_silent().await.unwrap();
    let turn = v.send_user_message("everything").await.unwrap();
    let mails = |l: &Log| l.events().iter().filter(|e| *e == "mail started").count();
    assert!(rig.log.wait(&mut v, |l| mails(l) == 2).await);
    for _ in 0..2 {
        rig.gate.open();
    }
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).tools.len() == 3)
            .await
            .unwrap()
    );
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        mails(&rig.log),
        2,
        "max_tool_runs bounds background runs too"
    );
    rig.server.reply(Reply::new().text("OK.").finish());
    v.user_says("and?").await.unwrap();
    let request = rig.server.read_back(1).expect("the request");
    let results: Vec<Value> = request
        .said
        .iter()
        .filter_map(|s| match s {
            Said::Result { output, .. } => serde_json::from_str(output).ok(),
            _ => None,
        })
        .collect();
    let first = &results[0];
    assert!(first.to_string().len() <= 1_000, "{first}");
    assert!(
        first["result"].as_str().is_some_and(|r| r.len() <= 1_000)
            && first["cut"]
                .as_str()
                .is_some_and(|c| c.starts_with("the result was 100000 bytes; only the first")),
        "{first}"
    );
}

#[tokio::test]
async fn a_recorded_call_replays_its_tools_outcomes_and_ids_the_same() {
    use voqalize_testing::{BargeAt, BargeIn, Replay};
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.reply(
        Reply::new()
            .call("whoami", json!({}))
            .text("Hello.")
            .finish(),
    );
    server.reply(
        Reply::new()
            .text("Searching now. ")
            .call("search", json!({}))
            .finish(),
    );
    server.reply(
        Reply::new()
            .call("stuck", json!({}))
            .text("It is slow.")
            .finish(),
    );
    server.reply(Reply::new().text("You are welcome.").finish());
    let recorded_log = Arc::new(Log::default());
    let recording = crate::replay::recorded(
        desk(server.base_url(), recorded_log.clone()),
        async |v: &mut Voqalize| {
            v.user_says("who is it").await.unwrap();
            let barge = BargeIn {
                at: BargeAt::FirstText,
                heard_prefix: Some("Searching".into()),
            };
            v.barge_in("search the archive", barge).await.unwrap();
            v.user_says("check the system").await.unwrap();
            v.user_says("thanks").await.unwrap();
        },
    )
    .await;
    let runs: Vec<(&str, &str, &str)> = recording
        .tool_runs
        .iter()
        .map(|r| (r.name.as_str(), r.outcome.as_str(), r.end.as_str()))
        .collect();
    assert_eq!(
        runs,
        [
            ("whoami", "ok", "in_turn"),
            ("search", "cancelled", "after_barge_in"),
            ("stuck", "timed_out", "in_turn")
        ]
    );
    let mut replay = Replay::start(recording).await.unwrap();
    let replayed_log = Arc::new(Log::default());
    let report = replay
        .run(desk(replay.base_url(), replayed_log.clone()))
        .await
        .unwrap();
    assert!(report.is_same(), "{report}");
    let ids = |log: &Log| -> Vec<String> {
        log.events()
            .into_iter()
            .filter(|e| e.starts_with("call "))
            .collect()
    };
    assert_eq!(
        ids(&replayed_log),
        ids(&recorded_log),
        "the call's id replays the same"
    );
    assert_eq!(ids(&recorded_log).len(), 1);
}

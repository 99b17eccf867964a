//! The barge-in torture test: for each of the five provider formats, each tool policy and each
//! point a caller can cut in (before the call is read, while its tool runs, right as it ends,
//! during the follow-up after a `#[needs_result_now]` tool), and with tools in parallel, over a
//! real session socket and the stand-in model server. It holds when every tool's effect happened
//! exactly once for each call in the next request's history and never for a call that is not in
//! it, every call there is answered exactly once and before the user's next words, the model
//! reads only what the user heard, and the testing kit's turn record lists what was answered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Semaphore;
use voqalize::prelude::*;
use voqalize::wire::Frame;
use voqalize_testing::{Gate as Pause, ModelServer, Provider, Reply, Said, Voqalize};

use crate::support::{Log, driver, layer};

/// What the reply says before its call, and what the caller hears of it when cutting in.
const SPOKEN: &str = "Working on it now. ";
const HEARD: &str = "Working on";

/// Lets a tool go on, once per permit.
struct Gate(Semaphore);

impl Gate {
    async fn pass(&self) {
        if let Ok(permit) = self.0.acquire().await {
            permit.forget();
        }
    }
}

/// Tools with side effects, one per policy, each counting its effect by the id of the call it
/// serves.
struct Torture {
    model: Model,
    effects: Arc<Mutex<HashMap<String, usize>>>,
    log: Arc<Log>,
    gate: Arc<Gate>,
}

impl Brain for Torture {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Torture {
    /// Books a table: runs on if the caller cuts in.
    #[tool]
    async fn book(&self) -> &'static str {
        self.work("book").await;
        "booked"
    }

    /// Looks tables up: stopped if the caller cuts in.
    #[tool(on_barge_in = cancel)]
    async fn look(&self) -> &'static str {
        self.work("look").await;
        "two free"
    }

    /// Mails the confirmation, in the background.
    #[tool(background)]
    async fn mail(&self) -> &'static str {
        self.work("mail").await;
        "mailed"
    }

    /// Checks the calendar; the model reads its result at once.
    #[tool]
    #[needs_result_now]
    async fn check(&self) -> &'static str {
        "free at nine"
    }
}

impl Torture {
    /// The effect first (a write that stands whatever happens next), then the wait.
    async fn work(&self, tool: &str) {
        if let Some(call) = self.session().tool_call() {
            *self
                .effects
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(call.id().to_owned())
                .or_default() += 1;
        }
        self.log.push(format!("{tool} started"));
        self.gate.pass().await;
        self.log.push(format!("{tool} finished"));
    }
}

/// Where the caller cuts in.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// Before the stream reaches the call.
    BeforeTheCall,
    /// While the tool runs.
    WhileItRuns,
    /// Right as the tool ends (its result filed or about to be).
    AsItEnds,
    /// While the tool of the follow-up after a `#[needs_result_now]` call runs.
    DuringTheFollowUp,
}

struct Case {
    provider: Provider,
    tools: &'static [&'static str],
    point: Point,
    parallel: usize,
}

struct Rig {
    server: ModelServer,
    effects: Arc<Mutex<HashMap<String, usize>>>,
    log: Arc<Log>,
    gate: Arc<Gate>,
    v: Voqalize,
}

async fn rig(provider: Provider, parallel: usize) -> Rig {
    let server = ModelServer::start(provider).await.expect("a loopback port");
    let (effects, log, gate) = (
        Arc::new(Mutex::new(HashMap::new())),
        Arc::new(Log::default()),
        Arc::new(Gate(Semaphore::new(0))),
    );
    let base = server.base_url();
    let (e, l, g) = (effects.clone(), log.clone(), gate.clone());
    let timeouts = voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let model = match provider {
        Provider::Gemini => "gemini-torture",
        Provider::Chat => "openai/torture",
        _ => "torture",
    };
    let v = driver(move || Torture {
        model: Model::new(layer(provider, &base, model, timeouts)).parallel_tools(parallel),
        effects: e.clone(),
        log: l.clone(),
        gate: g.clone(),
    })
    .await;
    Rig {
        server,
        effects,
        log,
        gate,
        v,
    }
}

fn started(log: &Log, tool: &str) -> bool {
    log.events().iter().any(|e| *e == format!("{tool} started"))
}

fn finished(log: &Log, tool: &str) -> bool {
    log.events()
        .iter()
        .any(|e| *e == format!("{tool} finished"))
}

impl Case {
    fn name(&self) -> String {
        format!(
            "{:?} {:?} {:?} parallel={}",
            self.provider, self.tools, self.point, self.parallel
        )
    }

    /// The reply that makes the calls, paused before them when the caller cuts in there.
    fn calls(&self) -> (Reply, Option<Pause>) {
        let mut reply = Reply::new().text(SPOKEN);
        let mut pause = None;
        if matches!(self.point, Point::BeforeTheCall) {
            let (r, g) = reply.pause();
            reply = r;
            pause = Some(g);
        }
        for tool in self.tools {
            reply = reply.call(tool, json!({}));
        }
        (reply.finish(), pause)
    }

    async fn run(self) {
        let name = self.name();
        let mut rig = rig(self.provider, self.parallel).await;
        let (calls, pause) = self.calls();
        if matches!(self.point, Point::DuringTheFollowUp) {
            rig.server
                .reply(Reply::new().call("check", json!({})).finish());
        }
        rig.server.reply(calls);
        rig.v.start_silent().await.unwrap();
        let turn = rig.v.send_user_message("book it").await.unwrap();
        let unit = first_unit(&mut rig.v, turn, &name).await;
        match self.point {
            Point::BeforeTheCall => {
                let pause = pause.expect("a pause");
                let reached = rig
                    .v
                    .run_until(Duration::from_secs(5), pause.reached())
                    .await
                    .unwrap();
                assert!(reached.is_some(), "{name}: the stream reached the pause");
                cut_in(&mut rig.v, turn, unit).await;
                pause.release();
            }
            Point::WhileItRuns | Point::DuringTheFollowUp => {
                let tools = self.tools;
                assert!(
                    rig.log
                        .wait(&mut rig.v, |l| tools.iter().all(|t| started(l, t)))
                        .await,
                    "{name}: the tools started"
                );
                cut_in(&mut rig.v, turn, unit).await;
                // The cut has reached the brain while the tools run: a run that stops with its
                // turn was answered as cancelled before any tool may end.
                if self.tools.contains(&"look") {
                    assert!(
                        rig.v
                            .wait_for(Duration::from_secs(5), |v| v
                                .tool_calls()
                                .iter()
                                .any(|(_, t)| t.name == "look"))
                            .await
                            .unwrap(),
                        "{name}: the cut stopped look"
                    );
                }
            }
            Point::AsItEnds => {
                let tools = self.tools;
                assert!(
                    rig.log
                        .wait(&mut rig.v, |l| tools.iter().all(|t| started(l, t)))
                        .await,
                    "{name}: the tools started"
                );
                rig.gate.0.add_permits(tools.len());
                assert!(
                    rig.log
                        .wait(&mut rig.v, |l| tools.iter().all(|t| finished(l, t)))
                        .await,
                    "{name}: the tools finished"
                );
                cut_in(&mut rig.v, turn, unit).await;
            }
        }
        // Whatever still waits may go on now (a cancelled run never will).
        rig.gate.0.add_permits(self.tools.len());
        let background =
            self.tools.contains(&"mail") && !matches!(self.point, Point::BeforeTheCall);
        if background {
            assert!(
                rig.log.wait(&mut rig.v, |l| finished(l, "mail")).await,
                "{name}: the background run ended"
            );
            assert!(
                rig.v
                    .wait_for(Duration::from_secs(5), |v| v
                        .turn(turn)
                        .tools
                        .iter()
                        .any(|t| t.end == "background"))
                    .await
                    .unwrap(),
                "{name}: the background run was answered"
            );
        }
        rig.server
            .reply(Reply::new().text("Anything else?").finish());
        let next = rig.v.user_says("and for two").await.unwrap();
        assert_eq!(next.text(), "Anything else?", "{name}");
        let index = rig.server.requests().len() - 1;
        let said = rig.server.read_back(index).expect("the next request").said;
        self.check(&rig, turn, &said, &name);
    }

    /// What the next request and the tools' effects must be.
    fn check(&self, rig: &Rig, turn: u64, said: &[Said], name: &str) {
        // Every call is answered exactly once, after it and before the caller's next words.
        let mut open: Vec<(Option<String>, String)> = Vec::new();
        let mut calls = Vec::new();
        let mut answers: Vec<String> = Vec::new();
        for item in said {
            match item {
                Said::Call { id, name: tool, .. } => {
                    open.push((id.clone(), tool.clone()));
                    calls.push(tool.clone());
                }
                Said::Result { id, output } => {
                    let at = open
                        .iter()
                        .position(|(c, _)| id.is_none() || c == id)
                        .unwrap_or_else(|| panic!("{name}: a result for no open call: {said:#?}"));
                    open.remove(at);
                    answers.push(output.clone());
                }
                Said::User(text) => {
                    assert!(
                        open.is_empty(),
                        "{name}: a call unanswered before user words {text:?}: {said:#?}"
                    );
                }
                // The model reads only what the caller heard of the cut unit.
                Said::Model(text) => assert!(
                    text.trim().is_empty() || text.trim() == HEARD,
                    "{name}: the model reads words the caller never heard: {text:?} in {said:#?}"
                ),
            }
        }
        assert!(open.is_empty(), "{name}: {said:#?}");
        let policy_calls: Vec<&str> = calls
            .iter()
            .map(String::as_str)
            .filter(|c| *c != "check")
            .collect();
        match self.point {
            Point::BeforeTheCall => assert!(
                policy_calls.is_empty(),
                "{name}: a call never read is nowhere: {said:#?}"
            ),
            _ => assert_eq!(
                policy_calls, self.tools,
                "{name}: every call made is there, in order: {said:#?}"
            ),
        }
        // Each call's effect once; no effect for a call that is not in the history.
        let effects = rig
            .effects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        assert_eq!(
            effects.len(),
            policy_calls.len(),
            "{name}: one effect per call: {effects:?}"
        );
        assert!(effects.values().all(|n| *n == 1), "{name}: {effects:?}");
        // What each call's answer says.
        for (tool, answer) in calls.iter().zip(&answers) {
            let want: &[&str] = match (tool.as_str(), self.point) {
                ("check", _) => &["free at nine"],
                ("book", _) => &["booked"],
                // Cut in right as it ended: its own result, or (when the cut came first) its
                // cancellation; never both, never neither.
                ("look", Point::AsItEnds) => &["two free", "cancelled before it finished"],
                ("look", _) => &["cancelled before it finished"],
                ("mail", _) => &["started in the background"],
                _ => unreachable!(),
            };
            assert!(
                want.iter().any(|w| answer.contains(w)),
                "{name}: {tool} answered {answer}"
            );
        }
        if self.tools.contains(&"mail") && !matches!(self.point, Point::BeforeTheCall) {
            assert!(
                said.iter().any(|s| matches!(s, Said::User(t)
                    if t.contains("background tool mail finished") && t.contains("mailed"))),
                "{name}: the background result came as a note: {said:#?}"
            );
        }
        // The turn record lists each call answered, once.
        let record = rig.v.turn(turn);
        let mut listed: Vec<String> = record.tools.iter().map(|t| t.name.clone()).collect();
        listed.sort();
        let mut made: Vec<String> = calls.clone();
        made.sort();
        assert_eq!(listed, made, "{name}: {:?}", record.tools);
    }
}

/// The first unit of `turn`, once it spoke.
async fn first_unit(v: &mut Voqalize, turn: u64, name: &str) -> u64 {
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v
            .units()
            .any(|u| u.turn_id == turn && !u.chunks.is_empty()))
            .await
            .unwrap(),
        "{name}: the turn spoke"
    );
    v.units()
        .find(|u| u.turn_id == turn)
        .map(|u| u.speech_id)
        .expect("a unit")
}

/// The caller cuts in on `turn`, having heard [`HEARD`] of `unit`.
async fn cut_in(v: &mut Voqalize, turn: u64, unit: u64) {
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.finalize(unit, HEARD).await.unwrap();
}

async fn torture(provider: Provider) {
    let points = [
        Point::BeforeTheCall,
        Point::WhileItRuns,
        Point::AsItEnds,
        Point::DuringTheFollowUp,
    ];
    for point in points {
        for tool in ["book", "look", "mail"] {
            Case {
                provider,
                tools: match tool {
                    "book" => &["book"],
                    "look" => &["look"],
                    _ => &["mail"],
                },
                point,
                parallel: 1,
            }
            .run()
            .await;
        }
        Case {
            provider,
            tools: &["book", "look", "mail"],
            point,
            parallel: 3,
        }
        .run()
        .await;
    }
}

#[tokio::test]
async fn barge_ins_on_gemini_tools_lose_and_repeat_nothing() {
    torture(Provider::Gemini).await;
}

#[tokio::test]
async fn barge_ins_on_openai_responses_tools_lose_and_repeat_nothing() {
    torture(Provider::OpenAi).await;
}

#[tokio::test]
async fn barge_ins_on_chat_completions_tools_lose_and_repeat_nothing() {
    torture(Provider::Chat).await;
}

#[tokio::test]
async fn barge_ins_on_anthropic_tools_lose_and_repeat_nothing() {
    torture(Provider::Anthropic).await;
}

#[tokio::test]
async fn barge_ins_on_interactions_tools_lose_and_repeat_nothing() {
    torture(Provider::Interactions).await;
}

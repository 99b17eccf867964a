//! The layer conformance kit: the scripted cases every built-in model layer passes, run against
//! any [`Layer`](voqalize::model::layer::Layer) in one call.
//!
//! Each case starts the stand-in provider ([`ModelServer`]) speaking your [`WireFormat`], a
//! model-backed brain with three tools on your layer, and a session played by [`Voqalize`]; it
//! scripts the provider's reply, plays the user, and checks what was spoken, which tools ran, the
//! TurnSteps, and the next request as your format reads it back ([`WireFormat::read`]):
//!
//! | case | what it proves |
//! |---|---|
//! | `streams_speech` | text streams into one unit; the request carries the instruction, the tools and the user's words |
//! | `reasoning_is_never_spoken` | a reasoning part is kept out of the speech |
//! | `calls_mid_stream` | a call between two texts runs with its arguments; the next request holds the text, the call, then its result (ids paired) |
//! | `result_read_at_once` | a response that only calls opens no unit (lazy speech); a `#[needs_result_now]` call is answered and the model asked again in the same turn |
//! | `barge_in_keeps_what_was_heard` | after a barge-in, the next request holds the heard prefix only |
//! | `cancelled_call_is_answered` | a call a barge-in cancels while it runs is in the next request once, with its cancellation as its result |
//! | `usage_is_reported` | the terminal event's usage reaches the model TurnStep |
//! | `error_answer_is_covered` | an HTTP 400 error body is not retried; the fallback line covers the turn |
//! | `retried_before_first_byte` | a 503 before the first byte is retried once |
//! | `error_event_keeps_what_was_said` | an error event mid-stream ends the turn, keeping what was spoken |
//! | `truncated_stream_keeps_what_was_said` | a stream that ends without its terminal event likewise |
//!
//! # Examples
//!
//! ```no_run
//! # async fn run() {
//! use voqalize::model::Gemini;
//! use voqalize_testing::{LayerKit, Provider};
//!
//! LayerKit::new(Provider::Gemini, |base_url| {
//!     Gemini::builder("test-key").base_url(base_url).build().expect("a valid layer")
//! })
//! .check()
//! .await; // panics naming every case that failed, and why
//! # }
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::driver::{BargeAt, BargeIn, Voqalize};
use crate::lock;
use crate::model_server::{ModelServer, Reply};
use crate::wire_format::{ReadBack, Said, WireFormat};
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize::wire::Frame;

/// The instruction every case's model is given.
const INSTRUCTION: &str = "You are the kit's test assistant.";
/// The line that covers a failed turn.
const FALLBACK: &str = "Sorry, one moment.";
/// How long a case waits for any one thing (5 s).
const WAIT: Duration = Duration::from_secs(5);

type MakeLayer = dyn Fn(&str) -> ModelLayer + Send + Sync;

/// The kit for one layer: its wire format and how to build it against a base URL.
pub struct LayerKit {
    format: Arc<dyn WireFormat>,
    make: Arc<MakeLayer>,
}

impl std::fmt::Debug for LayerKit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerKit").finish_non_exhaustive()
    }
}

/// What [`LayerKit::run`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KitReport {
    /// The cases that passed, by name.
    pub passed: Vec<&'static str>,
    /// The cases that failed, by name, with what was wrong.
    pub failed: Vec<(&'static str, String)>,
}

impl LayerKit {
    /// A kit for the layer `make` builds against the stand-in's base URL, which speaks `format`.
    /// `make` is called once per case and should set nothing the cases do not expect (no
    /// strict-schema or reasoning settings the format does not write).
    pub fn new<L: Into<ModelLayer>>(
        format: impl WireFormat,
        make: impl Fn(&str) -> L + Send + Sync + 'static,
    ) -> LayerKit {
        LayerKit {
            format: Arc::new(format),
            make: Arc::new(move |base_url| make(base_url).into()),
        }
    }

    /// Runs every case, one after another, each on a fresh server and session.
    pub async fn run(&self) -> KitReport {
        let mut report = KitReport::default();
        for (name, case) in CASES {
            let outcome = match Rig::start(self).await {
                Ok(mut rig) => {
                    let outcome = case(&mut rig).await;
                    rig.v.hang_up().await;
                    outcome
                }
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => report.passed.push(name),
                Err(why) => report.failed.push((name, why)),
            }
        }
        report
    }

    /// Runs every case.
    ///
    /// # Panics
    /// When a case fails, naming every failed case and why (for a `#[tokio::test]`).
    pub async fn check(&self) {
        let report = self.run().await;
        assert!(
            report.failed.is_empty(),
            "{} of {} layer kit cases failed:\n{}",
            report.failed.len(),
            report.failed.len() + report.passed.len(),
            report
                .failed
                .iter()
                .map(|(name, why)| format!("  {name}: {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

type CaseFuture<'a> = std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;
type Case = for<'a> fn(&'a mut Rig) -> CaseFuture<'a>;

const CASES: [(&str, Case); 11] = [
    ("streams_speech", |r| Box::pin(streams_speech(r))),
    ("reasoning_is_never_spoken", |r| Box::pin(reasoning(r))),
    ("calls_mid_stream", |r| Box::pin(calls_mid_stream(r))),
    ("result_read_at_once", |r| Box::pin(result_read_at_once(r))),
    ("barge_in_keeps_what_was_heard", |r| Box::pin(barge_in(r))),
    ("cancelled_call_is_answered", |r| Box::pin(cancelled(r))),
    ("usage_is_reported", |r| Box::pin(usage(r))),
    ("error_answer_is_covered", |r| Box::pin(error_answer(r))),
    ("retried_before_first_byte", |r| Box::pin(retried(r))),
    ("error_event_keeps_what_was_said", |r| {
        Box::pin(error_event(r))
    }),
    ("truncated_stream_keeps_what_was_said", |r| {
        Box::pin(truncated(r))
    }),
];

/// A city.
#[voqalize::json_type]
struct KitCity {
    /// The city.
    city: String,
}

/// The kit's brain: three tools that log their runs, the model answering every turn.
struct KitBrain {
    model: Model,
    log: Arc<Mutex<Vec<String>>>,
}

impl Brain for KitBrain {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[voqalize::brain]
impl KitBrain {
    /// Put the booking form for a city on screen.
    #[tool]
    async fn open_booking(&self, args: KitCity) -> &'static str {
        lock(&self.log).push(format!("open_booking {}", args.city));
        "opened"
    }

    /// The account balance, in euros.
    #[tool]
    #[needs_result_now]
    async fn get_balance(&self) -> &'static str {
        lock(&self.log).push("get_balance".into());
        "12.50"
    }

    /// Ask the back office; it never answers.
    #[tool(on_barge_in = cancel)]
    async fn ask_office(&self) -> &'static str {
        lock(&self.log).push("ask_office started".into());
        std::future::pending::<()>().await;
        "never"
    }
}

/// One case's parts: the stand-in, the tool log, the session.
struct Rig {
    server: ModelServer,
    log: Arc<Mutex<Vec<String>>>,
    v: Voqalize,
}

impl Rig {
    async fn start(kit: &LayerKit) -> Result<Rig, String> {
        let server = ModelServer::serve(kit.format.clone(), "kit".into())
            .await
            .map_err(|e| format!("no loopback port for the stand-in: {e}"))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (base, make, l) = (server.base_url(), kit.make.clone(), log.clone());
        let mut v = Voqalize::in_process(move || KitBrain {
            model: Model::new(make(&base))
                .instruction(INSTRUCTION)
                .fallback_line(FALLBACK),
            log: l.clone(),
        });
        v.quiet = Duration::from_millis(60);
        v.linger = Duration::from_millis(200);
        v.start_silent().await.map_err(|e| e.to_string())?;
        Ok(Rig { server, log, v })
    }

    async fn says(&mut self, text: &str) -> Result<String, String> {
        let turn = self.v.user_says(text).await.map_err(|e| e.to_string())?;
        Ok(turn.text())
    }

    fn read(&self, i: usize) -> Result<ReadBack, String> {
        self.server
            .read_back(i)
            .ok_or_else(|| format!("request {} never came", i + 1))
    }

    /// Request `i` as lines (`user: ..`, `model: ..`, `call: name {args}`, `result: ..`),
    /// checking that every result answers the call before it by id.
    fn said(&self, i: usize) -> Result<Vec<String>, String> {
        let said = self.read(i)?.said;
        let mut calls: Vec<Option<String>> = Vec::new();
        let mut lines = Vec::new();
        for s in said {
            lines.push(match s {
                Said::User(t) => format!("user: {t}"),
                Said::Model(t) => format!("model: {t}"),
                Said::Call {
                    id,
                    name,
                    arguments,
                } => {
                    calls.push(id);
                    format!("call: {name} {arguments}")
                }
                Said::Result { id, output } => {
                    if id.is_some() && !calls.contains(&id) {
                        return Err(format!(
                            "request {}: a result for call id {id:?}, which no call before it has",
                            i + 1
                        ));
                    }
                    let kind = if output.contains("error") {
                        "error"
                    } else {
                        "result"
                    };
                    let value = ["opened", "12.50", "cancelled"]
                        .into_iter()
                        .find(|v| output.contains(v))
                        .unwrap_or("?");
                    format!("{kind}: {value}")
                }
            });
        }
        Ok(lines)
    }

    fn logged(&self) -> Vec<String> {
        lock(&self.log).clone()
    }
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

async fn streams_speech(r: &mut Rig) -> Result<(), String> {
    r.server
        .reply(Reply::new().text("Hello").text(" there.").finish());
    expect("spoken", r.says("hi").await?, "Hello there.".into())?;
    let first = r.read(0)?;
    expect(
        "the instruction read back",
        first.instruction.as_deref(),
        Some(INSTRUCTION),
    )?;
    expect(
        "the tools declared",
        first.tools,
        vec![
            "open_booking".to_owned(),
            "get_balance".into(),
            "ask_office".into(),
        ],
    )?;
    expect("the request", r.said(0)?, vec!["user: hi".to_owned()])
}

async fn reasoning(r: &mut Rig) -> Result<(), String> {
    r.server.reply(
        Reply::new()
            .thought("The user greets; greet back.")
            .text("Hi!")
            .finish(),
    );
    expect("spoken", r.says("hello").await?, "Hi!".into())
}

async fn calls_mid_stream(r: &mut Rig) -> Result<(), String> {
    r.server.reply(
        Reply::new()
            .text("Opening it. ")
            .call("open_booking", json!({"city": "Paris"}))
            .text("Done.")
            .finish(),
    );
    expect(
        "spoken",
        r.says("book Paris").await?,
        "Opening it. Done.".into(),
    )?;
    expect(
        "tools run",
        r.logged(),
        vec!["open_booking Paris".to_owned()],
    )?;
    r.server.reply(Reply::new().text("Sure.").finish());
    r.says("thanks").await?;
    expect(
        "the next request",
        r.said(1)?,
        [
            "user: book Paris",
            "model: Opening it. Done.",
            r#"call: open_booking {"city":"Paris"}"#,
            "result: opened",
            "user: thanks",
        ]
        .map(String::from)
        .to_vec(),
    )
}

async fn result_read_at_once(r: &mut Rig) -> Result<(), String> {
    r.server
        .reply(Reply::new().call("get_balance", json!({})).finish());
    r.server
        .reply(Reply::new().text("You have 12.50.").finish());
    let turn = r.v.user_says("balance?").await.map_err(|e| e.to_string())?;
    expect(
        "the units spoken (none for the response that only called)",
        turn.unit_texts(),
        vec!["You have 12.50.".to_owned()],
    )?;
    expect("requests", r.server.requests().len(), 2)?;
    expect(
        "the follow-up request",
        r.said(1)?,
        ["user: balance?", "call: get_balance {}", "result: 12.50"]
            .map(String::from)
            .to_vec(),
    )
}

async fn barge_in(r: &mut Rig) -> Result<(), String> {
    let (reply, gate) = Reply::new().text("One two three. ").pause();
    r.server.reply(reply.text("Four five six.").finish());
    let barge = BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some("One two".into()),
    };
    r.v.barge_in("count", barge)
        .await
        .map_err(|e| e.to_string())?;
    gate.release();
    r.server.reply(Reply::new().text("Okay.").finish());
    r.says("go on").await?;
    expect(
        "the next request",
        r.said(1)?,
        ["user: count", "model: One two", "user: go on"]
            .map(String::from)
            .to_vec(),
    )
}

async fn cancelled(r: &mut Rig) -> Result<(), String> {
    r.server.reply(
        Reply::new()
            .text("Asking. ")
            .call("ask_office", json!({}))
            .finish(),
    );
    let turn =
        r.v.send_user_message("ask them")
            .await
            .map_err(|e| e.to_string())?;
    let log = r.log.clone();
    let running =
        r.v.wait_for(WAIT, move |v| {
            lock(&log).iter().any(|l| l == "ask_office started")
                && v.units().any(|u| u.turn_id == turn && !u.chunks.is_empty())
        })
        .await
        .map_err(|e| e.to_string())?;
    if !running {
        return Err("the call never ran, or its text never reached the speaker".into());
    }
    r.v.send(Frame::Interruption { through_turn: turn })
        .await
        .map_err(|e| e.to_string())?;
    let unit =
        r.v.units()
            .find(|u| u.turn_id == turn)
            .map(|u| u.speech_id)
            .ok_or("no unit")?;
    r.v.finalize(unit, "Asking.")
        .await
        .map_err(|e| e.to_string())?;
    r.server.reply(Reply::new().text("Anything else?").finish());
    r.says("never mind").await?;
    expect(
        "the next request",
        r.said(1)?,
        [
            "user: ask them",
            "model: Asking.",
            "call: ask_office {}",
            "error: cancelled",
            "user: never mind",
        ]
        .map(String::from)
        .to_vec(),
    )
}

async fn usage(r: &mut Rig) -> Result<(), String> {
    r.server
        .reply(Reply::new().text("Hi.").finish().usage(10, 5));
    r.says("hi").await?;
    let step =
        r.v.turn_steps()
            .iter()
            .find(|s| s.kind == "model")
            .cloned()
            .ok_or("no model TurnStep")?;
    expect(
        "input_tokens",
        step.counts.get("input_tokens").copied(),
        Some(10),
    )?;
    expect(
        "output_tokens",
        step.counts.get("output_tokens").copied(),
        Some(5),
    )
}

async fn error_answer(r: &mut Rig) -> Result<(), String> {
    r.server
        .reply(Reply::error_status(400, "the request is invalid"));
    expect("spoken", r.says("hi").await?, FALLBACK.into())?;
    expect(
        "requests (a 400 is not retried)",
        r.server.requests().len(),
        1,
    )?;
    r.server.reply(Reply::new().text("Hi.").finish());
    expect("the turn after", r.says("hi?").await?, "Hi.".into())
}

async fn retried(r: &mut Rig) -> Result<(), String> {
    r.server.reply(Reply::error_status(503, "overloaded"));
    r.server.reply(Reply::new().text("Back.").finish());
    expect("spoken", r.says("hi").await?, "Back.".into())?;
    expect("requests", r.server.requests().len(), 2)
}

async fn error_event(r: &mut Rig) -> Result<(), String> {
    r.server
        .reply(Reply::new().text("Half").error("the model is overloaded"));
    expect("spoken", r.says("go").await?, "Half".into())?;
    r.server.reply(Reply::new().text("Fine.").finish());
    expect("the turn after", r.says("and?").await?, "Fine.".into())?;
    expect(
        "the next request",
        r.said(1)?,
        ["user: go", "model: Half", "user: and?"]
            .map(String::from)
            .to_vec(),
    )
}

async fn truncated(r: &mut Rig) -> Result<(), String> {
    r.server.reply(Reply::new().text("Also half"));
    expect("spoken", r.says("go").await?, "Also half".into())?;
    r.server.reply(Reply::new().text("Fine.").finish());
    r.says("and?").await?;
    expect(
        "the next request",
        r.said(1)?,
        ["user: go", "model: Also half", "user: and?"]
            .map(String::from)
            .to_vec(),
    )
}

//! Long calls: the history summarised, not dropped. Over a real session socket, a Gemini stand-in
//! answers the turns and an OpenAI stand-in (another format) writes the summaries: a 300-turn call
//! stays within its budgets and remembers the caller's name; pins and a call with its result stay
//! verbatim; a summary that fails, times out, only calls a function or is huge; a summary request
//! that hangs while the turns go on.

use std::time::Duration;

use serde_json::{Value, json};
use voqalize::prelude::*;
use voqalize::voice::{HistorySummary, SummaryError};
use voqalize_testing::{BargeAt, BargeIn, ModelServer, Provider, Reply, Said, Voqalize};

use crate::support::{driver, layer, logs, refusing, said};

/// A help desk whose one tool pins the caller's order number.
struct Desk {
    model: Model,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Desk {
    /// Look up the caller's order.
    #[tool]
    async fn track_order(&self) -> &'static str {
        self.model.pin_note("(Order 4411, for Ana.)");
        "on its way"
    }
}

fn timeouts() -> voqalize::model::Timeouts {
    voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(30),
        gap: Duration::from_secs(30),
    }
}

/// The most entries of history in these tests.
const ENTRIES: usize = 24;
/// Their token budget, at the default 4 bytes per token for Gemini.
const TOKENS: usize = 3_000;

/// A caller's pause between turns, in the tests whose summaries must run while the call goes on.
const CALLER_PAUSE: Duration = Duration::from_millis(60);

struct Rig {
    server: ModelServer,
    summarizer: ModelServer,
    v: Voqalize,
}

impl Rig {
    /// Asks `Question {i}.` for each `i` of `range`, checks that every request the desk's model
    /// read stayed within its budgets, and gives the last one's history (`said`).
    async fn questions(&mut self, range: std::ops::RangeInclusive<usize>) -> Vec<String> {
        self.questions_paced(range, Duration::ZERO).await
    }

    /// [`questions`](Self::questions), the caller pausing `pause` after each answer: time in
    /// which a summary runs in the background while the call goes on (the driver plays each turn
    /// out as soon as it is over), as between a real caller's turns.
    async fn questions_paced(
        &mut self,
        range: std::ops::RangeInclusive<usize>,
        pause: Duration,
    ) -> Vec<String> {
        for i in range {
            self.v
                .user_says(&format!("Question {i}."))
                .await
                .expect("a turn");
            tokio::time::sleep(pause).await;
        }
        assert_within_budgets(&self.server);
        said(&self.server, self.server.requests().len() - 1)
    }
}

/// A desk on a Gemini stand-in answering "Noted." to every turn, its summaries by `summary`
/// (given the summarizer's layer, named `name`).
async fn rig(name: &'static str, summary: fn(HistorySummary) -> HistorySummary) -> Rig {
    rig_over(name, summary, None).await
}

/// As [`rig`]; with `down`, the summaries come from a fallback chain whose first layer is at
/// that base URL, before the summarizer's.
async fn rig_over(
    name: &'static str,
    summary: fn(HistorySummary) -> HistorySummary,
    down: Option<String>,
) -> Rig {
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    let summarizer = ModelServer::start(Provider::OpenAi).await.expect("a port");
    server.answer_with(|_| Reply::new().text("Noted.").finish());
    let (base, other) = (server.base_url(), summarizer.base_url());
    let mut v = driver(move || {
        let summarizer = layer(Provider::OpenAi, &other, name, timeouts());
        let layers = match &down {
            Some(down) => Fallback::new(layer(Provider::Anthropic, down, "sum-down", timeouts()))
                .then(summarizer)
                .build()
                .expect("a chain"),
            None => summarizer,
        };
        let summarise = summary(
            HistorySummary::new(layers)
                .token_budget(TOKENS)
                .max_summary_bytes(512),
        );
        Desk {
            model: Model::new(layer(Provider::Gemini, &base, "gemini-test", timeouts()))
                .instruction("You answer the help line.")
                .max_history(ENTRIES)
                .summarize_history(summarise)
                .expect("valid budgets"),
        }
    })
    .await;
    v.start_silent().await.expect("a session");
    Rig {
        server,
        summarizer,
        v,
    }
}

/// A summarizer that says the caller is Ana once it reads her name (in the transcript, or in
/// the summary so far).
fn knows_ana(server: &ModelServer) {
    server.answer_with(|read| {
        let knows = read
            .said
            .iter()
            .any(|s| matches!(s, Said::User(t) if t.contains("Ana")));
        let text = if knows {
            "The caller is Ana."
        } else {
            "Someone called."
        };
        Reply::new().text(text).finish()
    });
}

/// Every request the desk's model read stays within the history's budgets: entries, and the
/// bytes of its conversation (`contents`) within the token budget's bytes.
fn assert_within_budgets(server: &ModelServer) {
    for (i, request) in server.requests().iter().enumerate() {
        let contents = request.body["contents"].as_array().expect("contents");
        assert!(contents.len() <= ENTRIES, "request {i}: {}", contents.len());
        let bytes = serde_json::to_vec(&Value::Array(contents.clone()))
            .expect("json")
            .len();
        assert!(bytes <= TOKENS * 4, "request {i}: {bytes} bytes");
    }
}

#[tokio::test]
async fn a_300_turn_call_stays_within_its_budgets_and_remembers_the_caller_s_name() {
    let mut rig = rig("sum-300", |s| s).await;
    knows_ana(&rig.summarizer);
    rig.v.user_says("Hi, I'm Ana.").await.expect("turn 1");
    for i in 2..=300 {
        let turn = rig
            .v
            .user_says(&format!("Here is question {i} about my order."))
            .await
            .expect("a turn");
        assert_eq!(turn.text(), "Noted.");
    }
    assert_within_budgets(&rig.server);
    let last = said(&rig.server, rig.server.requests().len() - 1);
    assert_eq!(
        last[0], "user: (Earlier in this call, summarised: The caller is Ana.)",
        "{last:#?}"
    );
    assert_eq!(
        last.last().map(String::as_str),
        Some("user: Here is question 300 about my order.")
    );
    // Summaries came from the OpenAI stand-in, one request at a time, and each folded in the last.
    let asked = rig.summarizer.requests().len();
    assert!(asked >= 10, "{asked} summaries");
    let folded = said(&rig.summarizer, asked - 1);
    assert!(
        folded[0].contains("Summary so far:\nThe caller is Ana."),
        "{folded:#?}"
    );
}

#[tokio::test]
async fn a_summary_over_a_fallback_chain_moves_past_a_layer_that_is_down() {
    let down = refusing().await;
    let mut rig = rig_over("sum-chain", |s| s, Some(down)).await;
    knows_ana(&rig.summarizer);
    rig.v.user_says("Hi, I'm Ana.").await.expect("turn 1");
    // Paced: the first layer's refusal and the second layer's summary take a moment of the call.
    let last = rig.questions_paced(2..=40, CALLER_PAUSE).await;
    assert!(!rig.summarizer.requests().is_empty());
    assert_eq!(
        last[0], "user: (Earlier in this call, summarised: The caller is Ana.)",
        "{last:#?}"
    );
}

#[tokio::test]
async fn pinned_notes_and_a_call_with_its_result_stay_verbatim() {
    let mut rig = rig("sum-pins", |s| s).await;
    knows_ana(&rig.summarizer);
    rig.server.reply(
        Reply::new()
            .text("Let me check.")
            .call("track_order", json!({}))
            .finish(),
    );
    rig.v
        .user_says("I'm Ana, where is my order?")
        .await
        .expect("turn 1");
    let last = rig.questions(2..=80).await;
    assert_eq!(
        &last[..4],
        [
            "user: (Earlier in this call, summarised: The caller is Ana.)",
            "model: Let me check.",
            "call: track_order",
            "result: {\"result\":\"on its way\"}",
        ],
        "{last:#?}"
    );
    assert!(
        last.iter().any(|l| l == "user: (Order 4411, for Ana.)"),
        "{last:#?}"
    );
}

#[tokio::test]
async fn a_summary_request_that_hangs_never_holds_a_turn_and_the_bounds_still_hold() {
    let mut rig = rig("sum-hangs", |s| s.timeout(Duration::from_secs(600))).await;
    rig.summarizer.answer_with(|_| Reply::new().hang());
    for i in 1..=60 {
        let turn = rig
            .v
            .user_says(&format!("Question {i}."))
            .await
            .expect("a turn");
        assert_eq!(turn.text(), "Noted.");
    }
    // One request at a time: the one that hangs is the only one.
    assert_eq!(rig.summarizer.requests().len(), 1);
    assert_within_budgets(&rig.server);
    let last = said(&rig.server, rig.server.requests().len() - 1);
    assert!(!last[0].contains("summarised"), "{last:#?}");
}

/// A call whose summaries all fail as `answer` does: it drops as without summaries, says so
/// once, and stops asking after three tries.
async fn falls_back(name: &'static str, answer: fn() -> Option<Reply>, why: &str) {
    let logs = logs();
    let mut rig = rig(name, |s| s.timeout(Duration::from_millis(300))).await;
    if answer().is_some() {
        rig.summarizer
            .answer_with(move |_| answer().expect("a reply"));
    }
    let mut asked = 0;
    for i in 1..=60 {
        let turn = rig
            .v
            .user_says(&format!("Question {i}."))
            .await
            .expect("a turn");
        assert_eq!(turn.text(), "Noted.");
        // Paced: each failure (a 300 ms timeout among them) takes a moment of the call.
        tokio::time::sleep(CALLER_PAUSE).await;
        if i == 40 {
            asked = rig.summarizer.requests().len();
        }
    }
    // It stopped asking after three failures (a 500 is retried once by the layer).
    assert!(asked > 0);
    assert_eq!(rig.summarizer.requests().len(), asked);
    assert_within_budgets(&rig.server);
    let last = said(&rig.server, rig.server.requests().len() - 1);
    assert!(!last.iter().any(|l| l.contains("summarised")), "{last:#?}");
    assert!(last.iter().all(|l| !l.contains("file_ticket")), "{last:#?}");
    let lines = logs.lines_with(&format!("model={name}"));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("the summary of older exchanges failed") && lines[0].contains(why),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn a_summary_that_fails_falls_back_to_dropping_with_one_log_line() {
    falls_back("sum-500", || None, "500").await;
}

#[tokio::test]
async fn a_summary_that_times_out_falls_back_to_dropping_with_one_log_line() {
    falls_back(
        "sum-slow",
        || {
            Some(
                Reply::new()
                    .text("Ana")
                    .keep_alive(Duration::from_millis(50)),
            )
        },
        "it took over 300ms",
    )
    .await;
}

#[tokio::test]
async fn a_summary_written_as_a_call_is_not_kept_nor_spoken() {
    falls_back(
        "sum-call",
        || Some(Reply::new().call("file_ticket", json!({})).finish()),
        "it said nothing",
    )
    .await;
}

#[tokio::test]
async fn a_huge_summary_is_cut_to_its_bound() {
    let mut rig = rig("sum-huge", |s| s).await;
    rig.summarizer.answer_with(|_| {
        let piece = "s".repeat(4096);
        let mut reply = Reply::new();
        for _ in 0..256 {
            reply = reply.text(&piece);
        }
        reply.finish()
    });
    let last = rig.questions(1..=40).await;
    assert!(
        last[0].starts_with("user: (Earlier in this call, summarised: sss"),
        "{}",
        &last[0][..80]
    );
    assert!(last[0].len() < 512 + 100, "{}", last[0].len());
}

#[test]
fn budgets_that_cannot_work_are_refused_at_build() {
    let model = || {
        Model::new(layer(
            Provider::Gemini,
            "http://127.0.0.1:9",
            "gemini-test",
            timeouts(),
        ))
        .instruction("x".repeat(10_000))
    };
    let summary = || {
        HistorySummary::new(layer(
            Provider::OpenAi,
            "http://127.0.0.1:9",
            "s",
            timeouts(),
        ))
    };
    let refused = |s: HistorySummary| model().summarize_history(s).expect_err("refused");
    assert!(matches!(
        refused(summary().token_budget(0)),
        SummaryError::Zero {
            what: "token_budget"
        }
    ));
    assert!(matches!(
        refused(summary().max_summary_bytes(0)),
        SummaryError::Zero {
            what: "max_summary_bytes"
        }
    ));
    assert!(matches!(
        refused(summary().timeout(Duration::ZERO)),
        SummaryError::Zero { what: "timeout" }
    ));
    assert!(matches!(
        refused(summary().high_water(100)),
        SummaryError::HighWater { percent: 100 }
    ));
    assert!(matches!(
        refused(summary().bytes_per_token(f64::NAN)),
        SummaryError::BytesPerToken { .. }
    ));
    // 2,000 tokens of 4 bytes: 8,000 bytes, less than the instruction and one summary.
    let e = refused(summary().token_budget(2_000));
    assert!(
        matches!(
            e,
            SummaryError::BelowInstruction {
                budget_bytes: 8_000,
                instruction_bytes: 10_000,
                ..
            }
        ),
        "{e}"
    );
    assert!(model().summarize_history(summary()).is_ok());
    // The estimate is the summarised model's provider's: 3,000 tokens hold 12,000 bytes for
    // Gemini, 10,500 for Anthropic (3.5 bytes a token), less than 10,000 and a 512-byte summary.
    let fits = |provider| {
        Model::new(layer(provider, "http://127.0.0.1:9", "m", timeouts()))
            .instruction("x".repeat(10_000))
            .summarize_history(summary().token_budget(3_000).max_summary_bytes(512))
    };
    assert!(fits(Provider::Gemini).is_ok());
    assert!(matches!(
        fits(Provider::Anthropic),
        Err(SummaryError::BelowInstruction {
            budget_bytes: 10_500,
            ..
        })
    ));
    assert!(
        model()
            .summarize_history(summary().token_budget(3_000).bytes_per_token(3.0))
            .is_err()
    );
}

#[tokio::test]
async fn a_summary_reads_only_what_the_caller_heard() {
    let mut rig = rig("sum-heard", |s| s).await;
    knows_ana(&rig.summarizer);
    rig.v.user_says("I'm Ana.").await.expect("turn 1");
    rig.server.reply(
        Reply::new()
            .text("Your code is 1234, keep it safe.")
            .finish(),
    );
    rig.v
        .barge_in(
            "What is my code?",
            BargeIn {
                at: BargeAt::FirstText,
                heard_prefix: Some("Your code is".into()),
            },
        )
        .await
        .expect("turn 2");
    rig.questions(3..=20).await;
    assert!(rig.summarizer.wait_requests(1).await, "a summary request");
    let first = said(&rig.summarizer, 0);
    assert!(
        first[0].contains("Caller: I'm Ana.\n")
            && first[0].contains("Caller: What is my code?\nAgent: Your code is\n"),
        "{first:#?}"
    );
    for request in rig.summarizer.requests() {
        assert!(
            !request.body.to_string().contains("1234"),
            "{}",
            request.body
        );
    }
}

#[tokio::test]
async fn a_call_that_ends_with_a_summary_in_flight_drops_its_request() {
    let mut rig = rig("sum-in-flight", |s| s.timeout(Duration::from_secs(600))).await;
    rig.summarizer.answer_with(|_| Reply::new().hang());
    let mut i = 0;
    while rig.summarizer.requests().is_empty() {
        i += 1;
        assert!(i <= 100, "no summary was asked for");
        rig.v
            .user_says(&format!("Question {i}."))
            .await
            .expect("a turn");
    }
    rig.v.end().await.expect("an end");
    assert!(
        rig.summarizer.wait_hung_up(1).await,
        "the summary request was dropped with the call"
    );
}

#[tokio::test]
async fn summary_failures_apart_do_not_stop_a_long_call_s_summaries() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut rig = rig("sum-flaky", |s| s).await;
    let asked = Arc::new(AtomicUsize::new(0));
    rig.summarizer.answer_with(move |_| {
        // Two failures, then a summary, over and over: never three failures in a row.
        if asked.fetch_add(1, Ordering::SeqCst) % 3 < 2 {
            Reply::error_status(400, "try again")
        } else {
            Reply::new().text("The caller asked questions.").finish()
        }
    });
    rig.questions(1..=60).await;
    let asked = rig.summarizer.requests().len();
    assert!(asked > 6, "{asked} summary requests");
}

#[tokio::test]
async fn a_call_whose_every_turn_makes_a_call_does_not_ask_for_a_summary_every_turn() {
    let mut rig = rig("sum-every-turn", |s| s).await;
    knows_ana(&rig.summarizer);
    rig.server.answer_with(|_| {
        Reply::new()
            .text("Let me check.")
            .call("track_order", json!({}))
            .finish()
    });
    rig.questions(1..=60).await;
    let asked = rig.summarizer.requests().len();
    assert!(asked <= 20, "{asked} summaries in 60 turns");
}

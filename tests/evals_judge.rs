//! The evals' simulated caller and judge against a stand-in provider on 127.0.0.1 (real HTTP, the
//! built-in layers): what each request carries (the caller hears only the heard text), how a
//! reply is read (a line, a hang-up marker, a verdict with quotes), and how a hostile or broken
//! provider is bounded (a huge reply, garbage, a 500, a stream that hangs).

use std::time::Duration;

use serde_json::json;
use voqalize::model::{Anthropic, Gemini};
use voqalize_testing::eval::{
    Ending, Judge, Line, Next, Scenario, SimulatedCaller, Speaker, Transcript, Verdict,
};
use voqalize_testing::{ModelServer, Provider, Reply, Said};

/// A stand-in Gemini server and a layer that talks to it.
pub(crate) async fn gemini() -> (ModelServer, Gemini) {
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    let layer = Gemini::builder("test-key")
        .model("gemini-test")
        .base_url(server.base_url())
        .build()
        .expect("a valid layer");
    (server, layer)
}

async fn anthropic() -> (ModelServer, Anthropic) {
    let server = ModelServer::start(Provider::Anthropic)
        .await
        .expect("a port");
    let layer = Anthropic::builder("test-key", "claude-test")
        .base_url(server.base_url())
        .build()
        .expect("a valid layer");
    (server, layer)
}

fn line(speaker: Speaker, heard: &str, unheard: &str) -> Line {
    Line::new(speaker, heard, unheard)
}

/// A booking call: the caller cut in on the agent's first offer (it never heard "or Monday at
/// ten"), then took Friday.
fn booking_call() -> Transcript {
    let mut call = Transcript::empty(Ending::GoalMet);
    call.lines = vec![
        line(Speaker::Caller, "Hi, I'd like to book a table.", ""),
        line(
            Speaker::Agent,
            "Sure. We have Friday at nine",
            "or Monday at ten, which suits you?",
        ),
        line(Speaker::Caller, "Friday please.", ""),
        line(Speaker::Agent, "Booked: Friday at nine, for Ana.", ""),
    ];
    call
}

fn booking() -> Scenario {
    Scenario::new("booking")
        .persona(
            "Ana, a busy nurse who speaks briefly",
            "book a table for Friday",
        )
        .fact("name", "Ana Lima")
        .fact("party size", "4")
        .rubric("The agent offers a time slot")
        .rubric("The agent confirms the booking with the caller's name")
}

// ------------------------------------------------------------------------------------------
// The simulated caller
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_simulated_caller_asks_with_its_part_and_only_what_it_heard() {
    let (server, layer) = gemini().await;
    server.reply(Reply::new().text("  Four of us. ").finish());
    let mut caller = SimulatedCaller::new(layer).play(&booking());
    let next = caller.next(&booking_call()).await.expect("a move");
    assert_eq!(next, Next::Say("Four of us.".to_owned()));

    let asked = server.read_back(0).expect("one request");
    let instruction = asked.instruction.unwrap_or_default();
    for part in [
        "Ana, a busy nurse who speaks briefly",
        "book a table for Friday",
        "name: Ana Lima",
        "party size: 4",
        "[hang up: goal met]",
        "[hang up: gave up]",
    ] {
        assert!(instruction.contains(part), "{part:?} in {instruction}");
    }
    assert!(asked.tools.is_empty(), "{:?}", asked.tools);
    // The caller speaks first: the agent picks up; the agent's words are the user's; the call
    // ends with the agent's last line; the unheard rest of the cut line is not there at all.
    assert_eq!(
        asked.said,
        vec![
            Said::User("(the agent picks up the phone)".to_owned()),
            Said::Model("Hi, I'd like to book a table.".to_owned()),
            Said::User("Sure. We have Friday at nine —".to_owned()),
            Said::Model("Friday please.".to_owned()),
            Said::User("Booked: Friday at nine, for Ana.".to_owned()),
        ]
    );
    let body = server.requests()[0].body.to_string();
    assert!(
        !body.contains("Monday"),
        "the unheard text was sent: {body}"
    );
}

#[tokio::test]
async fn the_simulated_caller_hangs_up_on_its_markers_and_sums_its_tokens() {
    let (server, layer) = anthropic().await;
    server.reply(
        Reply::new()
            .text("Great, thanks. Bye! [Hang up: goal MET]")
            .usage(100, 7)
            .finish(),
    );
    server.reply(
        Reply::new()
            .text("Never mind, I'll call back.  [ hang up : gave up ]")
            .usage(120, 9)
            .finish(),
    );
    server.reply(
        Reply::new()
            .text("[hang up: goal met]")
            .usage(5, 1)
            .finish(),
    );
    let mut call = Transcript::empty(Ending::TurnLimit);
    call.lines = vec![line(Speaker::Agent, "Clinic, how can I help?", "")];
    let mut caller = SimulatedCaller::new(layer).play(&booking());

    let next = caller.next(&call).await.expect("a move");
    assert_eq!(
        next,
        Next::HangUp {
            last: Some("Great, thanks. Bye!".to_owned()),
            ending: Ending::GoalMet
        }
    );
    let next = caller.next(&call).await.expect("a move");
    assert_eq!(
        next,
        Next::HangUp {
            last: Some("Never mind, I'll call back.".to_owned()),
            ending: Ending::GaveUp
        }
    );
    let next = caller.next(&call).await.expect("a move");
    assert_eq!(
        next,
        Next::HangUp {
            last: None,
            ending: Ending::GoalMet
        }
    );
    // The agent greeted: the call starts with its words, as the user's.
    let asked = server.read_back(0).expect("a request");
    assert_eq!(
        asked.said,
        vec![Said::User("Clinic, how can I help?".to_owned())]
    );
    let counts = caller.counts();
    assert_eq!(counts.get("input_tokens"), Some(&225), "{counts:?}");
    assert_eq!(counts.get("output_tokens"), Some(&17), "{counts:?}");
}

#[tokio::test]
async fn a_huge_caller_line_is_cut_and_an_empty_or_failed_reply_is_an_error() {
    let (server, layer) = gemini().await;
    let mut reply = Reply::new();
    for _ in 0..64 {
        reply = reply.text(&"é".repeat(2048));
    }
    server.reply(reply.finish());
    server.reply(Reply::new().text(" \n ").finish());
    let mut caller = SimulatedCaller::new(layer)
        .max_line_bytes(101)
        .timeout(Duration::from_secs(20))
        .play(&booking());
    let call = booking_call();

    let Next::Say(said) = caller.next(&call).await.expect("a move") else {
        panic!("a line");
    };
    assert_eq!(said, "é".repeat(50), "cut at a character boundary");

    let empty = caller.next(&call).await.expect_err("an empty reply");
    assert!(empty.why.contains("answered nothing"), "{}", empty.why);

    // No reply queued: the stand-in answers 500 (the layer's retry gets the same).
    let failed = caller.next(&call).await.expect_err("a 500");
    assert!(failed.why.contains("request failed"), "{}", failed.why);
    assert!(failed.why.contains("500"), "{}", failed.why);
}

// ------------------------------------------------------------------------------------------
// The judge
// ------------------------------------------------------------------------------------------

/// `future`, checked to be `Send`.
fn sent<F: std::future::Future + Send>(future: F) -> F {
    future
}

fn verdict(verdict: &str, reasons: serde_json::Value) -> String {
    json!({"verdict": verdict, "reasons": reasons}).to_string()
}

#[tokio::test]
async fn a_quoted_pass_passes_a_quoted_fail_fails_and_both_count_their_tokens() {
    let (server, layer) = gemini().await;
    let pass = verdict(
        "pass",
        json!([
            {"item": "The agent offers a time slot", "quote": "we have friday   at nine", "why": "it offers Friday"},
            {"item": "The agent confirms the booking", "quote": "Booked: Friday at nine, for Ana.", "why": "it names Ana"},
        ]),
    );
    server.reply(Reply::new().text(&pass).usage(300, 40).finish());
    // A quote from what the agent generated but the caller never heard backs a finding too.
    let fail = verdict(
        "fail",
        json!([{"item": "The agent offers a time slot", "quote": "or Monday at ten", "why": "Monday was never heard"}]),
    );
    server.reply(Reply::new().text(&fail).usage(310, 30).finish());
    let judge = Judge::new(layer);
    let call = booking_call();

    // A runner judges calls on tasks of its own: the judgement is a `Send` future.
    let j = sent(judge.judge(&booking(), &call)).await;
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    assert_eq!(j.raw, None);
    assert_eq!(j.reasons.len(), 2);
    assert!(j.reasons.iter().all(|r| r.quoted), "{:?}", j.reasons);
    assert_eq!(j.counts.get("input_tokens"), Some(&300), "{:?}", j.counts);
    assert_eq!(j.counts.get("output_tokens"), Some(&40), "{:?}", j.counts);

    let j = judge.judge(&booking(), &call).await;
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert_eq!(j.reasons[0].why, "Monday was never heard");
    assert!(j.reasons[0].quoted);
    assert_eq!(j.counts.get("output_tokens"), Some(&30), "{:?}", j.counts);

    // What the judge read: the goal, the rubric numbered, the call with the unheard shown.
    let asked = server.read_back(0).expect("a request");
    assert!(
        asked
            .instruction
            .unwrap_or_default()
            .contains("\"verdict\"")
    );
    let [Said::User(question)] = asked.said.as_slice() else {
        panic!("one user message: {:?}", asked.said);
    };
    for part in [
        "book a table for Friday",
        "1. The agent offers a time slot",
        "2. The agent confirms the booking with the caller's name",
        "agent: Sure. We have Friday at nine [unheard: or Monday at ten, which suits you?]",
    ] {
        assert!(question.contains(part), "{part:?} in {question}");
    }
}

#[tokio::test]
async fn garbage_or_an_unquoted_verdict_is_unsure_and_a_fenced_answer_is_read() {
    let (server, layer) = anthropic().await;
    server.reply(Reply::new().text("I think it went well.\n").finish());
    server.reply(
        Reply::new()
            .text(&verdict(
                "pass",
                json!([{"item": "slot", "quote": "We have Tuesday at noon", "why": "made up"}]),
            ))
            .finish(),
    );
    server.reply(Reply::new().text(&verdict("pass", json!([]))).finish());
    let fenced = format!(
        "Here is my grading:\n```json\n{}\n```\nHope that helps.",
        verdict(
            "fail",
            json!([{"item": "name", "quote": "for Ana", "why": "no surname"}])
        )
    );
    server.reply(Reply::new().text(&fenced).finish());
    let judge = Judge::new(layer);
    let call = booking_call();

    let j = judge.judge(&booking(), &call).await;
    assert_eq!(j.verdict, Verdict::Unsure);
    let raw = j.raw.unwrap_or_default();
    assert!(
        raw.contains("I think it went well.\\n"),
        "escaped in raw: {raw}"
    );

    let j = judge.judge(&booking(), &call).await;
    assert_eq!(j.verdict, Verdict::Unsure, "{j:?}");
    assert!(!j.reasons[0].quoted);
    let raw = j.raw.unwrap_or_default();
    assert!(raw.contains("quotes nothing from the transcript"), "{raw}");

    let j = judge.judge(&booking(), &call).await;
    assert_eq!(j.verdict, Verdict::Unsure, "no reasons: {j:?}");

    let j = judge.judge(&booking(), &call).await;
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert_eq!(j.reasons[0].quote, "for Ana");
}

#[tokio::test]
async fn a_megabyte_answer_is_bounded() {
    let (server, layer) = gemini().await;
    // A megabyte, in pieces of 4 KiB, opening like a verdict that never closes.
    let mut reply = Reply::new().text("{\"verdict\": \"pass\", \"reasons\": [\"");
    let piece = "x".repeat(4096);
    for _ in 0..256 {
        reply = reply.text(&piece);
    }
    server.reply(reply.finish());
    let j = Judge::new(layer)
        .max_answer_bytes(1024)
        .judge(&booking(), &booking_call())
        .await;
    assert_eq!(j.verdict, Verdict::Unsure, "{:?}", j.verdict);
    let raw = j.raw.unwrap_or_default();
    // The answer read is clipped to its bound: the note and 1 KiB of it.
    assert!(raw.contains("no JSON object"), "{}", &raw[..200]);
    assert!(raw.len() < 1024 + 64, "{}", raw.len());
}

#[tokio::test]
async fn a_judge_that_hangs_is_unsure_at_its_timeout() {
    let (server, layer) = gemini().await;
    server.reply(Reply::new().text("{\"verdict\": ").hang());
    let j = Judge::new(layer)
        .timeout(Duration::from_millis(300))
        .judge(&booking(), &booking_call())
        .await;
    assert_eq!(j.verdict, Verdict::Unsure);
    let raw = j.raw.unwrap_or_default();
    assert!(raw.contains("timeout (300ms)"), "{raw}");
}

#[tokio::test]
async fn an_empty_rubric_passes_without_a_request() {
    let (server, layer) = gemini().await;
    let scenario = Scenario::new("no rubric").persona("p", "g");
    let j = Judge::new(layer).judge(&scenario, &booking_call()).await;
    assert_eq!(
        (j.verdict, j.reasons.len(), j.raw),
        (Verdict::Pass, 0, None)
    );
    assert!(server.requests().is_empty());
}

//! Handoff summaries attacked as a hostile provider would: one that is huge, never ends, only
//! calls a function, or is cut by a barge-in. On the lab of `stage_attacks.rs`.

use std::time::Duration;

use serde_json::json;
use voqalize::voice::Workflow;
use voqalize_testing::{Reply, Voqalize};

use crate::stage_attacks::{Line, Rig, rig, summarizer};
use crate::support::{logs, said};

/// A turn that hands off with a summary, whatever the summarizer answers; returns what the
/// Back stage's first request read.
async fn summarised(rig: &Rig, v: &mut Voqalize) -> Vec<String> {
    rig.server
        .reply(Reply::new().text("Hello, who is calling?").finish());
    v.user_says("hi").await.unwrap();
    rig.server
        .reply(Reply::new().call("to_back_summary", json!({})).finish());
    rig.server.reply(Reply::new().text("Filing.").finish());
    let turn = v.user_says("I'm Ana").await.unwrap();
    assert_eq!(turn.text(), "Filing.");
    said(&rig.server, rig.server.requests().len() - 1)
}

fn summary_workflow(base: &str) -> Workflow<Line> {
    Workflow::<Line>::new()
        .summarizer(summarizer(base))
        .max_summary_bytes(256)
        .summary_timeout(Duration::from_millis(500))
}

#[tokio::test]
async fn a_huge_summary_is_cut_to_its_bound() {
    let (rig, mut v) = rig(|m, base| m.workflow(summary_workflow(&base))).await;
    v.start_silent().await.unwrap();
    // A megabyte, in pieces of 4 KiB.
    let piece = "s".repeat(4096);
    let mut reply = Reply::new();
    for _ in 0..256 {
        reply = reply.text(&piece);
    }
    rig.other.reply(reply.finish());
    let read = summarised(&rig, &mut v).await;
    assert_eq!(read.len(), 1, "{read:#?}");
    assert!(
        read[0].starts_with(
            "user: (The call moved from stage Front to stage Back. What was said before: sss"
        ),
        "{}",
        &read[0][..200]
    );
    assert!(read[0].len() < 256 + 200, "{}", read[0].len());
    // One piece in one event, past what a summary request reads: the note alone crosses.
    rig.server
        .reply(Reply::new().call("to_front", json!({})).finish());
    rig.server.reply(Reply::new().text("Hi again.").finish());
    v.user_says("back").await.unwrap();
    rig.other
        .reply(Reply::new().text(&"t".repeat(1024 * 1024)).finish());
    let read = summarised(&rig, &mut v).await;
    assert!(read[0].len() < 256 + 200, "{}", read[0].len());
}

#[tokio::test]
async fn a_summary_that_never_ends_is_cut_at_its_timeout_and_the_note_alone_crosses() {
    let logs = logs();
    let (rig, mut v) = rig(|m, base| m.workflow(summary_workflow(&base))).await;
    v.start_silent().await.unwrap();
    rig.other.reply(
        Reply::new()
            .text("Ana calls")
            .keep_alive(Duration::from_millis(50)),
    );
    let read = summarised(&rig, &mut v).await;
    assert_eq!(
        read,
        ["user: (The call moved from stage Front to stage Back. Note: Summarised.)"]
    );
    let lines = logs.lines_with("it took over 500ms");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the handoff summary failed")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn a_summary_that_only_calls_a_function_is_no_summary_and_says_so() {
    let logs = logs();
    let (rig, mut v) = rig(|m, base| m.workflow(summary_workflow(&base))).await;
    v.start_silent().await.unwrap();
    rig.other
        .reply(Reply::new().call("file_ticket", json!({})).finish());
    let read = summarised(&rig, &mut v).await;
    assert_eq!(
        read,
        ["user: (The call moved from stage Front to stage Back. Note: Summarised.)"]
    );
    assert!(!rig.log.events().contains(&"filed".to_owned()));
    let lines = logs.lines_with("the handoff summary failed (it said nothing)");
    assert!(!lines.is_empty(), "{lines:#?}");
}

#[tokio::test]
async fn a_barge_in_during_the_summary_request_leaves_the_handoff_for_the_next_turn() {
    let (rig, mut v) = rig(|m, base| {
        m.workflow(
            Workflow::<Line>::new()
                .summarizer(summarizer(&base))
                .summary_timeout(Duration::from_secs(60)),
        )
    })
    .await;
    v.start_silent().await.unwrap();
    rig.server
        .reply(Reply::new().text("Hello, who is calling?").finish());
    v.user_says("hi").await.unwrap();
    // The first summary request never answers; the caller barges in while the turn waits on it.
    rig.other.reply(Reply::new().hang());
    rig.other.reply(Reply::new().text("Ana called.").finish());
    rig.server
        .reply(Reply::new().call("to_back_summary", json!({})).finish());
    let turn_id = v.send_user_message("I'm Ana").await.unwrap();
    assert!(rig.other.wait_requests(1).await, "the summary request");
    v.send(voqalize::wire::Frame::Interruption {
        through_turn: turn_id,
    })
    .await
    .unwrap();
    // The next turn applies the handoff in full: a summary, and nothing of the stage left.
    rig.server
        .reply(Reply::new().text("Which ticket?").finish());
    let turn = v.user_says("hello?").await.unwrap();
    assert_eq!(turn.text(), "Which ticket?");
    let last = rig.server.requests().len() - 1;
    assert_eq!(
        said(&rig.server, last),
        [
            "user: (The call moved from stage Front to stage Back. What was said before: Ana called. Note: Summarised.)",
            "user: hello?"
        ]
    );
    assert_eq!(
        rig.server.read_back(last).expect("the request").tools,
        ["file_ticket", "to_front", "done"]
    );
}

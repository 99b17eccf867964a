//! What the drain writes in the log, on both legs (docs/protocol.md §2.2, README "Deploying"): a
//! call it ends is said to be ended by the drain, not a transport failure, and one call is counted
//! as one call.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tracing::Instrument;
use voqalize::host::Shutdown;
use voqalize::prelude::*;
use voqalize::relay::Relay;
use voqalize_testing::Voqalize;

use crate::relay::{echo, says, stand_in, start};
use crate::support::{Log, logs};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Records why its call ended.
struct Told(Arc<Log>);

impl Brain for Told {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, reason: EndReason) {
        self.0.end_because(&reason);
    }
}

/// The captured lines that carry `tag` (in a span field or a session id): this test's own.
fn lines_of(tag: &str) -> Vec<String> {
    logs().lines_with(tag)
}

/// No line of `tag`'s counts one of anything as many, nor calls the drain a transport failure.
fn worded_right(tag: &str) {
    let lines = lines_of(tag);
    let wrong: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.contains(" 1 calls")
                || l.contains(" 1 sessions")
                || l.contains("the transport failed")
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// `needle` is in one of `tag`'s lines.
fn said(tag: &str, needle: &str) {
    let lines = lines_of(tag);
    assert!(
        lines.iter().any(|l| l.contains(needle)),
        "no line says {needle:?}: {lines:#?}"
    );
}

// The direct leg: one call outlives the drain's 100 ms and is ended by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_on_the_direct_leg_says_it_ended_the_call_and_counts_one_call() -> TestResult {
    logs();
    let tag = format!("drain-words-direct-{}", std::process::id());
    let shutdown = Shutdown::new(Duration::from_millis(100));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let log = Arc::new(Log::default());
    let l = log.clone();
    tokio::spawn(voqalize::host::serve(
        listener,
        move || Told(l.clone()),
        HostOptions::builder()
            .allow_unverified()
            .shutdown(&shutdown)
            .build()?,
    ));
    let mut v = Voqalize::connect(&format!("ws://{addr}/voice"), &tag, None).await?;
    v.start_silent().await?;
    assert_eq!(v.user_says("up").await?.text(), "up");
    tracing::info_span!("drain_words", tag = %tag).in_scope(|| shutdown.trigger());
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the drain ended the call"
    );
    assert_eq!(log.end_reasons(), [EndReason::Shutdown]);
    said(&tag, "shutdown: draining 1 call for up to");
    said(&tag, "session: the drain ends the call");
    worded_right(&tag);
    Ok(())
}

// The relay leg: the same words, and the relay's own lines count one call as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_on_the_relay_says_it_ended_the_call_and_counts_one_call() {
    logs();
    let tag = format!("drain-words-relay-{}", std::process::id());
    let shutdown = Shutdown::new(Duration::from_millis(100));
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .shutdown(&shutdown)
        .build()
        .unwrap();
    let factory = echo(&log, &release);
    let triggered = shutdown.clone();
    let served = tokio::spawn(
        async move { agent.serve(factory, triggered.triggered()).await }
            .instrument(tracing::info_span!("drain_words", tag = %tag)),
    );
    let mut link = relay.agent().await;
    link.send([0xa; 16], &start("lingers")).await;
    link.send([0xa; 16], &says(2, "up")).await;
    assert_eq!(link.spoken().await, ([0xa; 16], "up".to_owned()));
    tracing::info_span!("drain_words", tag = %tag).in_scope(|| shutdown.trigger());
    link.until_end_of([0xa; 16]).await;
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the drain ended the call"
    );
    assert_eq!(log.end_reasons(), [EndReason::Shutdown]);
    let report = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("serve returns after the drain")
        .unwrap()
        .unwrap();
    assert_eq!((report.drained, report.ended), (0, 1));
    said(&tag, "shutdown: draining 1 call for up to");
    said(&tag, "relay: shutting down; 1 call running");
    said(
        &tag,
        "relay: the drain is over; ending the 1 call still running",
    );
    said(&tag, "relay: ending 1 session");
    said(&tag, "session: the drain ends the call");
    worded_right(&tag);
}

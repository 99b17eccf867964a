//! An `End` the peer sent is what ended the call, however soon the transport goes after it
//! (docs/protocol.md §3.4, §4.13): a console's *End call* sends `End`, then closes at once. Many
//! calls, over real WebSockets on 127.0.0.1, on the direct leg and on the relay leg; every reason
//! `on_session_end` is told is checked.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use voqalize::prelude::*;
use voqalize::relay::Relay;
use voqalize::wire::{self, Frame, SessionStart, WIRE_VERSION};

use crate::relay::{echo, says, serve, stand_in, start};
use crate::support::Log;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Greets (so its writer has a frame to send as the peer goes), and records why each call ended.
struct Greeter(Arc<Log>);

impl Brain for Greeter {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }

    async fn on_session_end(&self, session: &Session, reason: EndReason) {
        self.0.push(format!("{} {reason:?}", session.id()));
        self.0.end_because(&reason);
    }
}

/// How the peer goes right after its `End`.
#[derive(Debug, Clone, Copy)]
enum Goes {
    /// A close frame (a browser's `close()`), then it reads until the brain closes too.
    CloseFrame,
    /// TCP's end of stream without a close frame, then it reads until the brain's end.
    Eof,
}

/// One call on the direct leg: `SessionStart`, (once the greeting began, when `settled`) `End`
/// and at once the close of `goes`, all in one write; then it reads what is left, so the socket
/// ends with FIN, not a reset that could lose the `End` in flight.
async fn end_then_go(
    addr: std::net::SocketAddr,
    sid: &str,
    settled: bool,
    goes: Goes,
) -> TestResult {
    let request = format!("ws://{addr}/voice?session_id={sid}").into_client_request()?;
    let (mut ws, _) =
        tokio_tungstenite::client_async(request, TcpStream::connect(addr).await?).await?;
    let start = Frame::SessionStart(
        SessionStart::new(sid, 1)
            .with_wire_version(WIRE_VERSION)
            .with_capabilities(Default::default()),
    );
    ws.send(Message::Binary(wire::encode(&start).into()))
        .await?;
    if settled {
        // The greeting's first frame: the feeder is past the start and waits for the next frame.
        while !matches!(ws.next().await, Some(Ok(Message::Binary(_))) | None) {}
    }
    ws.feed(Message::Binary(wire::encode(&Frame::End).into()))
        .await?;
    match goes {
        Goes::CloseFrame => ws.send(Message::Close(None)).await?,
        Goes::Eof => {
            ws.flush().await?;
            ws.get_mut().shutdown().await?;
        }
    }
    while let Some(Ok(_)) = ws.next().await {}
    Ok(())
}

// 200 calls on the direct leg end with `End` and a close right behind it (a close frame or an end
// of stream; before the greeting went out or once it is under way; ten calls at a time): each
// brain is told `Ended`, never the close that followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_followed_at_once_by_a_close_ends_direct_calls_as_ended() -> TestResult {
    const CALLS: usize = 200;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let log = Arc::new(Log::default());
    let l = log.clone();
    tokio::spawn(voqalize::host::serve(
        listener,
        move || Greeter(l.clone()),
        HostOptions::allow_unverified(),
    ));
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..10 {
        callers.spawn(async move {
            for n in (caller..CALLS).step_by(10) {
                let goes = if n % 2 == 0 {
                    Goes::CloseFrame
                } else {
                    Goes::Eof
                };
                end_then_go(addr, &format!("end-race-{n}"), n % 4 >= 2, goes).await?;
            }
            TestResult::Ok(())
        });
    }
    while let Some(done) = callers.join_next().await {
        done??;
    }
    assert!(
        log.until_within(Duration::from_secs(30), |l| l.ended() == CALLS)
            .await,
        "every call ended once: {}",
        log.ended()
    );
    let wrong: Vec<String> = log
        .events()
        .into_iter()
        .filter(|e| !e.ends_with(" Ended"))
        .collect();
    assert!(wrong.is_empty(), "{} of {CALLS}: {wrong:?}", wrong.len());
    Ok(())
}

// On the relay leg: 20 connections, each carrying 10 calls (half of them answered a turn, half
// only just opened), then every call's `End` and at once the relay closing the connection. The
// calls ended by their `End` are told `Ended`, never that the relay was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_followed_at_once_by_the_relay_closing_ends_relay_calls_as_ended() {
    const ROUNDS: usize = 20;
    const CALLS: u8 = 10;
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .reconnect_backoff(Duration::from_millis(1), Duration::from_millis(4))
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    for round in 0..ROUNDS {
        let mut link = relay.agent().await;
        for call in 0..CALLS {
            link.send(
                [call; 16],
                &start(&format!("relay-end-race-{round}-{call}")),
            )
            .await;
        }
        for call in 0..CALLS / 2 {
            link.send([call; 16], &says(2, "hi")).await;
            assert_eq!(link.spoken().await, ([call; 16], "hi".to_owned()));
        }
        for call in 0..CALLS {
            link.send([call; 16], &Frame::End).await;
        }
        link.close(1011).await;
        let ended = (round + 1) * usize::from(CALLS);
        assert!(
            log.until_within(Duration::from_secs(30), |l| l.ended() == ended)
                .await,
            "round {round}: {} calls ended, not {ended}",
            log.ended()
        );
    }
    let reasons = log.end_reasons();
    let wrong: Vec<&EndReason> = reasons.iter().filter(|r| **r != EndReason::Ended).collect();
    assert!(
        wrong.is_empty(),
        "{} of {}: {wrong:?}",
        wrong.len(),
        reasons.len()
    );
}

//! The relay leg against a stand-in Cortex relay on 127.0.0.1 (a tokio-tungstenite server in this
//! file): the upgrade and its headers, prefix framing both ways, sessions by prefix, refusals,
//! reconnects, bad input, and isolation between sessions on one connection (docs/protocol.md §2.2).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use voqalize::prelude::*;
use voqalize::relay::{Relay, RelayError};
use voqalize::session::TransportLoss;
use voqalize::wire::{self, Capabilities, Frame, SessionStart, WIRE_VERSION};

use crate::support::Log;

/// The stand-in relay: accepts agent connections on `/agent`, records their headers, and can
/// answer the next upgrades with an HTTP status instead, or close them right after the upgrade.
pub(crate) struct StandIn {
    addr: SocketAddr,
    agents: mpsc::UnboundedReceiver<Agent>,
    headers: Arc<Mutex<Vec<(String, String)>>>,
    refuse: Arc<Mutex<VecDeque<u16>>>,
    pub(crate) attempts: Arc<AtomicUsize>,
    /// How the next upgraded connections are closed at once instead of handed to the test.
    hang_up: Arc<Mutex<VecDeque<HangUp>>>,
    /// When each upgrade completed.
    upgraded: Arc<Mutex<Vec<Instant>>>,
}

/// How the stand-in closes a connection right after accepting it.
#[derive(Debug, Clone, Copy)]
enum HangUp {
    /// A close frame with 1011.
    Close1011,
    /// The TCP connection ends without a close frame.
    Eof,
}

/// One agent connection as the relay sees it.
pub(crate) struct Agent(WebSocketStream<TcpStream>);

pub(crate) async fn stand_in() -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, agents) = mpsc::unbounded_channel();
    let headers = Arc::new(Mutex::new(Vec::new()));
    let refuse: Arc<Mutex<VecDeque<u16>>> = Arc::new(Mutex::new(VecDeque::new()));
    let attempts = Arc::new(AtomicUsize::new(0));
    let hang_up: Arc<Mutex<VecDeque<HangUp>>> = Arc::default();
    let upgraded: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let (h, r, a) = (headers.clone(), refuse.clone(), attempts.clone());
    let (hu, up) = (hang_up.clone(), upgraded.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (h, r, a, tx) = (h.clone(), r.clone(), a.clone(), tx.clone());
            let (hu, up) = (hu.clone(), up.clone());
            tokio::spawn(async move {
                // The ErrorResponse type is tungstenite's callback contract.
                #[allow(clippy::result_large_err)]
                let callback =
                    move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                        a.fetch_add(1, Ordering::SeqCst);
                        for (k, v) in req.headers() {
                            h.lock().unwrap().push((
                                k.as_str().to_owned(),
                                v.to_str().unwrap_or_default().to_owned(),
                            ));
                        }
                        if let Some(status) = r.lock().unwrap().pop_front() {
                            let mut refusal = ErrorResponse::new(Some("refused".into()));
                            *refusal.status_mut() = StatusCode::from_u16(status).unwrap();
                            return Err(refusal);
                        }
                        Ok(resp)
                    };
                if let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await {
                    up.lock().unwrap().push(Instant::now());
                    let hang_up = hu.lock().unwrap().pop_front();
                    match hang_up {
                        Some(HangUp::Close1011) => {
                            let _ = ws
                                .close(Some(CloseFrame {
                                    code: 1011.into(),
                                    reason: "".into(),
                                }))
                                .await;
                        }
                        Some(HangUp::Eof) => drop(ws),
                        None => {
                            let _ = tx.send(Agent(ws));
                        }
                    }
                }
            });
        }
    });
    StandIn {
        addr,
        agents,
        headers,
        refuse,
        attempts,
        hang_up,
        upgraded,
    }
}

impl StandIn {
    pub(crate) fn url(&self) -> String {
        format!("ws://{}/agent", self.addr)
    }

    pub(crate) async fn agent(&mut self) -> Agent {
        tokio::time::timeout(Duration::from_secs(10), self.agents.recv())
            .await
            .expect("the agent connects")
            .expect("the stand-in runs")
    }

    fn header(&self, name: &str) -> Vec<String> {
        self.headers
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

pub(crate) fn start(session_id: &str) -> Frame {
    Frame::SessionStart(
        SessionStart::new(session_id, 1)
            .with_wire_version(WIRE_VERSION)
            .with_capabilities(Capabilities::new()),
    )
}

pub(crate) fn says(turn_id: u64, text: &str) -> Frame {
    Frame::UserMessage(UserMessage::new(turn_id, text))
}

impl Agent {
    pub(crate) async fn send(&mut self, prefix: [u8; 16], frame: &Frame) {
        let mut bytes = prefix.to_vec();
        bytes.extend(wire::encode(frame));
        self.0.send(Message::Binary(bytes.into())).await.unwrap();
    }

    pub(crate) async fn send_raw(&mut self, message: Message) {
        self.0.send(message).await.unwrap();
    }

    /// Sends `message` to an agent that may drop the connection while it is written.
    pub(crate) async fn send_lossy(&mut self, message: Message) {
        let _ = self.0.send(message).await;
    }

    /// The next frame the agent sends (5 s at most), with its prefix.
    pub(crate) async fn recv(&mut self) -> ([u8; 16], Frame) {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(5), self.0.next())
                .await
                .expect("the agent answers")
                .expect("the connection is open")
                .expect("a message");
            if let Message::Binary(bytes) = next {
                let prefix: [u8; 16] = bytes[..16].try_into().unwrap();
                return (prefix, wire::decode_strict(&bytes[16..]).unwrap());
            }
        }
    }

    /// The text of the next unit the agent speaks for any session (frames until its SpeechEnd).
    pub(crate) async fn spoken(&mut self) -> ([u8; 16], String) {
        let mut text = String::new();
        loop {
            match self.recv().await {
                (_, Frame::SpeechStart { .. }) => text.clear(),
                (_, Frame::SpeechChunk { text: t, .. }) => text.push_str(&t),
                (prefix, Frame::SpeechEnd { .. }) => return (prefix, text),
                _ => {}
            }
        }
    }

    /// Reads until the connection closes; the close code, if a close frame came.
    async fn until_closed(&mut self) -> Option<u16> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(5), self.0.next())
                .await
                .expect("the agent closes");
            match next {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(Message::Binary(bytes))) => {
                    panic!("a frame after the last End: {:?}", &bytes[16..])
                }
                Some(Ok(_)) => continue,
                None | Some(Err(_)) => return None,
            }
        }
    }

    /// Frames until `prefix`'s `End` (5 s at most for each); panics at an `End` for any other.
    pub(crate) async fn until_end_of(&mut self, prefix: [u8; 16]) {
        loop {
            if let (p, Frame::End) = self.recv().await {
                assert_eq!(p, prefix, "only that session ends");
                return;
            }
        }
    }

    pub(crate) async fn close(&mut self, code: u16) {
        let frame = CloseFrame {
            code: code.into(),
            reason: "".into(),
        };
        let _ = self.0.send(Message::Close(Some(frame))).await;
    }
}

/// Echoes, records the session ends, and blocks on "block" until released.
struct Echo {
    log: Arc<Log>,
    release: Arc<Notify>,
}

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        if message.text == "block" {
            self.release.notified().await;
        }
        if message.text == "panic" {
            panic!("a bug in the brain");
        }
        if let Some(n) = message.text.strip_prefix("flood ") {
            // Far more than a relay that stops reading can take: the socket's buffers fill. The
            // turn yields after each unit, so its writer keeps the relay's queue fed instead of
            // the session's own lane shedding what it cannot hold.
            let chunk = "x".repeat(64 * 1024);
            for _ in 0..n.parse::<usize>().unwrap() {
                turn.say(&chunk);
                tokio::task::yield_now().await;
            }
            return Ok(());
        }
        turn.say(&message.text);
        Ok(())
    }

    async fn on_session_end(&self, session: &Session, reason: EndReason) {
        self.log.push(format!("end {}", session.id()));
        self.log.end_because(&reason);
    }
}

pub(crate) fn echo(log: &Arc<Log>, release: &Arc<Notify>) -> impl MakeBrain {
    let (log, release) = (log.clone(), release.clone());
    move || Echo {
        log: log.clone(),
        release: release.clone(),
    }
}

const A: [u8; 16] = [0xa; 16];
const B: [u8; 16] = [0xb; 16];
const C: [u8; 16] = [0xc; 16];

/// Opens two sessions on `link`: A, whose turn blocks until released, and B, idle once it has
/// answered. Both run: the relay's frames are routed in order, so B's answer comes after A began.
async fn stuck_and_idle(link: &mut Agent) {
    link.send(A, &start("stuck")).await;
    link.send(A, &says(2, "block")).await;
    link.send(B, &start("idle")).await;
    link.send(B, &says(2, "ready")).await;
    assert_eq!(link.spoken().await, (B, "ready".to_owned()));
}

/// Serves `factory` through `relay` in the background; the returned sender shuts it down.
pub(crate) fn serve(
    relay: Relay,
    factory: impl MakeBrain,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<voqalize::host::DrainReport, RelayError>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        relay
            .serve(factory, async {
                let _ = stopped.await;
            })
            .await
    });
    (stop, task)
}

#[tokio::test]
async fn sessions_ride_one_connection_by_prefix_and_unknown_prefixes_are_dropped() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("sk_test")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    assert_eq!(relay.header("x-agent-version"), ["v9"]);
    assert_eq!(relay.header("authorization"), ["Bearer sk_test"]);

    // A frame for a prefix with no session is dropped; a SessionStart opens one.
    link.send(B, &says(2, "nobody here")).await;
    link.send(A, &start("call-a")).await;
    link.send(A, &says(2, "hello")).await;
    let (prefix, text) = link.spoken().await;
    assert_eq!(
        (prefix, text.as_str()),
        (A, "hello"),
        "the prefix is echoed byte for byte"
    );

    // A second session beside it.
    link.send(B, &start("call-b")).await;
    link.send(B, &says(2, "second")).await;
    assert_eq!(link.spoken().await, (B, "second".to_owned()));
}

/// `serve` runs the connection in a task of its own; dropping `serve`'s future still ends it, and
/// its calls, as it did when the connection ran inside that future.
#[tokio::test]
async fn dropping_serve_closes_the_relay_connection() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("sk_test")
        .build()
        .unwrap();
    let (_stop, task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("call-a")).await;
    link.send(A, &says(2, "hello")).await;
    assert_eq!(link.spoken().await, (A, "hello".to_owned()));
    task.abort();
    tokio::time::timeout(Duration::from_secs(10), link.until_closed())
        .await
        .expect("the connection closes once serve is dropped");
}

#[tokio::test]
async fn an_upgrade_refused_with_401_or_403_fails_at_once_and_500_is_retried() {
    for status in [401u16, 403] {
        let relay = stand_in().await;
        relay.refuse.lock().unwrap().push_back(status);
        let agent = Relay::builder(relay.url(), "v9")
            .api_key("bad")
            .build()
            .unwrap();
        let result = agent
            .serve(
                || Echo {
                    log: Arc::default(),
                    release: Arc::default(),
                },
                std::future::pending(),
            )
            .await;
        assert!(
            matches!(result, Err(RelayError::AuthRejected { status: s }) if s == status),
            "{result:?}"
        );
        assert_eq!(
            relay.attempts.load(Ordering::SeqCst),
            1,
            "no retry after {status}"
        );
    }

    // 500 twice, then accepted; an authorization provider is called on every attempt.
    let mut relay = stand_in().await;
    relay.refuse.lock().unwrap().extend([500, 500]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let agent = Relay::builder(relay.url(), "v9")
        .authorization_provider(move || {
            format!("Bearer token-{}", c.fetch_add(1, Ordering::SeqCst))
        })
        .build()
        .unwrap();
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let _link = relay.agent().await;
    assert_eq!(relay.attempts.load(Ordering::SeqCst), 3);
    assert_eq!(
        relay.header("authorization"),
        ["Bearer token-0", "Bearer token-1", "Bearer token-2"]
    );
}

#[tokio::test]
async fn a_relay_close_reconnects_and_ends_every_session_without_replay() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("call-a")).await;
    link.send(A, &says(2, "hi")).await;
    assert_eq!(link.spoken().await.1, "hi");
    link.close(1011).await;
    let mut again = relay.agent().await;
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the session ended with the connection"
    );
    assert_eq!(
        log.end_reasons(),
        [EndReason::TransportLost(TransportLoss::RelayLost)]
    );
    // The old prefix has no session on the new connection: its frames are dropped...
    again.send(A, &says(3, "still there?")).await;
    // ...and a new SessionStart on it makes a fresh brain, whose speech ids start at 1.
    again.send(A, &start("call-a2")).await;
    again.send(A, &says(2, "fresh")).await;
    loop {
        match again.recv().await {
            (_, Frame::SpeechStart { speech_id, .. }) => {
                assert_eq!(speech_id, 1);
                break;
            }
            _ => continue,
        }
    }
    // Close 4000 is permanent.
    again.close(4000).await;
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(RelayError::NoAgent)), "{result:?}");
}

#[tokio::test]
async fn a_session_that_ends_frees_its_prefix_for_a_fresh_brain() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("first")).await;
    link.send(A, &says(2, "one")).await;
    assert_eq!(link.spoken().await.1, "one");
    link.send(A, &Frame::End).await;
    assert!(log.until(|l| l.ended() == 1).await);
    link.send(A, &start("second")).await;
    link.send(A, &says(2, "two")).await;
    loop {
        if let (_, Frame::SpeechStart { speech_id, .. }) = link.recv().await {
            assert_eq!(speech_id, 1, "a fresh brain and session");
            break;
        }
    }
}

#[tokio::test]
async fn bad_frames_are_skipped_and_one_blocked_or_panicking_session_does_not_stop_another() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send_raw(Message::Text("hello".into())).await;
    link.send_raw(Message::Binary(vec![1, 2, 3].into())).await;
    link.send_raw(Message::Binary(
        [[0xcu8; 16].to_vec(), vec![0xff, 0xff]].concat().into(),
    ))
    .await;
    link.send(A, &start("blocked")).await;
    link.send(A, &says(2, "block")).await;
    link.send(B, &start("panics")).await;
    link.send(B, &says(2, "panic")).await;
    let c = [0xc; 16];
    link.send(c, &start("fine")).await;
    link.send(c, &says(2, "answered")).await;
    let (prefix, text) = link.spoken().await;
    assert_eq!((prefix, text.as_str()), (c, "answered"));
    release.notify_waiters();
    assert_eq!(link.spoken().await, (A, "block".to_owned()));
}

#[tokio::test]
async fn a_failing_factory_fails_its_own_session_only() {
    let mut relay = stand_in().await;
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let factory = fallible(move || {
        if m.fetch_add(1, Ordering::SeqCst) == 0 {
            Err("no database")
        } else {
            Ok(Echo {
                log: Arc::default(),
                release: Arc::default(),
            })
        }
    });
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, factory);
    let mut link = relay.agent().await;
    link.send(A, &start("unlucky")).await;
    let mut saw_fatal = false;
    loop {
        match link.recv().await {
            (p, Frame::Error(e)) if p == A => saw_fatal = e.fatal,
            (p, Frame::End) if p == A => break,
            _ => {}
        }
    }
    assert!(saw_fatal);
    link.send(B, &start("lucky")).await;
    link.send(B, &says(2, "works")).await;
    assert_eq!(link.spoken().await, (B, "works".to_owned()));
}

#[tokio::test]
async fn the_builder_wants_exactly_one_way_to_authorize() {
    assert!(matches!(
        Relay::builder("ws://127.0.0.1:1/agent", "v9").build(),
        Err(RelayError::Config(_))
    ));
    assert!(matches!(
        Relay::builder("ws://127.0.0.1:1/agent", "v9")
            .api_key("k")
            .authorization_provider(|| "Bearer x".into())
            .build(),
        Err(RelayError::Config(_))
    ));
    assert!(matches!(
        Relay::builder("http://127.0.0.1:1/agent", "v9")
            .api_key("k")
            .build(),
        Err(RelayError::Config(_))
    ));
    assert!(matches!(
        Relay::builder("ws://127.0.0.1:1/agent", "v9\n")
            .api_key("k")
            .build(),
        Err(RelayError::Config(_))
    ));
}

/// `drain_timeout` beside a `Shutdown` (whose own timeout rules) is an error from `build()` naming
/// it (it was silently unused).
#[test]
fn a_drain_timeout_beside_a_shutdown_is_an_error_from_build_naming_it() {
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(1));
    let built = Relay::builder("ws://127.0.0.1:1/agent", "v9")
        .api_key("k")
        .drain_timeout(Duration::from_secs(5))
        .shutdown(&shutdown)
        .build();
    match built {
        Err(RelayError::Config(why)) => assert!(why.starts_with("drain_timeout: "), "{why}"),
        other => panic!("expected a Config error naming drain_timeout: {other:?}"),
    }
}

#[tokio::test]
async fn shutdown_lets_running_calls_finish_then_closes() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .drain_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (stop, task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("running")).await;
    link.send(A, &says(2, "hi")).await;
    assert_eq!(link.spoken().await.1, "hi");
    stop.send(()).unwrap();
    // New sessions are no longer taken; the running one ends when Voqalize ends it.
    link.send(B, &start("late")).await;
    link.send(A, &Frame::End).await;
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(log.events(), ["end call-a".replace("call-a", "running")]);
    // It finished within the drain: Voqalize ended it, not the shutdown.
    assert_eq!(log.end_reasons(), [EndReason::Ended]);
}

#[tokio::test]
async fn two_agents_on_one_relay_each_carry_the_sessions_routed_to_them() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop1, _task1) = serve(agent.clone(), echo(&log, &release));
    let mut first = relay.agent().await;
    let (_stop2, _task2) = serve(agent, echo(&log, &release));
    let mut second = relay.agent().await;
    first.send(A, &start("on-first")).await;
    first.send(A, &says(2, "from the first")).await;
    second.send(B, &start("on-second")).await;
    second.send(B, &says(2, "from the second")).await;
    assert_eq!(first.spoken().await, (A, "from the first".to_owned()));
    assert_eq!(second.spoken().await, (B, "from the second".to_owned()));
}

#[tokio::test]
async fn relay_sessions_count_against_max_sessions() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .max_sessions(1)
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("first")).await;
    link.send(B, &start("refused")).await;
    link.send(B, &says(2, "not served")).await;
    link.send(A, &says(2, "served")).await;
    assert_eq!(link.spoken().await, (A, "served".to_owned()));
    // Once the first call ends, its place is free for a new one.
    link.send(A, &Frame::End).await;
    assert!(log.until(|l| l.ended() == 1).await);
    // The place is given back when the first call's task returns, just after `on_session_end`:
    // a start refused in between is answered with its End, so try again until one is taken.
    for attempt in 0..50u64 {
        link.send(B, &start("now")).await;
        link.send(B, &says(2 + attempt, "now served")).await;
        if let Ok(spoken) = tokio::time::timeout(Duration::from_millis(200), link.spoken()).await {
            assert_eq!(spoken, (B, "now served".to_owned()));
            return;
        }
    }
    panic!("the freed place was never given to a new session");
}

#[tokio::test]
async fn a_silent_caller_on_the_relay_outlives_the_session_ping_deadline() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    // On the relay the connection owns liveness (the builder's one `keepalive` is the
    // connection's; a call has no deadline of its own to set): a quiet call stays up.
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("quiet")).await;
    link.send(A, &says(2, "hello")).await;
    assert_eq!(link.spoken().await, (A, "hello".to_owned()));
    // Nothing to await: the point is that nothing happens for several session deadlines.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(log.ended(), 0, "the session is still up");
    link.send(A, &says(3, "still here")).await;
    assert_eq!(link.spoken().await, (A, "still here".to_owned()));
}

#[tokio::test]
async fn a_relay_that_goes_silent_is_redialled_and_its_sessions_end() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .keepalive(Duration::from_millis(100), Duration::from_millis(100))
        .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(10))
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut hung = relay.agent().await;
    hung.send(A, &start("on-a-hung-relay")).await;
    hung.send(A, &says(2, "hi")).await;
    assert_eq!(hung.spoken().await.1, "hi");
    // The relay hangs: it neither reads nor sends (not even a Pong).
    let mut half_open = relay.agent().await;
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the session on the hung relay ended"
    );
    // The next relay sends half a frame header and a few bytes, then nothing.
    half_open
        .0
        .get_mut()
        .write_all(&[0x82, 0x7e, 0x10, 0x00, 1, 2, 3])
        .await
        .unwrap();
    let mut live = relay.agent().await;
    // The third connection serves again.
    live.send(B, &start("after")).await;
    live.send(B, &says(2, "served again")).await;
    assert_eq!(live.spoken().await, (B, "served again".to_owned()));
    drop((hung, half_open));
}

#[tokio::test]
async fn a_relay_that_accepts_then_closes_is_backed_off_like_a_failed_dial() {
    let mut relay = stand_in().await;
    relay.hang_up.lock().unwrap().extend([
        HangUp::Close1011,
        HangUp::Eof,
        HangUp::Close1011,
        HangUp::Eof,
    ]);
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let first = Duration::from_millis(20);
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .reconnect_backoff(first, Duration::from_secs(10))
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    // The fifth connection is kept: the agent serves on it.
    let mut link = relay.agent().await;
    link.send(A, &start("at-last")).await;
    link.send(A, &says(2, "hello")).await;
    assert_eq!(link.spoken().await.1, "hello");
    let upgraded = relay.upgraded.lock().unwrap().clone();
    assert_eq!(upgraded.len(), 5);
    // Each short-lived connection doubled the wait: 20 + 40 + 80 + 160 ms, less the jitter.
    let waited = upgraded[4] - upgraded[0];
    let backoff: Duration = (0..4).map(|i| first * (1 << i)).sum();
    assert!(
        waited >= backoff.mul_f64(0.9),
        "redialled after {waited:?}, sooner than the backoff of {backoff:?}"
    );
}

#[tokio::test]
async fn sessions_still_running_at_the_drain_deadline_end_with_an_end_before_the_close() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .drain_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let (stop, task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    stuck_and_idle(&mut link).await;
    stop.send(()).unwrap();
    // The brain ends both calls: the relay hears it from each, then the socket closes.
    let mut ended = Vec::new();
    while ended.len() < 2 {
        if let (p, Frame::End) = link.recv().await {
            ended.push(p);
        }
    }
    ended.sort();
    assert_eq!(ended, [A, B]);
    assert_eq!(link.until_closed().await, Some(1000));
    assert!(task.await.unwrap().is_ok());
    // Each brain was told why: the server shut down.
    assert!(log.until(|l| l.ended() == 2).await);
    assert_eq!(
        log.end_reasons(),
        [EndReason::Shutdown, EndReason::Shutdown]
    );
}

#[tokio::test]
async fn a_relay_that_stops_reading_is_redialled_and_serves_again() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        // A long Ping interval: the relay is not silent for the test's life, it only takes no
        // bytes; the write deadline is what ends the connection.
        .keepalive(Duration::from_secs(30), Duration::from_millis(200))
        .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(10))
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut deaf = relay.agent().await;
    socket2::SockRef::from(deaf.0.get_ref())
        .set_recv_buffer_size(4096)
        .unwrap();
    deaf.send(A, &start("floods")).await;
    deaf.send(A, &says(2, "flood 300")).await;
    // The relay reads nothing more: the agent's writes stall, and it redials.
    let mut live = relay.agent().await;
    assert!(log.until(|l| l.ended() == 1).await);
    live.send(B, &start("after")).await;
    live.send(B, &says(2, "served again")).await;
    assert_eq!(live.spoken().await, (B, "served again".to_owned()));
    drop(deaf);
}

#[tokio::test]
async fn a_frame_bigger_than_a_sessions_backlog_ends_that_session_with_its_end() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .max_write_backlog_bytes(64 * 1024)
        .max_chunk_bytes(128 * 1024)
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("says-too-much")).await;
    link.send(B, &start("bystander")).await;
    // Its echo is one 100 KB SpeechChunk: more than the session may have waiting, ever.
    link.send(A, &says(2, &"x".repeat(100 * 1000))).await;
    link.until_end_of(A).await;
    assert!(log.until(|l| l.ended() == 1).await);
    link.send(B, &says(2, "still served")).await;
    assert_eq!(link.spoken().await, (B, "still served".to_owned()));
    assert_eq!(relay.attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_session_start_with_a_bad_init_is_refused_with_an_error_and_end() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    // `init` as JSON text that is not an object: built by hand, as the codec only encodes objects.
    let mut bad = A.to_vec();
    bad.extend(prost::Message::encode_to_vec(&voqalize::proto::Envelope {
        body: Some(voqalize::proto::envelope::Body::SessionStart(
            voqalize::proto::SessionStart {
                session_id: "bad-init".into(),
                turn_id: 1,
                init: "[1, 2]".into(),
                wire_version: WIRE_VERSION,
                capabilities: Vec::new(),
            },
        )),
    }));
    link.send_raw(Message::Binary(bad.into())).await;
    let mut refusal = None;
    loop {
        match link.recv().await {
            (p, Frame::Error(e)) if p == A => refusal = Some(e),
            (p, Frame::End) if p == A => break,
            _ => {}
        }
    }
    let refusal = refusal.expect("an Error before the End");
    assert!(
        refusal.fatal && refusal.code == voqalize::wire::ErrorCode::Protocol,
        "{refusal:?}"
    );
    link.send(B, &start("fine")).await;
    link.send(B, &says(2, "still served")).await;
    assert_eq!(link.spoken().await, (B, "still served".to_owned()));
}

// ---- Hostile review: a SessionStart the brain will not serve is answered, never dropped ----

/// The next frame for `prefix` within `within`, skipping other sessions' frames.
async fn next_for(link: &mut Agent, prefix: [u8; 16], within: Duration) -> Option<Frame> {
    tokio::time::timeout(within, async {
        loop {
            let (p, frame) = link.recv().await;
            if p == prefix {
                return frame;
            }
        }
    })
    .await
    .ok()
}

// At max_sessions the direct leg answers the upgrade with HTTP 503; on the relay the SessionStart
// is dropped and the relay is told nothing: it believes the call is up, and the caller hears
// silence until it hangs up. The refusal must reach the relay (an `End`, with an `Error` before
// it if you like).
#[tokio::test]
async fn a_session_refused_at_max_sessions_is_answered_with_its_end() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .max_sessions(1)
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("first")).await;
    link.send(A, &says(2, "served")).await;
    assert_eq!(link.spoken().await, (A, "served".to_owned()));
    link.send(B, &start("refused")).await;
    let mut answer = None;
    while let Some(frame) = next_for(&mut link, B, Duration::from_secs(1)).await {
        let end = frame == Frame::End;
        answer = Some(frame);
        if end {
            break;
        }
    }
    assert_eq!(
        answer,
        Some(Frame::End),
        "the relay is told the refused session ended"
    );
}

// While the brain drains for shutdown, a new SessionStart is dropped without a word to the relay,
// as at max_sessions.
#[tokio::test]
async fn a_session_start_during_the_drain_is_answered_with_its_end() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .drain_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("running")).await;
    link.send(A, &says(2, "hi")).await;
    assert_eq!(link.spoken().await.1, "hi");
    stop.send(()).unwrap();
    link.send(B, &start("late")).await;
    let answer = next_for(&mut link, B, Duration::from_secs(1)).await;
    assert_eq!(
        answer,
        Some(Frame::End),
        "the relay is told the late session ended"
    );
    link.send(A, &Frame::End).await;
}

// A relay carries at most `max_sessions` calls: the next SessionStart is
// answered with its End at once (a relay could otherwise open calls without end: they stay up,
// since the relay owns their liveness), and the calls already up go on.
#[tokio::test]
async fn a_relay_connection_carries_at_most_max_sessions() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .max_sessions(1)
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("first")).await;
    link.send(A, &says(2, "served")).await;
    assert_eq!(link.spoken().await, (A, "served".to_owned()));
    link.send(B, &start("one too many")).await;
    assert_eq!(
        next_for(&mut link, B, Duration::from_secs(5)).await,
        Some(Frame::End)
    );
    link.send(A, &says(3, "still served")).await;
    assert_eq!(link.spoken().await, (A, "still served".to_owned()));
}

/// A relay whose TLS fails on every attempt (here: `wss://` to a server that speaks plain
/// WebSocket) will not heal by waiting: after `give_up_after`, `serve` returns
/// `RelayError::Unreachable` saying why, instead of redialling without end. A relay that is not
/// up yet (connection refused) is another matter: it is retried, as the 500s above.
#[tokio::test]
async fn a_relay_whose_tls_always_fails_is_given_up_with_a_typed_error() {
    let relay = stand_in().await;
    let url = relay.url().replacen("ws://", "wss://", 1);
    let agent = Relay::builder(url, "v9")
        .api_key("k")
        .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(20))
        .give_up_after(Duration::from_millis(100))
        .build()
        .unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        agent.serve(
            || Echo {
                log: Arc::default(),
                release: Arc::default(),
            },
            std::future::pending(),
        ),
    )
    .await
    .expect("serve gives up");
    let Err(RelayError::Unreachable { why, .. }) = result else {
        panic!("{result:?}");
    };
    assert!(why.contains("TLS"), "{why}");
    assert!(
        relay.attempts.load(Ordering::SeqCst) == 0,
        "no upgrade ever reached the relay"
    );
}

// Readiness follows the relay connection: not ready before it is up, ready while it carries
// calls, not ready once it is gone.
#[tokio::test]
async fn readiness_follows_the_relay_connection() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(5));
    let health = voqalize::host::Health::new(&shutdown).relay(&agent);
    assert!(!health.ready(), "not connected yet");
    let (_stop, task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("probed")).await;
    link.send(A, &says(2, "hi")).await;
    assert_eq!(link.spoken().await.1, "hi");
    assert!(health.ready(), "connected and carrying a call");
    link.close(4000).await;
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(RelayError::NoAgent)), "{result:?}");
    assert!(!health.ready(), "the relay is gone");
}

// The relay follows the same `Shutdown` as the direct leg when its host options carry it: its
// calls count in the shutdown (readiness, the report), the drain refuses new sessions with their
// End, and a second trigger (a second SIGTERM) ends the running ones at once, however long the
// drain would be.
#[tokio::test]
async fn a_relay_follows_the_hosts_shutdown_and_a_second_trigger_ends_its_calls() {
    // The relay leg's calls in the metrics (this test's thread records them).
    let metrics = crate::support::MetricLog::default();
    let _recording = metrics::set_default_local_recorder(&metrics);
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(600));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .shutdown(&shutdown)
        .build()
        .unwrap();
    let served = {
        let shutdown = shutdown.clone();
        let factory = echo(&log, &release);
        tokio::spawn(async move { agent.serve(factory, shutdown.triggered()).await })
    };
    let mut link = relay.agent().await;
    stuck_and_idle(&mut link).await;
    assert_eq!(
        shutdown.open(),
        2,
        "the relay's calls count in the shutdown"
    );
    shutdown.trigger();
    // Draining: a new session is answered with its End, the running ones go on.
    link.send(C, &start("late")).await;
    assert_eq!(
        next_for(&mut link, C, Duration::from_secs(5)).await,
        Some(Frame::End)
    );
    link.send(B, &Frame::End).await;
    assert!(
        log.until(|l| l.ended() == 1).await,
        "B ends as Voqalize asked"
    );
    assert_eq!(shutdown.open(), 1);
    // The second trigger: the stuck call ends now, not in ten minutes.
    shutdown.trigger();
    let mut ended = false;
    while !ended {
        ended = matches!(link.recv().await, (p, Frame::End) if p == A);
    }
    assert_eq!(link.until_closed().await, Some(1000));
    let result = tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .unwrap()
        .unwrap();
    let report = tokio::time::timeout(Duration::from_secs(5), shutdown.drained())
        .await
        .unwrap();
    assert_eq!((report.drained, report.ended), (1, 1));
    assert_eq!(
        result.ok(),
        Some(report),
        "serve returns what the drain did"
    );
    assert!(log.until(|l| l.ended() == 2).await);
    assert_eq!(log.end_reasons(), [EndReason::Ended, EndReason::Shutdown]);
    for (name, want) in [
        ("voqalize_calls_started_total{leg=relay}", 2.0),
        ("voqalize_calls_open{leg=relay}", 0.0),
        ("voqalize_calls_ended_total{leg=relay,reason=ended}", 1.0),
        ("voqalize_calls_ended_total{leg=relay,reason=shutdown}", 1.0),
        ("voqalize_calls_refused_total{reason=draining}", 1.0),
    ] {
        assert_eq!(metrics.value(name), want, "{name}: {:?}", metrics.names());
    }
}

#[tokio::test]
async fn relay_calls_are_recorded_each_to_its_own_recording() {
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let recorder = voqalize::record::Recorder::in_memory();
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .record(recorder.clone())
        .build()
        .unwrap();
    let (stop, task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(A, &start("call-a")).await;
    link.send(B, &start("call-b")).await;
    link.send(A, &says(2, "from a")).await;
    assert_eq!(link.spoken().await, (A, "from a".to_owned()));
    link.send(B, &says(2, "from b")).await;
    assert_eq!(link.spoken().await, (B, "from b".to_owned()));
    link.send(A, &Frame::End).await;
    link.send(B, &Frame::End).await;
    assert!(log.until(|l| l.ended() == 2).await);
    // A session's recording is handed over as its task returns, just after `on_session_end`;
    // serving returns once every session's task has.
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    let mut recordings = recorder.take().unwrap();
    recordings.sort_by(|a, b| a.session_id().cmp(&b.session_id()));
    let ids: Vec<Option<&str>> = recordings.iter().map(|r| r.session_id()).collect();
    assert_eq!(ids, [Some("call-a"), Some("call-b")]);
    for (recording, said) in recordings.iter().zip(["from a", "from b"]) {
        let spoken: String = recording
            .frames
            .iter()
            .filter_map(|f| match &f.frame {
                Frame::SpeechChunk { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(spoken, said, "each recording holds its own call only");
    }
}

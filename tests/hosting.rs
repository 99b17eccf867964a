//! Hosting a brain on the direct leg (docs/protocol.md §2.1, §4.13, §5, and the
//! docs/protocol.md §7 D5, D10, D15 and D17): real
//! WebSockets on 127.0.0.1, real RS256 tokens from `tests/fixtures/`, the public `Channel` trait.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use voqalize::host::AcceptError;
use voqalize::host::{Channel, ChannelError, ChannelReceiver, ChannelSender, Incoming};
use voqalize::prelude::*;
use voqalize::session::TransportLoss;
use voqalize::wire::{Frame, Response, RtviType, SessionStart, WIRE_VERSION};
use voqalize_testing::{DriverError, Start, TokenSigner, Voqalize};

use crate::support::logs;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const SIGNER_PUB: &str = include_str!("fixtures/test_signer_pub.pem");
const SIGNER_PRIV: &str = include_str!("fixtures/test_signer_priv.pem");
const OTHER_PRIV: &str = include_str!("fixtures/other_priv.pem");

/// Cap on waits for things that must happen (a hang fails the test instead of blocking it).
const HANG: Duration = Duration::from_secs(10);

/// A session id no other test in this process uses.
fn unique_id(tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    format!(
        "hosting-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn signer() -> TokenSigner {
    TokenSigner::from_pem(SIGNER_PRIV).expect("the fixture signing key parses")
}

fn trusted() -> HostOptions {
    HostOptions::builder()
        .public_keys([SIGNER_PUB])
        .build()
        .expect("the fixture public key parses")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Claims like Voqalize mints, for `session_id`, with these tenant/agent ids and lifetime.
fn claims(session_id: &str, tenant: &str, agent: &str, iat: u64, exp: u64) -> Map<String, Value> {
    let claims = json!({
        "iss": "pygato",
        "aud": "brain",
        "sub": session_id,
        "kind": "pygato",
        "agent_id": agent,
        "tenant_id": tenant,
        "iat": iat,
        "exp": exp,
    });
    claims.as_object().cloned().unwrap_or_default()
}

/// Greets, then says back what it heard.
struct Echo;

impl Brain for Echo {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }
}

/// Socket drivers with a short quiet window (127.0.0.1 has little jitter).
async fn dial(url: &str, session_id: &str, token: Option<&str>) -> Result<Voqalize, DriverError> {
    let mut v = Voqalize::connect(url, session_id, token).await?;
    v.quiet = Duration::from_millis(60);
    Ok(v)
}

async fn bind() -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// `host::serve` on 127.0.0.1:0 in the background; returns its address.
async fn serve_tungstenite(
    factory: impl MakeBrain,
    options: HostOptions,
) -> std::io::Result<SocketAddr> {
    let (listener, addr) = bind().await?;
    tokio::spawn(voqalize::host::serve(listener, factory, options));
    Ok(addr)
}

/// `Echo` under `options` on both adapters, each on 127.0.0.1:0 in the background: the
/// addresses of `host::serve` and of an axum app with `brain_route` at `/voice`.
async fn serve_echo_on_both(options: HostOptions) -> std::io::Result<[SocketAddr; 2]> {
    let tungstenite = serve_tungstenite(|| Echo, options.clone()).await?;
    let (listener, axum_addr) = bind().await?;
    let app = axum::Router::new().route(
        "/voice",
        voqalize::host::axum::brain_route(|| Echo, options),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok([tungstenite, axum_addr])
}

/// Accepts exactly one connection with `host::accept` and reports when (and how) it returned.
async fn serve_once(
    factory: impl MakeBrain,
    options: HostOptions,
) -> std::io::Result<(SocketAddr, oneshot::Receiver<Result<(), AcceptError>>)> {
    let (listener, addr) = bind().await?;
    let (done_tx, done_rx) = oneshot::channel();
    tokio::spawn(async move {
        if let Ok((stream, _)) = listener.accept().await {
            let result = voqalize::host::accept(
                stream,
                Arc::new(factory),
                &options,
                &voqalize::host::Admission::new(&options),
            )
            .await;
            let _ = done_tx.send(result);
        }
    });
    Ok((addr, done_rx))
}

/// Dials `ws://{addr}{target}` with plain tokio-tungstenite (no `session_id` added) and returns the
/// close code of the first close frame the server sends.
async fn raw_close_code(
    addr: SocketAddr,
    target: &str,
    token: Option<&str>,
) -> Result<Option<u16>, Box<dyn std::error::Error>> {
    let mut request = format!("ws://{addr}{target}").into_client_request()?;
    if let Some(token) = token {
        request.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {token}"))?,
        );
    }
    let stream = TcpStream::connect(addr).await?;
    let (mut ws, _) = tokio_tungstenite::client_async(request, stream).await?;
    let code = tokio::time::timeout(HANG, async {
        while let Some(message) = ws.next().await {
            match message? {
                Message::Close(frame) => return Ok(frame.map(|f| u16::from(f.code))),
                _ => continue,
            }
        }
        Ok::<_, tokio_tungstenite::tungstenite::Error>(None)
    })
    .await??;
    Ok(code)
}

fn session_start(session_id: &str) -> Frame {
    Frame::SessionStart(
        SessionStart::new(session_id.to_owned(), 1)
            .with_wire_version(WIRE_VERSION)
            .with_capabilities(Start::default().capabilities),
    )
}

/// A full echo call over a socket: greeting, one answered turn, `End`, close 1000.
async fn echo_call(url: &str, session_id: &str, token: Option<&str>) -> TestResult {
    let mut v = dial(url, session_id, token).await?;
    let greeting = v.start().await?;
    assert_eq!(greeting.text(), "hello");
    let turn = v.user_says("hi").await?;
    assert!(turn.completed(), "{turn:?}");
    assert_eq!(turn.text(), "hi");
    assert_eq!(v.end().await?, Some(1000));
    v.assert_clean();
    Ok(())
}

// 1. axum: brain_route, upgrade-time refusals (docs/protocol.md §2.1, §5.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_brain_route_echoes_and_refuses_bad_upgrades() -> TestResult {
    let app = axum::Router::new().route(
        "/voice",
        voqalize::host::axum::brain_route(
            || Echo,
            HostOptions::builder().public_keys([SIGNER_PUB]).build()?,
        ),
    );
    let (listener, addr) = bind().await?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("ws://{addr}/voice");

    let sid = unique_id("axum-ok");
    echo_call(&url, &sid, Some(&signer().mint(&sid))).await?;

    // A token signed by a key the brain does not trust: the upgrade completes, then 4000.
    let sid = unique_id("axum-wrong-key");
    let wrong = TokenSigner::from_pem(OTHER_PRIV)?.mint(&sid);
    let mut v = dial(&url, &sid, Some(&wrong)).await?;
    assert_eq!(v.wait_closed().await?, Some(4000));
    assert!(v.received().is_empty(), "{:?}", v.received());

    // An expired token (zero leeway): 4000.
    let sid = unique_id("axum-expired");
    let expired = signer()
        .sign(&claims(&sid, "t", "a", now() - 120, now() - 60))
        .expect("signing");
    let mut v = dial(&url, &sid, Some(&expired)).await?;
    assert_eq!(v.wait_closed().await?, Some(4000));

    // No session_id on the upgrade (valid token otherwise): 1008; an empty one too.
    let sid = unique_id("axum-no-sid");
    let token = signer().mint(&sid);
    assert_eq!(
        raw_close_code(addr, "/voice", Some(&token)).await?,
        Some(1008)
    );
    assert_eq!(
        raw_close_code(addr, "/voice?a=1&session_id=", Some(&token)).await?,
        Some(1008)
    );
    Ok(())
}

/// A health check's or a load balancer's TCP probe (connect, close) and a plain HTTP request are
/// no calls: nothing is lost, any peer can repeat them, so no warning is logged; the next call is
/// served as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_probes_and_plain_http_are_not_warned_about() -> TestResult {
    logs();
    let addr = serve_tungstenite(|| Echo, trusted()).await?;
    // The probes' own addresses: the capture is shared with every test of this binary, and a
    // hostile peer of another test is warned about, as it should be.
    let mut peers = Vec::new();
    for _ in 0..20 {
        let probe = TcpStream::connect(addr).await?;
        peers.push(probe.local_addr()?);
    }
    let mut http = TcpStream::connect(addr).await?;
    peers.push(http.local_addr()?);
    tokio::io::AsyncWriteExt::write_all(&mut http, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    drop(http);
    let url = format!("ws://{addr}/voice");
    let sid = unique_id("tung-probed");
    echo_call(&url, &sid, Some(&signer().mint(&sid))).await?;
    let warned: Vec<String> = logs()
        .lines_with("connection from 127.0.0.1")
        .into_iter()
        .filter(|line| {
            peers.iter().any(|peer| {
                line.contains(&format!("connection from {peer}:"))
                    || line.contains(&format!("connection from {peer} "))
            })
        })
        .collect();
    assert!(warned.is_empty(), "{warned:?}");
    Ok(())
}

// 2. tokio-tungstenite: serve with a path and extra query; End closes 1000 without waiting (docs/protocol.md §7 D10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tungstenite_serve_echoes_refuses_and_closes_on_end() -> TestResult {
    let addr = serve_tungstenite(|| Echo, trusted()).await?;
    let url = format!("ws://{addr}/voice?a=1");

    let sid = unique_id("tung-ok");
    echo_call(&url, &sid, Some(&signer().mint(&sid))).await?;

    // A token whose sub names another session: 4000.
    let sid = unique_id("tung-bad");
    let mut v = dial(&url, &sid, Some(&signer().mint("someone-else"))).await?;
    assert_eq!(v.wait_closed().await?, Some(4000));
    // No token at all: 4000.
    let mut v = dial(&url, &unique_id("tung-none"), None).await?;
    assert_eq!(v.wait_closed().await?, Some(4000));

    // docs/protocol.md §7 D10: after End, run_session returns (and closes 1000) while the peer reads nothing and
    // closes nothing. The driver sends End and does not pump until `accept` has returned.
    let ends = Arc::new(AtomicUsize::new(0));
    let (addr, returned) = serve_once(CountingEcho::factory(&ends), trusted()).await?;
    let sid = unique_id("tung-end");
    let mut v = dial(
        &format!("ws://{addr}/voice?a=1"),
        &sid,
        Some(&signer().mint(&sid)),
    )
    .await?;
    v.start().await?;
    assert_eq!(v.user_says("bye").await?.text(), "bye");
    v.send(Frame::End).await?;
    let result = tokio::time::timeout(HANG, returned)
        .await
        .map_err(|_| "run_session still blocked after End, waiting for the peer")??;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(ends.load(Ordering::SeqCst), 1);
    assert_eq!(v.wait_closed().await?, Some(1000));
    v.assert_clean();
    Ok(())
}

/// Echo that counts `on_session_end` calls.
struct CountingEcho {
    ends: Arc<AtomicUsize>,
}

impl CountingEcho {
    fn factory(ends: &Arc<AtomicUsize>) -> impl MakeBrain {
        let ends = ends.clone();
        move || CountingEcho { ends: ends.clone() }
    }
}

impl Brain for CountingEcho {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, _reason: EndReason) {
        self.ends.fetch_add(1, Ordering::SeqCst);
    }
}

// 3. A factory that panics fails that connection only (docs/protocol.md §7 D15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factory_panic_fails_only_that_connection() -> TestResult {
    let made = Arc::new(AtomicUsize::new(0));
    let factory = {
        let made = made.clone();
        move || {
            if made.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the factory exploded");
            }
            Echo
        }
    };
    let addr = serve_tungstenite(factory, trusted()).await?;
    let url = format!("ws://{addr}/voice");

    let sid = unique_id("factory-1");
    let mut v = dial(&url, &sid, Some(&signer().mint(&sid))).await?;
    v.send(session_start(&sid)).await?;
    let timeout = v.timeout;
    assert!(
        v.wait_for(timeout, Voqalize::brain_ended).await?,
        "no End after a factory panic"
    );
    match v.received() {
        [Frame::Error(e), Frame::End] => {
            assert_eq!(e.code, ErrorCode::Internal, "{e:?}");
            assert!(e.fatal, "{e:?}");
        }
        other => panic!("expected Error{{INTERNAL, fatal}} then End, got {other:?}"),
    }
    assert_eq!(v.end().await?, Some(1000));

    // The server survived: the next connection gets a working brain.
    let sid = unique_id("factory-2");
    echo_call(&url, &sid, Some(&signer().mint(&sid))).await?;
    assert_eq!(made.load(Ordering::SeqCst), 2);
    Ok(())
}

/// Opens a unit, writes, and panics mid-unit on "boom".
struct Fragile;

impl Brain for Fragile {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        let mut unit = turn.open_unit();
        unit.write("heard ");
        tokio::task::yield_now().await;
        if message.text == "boom" {
            panic!("boom in on_user_message");
        }
        unit.write(&message.text);
        unit.close();
        Ok(())
    }
}

// 4. A panic in on_user_message is a failed turn: SpeechEnd for its open unit, the session and the
// server's other sessions go on (docs/protocol.md §7 D17).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callback_panic_is_isolated() -> TestResult {
    let addr = serve_tungstenite(|| Fragile, trusted()).await?;
    let url = format!("ws://{addr}/voice");
    let (sid_a, sid_b) = (unique_id("panic-a"), unique_id("panic-b"));
    let mut a = dial(&url, &sid_a, Some(&signer().mint(&sid_a))).await?;
    let mut b = dial(&url, &sid_b, Some(&signer().mint(&sid_b))).await?;
    let (ga, gb) = tokio::join!(a.start(), b.start());
    assert_eq!(
        (ga?.text(), gb?.text()),
        ("hello".to_owned(), "hello".to_owned())
    );

    // Session A panics while session B is answering a turn at the same time.
    let (boom, steady) = tokio::join!(a.user_says("boom"), b.user_says("steady"));
    let boom = boom?;
    assert!(
        boom.completed(),
        "the panicked turn's unit got no SpeechEnd: {boom:?}"
    );
    assert_eq!(boom.unit_texts(), vec!["heard ".to_owned()]);
    assert_eq!(steady?.text(), "heard steady");

    // Both sessions go on.
    let (next_a, next_b) = tokio::join!(a.user_says("again"), b.user_says("more"));
    assert_eq!(next_a?.text(), "heard again");
    assert_eq!(next_b?.text(), "heard more");
    assert_eq!(a.end().await?, Some(1000));
    assert_eq!(b.end().await?, Some(1000));
    a.assert_clean();
    b.assert_clean();
    assert!(a.errors().is_empty() && b.errors().is_empty());
    Ok(())
}

#[derive(Debug, thiserror::Error)]
#[error("link down")]
struct LinkDown;

/// A `Channel` whose sender fails once `sends_left` sends succeeded; inbound comes from a test queue.
struct FlakyChannel {
    sends_left: usize,
    attempts: Arc<AtomicUsize>,
    inbound: mpsc::UnboundedReceiver<Incoming>,
}

struct FlakySender {
    sends_left: usize,
    attempts: Arc<AtomicUsize>,
}

struct QueueReceiver(mpsc::UnboundedReceiver<Incoming>);

impl Channel for FlakyChannel {
    type Sender = FlakySender;
    type Receiver = QueueReceiver;
    fn split(self) -> (FlakySender, QueueReceiver) {
        (
            FlakySender {
                sends_left: self.sends_left,
                attempts: self.attempts,
            },
            QueueReceiver(self.inbound),
        )
    }
}

impl ChannelSender for FlakySender {
    async fn send(&mut self, _frame: Vec<u8>) -> Result<(), ChannelError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.sends_left == 0 {
            return Err(ChannelError::new(LinkDown));
        }
        self.sends_left -= 1;
        Ok(())
    }

    async fn close(&mut self, _code: u16, _reason: &str) {}
}

impl ChannelReceiver for QueueReceiver {
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        self.0.recv().await.map(Ok)
    }
}

/// Greets, then streams slowly; counts session ends and turns that ran to their end.
struct SlowTalker {
    ends: Arc<AtomicUsize>,
    finished_turns: Arc<AtomicUsize>,
}

impl Brain for SlowTalker {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, _message: UserMessage) -> BrainResult {
        let mut unit = turn.open_unit();
        for word in ["one ", "two ", "three"] {
            unit.write(word);
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        unit.close();
        self.finished_turns.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, _reason: EndReason) {
        self.ends.fetch_add(1, Ordering::SeqCst);
    }
}

struct SlowCounts {
    ends: Arc<AtomicUsize>,
    finished_turns: Arc<AtomicUsize>,
}

impl SlowCounts {
    fn new() -> Self {
        SlowCounts {
            ends: Arc::new(AtomicUsize::new(0)),
            finished_turns: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn factory(&self) -> impl MakeBrain {
        let (ends, finished_turns) = (self.ends.clone(), self.finished_turns.clone());
        move || SlowTalker {
            ends: ends.clone(),
            finished_turns: finished_turns.clone(),
        }
    }
}

// 5. docs/protocol.md §7 D5: a failed send ends the session: turns cancelled, on_session_end once, run_session errs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_send_ends_the_session() -> TestResult {
    let counts = SlowCounts::new();
    let attempts = Arc::new(AtomicUsize::new(0));
    let (to_brain, inbound) = mpsc::unbounded_channel();
    // The greeting's SpeechStart, SpeechChunk and SpeechEnd go out; the turn's SpeechStart fails.
    let channel = FlakyChannel {
        sends_left: 3,
        attempts: attempts.clone(),
        inbound,
    };
    let sid = unique_id("flaky");
    to_brain.send(Incoming::Binary(
        voqalize::wire::encode(&session_start(&sid)).into(),
    ))?;
    let message = Frame::UserMessage(UserMessage::new(2, "talk".to_owned()));
    to_brain.send(Incoming::Binary(voqalize::wire::encode(&message).into()))?;
    let upgrade = Upgrade {
        session_id: Some(sid),
        authorization: None,
    };
    let result = tokio::time::timeout(
        HANG,
        run_session(
            channel,
            Arc::new(counts.factory()),
            upgrade,
            &HostOptions::allow_unverified(),
        ),
    )
    .await
    .map_err(|_| "run_session did not return after a failed send")?;
    match result {
        Err(HostError::SendFailed(cause)) => {
            // The transport's own error is the source, not repeated in the message.
            let source = std::error::Error::source(&cause).map(ToString::to_string);
            assert_eq!(source.as_deref(), Some("link down"), "{cause}");
            assert!(!cause.to_string().contains("link down"), "{cause}");
        }
        other => panic!("expected Err(SendFailed), got {other:?}"),
    }
    assert_eq!(counts.ends.load(Ordering::SeqCst), 1);
    assert_eq!(counts.finished_turns.load(Ordering::SeqCst), 0);
    // Nothing is sent after the failure.
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    drop(to_brain);
    Ok(())
}

// 6. docs/protocol.md §4.13: the runtime hangs up mid-turn: the turn is cancelled (no SpeechEnd), on_session_end
// runs once and run_session returns; in process and over a socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_up_mid_turn_ends_the_session() -> TestResult {
    // In process.
    let counts = SlowCounts::new();
    let mut v = Voqalize::in_process(counts.factory());
    v.quiet = Duration::from_millis(60);
    v.start().await?;
    let turn = streaming_turn(&mut v).await?;
    v.hang_up().await;
    let result = v.brain_result().await?;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(counts.ends.load(Ordering::SeqCst), 1);
    assert_eq!(counts.finished_turns.load(Ordering::SeqCst), 0);
    assert_eq!(v.wait_closed().await?, Some(1000));
    assert_unit_not_ended(&v, turn);

    // Over a socket (tokio-tungstenite accept).
    let counts = SlowCounts::new();
    let (addr, returned) = serve_once(counts.factory(), trusted()).await?;
    let sid = unique_id("hangup");
    let mut v = dial(
        &format!("ws://{addr}/voice"),
        &sid,
        Some(&signer().mint(&sid)),
    )
    .await?;
    v.start().await?;
    let turn = streaming_turn(&mut v).await?;
    v.hang_up().await;
    let result = tokio::time::timeout(HANG, returned)
        .await
        .map_err(|_| "run_session did not return after the hang-up")??;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(counts.ends.load(Ordering::SeqCst), 1);
    assert_eq!(counts.finished_turns.load(Ordering::SeqCst), 0);
    // Read whatever the brain still sent until the close handshake completes.
    v.wait_closed().await?;
    assert_unit_not_ended(&v, turn);
    Ok(())
}

/// Starts a `SlowTalker` turn and waits until its first chunk arrived; returns the turn id.
async fn streaming_turn(v: &mut Voqalize) -> Result<u64, DriverError> {
    let turn_id = v.next_turn_id();
    v.send(Frame::UserMessage(UserMessage::new(
        turn_id,
        "talk".to_owned(),
    )))
    .await?;
    let timeout = v.timeout;
    let streaming = v
        .wait_for(timeout, move |v| {
            v.units()
                .any(|u| u.turn_id == turn_id && !u.chunks.is_empty())
        })
        .await?;
    assert!(streaming, "the turn never started streaming");
    Ok(turn_id)
}

fn assert_unit_not_ended(v: &Voqalize, turn_id: u64) {
    let turn = v.turn(turn_id);
    assert_eq!(turn.unit_texts(), vec!["one ".to_owned()], "{turn:?}");
    assert!(
        !turn.units[0].ended,
        "a cancelled turn's unit got a SpeechEnd"
    );
    v.assert_clean();
}

/// The value of `name=` in a formatted line's span fields (quotes removed).
fn field(line: &str, name: &str) -> Option<String> {
    line.split([' ', '{', '}'])
        .find_map(|token| token.strip_prefix(name)?.strip_prefix('='))
        .map(|v| v.trim_end_matches(':').trim_matches('"').to_owned())
}

/// Logs one line from inside a turn, naming what it heard.
struct Chatty;

impl Brain for Chatty {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        tracing::info!("hosting-log-probe {}", message.text);
        turn.say("noted");
        Ok(())
    }
}

/// Runs one call whose brain logs `hosting-log-probe <probe>`; returns the captured probe lines.
async fn logged_call(
    url: &str,
    sid: &str,
    token: Option<&str>,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let capture = logs();
    let probe = format!("probe-{sid}");
    let mut v = dial(url, sid, token).await?;
    v.start().await?;
    assert_eq!(v.user_says(&probe).await?.text(), "noted");
    assert_eq!(v.end().await?, Some(1000));
    Ok(capture.lines_with(&format!("hosting-log-probe {probe}")))
}

// 7. docs/protocol.md §5.3: log lines inside a verified session carry service, session_id, tenant_id and
// agent_id from the token; an unverified session's lines carry no tenant or agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_carry_the_session_context() -> TestResult {
    logs();
    let addr = serve_tungstenite(|| Chatty, trusted()).await?;
    let sid = unique_id("log-verified");
    let (tenant, agent) = (format!("tenant-{sid}"), format!("agent-{sid}"));
    let token = signer()
        .sign(&claims(&sid, &tenant, &agent, now(), now() + 60))
        .expect("signing");
    let lines = logged_call(&format!("ws://{addr}/voice"), &sid, Some(&token)).await?;
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    assert_eq!(field(line, "service").as_deref(), Some("brain"), "{line}");
    assert_eq!(
        field(line, "session_id").as_deref(),
        Some(sid.as_str()),
        "{line}"
    );
    assert_eq!(
        field(line, "tenant_id").as_deref(),
        Some(tenant.as_str()),
        "{line}"
    );
    assert_eq!(
        field(line, "agent_id").as_deref(),
        Some(agent.as_str()),
        "{line}"
    );

    let addr = serve_tungstenite(|| Chatty, HostOptions::allow_unverified()).await?;
    let sid = unique_id("log-unverified");
    let lines = logged_call(&format!("ws://{addr}/voice"), &sid, None).await?;
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    assert_eq!(field(line, "service").as_deref(), Some("brain"), "{line}");
    assert_eq!(
        field(line, "session_id").as_deref(),
        Some(sid.as_str()),
        "{line}"
    );
    assert_eq!(field(line, "tenant_id"), None, "{line}");
    assert_eq!(field(line, "agent_id"), None, "{line}");
    Ok(())
}

// 8. Upgrade::from_query: request targets and bare queries.
#[test]
fn upgrade_from_query_reads_the_session_id() {
    let auth = Some("Bearer t".to_owned());
    let upgrade = Upgrade::from_query(Some("/?session_id=conf-1"), auth.clone());
    assert_eq!(upgrade.session_id.as_deref(), Some("conf-1"));
    assert_eq!(upgrade.authorization, auth);

    let sid = |q: Option<&str>| Upgrade::from_query(q, None).session_id;
    assert_eq!(
        sid(Some("/voice?a=1&session_id=x%2Fy")).as_deref(),
        Some("x/y")
    );
    assert_eq!(sid(Some("session_id=conf-1")).as_deref(), Some("conf-1"));
    assert_eq!(sid(Some("a=1&session_id=x%2Fy")).as_deref(), Some("x/y"));
    assert_eq!(sid(Some("session_id=a+b")).as_deref(), Some("a b"));
    // A bare query may hold `?` in a value; only a request target is cut at its first `?`.
    assert_eq!(sid(Some("session_id=x?y")).as_deref(), Some("x?y"));
    assert_eq!(sid(Some("/v?session_id=x?y")).as_deref(), Some("x?y"));
    assert_eq!(sid(None), None);
    assert_eq!(sid(Some("")), None);
    assert_eq!(sid(Some("/voice")), None);
    assert_eq!(sid(Some("/voice?a=1")), None);
    assert_eq!(sid(Some("/?session_id=")), None);
    assert_eq!(sid(Some("session_id=")), None);
    assert_eq!(sid(Some("/voice?a=1&session_id=")), None);
}

// Identity is bound to the token: a SessionStart naming another session than the one the token
// was verified for is refused before any brain is made.
#[tokio::test]
async fn a_session_start_for_another_session_is_refused() -> Result<(), Box<dyn std::error::Error>>
{
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let addr = serve_tungstenite(
        move || {
            m.fetch_add(1, Ordering::SeqCst);
            Echo
        },
        trusted(),
    )
    .await?;
    let token = signer().sign(&claims("sess-A", "t", "a", now(), now() + 60))?;
    let mut v = dial(&format!("ws://{addr}/voice"), "sess-A", Some(&token)).await?;
    v.start_with(Start {
        session_id: Some("sess-VICTIM".into()),
        expect_greeting: false,
        ..Start::default()
    })
    .await?;
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await?
    );
    let refusal = v
        .errors()
        .first()
        .cloned()
        .expect("a fatal error before End");
    assert_eq!(refusal.code, ErrorCode::Protocol);
    assert!(refusal.fatal);
    assert_eq!(
        made.load(Ordering::SeqCst),
        0,
        "no brain was made for the victim's session"
    );
    // The same token with its own session id is served.
    let mut v = dial(&format!("ws://{addr}/voice"), "sess-A", Some(&token)).await?;
    v.start_silent().await?;
    assert_eq!(v.user_says("hi").await?.text(), "hi");
    Ok(())
}

// A peer that never sends SessionStart is closed after the deadline, and the server goes on
// answering other calls.
#[tokio::test]
async fn a_connection_without_session_start_is_closed_after_the_deadline() -> TestResult {
    let addr = serve_tungstenite(
        || Echo,
        HostOptions::builder()
            .allow_unverified()
            .session_start_timeout(Duration::from_millis(200))
            .build()?,
    )
    .await?;
    let mut idle = dial(&format!("ws://{addr}/voice"), "idle", None).await?;
    assert_eq!(idle.wait_closed().await?, Some(1000));
    let mut v = dial(&format!("ws://{addr}/voice"), "busy", None).await?;
    v.start_silent().await?;
    assert_eq!(v.user_says("still here?").await?.text(), "still here?");
    Ok(())
}

// A message over the size limit ends that call with 1009, on both adapters.
#[tokio::test]
async fn a_message_over_the_limit_closes_with_1009() -> TestResult {
    let options = HostOptions::builder()
        .allow_unverified()
        .max_message_bytes(4096)
        .build()?;
    for addr in serve_echo_on_both(options).await? {
        let mut v = dial(&format!("ws://{addr}/voice"), "big", None).await?;
        v.start_silent().await?;
        assert_eq!(v.user_says("small").await?.text(), "small");
        v.send_bytes(vec![0u8; 64 * 1024]).await?;
        assert_eq!(v.wait_closed().await?, Some(1009), "{addr}");
    }
    Ok(())
}

/// Echoes every message and counts the sessions that ended.
struct Counted(Arc<crate::support::Log>);

impl Brain for Counted {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, reason: EndReason) {
        self.0.end_because(&reason);
    }
}

/// A raw WebSocket client on `addr` that has sent a SessionStart for `session_id`.
async fn raw_client(
    addr: SocketAddr,
    session_id: &str,
) -> Result<tokio_tungstenite::WebSocketStream<TcpStream>, Box<dyn std::error::Error + Send + Sync>>
{
    let request = format!("ws://{addr}/voice?session_id={session_id}").into_client_request()?;
    let stream = TcpStream::connect(addr).await?;
    let (mut ws, _) = tokio_tungstenite::client_async(request, stream).await?;
    let start = Frame::SessionStart(
        SessionStart::new(session_id, 1)
            .with_wire_version(WIRE_VERSION)
            .with_capabilities(Default::default()),
    );
    futures_util::SinkExt::send(
        &mut ws,
        Message::Binary(voqalize::wire::encode(&start).into()),
    )
    .await?;
    Ok(ws)
}

// A peer that floods user messages and never reads: the outbound lane meets its hard bound and the
// call ends (on_session_end runs), while another call on the same brain is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_is_ended_not_buffered() -> TestResult {
    let log = Arc::new(crate::support::Log::default());
    let l = log.clone();
    let addr = serve_tungstenite(
        move || Counted(l.clone()),
        HostOptions::builder()
            .allow_unverified()
            .max_lane_frames(4)
            .build()?,
    )
    .await?;
    let mut ws = raw_client(addr, "flood").await.map_err(|e| e.to_string())?;
    let text = "x".repeat(16 * 1024);
    let flood = tokio::spawn(async move {
        for turn_id in 2..20_000u64 {
            let m = Frame::UserMessage(UserMessage::new(turn_id, text.clone()));
            let sent = futures_util::SinkExt::send(
                &mut ws,
                Message::Binary(voqalize::wire::encode(&m).into()),
            )
            .await;
            if sent.is_err() {
                return turn_id;
            }
        }
        u64::MAX
    });
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the flooding call ended"
    );
    assert_eq!(
        log.end_reasons(),
        [EndReason::BoundExceeded(
            voqalize::session::BoundExceeded::Lane
        )]
    );
    let mut v = dial(&format!("ws://{addr}/voice"), "calm", None).await?;
    v.start_silent().await?;
    assert_eq!(v.user_says("hello").await?.text(), "hello");
    flood.abort();
    Ok(())
}

// A peer that sends Pings and never reads: the Pongs wait in a write buffer bounded by the write
// backlog (tungstenite keeps one pending Pong once it is full, instead of growing), and the brain
// keeps answering other calls while 13 MB of Pings arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_flood_that_never_reads_does_not_disturb_other_calls() -> TestResult {
    let log = Arc::new(crate::support::Log::default());
    let l = log.clone();
    let addr = serve_tungstenite(
        move || Counted(l.clone()),
        HostOptions::builder()
            .allow_unverified()
            .max_write_backlog_bytes(64 * 1024)
            .build()?,
    )
    .await?;
    let mut ws = raw_client(addr, "pings").await.map_err(|e| e.to_string())?;
    let payload = vec![7u8; 125];
    for _ in 0..100_000u32 {
        futures_util::SinkExt::feed(&mut ws, Message::Ping(payload.clone().into())).await?;
    }
    futures_util::SinkExt::flush(&mut ws).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), "calm", None).await?;
    v.start_silent().await?;
    assert_eq!(v.user_says("hello").await?.text(), "hello");
    assert_eq!(log.ended(), 0, "the ping flood is bounded, not fatal");
    drop(ws);
    Ok(())
}

// A peer controls what it sends, not how much the brain logs: 2,000 junk frames give one warning
// (the rest are summed up once a window has passed, or at the end), and the session goes on.
#[tokio::test]
async fn junk_frames_are_logged_once_not_once_each() -> TestResult {
    let logs = logs();
    let addr = serve_tungstenite(|| Echo, HostOptions::allow_unverified()).await?;
    let sid = unique_id("junk");
    let mut v = dial(&format!("ws://{addr}/voice"), &sid, None).await?;
    v.start_silent().await?;
    for i in 0..1_000u32 {
        v.send_text("not a frame").await?;
        v.send_bytes(vec![0xff, 0xff, (i % 256) as u8]).await?;
    }
    assert_eq!(v.user_says("still fine").await?.text(), "still fine");
    let lines: Vec<String> = logs
        .lines_with(&sid)
        .into_iter()
        .filter(|l| l.contains("TEXT frame") || l.contains("malformed payload"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    Ok(())
}

// A half-open connection (a peer that stopped answering, Pongs included) ends and
// `on_session_end` runs; a silent peer that answers the Pings stays connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_answering_pings_is_ended() -> TestResult {
    let log = Arc::new(crate::support::Log::default());
    let l = log.clone();
    let options = HostOptions::builder()
        .allow_unverified()
        .keepalive(Duration::from_millis(100), Duration::from_millis(100))
        .build()?;
    let addr = serve_tungstenite(move || Counted(l.clone()), options).await?;
    let gone = raw_client(addr, "gone").await.map_err(|e| e.to_string())?;
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the half-open call ended"
    );
    assert_eq!(
        log.end_reasons(),
        [EndReason::TransportLost(TransportLoss::KeepaliveDeadline)]
    );

    let mut v = dial(&format!("ws://{addr}/voice"), "silent", None).await?;
    v.start_silent().await?;
    // Silent for several ping intervals; the driver answers the Pings as it reads.
    v.quiesce(Duration::from_millis(600), Duration::from_millis(600))
        .await?;
    assert_eq!(v.user_says("still there?").await?.text(), "still there?");
    assert_eq!(log.ended(), 1, "only the half-open call ended");
    drop(gone);
    Ok(())
}

// With a cap on concurrent calls, a connection beyond it is refused at the upgrade (HTTP 503) at
// once, on both adapters; once a call ends its place is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_max_sessions_are_refused_at_the_upgrade() -> TestResult {
    for addr in serve_echo_on_both(
        HostOptions::builder()
            .allow_unverified()
            .max_sessions(1)
            .build()?,
    )
    .await?
    {
        let url = format!("ws://{addr}/voice");
        let mut first = dial(&url, "first", None).await?;
        first.start_silent().await?;
        let refused = dial(&url, "second", None).await;
        let Err(DriverError::Connect { source, .. }) = refused else {
            panic!("{addr}: the second call was not refused");
        };
        assert!(source.to_string().contains("503"), "{addr}: {source}");
        assert_eq!(first.user_says("hi").await?.text(), "hi");
        first.end().await?;
        // The place is given back once the first call's session has returned.
        let mut third = None;
        for _ in 0..200 {
            if let Ok(v) = dial(&url, "third", None).await {
                third = Some(v);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut third = third.expect("the place was given back");
        third.start_silent().await?;
        assert_eq!(third.user_says("again").await?.text(), "again");
    }
    Ok(())
}

// ---- The writer's batches (docs/protocol.md §2.1) ----

/// What the session did with its sender, in order.
#[derive(Debug, Clone, PartialEq)]
enum Wrote {
    Frame(Frame),
    Flush,
}

struct RecordingChannel {
    wrote: Arc<std::sync::Mutex<Vec<Wrote>>>,
    inbound: mpsc::UnboundedReceiver<Incoming>,
}

struct RecordingSender(Arc<std::sync::Mutex<Vec<Wrote>>>);

impl Channel for RecordingChannel {
    type Sender = RecordingSender;
    type Receiver = QueueReceiver;
    fn split(self) -> (RecordingSender, QueueReceiver) {
        (RecordingSender(self.wrote), QueueReceiver(self.inbound))
    }
}

impl RecordingSender {
    fn record(&self, what: Wrote) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(what);
    }
}

impl ChannelSender for RecordingSender {
    async fn send(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        self.feed(frame).await?;
        self.flush().await
    }

    async fn feed(&mut self, frame: Vec<u8>) -> Result<(), ChannelError> {
        let frame = voqalize::wire::decode(&frame)
            .map_err(ChannelError::new)?
            .ok_or_else(|| ChannelError::new(LinkDown))?;
        self.record(Wrote::Frame(frame));
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), ChannelError> {
        self.record(Wrote::Flush);
        Ok(())
    }

    async fn close(&mut self, _code: u16, _reason: &str) {}
}

/// Speaks one unit of eight chunks without awaiting between them, as a brain that has its text.
struct EightChunks;

impl Brain for EightChunks {
    async fn on_user_message(&self, turn: &mut Turn, _message: UserMessage) -> BrainResult {
        let mut unit = turn.open_unit();
        for i in 0..8 {
            unit.write(&format!("chunk {i} "));
        }
        Ok(())
    }
}

/// On the single-threaded runtime the turn runs to its end before the writer is polled, so the
/// writer finds all of the turn's frames ready and sends them with one flush (one `write` on a
/// socket).
#[tokio::test]
async fn a_turns_frames_leave_in_one_flush() -> TestResult {
    let wrote = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (to_brain, inbound) = mpsc::unbounded_channel();
    let channel = RecordingChannel {
        wrote: wrote.clone(),
        inbound,
    };
    let session_id = unique_id("batch");
    let upgrade = Upgrade {
        session_id: Some(session_id.clone()),
        authorization: None,
    };
    let options = HostOptions::allow_unverified();
    let host = tokio::spawn(async move {
        run_session(channel, Arc::new(|| EightChunks), upgrade, &options).await
    });
    let send =
        |frame: Frame| to_brain.send(Incoming::Binary(voqalize::wire::encode(&frame).into()));
    send(Frame::SessionStart(
        SessionStart::new(session_id, 1)
            .with_wire_version(WIRE_VERSION)
            .with_capabilities(Default::default()),
    ))?;
    send(Frame::UserMessage(voqalize::wire::UserMessage::new(
        2, "go",
    )))?;
    let ended = |w: &Vec<Wrote>| {
        w.iter()
            .any(|x| matches!(x, Wrote::Frame(Frame::SpeechEnd { .. })))
    };
    tokio::time::timeout(HANG, async {
        while !ended(&wrote.lock().unwrap_or_else(|p| p.into_inner())) {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    send(Frame::End)?;
    tokio::time::timeout(HANG, host).await???;

    let wrote = wrote.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let first = wrote
        .iter()
        .position(|w| matches!(w, Wrote::Frame(Frame::SpeechChunk { .. })))
        .ok_or("no chunk was sent")?;
    let end = wrote
        .iter()
        .position(|w| matches!(w, Wrote::Frame(Frame::SpeechEnd { .. })))
        .ok_or("no SpeechEnd was sent")?;
    let chunks = wrote[first..=end]
        .iter()
        .filter(|w| matches!(w, Wrote::Frame(Frame::SpeechChunk { .. })))
        .count();
    assert_eq!(chunks, 8, "{wrote:?}");
    assert!(
        !wrote[first..=end].contains(&Wrote::Flush),
        "no flush between the turn's first chunk and its SpeechEnd: {wrote:?}"
    );
    assert_eq!(
        wrote.get(end + 1),
        Some(&Wrote::Flush),
        "one flush after them: {wrote:?}"
    );
    Ok(())
}

// ---- A hostile caller does not choose how much the brain logs (issue 15) ----

/// Echoes; `units N` speaks N units at once; a session whose id names `stuck` never returns from
/// `on_session_start`. Counts the sessions that ended.
struct Target(Arc<crate::support::Log>);

impl Brain for Target {
    async fn on_session_start(&self, session: &Session) -> BrainResult {
        if session.id().contains("stuck") {
            std::future::pending::<()>().await;
        }
        Ok(())
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        match message.text.strip_prefix("units ") {
            Some(n) => {
                for _ in 0..n.parse::<u32>()? {
                    turn.say("u");
                }
            }
            None => {
                turn.say(&message.text);
            }
        }
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, reason: EndReason) {
        self.0.end_because(&reason);
    }
}

/// A brain serving [`Target`] on 127.0.0.1, its log of ended sessions, and a session id for the
/// hostile call.
async fn target(
    tag: &str,
    options: HostOptions,
) -> Result<(SocketAddr, Arc<crate::support::Log>, String), Box<dyn std::error::Error>> {
    logs();
    let log = Arc::new(crate::support::Log::default());
    let l = log.clone();
    let addr = serve_tungstenite(move || Target(l.clone()), options).await?;
    Ok((addr, log, unique_id(tag)))
}

/// The captured log lines of session `sid` that contain `needle`.
fn lines_of(sid: &str, needle: &str) -> Vec<String> {
    logs()
        .lines_with(sid)
        .into_iter()
        .filter(|l| l.contains(needle))
        .collect()
}

/// A bystander call on the same brain is answered.
async fn bystander(addr: SocketAddr) -> TestResult {
    let mut v = dial(&format!("ws://{addr}/voice"), &unique_id("bystander"), None).await?;
    v.start_silent().await?;
    assert_eq!(v.user_says("hello").await?.text(), "hello");
    Ok(())
}

// 5,000 Responses for requests nobody made: one warning, the call and a bystander go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_for_no_request_are_logged_once_not_once_each() -> TestResult {
    let (addr, _log, sid) = target("strays", HostOptions::allow_unverified()).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), &sid, None).await?;
    v.start_silent().await?;
    for request_id in 1..=5_000 {
        v.send(Frame::Response(Response::new(
            request_id,
            true,
            String::new(),
            None,
        )))
        .await?;
    }
    // Responses are applied as they are read: all of them were, before this is answered.
    assert_eq!(v.user_says("still here").await?.text(), "still here");
    let lines = lines_of(&sid, "nobody waiting");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    bystander(addr).await
}

// A peer that repeats SessionStart and never reads: one warning and one Error frame in answer,
// not one each; the call goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_session_starts_get_one_answer_and_one_line() -> TestResult {
    let (addr, _log, sid) = target("restarts", HostOptions::allow_unverified()).await?;
    let mut ws = raw_client(addr, &sid).await.map_err(|e| e.to_string())?;
    let again = voqalize::wire::encode(&session_start(&sid));
    for _ in 0..1_000 {
        futures_util::SinkExt::feed(&mut ws, Message::Binary(again.clone().into())).await?;
    }
    let ping = Frame::UserMessage(UserMessage::new(2, "ping"));
    futures_util::SinkExt::send(
        &mut ws,
        Message::Binary(voqalize::wire::encode(&ping).into()),
    )
    .await?;
    // Only now read: every SessionStart was handled before the message behind them.
    let mut errors = 0;
    tokio::time::timeout(HANG, async {
        while let Some(message) = ws.next().await {
            let Message::Binary(bytes) = message? else {
                continue;
            };
            match voqalize::wire::decode(&bytes)? {
                Some(Frame::Error(_)) => errors += 1,
                Some(Frame::SpeechChunk { text, .. }) if text == "ping" => break,
                _ => {}
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })
    .await??;
    assert_eq!(errors, 1, "one Error frame answers them all");
    let lines = lines_of(&sid, "SessionStart");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    bystander(addr).await
}

// RTVI types only the brain sends, sent inbound 2,000 times: one warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brain_only_rtvi_sent_inbound_is_logged_once() -> TestResult {
    let (addr, _log, sid) = target("brain-only", HostOptions::allow_unverified()).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), &sid, None).await?;
    v.start_silent().await?;
    for n in 0..2_000 {
        v.send_rtvi(RtviType::ServerMessage, json!({ "n": n }))
            .await?;
    }
    assert_eq!(v.user_says("still here").await?.text(), "still here");
    let lines = lines_of(&sid, "only the brain sends it");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    bystander(addr).await
}

// A runtime that never finalizes: the book forgets the oldest units past its bound with one
// warning, not one per unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_never_finalized_are_logged_once_not_once_each() -> TestResult {
    let options = HostOptions::builder()
        .allow_unverified()
        .max_lane_frames(4096)
        .build()?;
    let (addr, _log, sid) = target("unfinalized", options).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), &sid, None).await?;
    v.start_silent().await?;
    let turn_id = v.next_turn_id();
    v.send(Frame::UserMessage(UserMessage::new(turn_id, "units 1100")))
        .await?;
    let all_ended = v
        .wait_for(HANG, |v| v.units().filter(|u| u.ended).count() == 1100)
        .await?;
    assert!(all_ended);
    let lines = lines_of(&sid, "was never finalized");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    bystander(addr).await
}

// A peer that floods the inbound lane past its hard bound ends its call with one line, however
// many frames it sends after that; a bystander is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbound_flood_ends_the_call_with_one_line() -> TestResult {
    let options = HostOptions::builder()
        .allow_unverified()
        .max_lane_frames(4)
        .build()?;
    let (addr, log, sid) = target("stuck-flood", options).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), &sid, None).await?;
    v.start_silent().await?;
    for _ in 0..2_000 {
        let finalize = Frame::Finalize {
            speech_id: 1,
            heard_text: String::new(),
        };
        if v.send(finalize).await.is_err() {
            break;
        }
    }
    assert!(
        log.until(|l| l.ended() == 1).await,
        "the flooding call ended"
    );
    let lines = lines_of(&sid, "floods the inbound lane");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    bystander(addr).await
}

// An unverified (development) brain refuses upgrades from web pages, on both adapters: a page
// open in the developer's browser must not drive it. A brain that checks tokens does not care.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_brain_takes_no_calls_from_web_pages() -> TestResult {
    let (listener, axum_addr) = bind().await?;
    let app = axum::Router::new().route(
        "/voice",
        voqalize::host::axum::brain_route(|| Echo, HostOptions::allow_unverified()),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let tungstenite_addr = serve_tungstenite(|| Echo, HostOptions::allow_unverified()).await?;
    let verified_addr = serve_tungstenite(
        || Echo,
        HostOptions::builder().public_keys([SIGNER_PUB]).build()?,
    )
    .await?;
    let upgrade = |addr: SocketAddr, origin: Option<&'static str>| async move {
        let mut request = format!("ws://{addr}/voice?session_id=page").into_client_request()?;
        if let Some(origin) = origin {
            request.headers_mut().insert("origin", origin.parse()?);
        }
        let stream = TcpStream::connect(addr).await?;
        Ok::<_, Box<dyn std::error::Error>>(
            match tokio_tungstenite::client_async(request, stream).await {
                Ok((_, response)) => response.status().as_u16(),
                Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                    response.status().as_u16()
                }
                Err(e) => return Err(e.into()),
            },
        )
    };
    for addr in [axum_addr, tungstenite_addr] {
        assert_eq!(
            upgrade(addr, Some("http://evil.example")).await?,
            403,
            "{addr}"
        );
        assert_eq!(
            upgrade(addr, Some("http://127.0.0.1:8788")).await?,
            403,
            "{addr}"
        );
        assert_eq!(
            upgrade(addr, None).await?,
            101,
            "{addr}: Voqalize sends no Origin"
        );
    }
    // A brain that checks tokens upgrades first and refuses a bad token on the socket (4000).
    assert_eq!(
        upgrade(verified_addr, Some("http://evil.example")).await?,
        101
    );
    Ok(())
}

/// A brain whose turns wait for `release` before they speak, so a turn is in flight when the
/// shutdown comes.
struct Gated {
    log: Arc<crate::support::Log>,
    release: Arc<tokio::sync::Notify>,
}

impl Brain for Gated {
    async fn on_session_start(&self, _session: &Session) -> BrainResult {
        self.log.push("started");
        Ok(())
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        self.release.notified().await;
        turn.say(&format!("{}, heard to the end.", message.text));
        Ok(())
    }

    async fn on_session_end(&self, _session: &Session, reason: EndReason) {
        self.log.end_because(&reason);
    }
}

/// Serves `Gated` under `shutdown` on a fresh port: the address, the log, the gate, and the
/// serve task (which returns once the drain is done).
async fn serve_drainable(
    shutdown: &voqalize::host::Shutdown,
) -> std::io::Result<(
    SocketAddr,
    Arc<crate::support::Log>,
    Arc<tokio::sync::Notify>,
    tokio::task::JoinHandle<std::io::Result<voqalize::host::DrainReport>>,
)> {
    let (listener, addr) = bind().await?;
    let (log, release) = (
        Arc::new(crate::support::Log::default()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let (l, r) = (log.clone(), release.clone());
    let options = HostOptions::builder()
        .allow_unverified()
        .shutdown(shutdown)
        .build()
        .expect("options");
    let served = tokio::spawn(voqalize::host::serve(
        listener,
        move || Gated {
            log: l.clone(),
            release: r.clone(),
        },
        options,
    ));
    Ok((addr, log, release, served))
}

/// The status and `Retry-After` an upgrade to `addr` is answered with.
async fn upgrade_status(
    addr: SocketAddr,
) -> Result<(u16, Option<String>), Box<dyn std::error::Error>> {
    let request = format!("ws://{addr}/voice?session_id=late").into_client_request()?;
    let stream = TcpStream::connect(addr).await?;
    Ok(
        match tokio_tungstenite::client_async(request, stream).await {
            Ok((_, response)) => (response.status().as_u16(), None),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => (
                response.status().as_u16(),
                response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            ),
            Err(e) => return Err(e.into()),
        },
    )
}

// A rolling update: the shutdown refuses new calls (503, Retry-After), the call in flight finishes
// and is heard to the end, Voqalize ends it, and serve returns with one call drained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_lets_the_running_call_finish_and_refuses_new_ones() -> TestResult {
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(30));
    let (addr, log, release, served) = serve_drainable(&shutdown).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), "running", None).await?;
    v.start_silent().await?;
    let turn = v.send_user_message("one more thing").await?;
    shutdown.trigger();
    assert!(shutdown.is_draining());
    assert_eq!(upgrade_status(addr).await?, (503, Some("1".to_owned())));
    release.notify_one();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).completed())
            .await?
    );
    assert_eq!(v.turn(turn).text(), "one more thing, heard to the end.");
    assert_eq!(log.ended(), 0, "the call goes on while it drains");
    v.end().await?;
    let report = tokio::time::timeout(Duration::from_secs(5), shutdown.drained()).await?;
    assert_eq!((report.drained, report.ended), (1, 0));
    assert_eq!(log.end_reasons(), [EndReason::Ended]);
    // serve returns the same report.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), served).await???,
        report
    );
    Ok(())
}

// Past the drain timeout, a call still running is ended: End on the wire, on_session_end told
// Shutdown, and serve returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_drain_timeout_end_with_end_and_are_told_shutdown() -> TestResult {
    let shutdown = voqalize::host::Shutdown::new(Duration::from_millis(100));
    let (addr, log, _release, served) = serve_drainable(&shutdown).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), "lingering", None).await?;
    v.start_silent().await?;
    v.send_user_message("still thinking").await?; // a turn that never gets to speak
    assert!(
        log.until(|l| !l.events().is_empty()).await,
        "the call started"
    );
    shutdown.trigger();
    ended_by_the_shutdown(&mut v, &shutdown, &log, served).await
}

// A second trigger (a second SIGTERM) ends the calls at once, however long the drain would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_trigger_ends_the_calls_at_once() -> TestResult {
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(3600));
    let (addr, log, _release, served) = serve_drainable(&shutdown).await?;
    let mut v = dial(&format!("ws://{addr}/voice"), "impatient", None).await?;
    v.start_silent().await?;
    assert!(
        log.until(|l| !l.events().is_empty()).await,
        "the call started"
    );
    shutdown.trigger();
    shutdown.trigger();
    ended_by_the_shutdown(&mut v, &shutdown, &log, served).await
}

/// The one call `v` was ended by `shutdown`: the brain sent End, was told `Shutdown`, the drain
/// counts it as ended, and serve returned.
async fn ended_by_the_shutdown(
    v: &mut Voqalize,
    shutdown: &voqalize::host::Shutdown,
    log: &crate::support::Log,
    served: tokio::task::JoinHandle<std::io::Result<voqalize::host::DrainReport>>,
) -> TestResult {
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.brain_ended())
            .await?,
        "the brain sent End"
    );
    let report = tokio::time::timeout(Duration::from_secs(5), shutdown.drained()).await?;
    assert_eq!((report.drained, report.ended), (0, 1));
    assert_eq!(log.end_reasons(), [EndReason::Shutdown]);
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), served).await???,
        report
    );
    Ok(())
}

/// `GET path` on `addr` with plain HTTP/1.1: the status and the body.
async fn http_get(
    addr: SocketAddr,
    path: &str,
) -> Result<(u16, String), Box<dyn std::error::Error>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status line")?;
    let body = reply
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    Ok((status, body))
}

// The probes: liveness always, readiness until the drain starts (with the calls open in the body),
// and the probe server stops once the drain is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_turns_false_while_draining() -> TestResult {
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(30));
    let (addr, _log, release, served) = serve_drainable(&shutdown).await?;
    let (probes, probe_addr) = bind().await?;
    let probing = tokio::spawn(voqalize::host::Health::new(&shutdown).serve(probes));
    assert_eq!(
        http_get(probe_addr, "/healthz").await?,
        (200, "ok".to_owned())
    );
    let mut v = dial(&format!("ws://{addr}/voice"), "probed", None).await?;
    v.start_silent().await?;
    let turn = v.send_user_message("hello").await?;
    let ready: serde_json::Value = serde_json::from_str(&http_get(probe_addr, "/readyz").await?.1)?;
    assert_eq!(
        ready,
        serde_json::json!({"ready": true, "draining": false, "sessions": 1})
    );

    shutdown.trigger();
    let (status, body) = http_get(probe_addr, "/readyz").await?;
    assert_eq!(status, 503);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body)?,
        serde_json::json!({"ready": false, "draining": true, "sessions": 1})
    );
    assert_eq!(
        http_get(probe_addr, "/healthz").await?.0,
        200,
        "still alive"
    );
    assert_eq!(http_get(probe_addr, "/nothing").await?.0, 404);

    release.notify_one();
    assert!(
        v.wait_for(Duration::from_secs(5), |v| v.turn(turn).completed())
            .await?
    );
    v.end().await?;
    tokio::time::timeout(Duration::from_secs(5), served).await???;
    tokio::time::timeout(Duration::from_secs(5), probing).await???;
    Ok(())
}

// Load admission: above the threshold, new calls are refused at the upgrade (503, Retry-After) on
// both adapters while the calls already up go on, and readiness is false with the load in its
// body; back under it, calls are taken again and the process is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_the_load_threshold_calls_are_refused_and_readiness_is_false() -> TestResult {
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b = busy.clone();
    let load = voqalize::host::Load::from_fn(move || {
        if b.load(std::sync::atomic::Ordering::Acquire) {
            0.93
        } else {
            0.2
        }
    })
    .threshold(0.9);
    let both = serve_echo_on_both(
        HostOptions::builder()
            .allow_unverified()
            .load(&load)
            .build()?,
    )
    .await?;
    let shutdown = voqalize::host::Shutdown::new(Duration::from_secs(30));
    let (probes, probe_addr) = bind().await?;
    tokio::spawn(
        voqalize::host::Health::new(&shutdown)
            .load(&load)
            .serve(probes),
    );
    let readiness = || async {
        let (status, body) = http_get(probe_addr, "/readyz").await?;
        Ok::<_, Box<dyn std::error::Error>>((
            status,
            serde_json::from_str::<serde_json::Value>(&body)?,
        ))
    };
    assert_eq!(
        readiness().await?,
        (
            200,
            serde_json::json!({"ready": true, "draining": false, "sessions": 0, "load": 0.2})
        )
    );
    for addr in both {
        let url = format!("ws://{addr}/voice");
        let mut up = dial(&url, "up", None).await?;
        up.start_silent().await?;
        busy.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(
            upgrade_status(addr).await?,
            (503, Some("1".to_owned())),
            "{addr}"
        );
        assert_eq!(up.user_says("still served").await?.text(), "still served");
        busy.store(false, std::sync::atomic::Ordering::Release);
        let mut next = dial(&url, "next", None).await?;
        next.start_silent().await?;
        assert_eq!(next.user_says("taken").await?.text(), "taken");
    }
    busy.store(true, std::sync::atomic::Ordering::Release);
    assert_eq!(
        readiness().await?,
        (
            503,
            serde_json::json!({"ready": false, "draining": false, "sessions": 0, "load": 0.93})
        )
    );
    Ok(())
}

/// Tells `started` when a call's session started.
struct Started(mpsc::UnboundedSender<()>);

impl Brain for Started {
    async fn on_session_start(&self, _session: &Session) -> BrainResult {
        let _ = self.0.send(());
        Ok(())
    }

    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }
}

/// A started call with nothing to do holds one task on the brain's runtime: its reader, its
/// feeder and its writer run in it (a task more a call is about a kilobyte more a call).
#[test]
fn an_idle_call_is_one_task_of_the_brain() -> TestResult {
    // The brain on a runtime of its own, so the driver's tasks are not counted with its own.
    let brain = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = brain.block_on(TcpListener::bind("127.0.0.1:0"))?;
    let url = format!("ws://{}", listener.local_addr()?);
    let (tx, mut started) = mpsc::unbounded_channel();
    brain.spawn(voqalize::host::serve(
        listener,
        move || Started(tx.clone()),
        HostOptions::allow_unverified(),
    ));
    let tasks = || brain.metrics().num_alive_tasks();
    let driver = tokio::runtime::Runtime::new()?;
    driver.block_on(async {
        let mut calls = Vec::new();
        // The first call is not counted: serving may start what it keeps once (the clock, the
        // accept loop) at its first call.
        for i in 0..4 {
            let before = tasks();
            let mut v = Voqalize::connect(&url, &format!("idle-{i}"), None).await?;
            v.start_silent().await?;
            started
                .recv()
                .await
                .ok_or("the brain started the session")?;
            if i > 0 {
                assert_eq!(tasks() - before, 1, "call {i}: one task a started call");
            }
            calls.push(v);
        }
        for mut v in calls {
            v.end().await?;
        }
        Ok(())
    })
}

//! The ports a stranger can reach, against peers that open connections and send nothing, or send
//! plain HTTP where a WebSocket is expected: the probes (`Health::serve`), the console's port and
//! the voice port, over real sockets on 127.0.0.1.
//!
//! The fd exhaustion itself is not played here (the tests share one process and its descriptors):
//! what prevents it is, the cap on a port's connections and the deadline on a request's head.
//! That failed accepts are logged once and then counted is a unit test of `host::listen`.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use voqalize::console::Console;
use voqalize::host::{Health, Shutdown};
use voqalize::prelude::*;
use voqalize_testing::Voqalize;

use crate::support::logs;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A wait for something that must happen: far above what it takes on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// Long enough that no connection of a test meets the deadline while the test runs.
const NEVER: Duration = Duration::from_secs(600);

/// Says back what it heard.
struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }
}

async fn bind() -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Everything the server sends until it closes the connection (at most [`PATIENCE`]).
async fn until_closed(stream: &mut TcpStream) -> Result<String, Box<dyn std::error::Error>> {
    let mut reply = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut reply))
        .await
        .map_err(|_| "the server kept the connection open")??;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// A GET over a connection of its own: the status and the body.
async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), Box<dyn std::error::Error>> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let reply = until_closed(&mut stream).await?;
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line in {reply:?}"))?;
    let body = reply
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    Ok((status, body))
}

/// A port at its cap of two connections, both open and silent: the third is answered 503 and
/// closed at once; `meanwhile` runs while the port is full; once one of the two goes, `path` is
/// served again.
async fn holds_at_most_two(
    addr: SocketAddr,
    path: &str,
    meanwhile: impl Future<Output = TestResult>,
) -> TestResult {
    let first = TcpStream::connect(addr).await?;
    let _second = TcpStream::connect(addr).await?;
    let mut third = TcpStream::connect(addr).await?;
    let refused = until_closed(&mut third).await?;
    assert!(
        refused.starts_with("HTTP/1.1 503 "),
        "the connection past the cap: {refused:?}"
    );
    meanwhile.await?;
    drop(first);
    // The server learns of the close when it reads: ask until a place is free again.
    let served = tokio::time::timeout(PATIENCE, async {
        loop {
            match get(addr, path).await {
                Ok((200, _)) => return,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    assert!(served.is_ok(), "a place was never given back");
    Ok(())
}

/// A port whose request heads are due within a short deadline: a silent connection, one that
/// sends half a head, and one that stays idle after a request are each closed.
async fn closes_slow_heads(addr: SocketAddr, path: &str) -> TestResult {
    let mut silent = TcpStream::connect(addr).await?;
    let mut half = TcpStream::connect(addr).await?;
    half.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n").as_bytes())
        .await?;
    let mut idle = TcpStream::connect(addr).await?;
    idle.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    until_closed(&mut silent).await?;
    until_closed(&mut half).await?;
    let answered = until_closed(&mut idle).await?;
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered:?}");
    Ok(())
}

// The probe port holds at most `max_connections` and gives a request's head `header_timeout`:
// 2,000 silent connections once held every descriptor of the process. The voice port is served
// all the while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_port_caps_its_connections_and_request_heads() -> TestResult {
    let shutdown = Shutdown::new(Duration::from_secs(30));
    let (voice, voice_addr) = bind().await?;
    tokio::spawn(voqalize::host::serve(
        voice,
        || Echo,
        HostOptions::builder()
            .allow_unverified()
            .shutdown(&shutdown)
            .build()?,
    ));
    let (probes, capped) = bind().await?;
    tokio::spawn(
        Health::new(&shutdown)
            .max_connections(2)
            .header_timeout(NEVER)
            .serve(probes),
    );
    let (probes, hurried) = bind().await?;
    tokio::spawn(
        Health::new(&shutdown)
            .header_timeout(Duration::from_millis(300))
            .serve(probes),
    );

    let voice_served = async {
        let url = format!("ws://{voice_addr}");
        let mut v = Voqalize::connect(&url, "listeners-probes", None).await?;
        v.start_silent().await?;
        assert_eq!(v.user_says("still served").await?.text(), "still served");
        v.end().await?;
        Ok(())
    };
    holds_at_most_two(capped, "/healthz", voice_served).await?;
    closes_slow_heads(hurried, "/healthz").await?;
    Ok(())
}

// The console's port is bounded the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_port_caps_its_connections_and_request_heads() -> TestResult {
    let (capped_listener, capped) = bind().await?;
    tokio::spawn(
        Console::new("ws://127.0.0.1:9")
            .max_connections(2)
            .header_timeout(NEVER)
            .serve(capped_listener, std::future::pending()),
    );
    let (hurried_listener, hurried) = bind().await?;
    tokio::spawn(
        Console::new("ws://127.0.0.1:9")
            .header_timeout(Duration::from_millis(300))
            .serve(hurried_listener, std::future::pending()),
    );
    holds_at_most_two(capped, "/", async { Ok(()) }).await?;
    closes_slow_heads(hurried, "/").await?;
    Ok(())
}

/// The status line, the headers (lower-case names) and the body of an HTTP answer.
fn parse(reply: &str) -> (u16, Vec<(String, String)>, String) {
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((reply, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

// A browser's (or a scanner's) plain `GET /` on the voice port is told what the port is, with
// 426 Upgrade Required, on both adapters; nothing is logged about it at INFO or above (a peer
// could repeat it at will); the port still takes calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_get_on_the_voice_port_is_answered_426() -> TestResult {
    let logs = logs();
    let (tungstenite, tungstenite_addr) = bind().await?;
    tokio::spawn(voqalize::host::serve(
        tungstenite,
        || Echo,
        HostOptions::allow_unverified(),
    ));
    let (axum_listener, axum_addr) = bind().await?;
    let app = axum::Router::new().route(
        "/",
        voqalize::host::axum::brain_route(|| Echo, HostOptions::allow_unverified()),
    );
    tokio::spawn(async move { axum::serve(axum_listener, app).await });
    for addr in [tungstenite_addr, axum_addr] {
        let mut stream = TcpStream::connect(addr).await?;
        let peer = stream.local_addr()?.to_string();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: brain.example\r\nAccept: text/html\r\n\r\n")
            .await?;
        // The tungstenite adapter closes after its answer; axum's keeps the connection: read the
        // answer's head and its body's length.
        let mut reply = Vec::new();
        let mut buf = [0u8; 1024];
        let answer = tokio::time::timeout(PATIENCE, async {
            loop {
                let n = stream.read(&mut buf).await?;
                reply.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&reply).into_owned();
                let (_, headers, body) = parse(&text);
                let length = header(&headers, "content-length").and_then(|l| l.parse().ok());
                if n == 0 || length.is_some_and(|l: usize| body.len() >= l) {
                    return Ok::<_, std::io::Error>(text);
                }
            }
        })
        .await
        .map_err(|_| format!("{addr}: no answer"))??;
        let (status, headers, body) = parse(&answer);
        assert_eq!(status, 426, "{addr}: {answer:?}");
        assert_eq!(header(&headers, "upgrade"), Some("websocket"), "{answer:?}");
        assert!(
            body.contains("Voqalize") && body.contains("WebSocket endpoint"),
            "{answer:?}"
        );
        assert!(
            logs.lines_with(&peer).is_empty(),
            "{:?}",
            logs.lines_with(&peer)
        );
        let mut v = Voqalize::connect(&format!("ws://{addr}/"), "listeners-426", None).await?;
        v.start_silent().await?;
        assert_eq!(v.user_says("a call").await?.text(), "a call");
        v.end().await?;
    }
    Ok(())
}

// The console's files say no site may frame them, and allow nothing but the page's own script,
// style and socket: three hidden frames on a hostile page once opened three calls.
#[tokio::test]
async fn the_console_forbids_framing_and_inline_code() -> TestResult {
    let (listener, addr) = bind().await?;
    tokio::spawn(Console::new("ws://127.0.0.1:9").serve(listener, std::future::pending()));
    for path in ["/", "/console.js", "/console.css"] {
        let mut stream = TcpStream::connect(addr).await?;
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
        let (status, headers, body) = parse(&until_closed(&mut stream).await?);
        assert_eq!(status, 200, "{path}");
        assert!(!body.is_empty(), "{path}");
        assert_eq!(header(&headers, "x-frame-options"), Some("DENY"), "{path}");
        let csp = header(&headers, "content-security-policy").unwrap_or_default();
        for directive in [
            "frame-ancestors 'none'",
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        if path == "/" {
            // No inline script or style for the policy to refuse.
            assert!(
                !body.contains("<script>") && !body.contains("<style"),
                "{body}"
            );
            assert!(!body.contains(" style="), "{body}");
            let handler = body.match_indices(" on").any(|(at, _)| {
                let name: String = body[at + 3..]
                    .chars()
                    .take_while(char::is_ascii_lowercase)
                    .collect();
                !name.is_empty() && body[at + 3 + name.len()..].starts_with('=')
            });
            assert!(!handler, "an inline event handler: {body}");
        }
    }
    Ok(())
}

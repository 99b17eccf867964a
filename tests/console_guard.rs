//! The console against other sites and stuck pages: a hostile page that frames it (in headless
//! Chromium, as `tests/console.rs` drives it), a framed copy of its page served without its
//! headers (the page's own rule), and a page that never reads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use voqalize::console::Console;
use voqalize::prelude::*;
use voqalize::wire::{self, Frame};

use crate::console::Browser;

/// A wait for something that must happen: far above what it takes on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// Says back what it heard.
struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }
}

/// A site of the test's own on 127.0.0.1: serves its files and counts the WebSocket upgrades
/// asked of it at `/ws` (each answered 404).
struct Site {
    addr: SocketAddr,
    upgrades: Arc<AtomicUsize>,
    asked: Arc<Notify>,
}

impl Site {
    /// Serves `files` (path, content type, body); every other path is 404.
    async fn start(files: Vec<(&'static str, &'static str, String)>) -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address");
        let upgrades = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(Notify::new());
        let files = Arc::new(files);
        let (counted, told) = (upgrades.clone(), asked.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (files, counted, told) = (files.clone(), counted.clone(), told.clone());
                tokio::spawn(async move {
                    let _ = answer(stream, &files, &counted, &told).await;
                });
            }
        });
        Site {
            addr,
            upgrades,
            asked,
        }
    }

    /// Waits until at least `n` upgrades were asked for (at most [`PATIENCE`]).
    async fn upgrades_reach(&self, n: usize) {
        let reached = tokio::time::timeout(PATIENCE, async {
            loop {
                let asked = self.asked.notified();
                if self.upgrades.load(Ordering::Acquire) >= n {
                    return;
                }
                asked.await;
            }
        })
        .await;
        assert!(
            reached.is_ok(),
            "{} upgrades asked, not {n}",
            self.upgrades.load(Ordering::Acquire)
        );
    }
}

/// Answers one request on `stream` and closes it.
async fn answer(
    mut stream: TcpStream,
    files: &[(&'static str, &'static str, String)],
    upgrades: &AtomicUsize,
    asked: &Notify,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split(' ').nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or(target);
    if path == "/ws" {
        upgrades.fetch_add(1, Ordering::AcqRel);
        asked.notify_waiters();
    }
    let reply = match files.iter().find(|(p, _, _)| *p == path) {
        Some((_, kind, body)) => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        None => {
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
        }
    };
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

/// One of the console's files, fetched as a browser would.
async fn fetch(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("the console");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .expect("the request is sent");
    let mut reply = String::new();
    tokio::time::timeout(PATIENCE, stream.read_to_string(&mut reply))
        .await
        .expect("an answer")
        .expect("a readable answer");
    assert!(reply.starts_with("HTTP/1.1 200 "), "{path}: {reply}");
    reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

// A hostile page that frames the console three times opens no call: the browser refuses to
// frame it (X-Frame-Options, CSP frame-ancestors). Once three hidden frames opened three calls.
// And the page's own rule, for a browser that would frame it all the same: a framed copy served
// without those headers dials nothing until New call is pressed; top-level, it dials on load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_frames_the_console_opens_no_call() {
    let brain = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let brain_url = format!("ws://{}", brain.local_addr().expect("an address"));
    tokio::spawn(voqalize::host::serve(
        brain,
        || Echo,
        HostOptions::allow_unverified(),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let console = listener.local_addr().expect("an address");
    tokio::spawn(Console::new(brain_url).serve(listener, std::future::pending()));

    let frame = format!(r#"<iframe src="http://{console}/?voice=clock"></iframe>"#);
    let hostile = Site::start(vec![(
        "/",
        "text/html",
        format!("<!doctype html><title>prizes</title>{}", frame.repeat(3)),
    )])
    .await;
    let mut browser = Browser::launch().await;
    // The load event waits for every frame, shown or refused.
    browser.open(&format!("http://{}/", hostile.addr)).await;
    // The console's own page, top-level, gets the first call the console numbers.
    browser
        .open(&format!("http://{console}/?voice=clock"))
        .await;
    let live = browser
        .wait_for(
            r#"document.getElementById("status").dataset.state === "live"
                 && document.getElementById("status").textContent"#,
        )
        .await;
    assert_eq!(live, "live: console-1", "the frames opened calls");

    // The page's rule, on a copy of the console's files at an origin of the test's own.
    let copy = Site::start(vec![
        (
            "/",
            "text/html",
            r#"<!doctype html><iframe id="console" src="/console.html?voice=clock"></iframe>"#
                .to_owned(),
        ),
        ("/console.html", "text/html", fetch(console, "/").await),
        (
            "/console.js",
            "text/javascript",
            fetch(console, "/console.js").await,
        ),
        (
            "/console.css",
            "text/css",
            fetch(console, "/console.css").await,
        ),
    ])
    .await;
    browser.open(&format!("http://{}/", copy.addr)).await;
    let framed = browser
        .eval(
            r#"(() => { const f = document.getElementById("console").contentWindow;
                 return [f.document.getElementById("status").dataset.state,
                         f.eval("socket === null"),
                         f.document.getElementById("send").disabled]; })()"#,
        )
        .await;
    assert_eq!(framed, serde_json::json!(["idle", true, true]));
    assert_eq!(copy.upgrades.load(Ordering::Acquire), 0);
    // The user presses New call in the frame: now it dials.
    browser
        .eval(
            r#"document.getElementById("console").contentWindow.document
                 .getElementById("restart").click(); true"#,
        )
        .await;
    copy.upgrades_reach(1).await;
    // Top-level, the same page dials as it loads.
    browser
        .open(&format!("http://{}/console.html?voice=clock", copy.addr))
        .await;
    copy.upgrades_reach(2).await;
}

// A page that never reads loses its call once a write to it waits past `page_write_timeout`:
// its place under `max_calls` goes to the next page, and the brain is told End. Once 16 such
// pages kept the console answering 503 to every new one for as long as they stayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_never_reads_loses_its_call() {
    // A "brain" that speaks one unit without end, as fast as the console takes it, and reports
    // how each call ended.
    let brain = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let brain_url = format!("ws://{}", brain.local_addr().expect("an address"));
    let (ended_tx, mut ended) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = brain.accept().await {
            let ended_tx = ended_tx.clone();
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let (mut tx, mut rx) = ws.split();
                let speaking = tokio::spawn(async move {
                    let start = Frame::SpeechStart {
                        speech_id: 1,
                        turn_id: 1,
                    };
                    let _ = tx.send(Message::Binary(wire::encode(&start).into())).await;
                    let chunk = wire::encode(&Frame::SpeechChunk {
                        speech_id: 1,
                        text: "word ".repeat(3_000),
                    });
                    while tx.send(Message::Binary(chunk.clone().into())).await.is_ok() {}
                });
                let mut how = "closed";
                while let Some(Ok(message)) = rx.next().await {
                    if let Message::Binary(bytes) = message
                        && matches!(wire::decode(&bytes), Ok(Some(Frame::End)))
                    {
                        how = "End";
                        break;
                    }
                }
                speaking.abort();
                let _ = ended_tx.send(how);
            });
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let console = listener.local_addr().expect("an address");
    tokio::spawn(
        Console::new(brain_url)
            .max_calls(1)
            .page_write_timeout(Duration::from_millis(300))
            .serve(listener, std::future::pending()),
    );
    // The stuck page: a small receive buffer, and it never reads.
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    let stream = socket.connect(console).await.expect("the console");
    let (_stuck, _) = tokio_tungstenite::client_async(format!("ws://{console}/ws"), stream)
        .await
        .expect("the first page's call");

    let how = tokio::time::timeout(PATIENCE, ended.recv())
        .await
        .expect("the stuck page's call ended")
        .expect("the brain is running");
    assert_eq!(how, "End", "the console hung up as a caller does");
    // Its place is free again: the next page gets a call.
    let next = tokio::time::timeout(PATIENCE, async {
        loop {
            let stream = TcpStream::connect(console).await.expect("the console");
            match tokio_tungstenite::client_async(format!("ws://{console}/ws"), stream).await {
                Ok((page, _)) => return page,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    assert!(next.is_ok(), "the stuck page kept its place");
}

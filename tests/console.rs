//! The voice console in a real browser: headless Chromium (Debian's `chromium`, which
//! `scripts/test-all` installs when it is missing) opens the page, says something to a
//! model-backed brain answered by the stand-in provider, sees the reply stream in, barges in, and
//! the brain gets the Finalize the page showed as heard; an MCP server's tool call shows in its
//! timeline as any tool call does.
//!
//! Chromium is driven over the DevTools protocol on its own WebSocket (no driver crate): every
//! wait is a promise in the page that resolves when the DOM changes (a MutationObserver), so
//! nothing here sleeps.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use voqalize::console::Console;
use voqalize::prelude::*;
use voqalize_testing::{ModelServer, Provider, Reply};

/// Where a section of the screen is.
#[json_type]
struct Section {
    /// Which one.
    name: String,
}

/// The UI command the app gets.
#[json_type]
#[derive(Action)]
struct ShowSection {
    name: String,
}

/// A model-backed brain that reports every Finalize and app message it gets.
struct Coach {
    model: Model,
    heard: mpsc::UnboundedSender<Finalized>,
    app: mpsc::UnboundedSender<Rtvi>,
}

impl Brain for Coach {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }

    async fn on_finalize(&self, _session: &Session, finalized: Finalized) -> BrainResult {
        let _ = self.heard.send(finalized);
        Ok(())
    }

    async fn on_rtvi(&self, _session: &Session, message: Rtvi) -> BrainResult {
        let _ = self.app.send(message);
        Ok(())
    }
}

#[brain]
impl Coach {
    /// Show a section of the screen.
    #[tool]
    async fn show(&self, args: Section) -> Result<&'static str, SessionError> {
        self.session().dispatch(&ShowSection { name: args.name })?;
        Ok("shown")
    }
}

const REPLY: &str = "Your week looks steady: the average is five point four, a little lower than \
last week, and the mornings are where it improves most, so keep the walks going.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn talk_to_a_model_brain_in_the_browser_and_barge_in() {
    // The brain, on a real socket, answered by the stand-in Gemini.
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.reply(
        Reply::new()
            .call("show", json!({"name": "week"}))
            .text(REPLY)
            .usage(40, 30)
            .finish(),
    );
    let base = server.base_url();
    let (heard_tx, mut heard_rx) = mpsc::unbounded_channel();
    let (app_tx, mut app_rx) = mpsc::unbounded_channel();
    // The console in front of it; the brain runs in this process, so its tool runs reach the
    // page's timeline too.
    let console = console_beside(|shown| {
        move || Coach {
            model: Model::new(crate::support::layer(
                Provider::Gemini,
                &base,
                "gemini-test",
                voqalize::model::Timeouts::default(),
            ))
            .instruction("Be brief.")
            .on_tool_run(shown.tool_observer()),
            heard: heard_tx.clone(),
            app: app_tx.clone(),
        }
    })
    .await;
    let mut browser = live_page(console).await;

    // Say something; the model's reply streams into one unit and the clock starts "hearing" it.
    browser
        .eval(
            r#"document.getElementById("say").value = "How was my week?";
               document.getElementById("send").click(); true"#,
        )
        .await;
    let ui_command = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item')].map(e => e.textContent)
                 .find(t => t.startsWith("ui-command")) || null"#,
        )
        .await;
    assert!(
        ui_command
            .as_str()
            .is_some_and(|t| t.contains("show_section") && t.contains("week")),
        "{ui_command}"
    );
    // The tool call, with its arguments and the result the model read.
    let tool = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item')].map(e => e.textContent)
                 .find(t => t.startsWith("tool")) || null"#,
        )
        .await;
    assert!(
        tool.as_str()
            .is_some_and(|t| t.starts_with(r#"toolshow({"name":"week"}) → {"result":"shown"}"#)),
        "{tool}"
    );
    // Three words heard, the unit still playing: the user talks over it.
    let before = browser
        .wait_for(
            r#"(() => { const u = document.querySelector('.unit[data-state="playing"]');
                 return u && u.dataset.heardSoFar.trim().split(/\s+/).length >= 3
                   ? u.dataset.heardSoFar : null; })()"#,
        )
        .await;
    assert!(REPLY.starts_with(before.as_str().unwrap_or_default()));
    browser
        .eval(r#"document.getElementById("barge").click(); true"#)
        .await;
    let shown = browser
        .wait_for(
            r#"(() => { const u = document.querySelector('.unit[data-finalized="true"]');
                 return u ? [u.dataset.state, u.dataset.heard] : null; })()"#,
        )
        .await;
    assert_eq!(shown[0], "cut", "{shown}");
    let shown_heard = shown[1].as_str().unwrap_or_default().to_owned();

    // The brain got exactly that as heard truth: a true prefix, cut mid-reply.
    let finalized = tokio::time::timeout(Duration::from_secs(10), heard_rx.recv())
        .await
        .expect("a Finalize within 10 s")
        .expect("the brain is running");
    assert_eq!(finalized.heard, shown_heard);
    assert_eq!(finalized.generated, REPLY);
    assert!(finalized.interrupted());
    assert!(finalized.heard.len() >= before.as_str().unwrap_or_default().len());
    assert!(REPLY.starts_with(&finalized.heard) && finalized.heard.len() < REPLY.len());

    // The timeline shows the model's TurnStep with its tokens.
    let step = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item')].map(e => e.textContent)
                 .find(t => t.startsWith("TurnStepmodel")) || null"#,
        )
        .await;
    assert!(
        step.as_str().is_some_and(|t| t.contains("input_tokens 40")),
        "{step}"
    );

    // An AppEvent typed into the form reaches the brain as RTVI ui-event.
    browser
        .eval(
            r#"document.getElementById("event-name").value = "card_tapped";
               document.getElementById("event-payload").value = '{"id": 3}';
               document.getElementById("event-send").click(); true"#,
        )
        .await;
    browser
        .wait_for(
            r#"[...document.querySelectorAll('.item')].some(e =>
                 e.textContent === 'AppEventcard_tapped {"id":3}')"#,
        )
        .await;
    let event = tokio::time::timeout(Duration::from_secs(10), app_rx.recv())
        .await
        .expect("the app event within 10 s")
        .expect("the brain is running");
    assert_eq!(event.kind, RtviType::UiEvent);
    assert_eq!(
        event.data,
        Some(json!({"event": "card_tapped", "payload": {"id": 3}}))
    );

    // Hanging up ends the call: the page says so and takes no more input.
    browser
        .eval(r#"document.getElementById("end").click(); true"#)
        .await;
    let over = browser
        .wait_for(
            r#"document.getElementById("status").dataset.state === "closed"
                 && document.getElementById("send").disabled
                 && document.getElementById("status").textContent"#,
        )
        .await;
    assert_eq!(over, "you ended the call");
}

/// Headless Chromium with its DevTools socket, one page attached.
pub(crate) struct Browser {
    child: std::process::Child,
    profile: PathBuf,
    devtools: WebSocketStream<TcpStream>,
    session: Option<String>,
    next_id: u64,
    events: VecDeque<Value>,
}

impl Browser {
    /// Starts `$VOQALIZE_CHROMIUM` or `/usr/bin/chromium` headless, as the machine's notes say it
    /// runs here (no sandbox as root, no background networking on a closed network).
    pub(crate) async fn launch() -> Self {
        let binary = std::env::var_os("VOQALIZE_CHROMIUM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
        assert!(
            binary.exists(),
            "{} is missing: scripts/test-all installs Debian's chromium package \
             (apt-get install chromium), or point VOQALIZE_CHROMIUM at a Chromium",
            binary.display()
        );
        // One profile per browser: two browsers of this process on one profile would be one.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let profile = std::env::temp_dir().join(format!(
            "voqalize-console-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut child = std::process::Command::new(&binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
                "about:blank",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("Chromium starts");
        // Chromium prints its DevTools address on stderr once it listens.
        let stderr = child.stderr.take().expect("a piped stderr");
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(url) = line.strip_prefix("DevTools listening on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .expect("Chromium listens within 30 s")
            .expect("Chromium printed its DevTools address");
        let authority = url
            .strip_prefix("ws://")
            .and_then(|rest| rest.split('/').next())
            .expect("a ws:// address")
            .to_owned();
        let stream = TcpStream::connect(&authority)
            .await
            .expect("the DevTools port");
        let (devtools, _) = tokio_tungstenite::client_async(url.as_str(), stream)
            .await
            .expect("the DevTools socket");
        Browser {
            child,
            profile,
            devtools,
            session: None,
            next_id: 0,
            events: VecDeque::new(),
        }
    }

    /// One DevTools command (on the attached page once there is one); its result.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        self.devtools
            .send(Message::Text(message.to_string().into()))
            .await
            .expect("DevTools takes a command");
        loop {
            let reply = self.read().await;
            if reply["id"] == id {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
            self.events.push_back(reply);
        }
    }

    async fn read(&mut self) -> Value {
        // Longer than a `wait_for`'s own 30 s, so that its failure (with the timeline) comes first.
        let next = tokio::time::timeout(Duration::from_secs(40), self.devtools.next())
            .await
            .expect("DevTools answers within 40 s");
        match next {
            Some(Ok(Message::Text(text))) => serde_json::from_str(&text).expect("DevTools JSON"),
            Some(Ok(_)) => json!({}),
            other => panic!("the DevTools socket closed: {other:?}"),
        }
    }

    /// Opens `url` in a new page and waits for its load event.
    pub(crate) async fn open(&mut self, url: &str) {
        let target = self
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = self
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        self.session = attached["sessionId"].as_str().map(str::to_owned);
        self.call("Page.enable", json!({})).await;
        self.call("Page.navigate", json!({"url": url})).await;
        loop {
            let event = match self.events.pop_front() {
                Some(e) => e,
                None => self.read().await,
            };
            if event["method"] == "Page.loadEventFired" {
                return;
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise); its value.
    pub(crate) async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "the page threw: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is truthy, re-evaluated on every change to the page's DOM (at
    /// most 30 s); its value.
    pub(crate) async fn wait_for(&mut self, expression: &str) -> Value {
        let waiting = format!(
            r#"new Promise((resolve, reject) => {{
                 const check = () => {{ const v = ({expression}); if (v) {{ observer.disconnect(); clearTimeout(cap); resolve(v); }} }};
                 const observer = new MutationObserver(check);
                 const cap = setTimeout(() => {{ observer.disconnect(); reject(new Error("not within 30 s: " + {source} + "\nthe timeline: " + (document.getElementById("timeline")?.innerText ?? "").slice(0, 4000))); }}, 30000);
                 observer.observe(document.documentElement, {{subtree: true, childList: true, characterData: true, attributes: true}});
                 check();
               }})"#,
            source = serde_json::to_string(expression).unwrap_or_default(),
        );
        self.eval(&waiting).await
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

// A page opened again and again cannot pile up calls: past `max_calls` the upgrade is refused
// until a call ends.
/// Serves `console` on a loopback port and opens its page in headless Chromium, once the page's
/// call is live.
async fn live_page(console: voqalize::console::Console) -> Browser {
    let console_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let page_url = format!(
        "http://{}/?voice=clock&wpm=240",
        console_listener.local_addr().expect("an address")
    );
    tokio::spawn(console.serve(console_listener, std::future::pending()));
    let mut browser = Browser::launch().await;
    browser.open(&page_url).await;
    browser
        .wait_for(r#"document.getElementById("status").dataset.state === "live""#)
        .await;
    browser
}

#[tokio::test]
async fn the_console_holds_at_most_max_calls() {
    // A "brain" that takes the TCP connection and never answers the upgrade: the call stays open.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let brain_url = format!("ws://{}", silent.local_addr().expect("an address"));
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            kept.push(stream);
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(
        Console::new(brain_url)
            .max_calls(1)
            .serve(listener, std::future::pending()),
    );
    let open = |addr: std::net::SocketAddr| async move {
        let stream = TcpStream::connect(addr).await.expect("the console");
        tokio_tungstenite::client_async(format!("ws://{addr}/ws"), stream).await
    };
    let (_first, _) = open(addr).await.expect("the first call");
    match open(addr).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 503);
        }
        other => panic!("a second call was not refused: {:?}", other.map(|_| ())),
    }
    held.abort();
}

/// A brain whose model's tools are all an MCP server's.
struct McpDesk {
    model: Model,
}

impl Brain for McpDesk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl McpDesk {}

// An MCP tool call shows in the page's timeline as any tool call does (its name as the model
// reads it, its arguments, the result), and its TurnStep as kind `mcp` with the toolset's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_call_shows_in_the_console_timeline() {
    let events = crate::mcp_servers::events_file("console_timeline");
    let toolset = voqalize::mcp::McpToolset::builder("crm", crate::mcp_servers::fastmcp(&events))
        .allow(["add"])
        .prefix("crm_")
        .connect()
        .await
        .expect("the FastMCP server connects");
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.reply(
        Reply::new()
            .call("crm_add", json!({"a": 2, "b": 40}))
            .finish(),
    );
    server.reply(Reply::new().text("That makes forty-two.").finish());
    let base = server.base_url();
    let console = console_beside(|shown| {
        move || McpDesk {
            model: Model::new(crate::support::layer(
                Provider::Gemini,
                &base,
                "gemini-test",
                voqalize::model::Timeouts::default(),
            ))
            .on_tool_run(shown.tool_observer())
            .mcp(toolset.clone())
            .expect("one toolset clashes with none"),
        }
    })
    .await;
    let mut browser = live_page(console).await;
    browser
        .eval(
            r#"document.getElementById("say").value = "Add two and forty.";
               document.getElementById("send").click(); true"#,
        )
        .await;
    let tool = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item')].map(e => e.textContent)
                 .find(t => t.startsWith("tool")) || null"#,
        )
        .await;
    assert!(
        tool.as_str().is_some_and(
            |t| t.starts_with(r#"toolcrm_add({"a":2,"b":40}) → {"result":{"sum":42}}"#)
        ),
        "{tool}"
    );
    let step = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item')].map(e => e.textContent)
                 .find(t => t.startsWith("TurnStepmcp")) || null"#,
        )
        .await;
    assert!(
        step.as_str()
            .is_some_and(|t| t.starts_with("TurnStepmcp crm_add (crm)")),
        "{step}"
    );
    browser
        .wait_for(
            r#"[...document.querySelectorAll('.unit')].some(u =>
                 u.textContent.includes("forty-two"))"#,
        )
        .await;
}

// A workflow's stage and each move show in the page's timeline as what they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_and_its_move_show_in_the_console_timeline() {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.reply(
        Reply::new()
            .call("verified", json!({"patient": "p-17"}))
            .finish(),
    );
    server.reply(Reply::new().text("Which day suits you?").finish());
    let console =
        console_beside(|_| crate::stages::desks(server.base_url(), voqalize::voice::Workflow::new))
            .await;
    let mut browser = live_page(console).await;
    browser
        .eval(
            r#"document.getElementById("say").value = "I'm Ana Lima.";
               document.getElementById("send").click(); true"#,
        )
        .await;
    let moved = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item.stage')].map(e => e.textContent)
                 .find(t => t.includes("→")) || null"#,
        )
        .await;
    assert_eq!(moved.as_str(), Some("StageVerify → Booking (fresh)"));
    let first = browser
        .wait_for(
            r#"[...document.querySelectorAll('.item.stage')].map(e => e.textContent)[0] || null"#,
        )
        .await;
    assert_eq!(first.as_str(), Some("StageVerify"));
}

/// Serves the brains `make` builds (given the console, for its tool observer) on a free port of
/// 127.0.0.1, in this process, and gives the console in front of them.
async fn console_beside<M: MakeBrain>(make: impl FnOnce(Console) -> M) -> Console {
    let brain_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let brain_url = format!("ws://{}", brain_listener.local_addr().expect("an address"));
    let console = Console::new(brain_url);
    tokio::spawn(voqalize::host::serve(
        brain_listener,
        make(console.clone()),
        HostOptions::allow_unverified(),
    ));
    console
}

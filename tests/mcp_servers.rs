//! MCP toolsets against real servers: the MCP project's reference server from npm (over stdio
//! and streamable HTTP), a FastMCP server (the Python SDK), and a hostile server of ours
//! (`tests/mcp/hostile_server.py`). `scripts/mcp-servers` installs the first two into
//! `target/mcp` (the tests run it once if they are missing).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use voqalize::mcp::{McpError, McpServer, McpTool, McpToolset};
use voqalize::tools::{ToolErrorKind, ToolPolicy};

/// The workspace's root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in the workspace")
        .to_path_buf()
}

/// Installs the servers once per run when they are missing (fast when they are there).
pub(crate) fn installed() -> &'static Path {
    static DONE: OnceLock<PathBuf> = OnceLock::new();
    DONE.get_or_init(|| {
        let status = std::process::Command::new(root().join("scripts/mcp-servers"))
            .status()
            .expect("scripts/mcp-servers runs");
        assert!(status.success(), "scripts/mcp-servers failed");
        root().join("target/mcp")
    })
}

/// The reference server over stdio.
pub(crate) fn everything() -> McpServer {
    let entry =
        installed().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    McpServer::stdio("node").arg(entry.to_string_lossy())
}

/// The FastMCP server over stdio, its events written to `events`.
pub(crate) fn fastmcp(events: &Path) -> McpServer {
    McpServer::stdio(installed().join("venv/bin/python").to_string_lossy())
        .arg(root().join("tests/mcp/fastmcp_server.py").to_string_lossy())
        .env("MCP_EVENTS_FILE", events.to_string_lossy())
}

/// The hostile server in `mode`.
pub(crate) fn hostile(mode: &str) -> McpServer {
    McpServer::stdio("python3")
        .arg(root().join("tests/mcp/hostile_server.py").to_string_lossy())
        .arg(mode)
}

/// A file for a server's events, empty, unique to the test.
pub(crate) fn events_file(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("voqalize-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join(format!("{test}.jsonl"));
    let _ = std::fs::remove_file(&path);
    path
}

/// The events a server wrote, once `check` holds over them (10 s at most).
pub(crate) async fn events_when(path: &Path, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events: Vec<Value> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if check(&events) || tokio::time::Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn named(events: &[Value], event: &str) -> usize {
    events.iter().filter(|e| e["event"] == event).count()
}

#[tokio::test]
async fn the_reference_server_over_stdio_lends_the_allowed_tools_under_a_prefix() {
    let toolset = McpToolset::builder("everything", everything())
        .allow(["echo", "get-sum", "get-structured-content"])
        .prefix("ev_")
        .connect()
        .await
        .expect("server-everything connects over stdio");
    let mut names = toolset.tool_names();
    names.sort();
    assert_eq!(
        names,
        ["ev_echo", "ev_get-structured-content", "ev_get-sum"]
    );
    assert!(toolset.is_connected());
    let echoed = toolset.call("ev_echo", json!({"message": "hi"})).await;
    assert_eq!(echoed.unwrap(), json!("Echo: hi"));
    let weather = toolset
        .call("ev_get-structured-content", json!({"location": "Chicago"}))
        .await
        .expect("a structured result");
    assert!(weather.get("temperature").is_some(), "{weather}");
    // Arguments the server refuses come back as its own text, marked as a failure.
    let refused = toolset.call("ev_echo", json!({})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::Failed);
    assert!(
        refused.message.contains("Invalid arguments"),
        "{}",
        refused.message
    );
    let unknown = toolset.call("echo", json!({})).await.unwrap_err();
    assert_eq!(unknown.kind, ToolErrorKind::Unknown);
}

/// A free port on 127.0.0.1, for a server that cannot report the port it bound.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("an address").port()
}

/// Starts a server process and waits for `ready` on its stderr.
async fn start_http(mut command: tokio::process::Command, ready: &str) -> tokio::process::Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("the server starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(ready) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the server said `{ready}`");
    // The rest of its stderr is drained, so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

#[tokio::test]
async fn the_reference_server_over_streamable_http_answers_with_structured_content() {
    let port = free_port();
    let entry =
        installed().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut command = tokio::process::Command::new("node");
    command
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let _server = start_http(command, "listening on port").await;
    let toolset = McpToolset::builder(
        "everything-http",
        McpServer::http(format!("http://127.0.0.1:{port}/mcp")).bearer("a-token"),
    )
    .allow(["get-structured-content", "get-sum"])
    .connect()
    .await
    .expect("server-everything connects over streamable HTTP");
    let weather = toolset
        .call("get-structured-content", json!({"location": "New York"}))
        .await
        .expect("a structured result");
    assert!(weather.get("conditions").is_some(), "{weather}");
    let sum = toolset.call("get-sum", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum.unwrap(), json!("The sum of 2 and 3 is 5."));
}

#[tokio::test]
async fn a_fastmcp_server_over_http_says_its_error_and_grows_its_list() {
    let mut command = tokio::process::Command::new(installed().join("venv/bin/python"));
    let port = free_port();
    command
        .arg(root().join("tests/mcp/fastmcp_server.py"))
        .arg("--http")
        .arg(port.to_string());
    let _server = start_http(command, "listening").await;
    let toolset = McpToolset::builder(
        "fast-http",
        McpServer::http(format!("http://127.0.0.1:{port}/mcp")),
    )
    .connect()
    .await
    .expect("the FastMCP server connects over HTTP");
    let failed = toolset
        .call("fail", json!({"reason": "the CRM is down"}))
        .await;
    let failed = failed.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Failed);
    assert!(
        failed.message.contains("the CRM is down"),
        "{}",
        failed.message
    );
    assert_eq!(
        toolset.call("add", json!({"a": 2, "b": 40})).await.unwrap(),
        json!({"sum": 42})
    );
    assert!(!toolset.tool_names().contains(&"extra_tool".to_owned()));
    // FastMCP wraps a plain return in structured content, which is what the model reads.
    assert_eq!(
        toolset.call("grow", json!({})).await.unwrap(),
        json!({"result": "grown"})
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !toolset.tool_names().contains(&"extra_tool".to_owned()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the list was fetched again"
        );
        toolset.listed(Duration::from_millis(200)).await;
    }
    assert_eq!(
        toolset.call("extra_tool", json!({})).await.unwrap(),
        json!({"result": "extra"})
    );
}

#[tokio::test]
async fn a_call_over_its_timeout_is_cancelled_on_the_server() {
    let events = events_file("timeout");
    let toolset = McpToolset::builder("fast", fastmcp(&events))
        .tool("slow", McpTool::new().timeout(Duration::from_millis(500)))
        .connect()
        .await
        .expect("the FastMCP server connects over stdio");
    let slow = toolset
        .call("slow", json!({"seconds": 30, "steps": 30}))
        .await;
    assert_eq!(slow.unwrap_err().kind, ToolErrorKind::TimedOut);
    let seen = events_when(&events, |e| named(e, "cancelled") == 1).await;
    assert_eq!(named(&seen, "cancelled"), 1, "{seen:?}");
    assert_eq!(named(&seen, "finished"), 0, "{seen:?}");
    // The connection goes on.
    assert_eq!(
        toolset
            .call("echo", json!({"text": "still here"}))
            .await
            .unwrap(),
        json!({"result": "still here"})
    );
}

#[tokio::test]
async fn a_server_down_at_start_is_an_error_that_names_it() {
    let missing = McpToolset::builder("ghost", McpServer::stdio("/nonexistent/mcp-server"))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(missing, McpError::Spawn { .. }), "{missing:?}");
    assert!(missing.to_string().contains("ghost"), "{missing}");
    let refused = McpToolset::builder(
        "closed",
        McpServer::http(format!("http://127.0.0.1:{}/mcp", free_port())),
    )
    .connect_timeout(Duration::from_secs(5))
    .connect()
    .await
    .unwrap_err();
    assert!(
        matches!(refused, McpError::Connect { tries: 1, .. }),
        "{refused:?}"
    );
    let bad = McpToolset::builder("bad prefix", hostile("normal"))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(bad, McpError::Config { .. }), "{bad:?}");
}

#[tokio::test]
async fn a_hostile_server_cannot_break_the_toolset_or_its_bystanders() {
    // 10,000 tools: 128 kept, the rest left out.
    let many = McpToolset::builder("many", hostile("many_tools"))
        .connect()
        .await
        .unwrap();
    assert_eq!(many.tool_names().len(), 128);
    // A result over the message bound is dropped unread: the call times out, the next works.
    let giant = McpToolset::builder("giant", hostile("giant"))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    let e = giant.call("t", json!({})).await.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::TimedOut, "{e:?}");
    assert!(giant.is_connected());
    // Garbage lines before the result: the result still arrives.
    let malformed = McpToolset::builder("malformed", hostile("malformed"))
        .connect()
        .await
        .unwrap();
    assert_eq!(
        malformed.call("t", json!({})).await.unwrap(),
        json!("survived")
    );
    // A result that never comes, and endless progress: the timeout ends both.
    let never = McpToolset::builder("never", hostile("never"))
        .timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    assert_eq!(
        never.call("t", json!({})).await.unwrap_err().kind,
        ToolErrorKind::TimedOut
    );
    let events = events_file("endless");
    let endless = McpToolset::builder(
        "endless",
        hostile("endless_progress").env("MCP_EVENTS_FILE", events.to_string_lossy()),
    )
    .timeout(Duration::from_millis(500))
    .connect()
    .await
    .unwrap();
    assert_eq!(
        endless.call("t", json!({})).await.unwrap_err().kind,
        ToolErrorKind::TimedOut
    );
    let seen = events_when(&events, |e| named(e, "cancelled") == 1).await;
    assert_eq!(
        named(&seen, "cancelled"),
        1,
        "the server was told: {seen:?}"
    );
}

#[tokio::test]
async fn a_schema_too_deep_to_read_fails_the_listing_and_says_so() {
    let deep = McpToolset::builder("deep", hostile("deep_schema"))
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await;
    // The listing's message is over the 4 MiB bound: it is dropped unread, and the first
    // listing never comes.
    let Err(McpError::Connect { why, .. }) = deep else {
        panic!("{deep:?}")
    };
    assert!(why.contains("tools/list"), "{why}");
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_the_call_and_is_restarted() {
    let starts = events_file("starts");
    let toolset = McpToolset::builder(
        "phoenix",
        hostile("restart_counter").env("MCP_STARTS_FILE", starts.to_string_lossy()),
    )
    .connect()
    .await
    .unwrap();
    let died = toolset.call("t", json!({})).await.unwrap_err();
    assert_eq!(died.kind, ToolErrorKind::Failed);
    assert!(
        died.message.contains("closed the connection"),
        "{}",
        died.message
    );
    assert!(toolset.listed(Duration::from_secs(10)).await || toolset.is_connected());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !toolset.is_connected() {
        assert!(tokio::time::Instant::now() < deadline, "reconnected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        toolset.call("t", json!({})).await.unwrap(),
        json!("start 2")
    );
    let _ = ToolPolicy::Cancel;
}

#[tokio::test]
async fn a_server_that_comes_up_late_is_waited_for_with_retry_at_start() {
    let port = free_port();
    let connecting = tokio::spawn(
        McpToolset::builder(
            "late",
            McpServer::http(format!("http://127.0.0.1:{port}/mcp")),
        )
        .connect_timeout(Duration::from_secs(5))
        .retry_at_start(Duration::from_secs(60))
        .connect(),
    );
    // The first tries fail (nothing listens yet); the server then starts.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!connecting.is_finished(), "it is still trying");
    let mut command = tokio::process::Command::new(installed().join("venv/bin/python"));
    command
        .arg(root().join("tests/mcp/fastmcp_server.py"))
        .arg("--http")
        .arg(port.to_string());
    let _server = start_http(command, "listening").await;
    let toolset = connecting
        .await
        .unwrap()
        .expect("connected once the server was up");
    assert!(toolset.tool_names().contains(&"echo".to_owned()));
}

#[tokio::test]
async fn the_client_opens_with_a_protocol_version_that_has_an_initialize_handshake() {
    // A stand-in HTTP endpoint that reads the first request's body and answers 503.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let read = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let body = loop {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request ended early");
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_owned())
                    })
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    break body.to_owned();
                }
            }
        };
        let _ = socket
            .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        serde_json::from_str::<Value>(&body).unwrap()
    });
    let refused = McpToolset::builder("version", McpServer::http(url))
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await;
    assert!(refused.is_err());
    let initialize = read.await.unwrap();
    assert_eq!(initialize["method"], "initialize");
    let version = initialize["params"]["protocolVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        ["2025-06-18", "2025-11-25"].contains(&version.as_str()),
        "{version}"
    );
    assert_eq!(initialize["params"]["clientInfo"]["name"], "voqalize");
}

#[tokio::test]
async fn a_newcomers_mistakes_fail_connect_with_what_to_fix() {
    // A typo in the allowlist: the error names it and what the server lists.
    let typo = McpToolset::builder("typo", hostile("normal"))
        .allow(["ping_tol"])
        .connect()
        .await
        .unwrap_err();
    let McpError::Config { what, .. } = &typo else {
        panic!("{typo:?}")
    };
    assert!(
        what.contains("'ping_tol'") && what.contains("ping_tool"),
        "{what}"
    );
    // A server that exits at once: its exit status and its last stderr line say why.
    let exits = McpToolset::builder(
        "exits",
        McpServer::stdio("sh").args(["-c", "echo 'boom: CRM_API_KEY is not set' >&2; exit 3"]),
    )
    .connect()
    .await
    .unwrap_err();
    let McpError::Connect { why, .. } = &exits else {
        panic!("{exits:?}")
    };
    assert!(why.contains("exit status: 3"), "{why}");
    assert!(why.contains("CRM_API_KEY is not set"), "{why}");
}

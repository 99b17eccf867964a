//! The MCP client attacked by a hostile or broken server (`tests/mcp/hostile_server.py`): a
//! server that floods notifications and requests of its own, one that dies just after each
//! connection is up, one whose pipes outlive it, one that pages its tool list forever. The call
//! and its bystanders go on, the logs stay small, the work stays bounded.

use std::time::{Duration, Instant};

use serde_json::json;
use voqalize::mcp::McpToolset;
use voqalize::tools::ToolErrorKind;

use crate::mcp_servers::{events_file, events_when, hostile};
use crate::support::logs;

/// A bound for waits on events that come in well under a second on an idle machine.
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_server_flooding_big_notifications_and_requests_logs_nothing_of_them_and_its_call_goes_on()
 {
    let capture = logs();
    let toolset = McpToolset::builder("chatty", hostile("chatty"))
        .connect()
        .await
        .expect("the chatty server connects");
    for _ in 0..2 {
        let answer = tokio::time::timeout(WAIT, toolset.call("t", json!({})))
            .await
            .expect("the call ends");
        assert_eq!(answer.expect("the call succeeds"), json!("t"));
    }
    assert!(toolset.is_connected());
    // 8 logging, progress, unknown notifications and 24 requests of 1 MiB each per call: none
    // of it reaches a log line.
    let lines = capture.lines_with("chatty-marker");
    assert!(
        lines.is_empty(),
        "{} log lines hold the server's text, the longest {} bytes",
        lines.len(),
        lines.iter().map(String::len).max().unwrap_or(0)
    );
}

#[tokio::test]
async fn a_server_that_dies_after_each_connection_is_restarted_with_growing_backoff_and_one_warning()
 {
    let capture = logs();
    let starts = events_file("crash_loop_starts");
    let started = Instant::now();
    let toolset = McpToolset::builder(
        "crashloop1",
        hostile("crash_loop").env("MCP_STARTS_FILE", starts.to_string_lossy()),
    )
    .connect()
    .await
    .expect("the first connection lists the tools");
    let count = || {
        std::fs::read_to_string(&starts)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + WAIT;
    while count() < 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(count() >= 5, "the server was restarted: {} starts", count());
    // Waits of 250 ms, 500 ms, 1 s and 2 s between the 5 starts at least: the backoff grows
    // while each connection dies at once (the server's own start time only adds to it).
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(3700),
        "5 starts within {elapsed:?}: the backoff did not grow"
    );
    // One warning for the server going down; the others are counted.
    let warned = capture
        .lines_with("MCP toolset crashloop1")
        .into_iter()
        .filter(|l| l.contains("WARN"))
        .count();
    assert!(
        warned <= 2,
        "{warned} warnings for one server going down again and again"
    );
    drop(toolset);
}

#[tokio::test]
async fn a_server_gone_with_its_pipes_held_open_fails_its_call_at_once_and_is_restarted() {
    let toolset = McpToolset::builder("orphan", hostile("orphan"))
        .timeout(Duration::from_secs(600))
        .connect()
        .await
        .expect("the orphan server connects");
    let failed = tokio::time::timeout(WAIT, toolset.call("t", json!({})))
        .await
        .expect("the call ends when the server's process exits, not at its timeout")
        .expect_err("the server exited before answering");
    assert_eq!(failed.kind, ToolErrorKind::Failed, "{}", failed.message);
    assert!(
        failed.message.contains("closed the connection") || failed.message.contains("down"),
        "{}",
        failed.message
    );
    // The supervisor starts it again.
    let deadline = Instant::now() + WAIT;
    while !toolset.is_connected() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(toolset.is_connected(), "the server was restarted");
}

#[tokio::test]
async fn a_tool_list_paged_forever_is_read_only_until_max_tools_are_kept() {
    let events = events_file("paging");
    let toolset = McpToolset::builder(
        "paging",
        hostile("paging").env("MCP_EVENTS_FILE", events.to_string_lossy()),
    )
    .max_tools(50)
    .connect()
    .await
    .expect("the paging server connects");
    assert_eq!(toolset.tool_names().len(), 50);
    assert_eq!(toolset.tool_names()[0], "t");
    // Each page holds 200 tools of about 2 KiB: the first one fills max_tools; the pages the
    // server would send on (up to 32, 13 MB) are not asked for.
    let listed = events_when(&events, |e| !e.is_empty()).await;
    assert_eq!(
        listed.len(),
        1,
        "{} pages asked for after max_tools were kept",
        listed.len()
    );
}

#[tokio::test]
async fn results_rmcp_cannot_type_are_read_as_they_came_and_odd_ones_end_their_calls() {
    let toolset = McpToolset::builder("odd", hostile("odd"))
        .timeout(Duration::from_secs(600))
        .connect()
        .await
        .expect("the odd server connects");
    let call = |tool: &'static str| {
        let toolset = toolset.clone();
        async move {
            tokio::time::timeout(WAIT, toolset.call(tool, json!({})))
                .await
                .unwrap_or_else(|_| panic!("{tool}: the call ends"))
        }
    };
    // A content block of a type newer than rmcp's: the call's text is still read.
    assert_eq!(
        call("unknown_block").await.expect("a result"),
        json!("[video content]\nafter")
    );
    // 300,000 blocks: the first 1000 read, the rest counted.
    let many = call("many_blocks").await.expect("a result");
    let many = many.as_str().expect("text");
    assert!(
        many.ends_with("[299000 more content blocks not read]"),
        "{}",
        &many[many.len() - 100..]
    );
    assert!(many.len() < 20_000, "{} bytes", many.len());
    let failed = call("error_no_content").await.expect_err("isError");
    assert_eq!(failed.kind, ToolErrorKind::Failed);
    assert_eq!(call("no_content").await.expect("a result"), json!(""));
    assert_eq!(
        call("string_structured").await.expect("a result"),
        json!("just a string")
    );
    for tool in ["not_a_list", "deep_structured", "wrong_id_type"] {
        let _ = call(tool).await;
    }
    assert!(toolset.is_connected());
    assert_eq!(call("t").await.expect("a result"), json!("t"));
}

#[tokio::test]
async fn a_tools_list_changed_storm_is_listed_again_about_once_a_second() {
    let events = events_file("storm");
    let toolset = McpToolset::builder(
        "storm",
        hostile("storm").env("MCP_EVENTS_FILE", events.to_string_lossy()),
    )
    .connect()
    .await
    .expect("the storm server connects");
    // 1500 notifications in 3 s (the server's own clock): a listing a second at most, and one
    // more for the last notification.
    let over = events_when(&events, |e| e.iter().any(|e| e["event"] == "storm_over")).await;
    let lists = over
        .iter()
        .find(|e| e["event"] == "storm_over")
        .and_then(|e| e["lists"].as_u64())
        .expect("the storm ended");
    assert!(lists <= 5, "{lists} listings in a 3 s storm");
    assert_eq!(
        toolset.call("t", json!({})).await.expect("a result"),
        json!("t")
    );
}

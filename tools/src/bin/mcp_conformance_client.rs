//! The client that `tools/scripts/mcp-conformance` runs against the official MCP conformance
//! suite (`@modelcontextprotocol/conformance`): it connects one `voqalize::mcp::McpToolset` over
//! streamable HTTP to the suite's test server and does what the scenario asks.
//!
//! ```text
//! MCP_CONFORMANCE_SCENARIO=tools_call mcp_conformance_client http://localhost:PORT/mcp
//! ```
//!
//! The server URL is the last argument; the scenario comes from `MCP_CONFORMANCE_SCENARIO`:
//! `initialize` (connect: handshake and listing), `tools_call` (call `add_numbers` with two
//! numbers), `sse-retry` (call `test_reconnection`, whose result comes after an SSE reconnection),
//! `elicitation-sep1034-client-defaults` (call `test_client_elicitation_defaults`). Exit 0 when it
//! all worked, 1 with one line on stderr saying what failed. `RUST_LOG` turns on the SDK's logs.

use std::process::ExitCode;

use serde_json::{Value, json};
use voqalize::mcp::{McpServer, McpToolset};

/// The tool each scenario calls and its arguments (`None`: connecting is the whole test).
fn call_for(scenario: &str) -> Result<Option<(&'static str, Value)>, String> {
    match scenario {
        "initialize" => Ok(None),
        "tools_call" => Ok(Some(("add_numbers", json!({ "a": 5, "b": 3 })))),
        "sse-retry" => Ok(Some(("test_reconnection", json!({})))),
        "elicitation-sep1034-client-defaults" => {
            Ok(Some(("test_client_elicitation_defaults", json!({}))))
        }
        other => Err(format!("unknown scenario '{other}'")),
    }
}

async fn run(url: String, scenario: &str) -> Result<(), String> {
    let call = call_for(scenario)?;
    let toolset = McpToolset::builder("conformance", McpServer::http(url))
        .connect()
        .await
        .map_err(|e| format!("connect failed: {e}"))?;
    let Some((tool, arguments)) = call else {
        return Ok(());
    };
    let result = toolset
        .call(tool, arguments)
        .await
        .map_err(|e| format!("calling {tool} failed ({:?}): {e}", e.kind))?;
    println!("{tool}: {result}");
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = voqalize::logging::init("info", voqalize::logging::Format::Human);
    }
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!(
            "mcp_conformance_client: usage: mcp_conformance_client <server URL> (scenario in MCP_CONFORMANCE_SCENARIO)"
        );
        return ExitCode::from(2);
    };
    match run(url, &scenario).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("mcp_conformance_client: scenario '{scenario}': {why}");
            ExitCode::FAILURE
        }
    }
}

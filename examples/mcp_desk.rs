//! The MCP desk: a model-backed brain with one `#[tool]` of its own (`open_ticket`) and the tools
//! an MCP server lends it (feature `mcp` of `voqalize`, docs/mcp.md).
//!
//! ```text
//! cargo run --example mcp_desk -- --provider offline --console
//! GEMINI_API_KEY=... cargo run --example mcp_desk -- --allow-unverified
//! cargo run --example mcp_desk -- --provider offline --console --mcp-command "uvx mcp-server-time"
//! cargo run --example mcp_desk -- --provider offline --console --mcp-url http://127.0.0.1:3001/mcp
//! ```
//!
//! By default it runs the MCP project's reference server over stdio
//! (`npx -y @modelcontextprotocol/server-everything`: Node.js and npm, and the network on the first
//! run) and lends four of its tools under the prefix `ev_`: `ev_echo`, `ev_get-sum`,
//! `ev_get-structured-content` and `ev_trigger-long-running-operation`, the last one cancelled on
//! the server when the caller barges in. `--mcp-command` runs another server over stdio (its
//! program and arguments, split at spaces), `--mcp-url` reaches one over streamable HTTP (a
//! bearer token from `MCP_BEARER_TOKEN` when set); either lends every tool that server lists,
//! under the prefix `mcp_`.
//!
//! The server is connected once, in `main`, before the brain listens: every call's `Model` takes
//! a clone of the one toolset (one process, one connection). It logs the tools it lends.
//!
//! `--provider offline` answers with a stand-in model in this process that follows a few rules
//! (`offline` below) and calls the tools it was declared; `--console` serves the voice console
//! beside the brain and prints its URL: its timeline shows every tool call, the MCP ones as any
//! other, and their TurnSteps (kind `mcp`). The offline rules know the reference server's tools
//! (and the desk's own `open_ticket`): with another server, talk to it through a real provider.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use clap::Parser;
use voqalize::mcp::{McpServer, McpTool, McpToolset};
use voqalize::prelude::*;
use voqalize::tools::ToolPolicy;
use voqalize_testing::{ReadBack, Reply, Said};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/model.rs"]
mod model;

const INSTRUCTION: &str = "You are the help desk of a test lab, on a voice call. Answer in one or \
two short spoken sentences, with no lists or markdown. Use the tools you have: echo text back, \
add numbers, read the weather of a city, run a long operation, or open a ticket.";

/// The reference server the desk runs when no other is named.
const EVERYTHING: &str = "npx -y @modelcontextprotocol/server-everything";

/// The reference server's tools the desk lends (their names at the server).
const EVERYTHING_TOOLS: [&str; 4] = [
    "echo",
    "get-sum",
    "get-structured-content",
    "trigger-long-running-operation",
];

/// Serve the MCP desk: a model-backed brain lending an MCP server's tools to its model.
#[derive(Parser, Debug)]
struct DeskArgs {
    #[command(flatten)]
    model: model::ModelArgs,
    /// Run this MCP server over stdio instead of the reference server: its program and its
    /// arguments, split at spaces (no shell quoting), such as "uvx mcp-server-time".
    #[arg(long, value_name = "COMMAND", conflicts_with = "mcp_url")]
    mcp_command: Option<String>,
    /// Reach the MCP server at this streamable HTTP endpoint instead, such as
    /// http://127.0.0.1:3001/mcp (`Authorization: Bearer $MCP_BEARER_TOKEN` when that is set).
    #[arg(long, value_name = "URL")]
    mcp_url: Option<String>,
}

/// An issue to open a ticket for.
#[json_type]
struct Issue {
    /// What the caller needs, in one sentence.
    summary: String,
}

/// One call's desk: its voice core, and the tickets opened during the call.
struct Desk {
    model: Model,
    tickets: AtomicU32,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Desk {
    /// Open a support ticket for the caller's issue; returns its number.
    #[tool]
    async fn open_ticket(&self, issue: Issue) -> String {
        let n = self.tickets.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(len = issue.summary.len(), "ticket {n} opened");
        format!("ticket T-{n} opened")
    }
}

/// Connects the MCP server the flags name (the reference server by default), once.
async fn connect(args: &DeskArgs) -> Result<McpToolset, voqalize::mcp::McpError> {
    if let Some(url) = &args.mcp_url {
        let mut server = McpServer::http(url);
        if let Ok(token) = std::env::var("MCP_BEARER_TOKEN")
            && !token.is_empty()
        {
            server = server.bearer(token);
        }
        return McpToolset::builder("server", server)
            .prefix("mcp_")
            .filler("One moment.")
            .connect()
            .await;
    }
    let command = args.mcp_command.as_deref().unwrap_or(EVERYTHING);
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or("npx");
    let server = McpServer::stdio(program).args(words);
    if args.mcp_command.is_some() {
        return McpToolset::builder("server", server)
            .prefix("mcp_")
            .filler("One moment.")
            .connect()
            .await;
    }
    McpToolset::builder("everything", server)
        .allow(EVERYTHING_TOOLS)
        .prefix("ev_")
        // npx fetches the package on its first run: give the first connection time for that.
        .connect_timeout(Duration::from_secs(120))
        .tool(
            "trigger-long-running-operation",
            McpTool::new()
                .on_barge_in(ToolPolicy::Cancel)
                .timeout(Duration::from_secs(60))
                .filler("That takes a little while, bear with me."),
        )
        .connect()
        .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = DeskArgs::parse();
    // Logging first, so what the MCP connection logs as it starts is seen.
    args.model.host.init_logging()?;
    // Once for the process: each call's Model takes a clone, which shares the connection.
    let toolset = match connect(&args).await {
        Ok(toolset) => toolset,
        Err(e) => {
            // What failed, and why (the operating system's or the client's words).
            let why = std::error::Error::source(&e).map(|s| format!(": {s}"));
            eprintln!("error: {e}{}", why.unwrap_or_default());
            std::process::exit(2);
        }
    };
    tracing::info!(
        "mcp: the toolset '{}' lends {}",
        toolset.name(),
        toolset.tool_names().join(", ")
    );
    let (layer, host) = model::layer_and_host_or_offline(args.model, offline).await;
    // With --console, the console's timeline shows each tool call (MCP ones too) and its result.
    let tools = host.console_tools();
    host.serve(move || Desk {
        model: tools.apply(
            Model::new(layer.clone())
                .instruction(INSTRUCTION)
                .mcp(toolset.clone())
                // `mcp` refuses a toolset whose tool names clash with another toolset's: with
                // one toolset, none can.
                .expect("one toolset clashes with none"),
        ),
        tickets: AtomicU32::new(0),
    })
    .await
}

/// How `--provider offline` plays the model, with no key and no network: a few rules over the
/// caller's last words that call the tools it was declared, as a model would, so the console's
/// timeline shows them. A request after a tool's result speaks it.
fn offline(request: &ReadBack) -> Reply {
    if let Some(Said::Result { output, .. }) = request.said.last() {
        let text: String = output.chars().take(300).collect();
        return Reply::new()
            .text(&format!("The tool says: {text}"))
            .finish();
    }
    let heard = request
        .said
        .iter()
        .rev()
        .find_map(|said| match said {
            Said::User(text) => Some(text.to_lowercase()),
            _ => None,
        })
        .unwrap_or_default();
    let says = |words: &[&str]| words.iter().any(|w| heard.contains(w));
    // A tool the request declares whose name ends with `name` (any prefix).
    let declared = |name: &str| request.tools.iter().find(|t| t.ends_with(name)).cloned();
    let numbers: Vec<f64> = heard
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .filter_map(|w| w.parse().ok())
        .collect();
    let call = if says(&["ticket"]) {
        Some((
            "open_ticket".to_owned(),
            voqalize::json!({ "summary": heard }),
        ))
    } else if says(&["add", "sum", "plus"]) && numbers.len() >= 2 {
        declared("get-sum").map(|t| (t, voqalize::json!({ "a": numbers[0], "b": numbers[1] })))
    } else if says(&["weather"]) {
        let city = if says(&["chicago"]) {
            "Chicago"
        } else if says(&["los angeles"]) {
            "Los Angeles"
        } else {
            "New York"
        };
        declared("get-structured-content").map(|t| (t, voqalize::json!({ "location": city })))
    } else if says(&["long", "slow", "operation"]) {
        declared("trigger-long-running-operation")
            .map(|t| (t, voqalize::json!({ "duration": 10, "steps": 5 })))
    } else if says(&["echo", "repeat"]) {
        declared("echo").map(|t| (t, voqalize::json!({ "message": heard })))
    } else {
        None
    };
    match call {
        // The brain's own tool files its result for later: say something as it runs.
        Some((name, arguments)) if name == "open_ticket" => Reply::new()
            .text("I'm opening a ticket for that.")
            .call(&name, arguments)
            .finish(),
        Some((name, arguments)) => Reply::new().call(&name, arguments).finish(),
        None => Reply::new()
            .text(&format!(
                "I'm the offline stand-in for a model, so I only follow a few rules. Ask me to \
                 echo something, to add two numbers, for the weather in Chicago, to run a long \
                 operation, or to open a ticket. My tools: {}.",
                request.tools.join(", ")
            ))
            .finish(),
    }
}

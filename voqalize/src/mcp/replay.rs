//! [`McpToolset::replay`](super::McpToolset::replay): a toolset that answers from a call's
//! recording, without the server: its tools as the recorded call's first turn declared them, each
//! call answered with what the model read in the recorded call.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::error::McpError;
use super::options::Settings;
use super::server::McpServer;
use super::{Link, McpToolset, Shared};
use crate::record::Recording;
use crate::recover::lock;
use crate::tools::{AddedDecl, ToolDecl, ToolError, ToolErrorKind, ToolPolicy};

/// The recorded calls of one toolset, each answered once.
pub(crate) struct Replayed {
    calls: Mutex<Vec<Recorded>>,
}

struct Recorded {
    tool: String,
    arguments: Value,
    outcome: String,
    response: Value,
    used: bool,
}

impl Replayed {
    /// Answers a call of `tool` with `arguments` from the first recorded call of it not yet
    /// answered with the same arguments (else the first of it at all). A call the recorded
    /// one saw cancelled or timed out waits as it did, until its turn or its timeout ends it.
    pub(crate) async fn answer(&self, tool: &str, arguments: &Value) -> Result<Value, ToolError> {
        let found = {
            let mut calls = lock(&self.calls);
            let i = calls
                .iter()
                .position(|c| !c.used && c.tool == tool && c.arguments == *arguments)
                .or_else(|| calls.iter().position(|c| !c.used && c.tool == tool));
            i.map(|i| {
                calls[i].used = true;
                (calls[i].outcome.clone(), calls[i].response.clone())
            })
        };
        let Some((outcome, response)) = found else {
            return Err(ToolError::new(
                ToolErrorKind::Failed,
                format!("the recording has no answer left for a call of the MCP tool '{tool}'"),
            ));
        };
        match outcome.as_str() {
            "ok" => Ok(response.get("result").cloned().unwrap_or(Value::Null)),
            "cancelled" | "timed_out" => std::future::pending().await,
            _ => Err(ToolError::new(
                ToolErrorKind::Failed,
                response
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("the MCP tool failed")
                    .to_owned(),
            )),
        }
    }
}

/// `McpToolset::replay`.
pub(super) fn toolset(recording: &Recording, name: &str) -> Result<McpToolset, McpError> {
    let Some(listed) = recording.mcp_tools.iter().find(|l| l.toolset == name) else {
        return Err(McpError::Config {
            toolset: name.to_owned(),
            what: "the recording declares no tools of this toolset".into(),
        });
    };
    let calls = recording
        .tool_runs
        .iter()
        .filter_map(|run| {
            let mcp = run.mcp.as_ref().filter(|m| m.toolset == name)?;
            Some(Recorded {
                tool: mcp.tool.clone(),
                arguments: run.arguments.clone(),
                outcome: run.outcome.clone(),
                response: mcp.response.clone(),
                used: false,
            })
        })
        .collect();
    let replayed = Arc::new(Replayed {
        calls: Mutex::new(calls),
    });
    let shared = Arc::new(Shared {
        name: name.into(),
        server: McpServer::stdio(format!("(a replay of {name})")),
        settings: Settings::default(),
        link: Mutex::new(Link::Replay(replayed)),
        tools: Mutex::new(Arc::from(Vec::new())),
        progress: Mutex::default(),
        next_token: std::sync::atomic::AtomicU64::new(1),
        list_changed: tokio::sync::Notify::new(),
        listed: tokio::sync::Notify::new(),
        unlisted: Mutex::default(),
        log: Mutex::default(),
    });
    let tools: Vec<Arc<ToolDecl>> = listed
        .tools
        .iter()
        .map(|t| {
            Arc::new(ToolDecl::added(AddedDecl {
                name: t.name.clone(),
                description: t.description.clone(),
                schema: t.schema.clone(),
                needs_result_now: t.needs_result_now,
                policy: match t.policy.as_str() {
                    "cancel" => ToolPolicy::Cancel,
                    "background" => ToolPolicy::Background,
                    _ => ToolPolicy::Finish,
                },
                timeout: Some(std::time::Duration::from_millis(t.timeout_ms)),
                filler: t.filler.clone(),
                added: super::catalog::added(&shared, &t.tool),
            }))
        })
        .collect();
    *lock(&shared.tools) = tools.into();
    let (life, _) = tokio::sync::oneshot::channel();
    Ok(McpToolset {
        shared,
        _life: Arc::new(life),
    })
}

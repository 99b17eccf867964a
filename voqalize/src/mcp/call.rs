//! One call of an MCP tool: sent with a progress token (its progress spoken through the turn's
//! lane), its result made what the model reads, its failures said in words the model can use.
//! Dropping the call's future (a barge-in on a `cancel` tool, its timeout) cancels it on the
//! server: the client sends `notifications/cancelled` for a request it stops waiting for.

use std::sync::{Arc, Weak};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    CustomResult, NumberOrString, ProgressToken, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;

use super::{Link, ProgressLane, Shared};
use crate::logline::outside;
use crate::recover::lock;
use crate::session::context;
use crate::tools::{AddedRun, AddedRunner, ToolError, ToolErrorKind, shortened_to};

/// The most bytes of a server's error text the model reads.
const ERROR_TEXT_BYTES: usize = 1000;
/// The most content blocks of one result read; the rest are counted.
const MAX_BLOCKS: usize = 1000;

/// Runs the tools of one toolset (held weakly: the toolset owns its tools' declarations).
pub(super) struct Runner {
    pub(super) shared: Weak<Shared>,
}

impl AddedRunner for Runner {
    fn run(&self, remote: Arc<str>, arguments: Value) -> AddedRun {
        let shared = self.shared.upgrade();
        // Read now, inside the call's context: the lane of the turn that waits for the call.
        let lane = context::current()
            .and_then(|c| c.tool)
            .and_then(|call| call.progress_lane());
        Box::pin(async move {
            let Some(shared) = shared else {
                return Err(failed("the MCP toolset of this tool was closed".into()));
            };
            call(&shared, &remote, arguments, lane).await
        })
    }
}

fn failed(message: String) -> ToolError {
    ToolError::new(ToolErrorKind::Failed, message)
}

/// A call's place in the progress routing, removed when the call ends (or is dropped).
struct Routed<'s> {
    shared: &'s Shared,
    token: u64,
}

impl Drop for Routed<'_> {
    fn drop(&mut self) {
        lock(&self.shared.progress).remove(&self.token);
    }
}

async fn call(
    shared: &Shared,
    remote: &str,
    arguments: Value,
    lane: Option<tokio::sync::mpsc::Sender<String>>,
) -> Result<Value, ToolError> {
    let peer = match &*lock(&shared.link) {
        Link::Up(peer) => Ok(peer.clone()),
        Link::Replay(replayed) => Err(Ok(replayed.clone())),
        Link::Down { why, since } => Err(Err(failed(format!(
            "the MCP server '{}' is down ({}, {}s ago) and is being restarted; the tool did not run",
            shared.name,
            outside(why),
            since.elapsed().as_secs()
        )))),
    };
    let peer = match peer {
        Ok(peer) => peer,
        Err(Ok(replayed)) => return replayed.answer(remote, &arguments).await,
        Err(Err(down)) => return Err(down),
    };
    let token = shared
        .next_token
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let _routed = lane.map(|lane| {
        lock(&shared.progress).insert(token, ProgressLane { lane, last: None });
        Routed { shared, token }
    });
    let mut params = CallToolRequestParams::new(remote.to_owned());
    params.arguments = match arguments {
        Value::Object(map) => Some(map),
        _ => None,
    };
    let progress = ProgressToken(NumberOrString::Number(token.cast_signed()));
    params.meta = Some(RequestMetaObject::with_progress_token(progress));
    match sent(&peer, params).await {
        // A result rmcp's types do not take (a content block of a type newer than them) is read
        // as the JSON it came as.
        Ok(ServerResult::CustomResult(CustomResult(value))) => read(shared, value),
        Ok(result) => read(shared, serde_json::to_value(result).unwrap_or(Value::Null)),
        Err(e) => Err(failed(transport(shared, &e))),
    }
}

/// Sends the `tools/call` and waits for its result, of whatever type it parsed as (rmcp's own
/// `call_tool` fails one it cannot type). Dropped before the result, it cancels the request on
/// the server.
async fn sent(
    peer: &rmcp::Peer<RoleClient>,
    params: CallToolRequestParams,
) -> Result<ServerResult, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await?;
    let mut waiting = Waiting {
        peer,
        id: Some(handle.id.clone()),
    };
    let result = handle.await_response().await;
    waiting.id = None;
    result
}

/// A request waited for: dropped while it is, it sends `notifications/cancelled` for it.
struct Waiting<'p> {
    peer: &'p rmcp::Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let cancelled =
            CancelledNotificationParam::new(Some(id), Some("the caller stopped waiting".into()));
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(cancelled).await;
        });
    }
}

/// What the model reads of a `tools/call` result (as JSON): its `structuredContent`, else its
/// content; one with `isError` is a failure carrying the server's text.
fn read(shared: &Shared, result: Value) -> Result<Value, ToolError> {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let text = content_text(result.get("content"));
    if is_error {
        let text = if text.is_empty() {
            "(no text)".to_owned()
        } else {
            shortened_to(&text, ERROR_TEXT_BYTES)
        };
        return Err(failed(format!("the MCP tool reported an error: {text}")));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return Ok(structured.clone());
    }
    let _ = shared;
    Ok(Value::String(text))
}

/// A result's content blocks as text: text blocks as they are, others named by type and size.
fn content_text(content: Option<&Value>) -> String {
    let Some(Value::Array(blocks)) = content else {
        return String::new();
    };
    let mut parts = Vec::with_capacity(blocks.len().min(MAX_BLOCKS) + 1);
    for block in blocks.iter().take(MAX_BLOCKS) {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        match kind {
            "text" => parts.push(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            "image" | "audio" => {
                let mime = block.get("mimeType").and_then(Value::as_str).unwrap_or("?");
                let bytes = block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, |d| d.len() / 4 * 3);
                parts.push(format!(
                    "[{kind} {}, about {bytes} bytes, not shown]",
                    shortened_to(mime, 64)
                ));
            }
            "resource" => {
                let resource = block.get("resource");
                match resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                    Some(text) => parts.push(text.to_owned()),
                    None => parts.push(format!(
                        "[resource {}]",
                        shortened_to(
                            resource
                                .and_then(|r| r.get("uri"))
                                .and_then(Value::as_str)
                                .unwrap_or("?"),
                            200
                        )
                    )),
                }
            }
            "resource_link" => parts.push(format!(
                "[resource {}]",
                shortened_to(block.get("uri").and_then(Value::as_str).unwrap_or("?"), 200)
            )),
            other => parts.push(format!("[{} content]", shortened_to(other, 32))),
        }
    }
    if blocks.len() > MAX_BLOCKS {
        parts.push(format!(
            "[{} more content blocks not read]",
            blocks.len() - MAX_BLOCKS
        ));
    }
    parts.join("\n")
}

/// A failed call said in words the model can use.
fn transport(shared: &Shared, e: &ServiceError) -> String {
    let name = &shared.name;
    match e {
        ServiceError::TransportClosed => {
            format!(
                "the MCP server '{name}' closed the connection during the call; the tool may or may not have run"
            )
        }
        ServiceError::McpError(data) => format!(
            "the MCP server '{name}' refused the call: {}",
            shortened_to(&data.message, ERROR_TEXT_BYTES)
        ),
        ServiceError::TransportSend(_) => {
            format!(
                "the call could not be sent to the MCP server '{name}': {}",
                shortened_to(&e.to_string(), 300)
            )
        }
        other => format!(
            "the call to the MCP server '{name}' failed: {}",
            shortened_to(&other.to_string(), 300)
        ),
    }
}

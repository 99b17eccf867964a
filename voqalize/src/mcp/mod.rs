//! MCP tools (feature `mcp`): a team's MCP servers' tools beside a brain's `#[tool]`s, with a
//! voice call's semantics.
//!
//! ```no_run
//! use std::time::Duration;
//! use voqalize::mcp::{McpServer, McpTool, McpToolset};
//! use voqalize::tools::ToolPolicy;
//!
//! # async fn f() -> Result<(), voqalize::mcp::McpError> {
//! // One connection for the whole process: every call's `Model` takes a clone.
//! let crm = McpToolset::builder("crm", McpServer::stdio("crm-mcp").arg("--readonly"))
//!     .allow(["find_customer", "open_orders"])
//!     .prefix("crm_")
//!     .timeout(Duration::from_secs(20))
//!     .tool("open_orders", McpTool::new().on_barge_in(ToolPolicy::Cancel))
//!     .connect()
//!     .await?;
//! let docs = McpToolset::builder("docs", McpServer::http("https://mcp.example.com/mcp").bearer("token"))
//!     .connect()
//!     .await?;
//! // In the brain factory: `Model::new(layer).mcp(crm.clone()).mcp(docs.clone())`.
//! # let _ = (crm, docs);
//! # Ok(())
//! # }
//! ```
//!
//! # What a toolset is
//!
//! An [`McpToolset`] is one connection to one server ([`McpServer::stdio`]: a child process the
//! SDK starts, supervises and restarts with backoff; [`McpServer::http`]: a streamable HTTP
//! endpoint) and the tools it lists, kept by an allowlist and a filter, named with an optional
//! prefix, each with the toolset's settings or its own ([`McpTool`]). It is cheap to clone and
//! every clone shares the connection: connect once in `main` and hand a clone to each call's
//! `Model` (one connection per process), or connect in the brain's `on_session_start` and lend it
//! with [`Model::add_mcp`](crate::voice::Model::add_mcp) for a connection per call. The
//! connection ends when the last clone is dropped.
//!
//! The MCP SDK underneath (`rmcp`) logs through `tracing` too, quoting servers' text as it came:
//! [`logging::init`](crate::logging::init) turns it off unless its directive names `rmcp`; with a
//! subscriber of your own, add `rmcp=off` (or `rmcp=warn`) to its filter.
//!
//! # In a call
//!
//! A `Model` takes toolsets with [`Model::mcp`](crate::voice::Model::mcp). Each turn reads each
//! toolset's tools once, as it starts: the model is declared them beside the brain's, their
//! schemas rewritten per provider like a `#[tool]`'s (with the same loss warnings). A
//! `tools/list_changed` notification has the list fetched again in the background; a turn
//! already running keeps the list it started with.
//!
//! A call of an MCP tool is a tool call like any other: the guards before and after it, the
//! parallel runs, the bounds (argument and result bytes, runs per turn), the filler, the
//! `execute_tool` span (with `mcp.method.name` and `voqalize.mcp.server`), its metrics, a
//! TurnStep of kind `mcp` (its provider the toolset's name) and its line in a call recording.
//! Its run is a task of its own, so every [`ToolPolicy`](crate::tools::ToolPolicy) holds: with
//! `Finish` (the default) a barge-in lets it end and its result is filed; with `Cancel` the call
//! is cancelled on the server (MCP's `notifications/cancelled`) and the model reads that the
//! user's interruption cancelled it; `Background` never holds the turn. A call over its timeout
//! is cancelled on the server too.
//!
//! What the model reads: a result's `structuredContent` when it has one, else its content
//! (text blocks joined; an image, audio or a resource named by its type and size). A result with
//! `isError` reaches the model as the server's own text (clipped), marked as a failure; a
//! connection that fails says what failed (`the MCP server 'crm' closed the connection during
//! the call`), and a server that is down is being restarted while its calls fail at once.
//!
//! # Bounds
//!
//! Everything a server sends is bounded: one message ([`McpToolsetBuilder::max_message_bytes`],
//! 4 MiB; a larger one is dropped unread), the tools kept from a listing
//! ([`McpToolsetBuilder::max_tools`], 128), one schema's bytes
//! ([`McpToolsetBuilder::max_schema_bytes`], 64 KiB) and depth (32), a description (2 KiB), a
//! progress line (spoken at most once per [`McpToolsetBuilder::progress_every`]), the content
//! blocks of a result read (1000), the result the model reads (the `Model`'s
//! `max_result_bytes`), the stderr lines logged (clipped, then summed up). A listing is read
//! page by page and no further once `max_tools` are kept. Notifications the client does not
//! use (logging, unknown ones) are dropped unread and requests other than `ping` refused, none
//! of them logged; a server that keeps going down right after connecting is restarted with a
//! growing backoff (250 ms up to 10 s) and one warning a minute.

mod call;
mod catalog;
mod connection;
mod error;
mod gate;
mod handler;
mod options;
mod process;
mod replay;
mod server;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Notify, mpsc};

pub use error::McpError;
pub use options::{
    MCP_CONNECT_TIMEOUT, MCP_MAX_DESCRIPTION_BYTES, MCP_MAX_MESSAGE_BYTES, MCP_MAX_SCHEMA_BYTES,
    MCP_MAX_TOOLS, MCP_PROGRESS_EVERY, MCP_TOOL_TIMEOUT, McpTool, McpToolsetBuilder,
};
pub use server::McpServer;

use crate::tools::ToolDecl;
use options::Settings;

/// One connected MCP server and the tools it lends the model. Clones share the connection; it
/// ends when the last one is dropped. See the [module](self) for how its calls run.
#[derive(Clone)]
pub struct McpToolset {
    shared: Arc<Shared>,
    /// Dropped with the last clone: the supervisor then closes the connection.
    _life: Arc<tokio::sync::oneshot::Sender<()>>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field("name", &self.shared.name)
            .field("server", &self.shared.server)
            .field("tools", &self.tool_names())
            .finish_non_exhaustive()
    }
}

impl McpToolset {
    /// A toolset called `name` (what logs, TurnSteps and metrics name it by; letters, digits,
    /// `_`, `-` and `.`) over `server`.
    pub fn builder(name: impl Into<String>, server: McpServer) -> McpToolsetBuilder {
        McpToolsetBuilder {
            name: name.into(),
            server,
            settings: Settings::default(),
        }
    }

    /// A toolset that answers from a call's recording instead of a server, for a replay of the
    /// call (`voqalize_testing::Replay`) or a test: its tools are those the recorded call's
    /// first turn declared for the toolset called `name`, with the settings its calls ran with,
    /// and each call is answered with what the model read in the recorded call (the first
    /// recorded call of that tool with the same arguments not answered yet, else the first of
    /// that tool). A call the recorded one saw cancelled or timed out waits, so that the
    /// replayed turn's barge-in or timeout ends it again; a call the recording has no answer
    /// for fails with an error the model reads.
    ///
    /// # Errors
    /// [`McpError::Config`] when the recording declares no tools of `name`.
    pub fn replay(
        recording: &crate::record::Recording,
        name: &str,
    ) -> Result<McpToolset, McpError> {
        replay::toolset(recording, name)
    }

    /// The toolset's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The tools the model is declared now, by the names it reads (prefix included).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools().iter().map(|t| t.name().to_owned()).collect()
    }

    /// Whether the connection is up now (`false` while a server that went down is restarted).
    pub fn is_connected(&self) -> bool {
        matches!(
            *crate::recover::lock(&self.shared.link),
            Link::Up(_) | Link::Replay(_)
        )
    }

    /// Calls the tool the model knows as `name` (prefix included) with `arguments` (a JSON
    /// object), within the tool's timeout, and returns what the model would read: the same run
    /// as a model's call, outside a turn (no guard, no progress spoken, no TurnStep). For tests,
    /// and for a brain's own code.
    ///
    /// # Errors
    /// A [`ToolError`](crate::tools::ToolError) the model would read: `Unknown` for a name the
    /// toolset does not declare now, `InvalidArguments` for arguments that are not an object,
    /// `Failed` for a result with `isError` (the server's text) or a failed connection (what
    /// failed), `TimedOut` past the timeout (the call is then cancelled on the server).
    pub async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, crate::tools::ToolError> {
        use crate::tools::{Arguments, ToolError, ToolErrorKind};
        let tools = self.tools();
        let Some(decl) = tools.iter().find(|t| t.name() == name).cloned() else {
            return Err(ToolError::new(
                ToolErrorKind::Unknown,
                format!(
                    "the MCP toolset '{}' has no tool named '{}'",
                    self.shared.name,
                    crate::tools::shortened(name)
                ),
            ));
        };
        let within = decl.timeout().unwrap_or(options::MCP_TOOL_TIMEOUT);
        let run = crate::tools::call_added(decl, Arguments::Json(arguments));
        match tokio::time::timeout(within, run).await {
            Ok(outcome) => outcome.result,
            Err(_) => Err(ToolError::new(
                ToolErrorKind::TimedOut,
                format!("the tool '{name}' did not finish within {within:?}; it was cancelled"),
            )),
        }
    }

    /// Whether `other` is a clone of this toolset (one connection).
    pub(crate) fn same(&self, other: &McpToolset) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// The tools as the last listing made them.
    pub(crate) fn tools(&self) -> Arc<[Arc<ToolDecl>]> {
        crate::recover::lock(&self.shared.tools).clone()
    }

    /// Waits until the tool list has been fetched again after a `tools/list_changed` (or a
    /// reconnection), at most `within`. For tests and tools that must see a new list; a turn
    /// never waits for one.
    pub async fn listed(&self, within: std::time::Duration) -> bool {
        tokio::time::timeout(within, self.shared.listed.notified())
            .await
            .is_ok()
    }
}

/// A toolset's state, shared by its clones, its supervisor, its runner and its gate.
pub(crate) struct Shared {
    name: Arc<str>,
    server: McpServer,
    settings: Settings,
    /// The connection while it is up, else why it is down.
    link: Mutex<Link>,
    /// The tools as the last listing made them.
    tools: Mutex<Arc<[Arc<ToolDecl>]>>,
    /// Calls in flight that a turn waits for, by progress token: where their progress goes.
    progress: Mutex<HashMap<u64, ProgressLane>>,
    next_token: AtomicU64,
    /// The server said its tools changed.
    list_changed: Notify,
    /// The tools were listed again.
    listed: Notify,
    /// The allowed names the last listing did not have, said as `connect`'s error says them.
    unlisted: Mutex<Option<String>>,
    /// Repeated warnings about this server, summed up.
    log: Mutex<connection::Warnings>,
}

/// The connection to the server, or why there is none.
pub(crate) enum Link {
    Up(rmcp::Peer<rmcp::RoleClient>),
    Down {
        why: String,
        since: Instant,
    },
    /// No server: a recording answers ([`McpToolset::replay`]).
    Replay(Arc<replay::Replayed>),
}

/// Where one call's progress lines go, and when the last one went.
pub(crate) struct ProgressLane {
    lane: mpsc::Sender<String>,
    last: Option<Instant>,
}

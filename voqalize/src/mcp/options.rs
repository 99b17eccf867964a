//! A toolset's settings: which tools, under which names, how each call runs, and the bounds on
//! what the server sends ([`McpToolsetBuilder`], [`McpTool`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::server::McpServer;
use crate::tools::{ToolDecl, ToolPolicy};

/// How long one call of an MCP tool may run, unless the toolset or the tool says otherwise:
/// 30 s. A remote tool is slower than one in the brain's process; the filler line covers the
/// wait, and a barge-in stops it only if its policy says so.
pub const MCP_TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one connection attempt (the process started or the endpoint reached, the MCP
/// handshake and the first `tools/list`) may take, unless told otherwise: 10 s.
pub const MCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most bytes of one message from the server (a JSON-RPC line over stdio, an SSE event or
/// a JSON body over HTTP), unless told otherwise: 4 MiB. A longer one is dropped unread; a call
/// it answered fails at its timeout.
pub const MCP_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The most tools kept from one `tools/list`, unless told otherwise: 128 (after the allowlist
/// and the filter). The rest are left out, with one warning.
pub const MCP_MAX_TOOLS: usize = 128;

/// The most bytes of one tool's input schema (as JSON), unless told otherwise: 64 KiB. A tool
/// with a larger one is left out, with one warning.
pub const MCP_MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The most bytes of one tool's description the model reads: 2 KiB; the rest is cut.
pub const MCP_MAX_DESCRIPTION_BYTES: usize = 2 * 1024;

/// How often a running call's progress messages may be spoken: at most one per 5 s.
pub const MCP_PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// A filter on a server's tools: `(name at the server, description)`, `true` to keep it.
pub(crate) type Filter = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// Per-tool settings that override the toolset's, given with [`McpToolsetBuilder::tool`]. Unset
/// fields take the toolset's.
///
/// ```
/// use std::time::Duration;
/// use voqalize::mcp::McpTool;
/// use voqalize::tools::ToolPolicy;
///
/// let slow = McpTool::new()
///     .timeout(Duration::from_secs(120))
///     .on_barge_in(ToolPolicy::Cancel)
///     .filler("Let me look that up.");
/// # let _ = slow;
/// ```
#[derive(Debug, Clone, Default)]
pub struct McpTool {
    pub(crate) timeout: Option<Duration>,
    pub(crate) policy: Option<ToolPolicy>,
    pub(crate) needs_result_now: Option<bool>,
    pub(crate) filler: Option<String>,
    pub(crate) description: Option<String>,
}

impl McpTool {
    /// No override.
    pub fn new() -> McpTool {
        McpTool::default()
    }

    /// How long one call may run.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> McpTool {
        self.timeout = Some(timeout);
        self
    }

    /// What a barge-in does to a running call: [`ToolPolicy::Cancel`] cancels it on the server
    /// (MCP's `notifications/cancelled`) and the model reads that it was cancelled;
    /// [`ToolPolicy::Finish`] lets it end and files its result; [`ToolPolicy::Background`]
    /// never holds the turn.
    #[must_use]
    pub fn on_barge_in(mut self, policy: ToolPolicy) -> McpTool {
        self.policy = Some(policy);
        self
    }

    /// Whether the model reads the result before it goes on speaking (as
    /// `#[needs_result_now]`).
    #[must_use]
    pub fn needs_result_now(mut self, now: bool) -> McpTool {
        self.needs_result_now = Some(now);
        self
    }

    /// The line spoken while a call of this tool keeps the caller waiting.
    #[must_use]
    pub fn filler(mut self, line: impl Into<String>) -> McpTool {
        self.filler = Some(line.into());
        self
    }

    /// The description the model reads, instead of the server's.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> McpTool {
        self.description = Some(text.into());
        self
    }
}

/// What to do when the server is down as the toolset connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtStart {
    /// Fail `connect` at the first failed try.
    Fail,
    /// Try again with backoff until this long has passed, then fail.
    RetryFor(Duration),
}

/// Everything a toolset was told.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) allow: Option<Vec<String>>,
    pub(crate) filter: Option<Filter>,
    pub(crate) prefix: String,
    pub(crate) tools: HashMap<String, McpTool>,
    pub(crate) timeout: Duration,
    pub(crate) policy: ToolPolicy,
    pub(crate) needs_result_now: bool,
    pub(crate) filler: Option<String>,
    pub(crate) progress_every: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) at_start: AtStart,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_tools: usize,
    pub(crate) max_schema_bytes: usize,
    pub(crate) beside: Vec<&'static [ToolDecl]>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("allow", &self.allow)
            .field("filter", &self.filter.as_ref().map(|_| "<fn>"))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("needs_result_now", &self.needs_result_now)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_tools", &self.max_tools)
            .field("max_schema_bytes", &self.max_schema_bytes)
            .finish_non_exhaustive()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            allow: None,
            filter: None,
            prefix: String::new(),
            tools: HashMap::new(),
            timeout: MCP_TOOL_TIMEOUT,
            policy: ToolPolicy::Finish,
            needs_result_now: true,
            filler: None,
            progress_every: MCP_PROGRESS_EVERY,
            connect_timeout: MCP_CONNECT_TIMEOUT,
            at_start: AtStart::Fail,
            max_message_bytes: MCP_MAX_MESSAGE_BYTES,
            max_tools: MCP_MAX_TOOLS,
            max_schema_bytes: MCP_MAX_SCHEMA_BYTES,
            beside: Vec::new(),
        }
    }
}

/// Builds an [`McpToolset`](super::McpToolset): [`McpToolset::builder`](super::McpToolset::builder), the settings, then
/// [`connect`](Self::connect).
#[derive(Debug)]
#[must_use = "a toolset builder does nothing until `connect` is awaited"]
pub struct McpToolsetBuilder {
    pub(crate) name: String,
    pub(crate) server: McpServer,
    pub(crate) settings: Settings,
}

impl McpToolsetBuilder {
    /// Keeps only the tools named here (names at the server, before the prefix). A name the
    /// server does not list is warned about once per listing. Default: every tool.
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.settings.allow = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Keeps only the tools `keep(name, description)` says yes to (after the allowlist).
    pub fn filter(mut self, keep: impl Fn(&str, &str) -> bool + Send + Sync + 'static) -> Self {
        self.settings.filter = Some(Arc::new(keep));
        self
    }

    /// Puts `prefix` before every tool's name as the model reads it (`"crm_"` makes `lookup`
    /// `crm_lookup`): two servers' tools of one name can then be told apart. The server is
    /// called with its own name.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.prefix = prefix.into();
        self
    }

    /// Settings for one tool (its name at the server), over the toolset's.
    pub fn tool(mut self, name: impl Into<String>, settings: McpTool) -> Self {
        self.settings.tools.insert(name.into(), settings);
        self
    }

    /// How long one call may run: [`MCP_TOOL_TIMEOUT`] (30 s) by default. A call over it is
    /// cancelled on the server and the model reads that it timed out.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// What a barge-in does to a running call of any tool of the set: [`ToolPolicy::Finish`]
    /// by default (see [`McpTool::on_barge_in`]).
    pub fn on_barge_in(mut self, policy: ToolPolicy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// Whether the model reads each result before it goes on speaking: `true` by default (an
    /// MCP tool is mostly a lookup whose answer the caller waits for).
    pub fn needs_result_now(mut self, now: bool) -> Self {
        self.settings.needs_result_now = now;
        self
    }

    /// The line spoken while a call keeps the caller waiting (else the `Model`'s filler line).
    pub fn filler(mut self, line: impl Into<String>) -> Self {
        self.settings.filler = Some(line.into());
        self
    }

    /// How often a running call's progress message (MCP `notifications/progress` with a
    /// `message`) may be spoken: at most once per [`MCP_PROGRESS_EVERY`] (5 s) by default;
    /// the others are dropped. A progress notification without a message is never spoken.
    pub fn progress_every(mut self, every: Duration) -> Self {
        self.settings.progress_every = every;
        self
    }

    /// How long one connection attempt may take: [`MCP_CONNECT_TIMEOUT`] (10 s) by default.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// When the server is down as [`connect`](Self::connect) runs, try again with backoff
    /// (0.25 s doubling to 10 s) until `within` has passed. Default: `connect` fails at the first
    /// failed try, so a brain never starts silently without its tools.
    pub fn retry_at_start(mut self, within: Duration) -> Self {
        self.settings.at_start = AtStart::RetryFor(within);
        self
    }

    /// The most bytes of one message from the server: [`MCP_MAX_MESSAGE_BYTES`] (4 MiB) by
    /// default.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.settings.max_message_bytes = bytes.max(1024);
        self
    }

    /// The most tools kept from one listing: [`MCP_MAX_TOOLS`] (128) by default.
    pub fn max_tools(mut self, tools: usize) -> Self {
        self.settings.max_tools = tools;
        self
    }

    /// The most bytes of one tool's input schema: [`MCP_MAX_SCHEMA_BYTES`] (64 KiB) by default.
    pub fn max_schema_bytes(mut self, bytes: usize) -> Self {
        self.settings.max_schema_bytes = bytes;
        self
    }

    /// The brain's own tool table (`brain.tools()`, from `#[brain]`): a tool of the set whose
    /// name (with the prefix) is one of them fails [`connect`](Self::connect) with
    /// [`McpError::NameClash`](super::McpError::NameClash) naming both. Without it, such a clash is found at the first turn
    /// instead: the brain's tool wins, and one error names both.
    pub fn beside(mut self, tools: &'static [ToolDecl]) -> Self {
        self.settings.beside.push(tools);
        self
    }
}

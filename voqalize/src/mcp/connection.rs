//! The connection to one server: opening it (a child process over stdio, or a streamable HTTP
//! endpoint), the MCP handshake and first listing, and the supervisor that keeps it up while the
//! toolset lives: a connection that ends is opened again with backoff, and `tools/list_changed`
//! has the tools listed again.

use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::service::{QuitReason, RoleClient, RunningServiceCancellationToken};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::sync::{Notify, oneshot};

use super::catalog;
use super::error::{Cause, McpError};
use super::gate::Gate;
use super::handler::Handler;
use super::options::{AtStart, McpToolsetBuilder};
use super::process::{Process, kill, spawn};
use super::server::Reach;
use super::{Link, McpToolset, Shared};
use crate::logline::{Repeated, outside};
use crate::recover::lock;

/// The first wait before a connection is tried again; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_START: Duration = Duration::from_millis(250);
/// The longest wait between two tries.
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long the server's tools stay unlisted after a `tools/list_changed` before they are
/// listed: a burst of notifications is one listing.
const RELIST_AFTER: Duration = Duration::from_millis(100);
/// The least time from one listing after `tools/list_changed` to the next: a server sending
/// the notification in a storm has its tools listed about once a second, not ten times.
const RELIST_EVERY: Duration = Duration::from_secs(1);
/// A connection up this long before it ends is opened again after [`BACKOFF_START`]; one that
/// ends sooner waits on as the backoff grew: a server that dies just after each handshake is
/// not restarted every 250 ms.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// Repeated warnings about one server, summed up.
pub(crate) struct Warnings {
    pub(crate) down: Repeated,
    pub(crate) listing: Repeated,
}

impl Default for Warnings {
    fn default() -> Self {
        Warnings {
            down: Repeated::with_window(
                "MCP disconnections and reconnection failures",
                Duration::from_secs(60),
            ),
            listing: Repeated::with_window("MCP tool-list warnings", Duration::from_secs(60)),
        }
    }
}

/// Why the connection's service ended, while it runs (`None` once it said so).
type Ended = Option<Pin<Box<dyn Future<Output = String> + Send>>>;

/// One open connection: its peer, how to close it, its end, and the process behind it.
struct Live {
    peer: rmcp::Peer<RoleClient>,
    cancel: Option<RunningServiceCancellationToken>,
    ended: Ended,
    process: Option<Process>,
}

impl Live {
    /// Closes the connection and stops its process (the whole process group on Unix: `npx`
    /// starts the server as its own child).
    async fn close(mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(ended) = self.ended.as_mut() {
            let _ = tokio::time::timeout(Duration::from_secs(2), ended).await;
        }
        if let Some(process) = self.process.as_mut() {
            kill(process);
            let _ = tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await;
        }
    }
}

/// Why the connection ended: its service stopped, or (stdio) its process exited, even while
/// something else (a grandchild) holds its pipes open.
async fn ending(ended: &mut Ended, process: &mut Option<Process>) -> String {
    let exited = async {
        match process.as_mut() {
            Some(p) => match p.child.wait().await {
                Ok(status) => format!("the server's process exited ({status})"),
                Err(e) => format!("the server's process could not be watched: {e}"),
            },
            None => std::future::pending().await,
        }
    };
    let Some(service) = ended.as_mut() else {
        return exited.await;
    };
    tokio::select! {
        why = service => {
            *ended = None;
            why
        }
        why = exited => why,
    }
}

/// Why one try to open the connection failed.
pub(super) enum OpenError {
    Spawn(std::io::Error),
    Failed { why: String, source: Option<Cause> },
}

impl OpenError {
    fn failed(why: impl Into<String>, source: Option<Cause>) -> Self {
        OpenError::Failed {
            why: why.into(),
            source,
        }
    }

    pub(super) fn why(&self) -> String {
        match self {
            OpenError::Spawn(e) => format!("could not start the program: {e}"),
            OpenError::Failed { why, .. } => why.clone(),
        }
    }
}

impl McpToolsetBuilder {
    /// Connects: starts the process or reaches the endpoint, completes the MCP handshake and
    /// lists the tools. The toolset then stays connected while any clone of it lives: a server
    /// that goes down is restarted (reconnected) with backoff, and a `tools/list_changed`
    /// notification has the list fetched again (a turn reads the list as its starts).
    ///
    /// # Errors
    /// [`McpError::Config`] for settings that cannot work, [`McpError::Spawn`] when the program
    /// cannot start, [`McpError::Connect`] when the handshake or the listing fails or times out
    /// (after the retries of [`retry_at_start`](Self::retry_at_start), if set), and
    /// [`McpError::NameClash`] for a name that is one of [`beside`](Self::beside)'s tools.
    pub async fn connect(self) -> Result<McpToolset, McpError> {
        connect(self).await
    }
}

/// `McpToolsetBuilder::connect`.
async fn connect(builder: McpToolsetBuilder) -> Result<McpToolset, McpError> {
    check(&builder)?;
    let McpToolsetBuilder {
        name,
        server,
        settings,
    } = builder;
    let shared = Arc::new(Shared {
        name: name.into(),
        server,
        settings,
        link: Mutex::new(Link::Down {
            why: "not connected yet".into(),
            since: Instant::now(),
        }),
        tools: Mutex::new(Arc::from(Vec::new())),
        progress: Mutex::default(),
        next_token: AtomicU64::new(1),
        list_changed: Notify::new(),
        listed: Notify::new(),
        unlisted: Mutex::default(),
        log: Mutex::default(),
    });
    let live = first(&shared).await?;
    // An allowed name the server does not list is a typo, or a server that is not the one
    // meant: found here, not as a tool the model never gets.
    let unlisted = lock(&shared.unlisted).take();
    let wrong = match unlisted {
        Some(what) => Some(McpError::Config {
            toolset: shared.name.to_string(),
            what,
        }),
        None => catalog::clash_beside(&shared),
    };
    if let Some(wrong) = wrong {
        live.close().await;
        return Err(wrong);
    }
    let (life, stop) = oneshot::channel();
    tracing::info!(
        "MCP toolset {} connected to {}: {}",
        shared.name,
        outside(&shared.server.describe()),
        crate::logline::count(lock(&shared.tools).len(), "tool")
    );
    tokio::spawn(supervise(shared.clone(), live, stop));
    Ok(McpToolset {
        shared,
        _life: Arc::new(life),
    })
}

/// The settings that cannot work, before anything is started.
fn check(builder: &McpToolsetBuilder) -> Result<(), McpError> {
    let bad = |what: String| McpError::Config {
        toolset: builder.name.clone(),
        what,
    };
    let name_ok = !builder.name.is_empty()
        && builder.name.len() <= 64
        && builder
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if !name_ok {
        return Err(bad(
            "a toolset's name is 1 to 64 letters, digits, '_', '-' or '.'".into(),
        ));
    }
    let prefix = &builder.settings.prefix;
    if !prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        || prefix.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
    {
        return Err(bad(format!(
            "the prefix '{}' would make names a model refuses: use letters, digits, '_', '-' or '.', not first a digit",
            outside(prefix)
        )));
    }
    match &builder.server.reach {
        Reach::Stdio { program, .. } if program.is_empty() => {
            Err(bad("the stdio server's program is empty".into()))
        }
        Reach::Http { url, http, .. } => {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| bad(format!("the URL '{}' does not parse: {e}", outside(url))))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(bad(format!("the URL '{}' is not http(s)", outside(url))));
            }
            http.check().map_err(|e| bad(e.to_string()))
        }
        Reach::Stdio { .. } => Ok(()),
    }
}

/// The first connection, tried again per `retry_at_start`.
async fn first(shared: &Arc<Shared>) -> Result<Live, McpError> {
    let started = Instant::now();
    let mut backoff = BACKOFF_START;
    let mut tries = 0;
    loop {
        tries += 1;
        let error = match open(shared).await {
            Ok(live) => return Ok(live),
            Err(OpenError::Spawn(source)) => {
                let Reach::Stdio { program, .. } = &shared.server.reach else {
                    unreachable!("only a stdio server spawns")
                };
                return Err(McpError::Spawn {
                    toolset: shared.name.to_string(),
                    program: program.clone(),
                    source,
                });
            }
            Err(e) => e,
        };
        if let AtStart::RetryFor(within) = shared.settings.at_start
            && started.elapsed() + backoff < within
        {
            tracing::debug!(
                "MCP toolset {}: try {tries} failed ({}); trying again in {backoff:?}",
                shared.name,
                outside(&error.why())
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
            continue;
        }
        let OpenError::Failed { why, source } = error else {
            unreachable!("a spawn error returned above")
        };
        return Err(McpError::Connect {
            toolset: shared.name.to_string(),
            tries,
            why,
            source,
        });
    }
}

/// One try: the transport, the handshake and the first listing, within the connect timeout.
async fn open(shared: &Arc<Shared>) -> Result<Live, OpenError> {
    let within = shared.settings.connect_timeout;
    let handler = Handler;
    let max = shared.settings.max_message_bytes;
    let (served, process) = match &shared.server.reach {
        Reach::Stdio { .. } => {
            let (mut process, stdout, stdin) = spawn(shared).map_err(OpenError::Spawn)?;
            let transport = Gate {
                inner: AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin)
                    .with_max_line_length(max),
                shared: Arc::downgrade(shared),
            };
            match tokio::time::timeout(within, handler.serve(transport)).await {
                Ok(served) => (served.map_err(|e| handshake_failed(&e)), Some(process)),
                Err(_) => {
                    kill(&mut process);
                    (Err(timed_out("the MCP handshake", within)), None)
                }
            }
        }
        Reach::Http { url, bearer, http } => {
            let client = crate::model::http::client(within, Some(http))
                .map_err(|e| OpenError::failed(e.to_string(), Some(Box::new(e))))?;
            let transport = Gate {
                inner: StreamableHttpClientTransport::with_client(
                    client,
                    http_config(url, bearer.as_deref(), http, max)?,
                ),
                shared: Arc::downgrade(shared),
            };
            match tokio::time::timeout(within, handler.serve(transport)).await {
                Ok(served) => (served.map_err(|e| handshake_failed(&e)), None),
                Err(_) => (Err(timed_out("the MCP handshake", within)), None),
            }
        }
    };
    let service = match served {
        Ok(service) => service,
        Err(e) => return Err(failed_early(e, process).await),
    };
    let peer = service.peer().clone();
    let cancel = service.cancellation_token();
    let ended: Ended = Some(Box::pin(async move {
        match service.waiting().await {
            Ok(QuitReason::Closed) => "the server closed the connection".to_owned(),
            Ok(QuitReason::Cancelled) => "the connection was closed".to_owned(),
            Ok(reason) => format!("the connection ended: {reason:?}"),
            Err(e) => format!("the connection's task failed: {e}"),
        }
    }));
    let live = Live {
        peer,
        cancel: Some(cancel),
        ended,
        process,
    };
    match tokio::time::timeout(within, catalog::list(shared, &live.peer)).await {
        Ok(Ok(tools)) => {
            *lock(&shared.tools) = tools;
            *lock(&shared.link) = Link::Up(live.peer.clone());
            Ok(live)
        }
        Ok(Err(e)) => {
            live.close().await;
            Err(e)
        }
        Err(_) => {
            live.close().await;
            Err(timed_out("the first tools/list", within))
        }
    }
}

/// A handshake that failed: for a stdio server, what its process said first (a missing key, a
/// stack trace) names the cause better than the handshake does; the process is then killed.
async fn failed_early(e: OpenError, process: Option<Process>) -> OpenError {
    let Some(mut process) = process else {
        return e;
    };
    let (exited, said) = process.last_words().await;
    kill(&mut process);
    match (e, exited) {
        (OpenError::Failed { source, .. }, Some(status)) => OpenError::Failed {
            why: format!("the server's process exited before the MCP handshake ({status}){said}"),
            source,
        },
        (OpenError::Failed { why, source }, None) => OpenError::Failed {
            why: why + &said,
            source,
        },
        (spawn, _) => spawn,
    }
}

fn timed_out(what: &str, within: Duration) -> OpenError {
    OpenError::failed(format!("{what} took more than {within:?}"), None)
}

fn handshake_failed(e: &rmcp::service::ClientInitializeError) -> OpenError {
    OpenError::failed(
        format!("the MCP handshake failed: {}", outside(&e.to_string())),
        None,
    )
}

/// The streamable HTTP client's settings: the URL, the bearer token, the headers, the bounds.
fn http_config(
    url: &str,
    bearer: Option<&str>,
    http: &crate::model::HttpOptions,
    max: usize,
) -> Result<StreamableHttpClientTransportConfig, OpenError> {
    let mut headers = std::collections::HashMap::new();
    for (name, value) in http.headers() {
        let name = reqwest::header::HeaderName::try_from(name.as_str())
            .map_err(|e| OpenError::failed(format!("a header name is not valid: {e}"), None))?;
        let value = reqwest::header::HeaderValue::try_from(value.as_str())
            .map_err(|e| OpenError::failed(format!("a header value is not valid: {e}"), None))?;
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(headers)
        .max_sse_event_size(max)
        .max_json_response_size(max);
    if let Some(token) = bearer {
        config = config.auth_header(token);
    }
    Ok(config)
}

/// Keeps the connection up while the toolset lives; closes it when the last clone is dropped.
async fn supervise(shared: Arc<Shared>, mut live: Live, mut stop: oneshot::Receiver<()>) {
    let mut backoff = BACKOFF_START;
    let mut up_since = Instant::now();
    let mut listed_at: Option<Instant> = None;
    loop {
        let mut relisting = false;
        let why = tokio::select! {
            _ = &mut stop => None,
            why = ending(&mut live.ended, &mut live.process) => Some(why),
            () = shared.list_changed.notified() => {
                relisting = true;
                None
            }
        };
        // The listing again also watches the connection's end and the toolset's drop.
        let why = match why {
            Some(why) => why,
            None if relisting => tokio::select! {
                _ = &mut stop => {
                    live.close().await;
                    return;
                }
                why = ending(&mut live.ended, &mut live.process) => why,
                () = relist(&shared, &live.peer, &mut listed_at) => continue,
            },
            None => {
                live.close().await;
                return;
            }
        };
        down(&shared, &why);
        // Calls in flight fail now (the transport closes), not at their timeouts.
        live.close().await;
        if up_since.elapsed() >= STABLE_AFTER {
            backoff = BACKOFF_START;
        }
        let Some(again) = reopen(&shared, &mut stop, &mut backoff).await else {
            return;
        };
        live = again;
        up_since = Instant::now();
        tracing::info!(
            "MCP toolset {} reconnected: {}",
            shared.name,
            crate::logline::count(lock(&shared.tools).len(), "tool")
        );
        shared.listed.notify_waiters();
    }
}

/// Notes the connection down: calls fail at once with `why` until it is up again.
fn down(shared: &Shared, why: &str) {
    *lock(&shared.link) = Link::Down {
        why: why.to_owned(),
        since: Instant::now(),
    };
    if lock(&shared.log).down.allow() {
        tracing::warn!(
            "MCP toolset {}: {}; reconnecting",
            shared.name,
            outside(why)
        );
    }
}

/// Opens the connection again after `backoff`, which doubles with each try (up to
/// [`BACKOFF_MAX`]), until it opens or the toolset is dropped.
async fn reopen(
    shared: &Arc<Shared>,
    stop: &mut oneshot::Receiver<()>,
    backoff: &mut Duration,
) -> Option<Live> {
    loop {
        tokio::select! {
            _ = &mut *stop => return None,
            () = tokio::time::sleep(*backoff) => {}
        }
        *backoff = (*backoff * 2).min(BACKOFF_MAX);
        match open(shared).await {
            Ok(live) => return Some(live),
            Err(e) => {
                let why = e.why();
                if lock(&shared.log).down.allow() {
                    tracing::warn!(
                        "MCP toolset {}: reconnecting failed: {}",
                        shared.name,
                        outside(&why)
                    );
                }
                if let Link::Down { why: w, .. } = &mut *lock(&shared.link) {
                    *w = why;
                }
            }
        }
    }
}

/// Lists the tools again after `tools/list_changed` (a burst of them is one listing, at most one
/// per [`RELIST_EVERY`]). A listing that fails keeps the tools as they were.
async fn relist(
    shared: &Arc<Shared>,
    peer: &rmcp::Peer<RoleClient>,
    listed_at: &mut Option<Instant>,
) {
    let soonest = listed_at.map_or(Instant::now(), |at| at + RELIST_EVERY);
    let at = soonest.max(Instant::now() + RELIST_AFTER);
    tokio::time::sleep_until(at.into()).await;
    *listed_at = Some(Instant::now());
    let within = shared.settings.connect_timeout;
    match tokio::time::timeout(within, catalog::list(shared, peer)).await {
        Ok(Ok(tools)) => {
            *lock(&shared.tools) = tools;
            shared.listed.notify_waiters();
        }
        Ok(Err(e)) => {
            if lock(&shared.log).listing.allow() {
                tracing::warn!(
                    "MCP toolset {}: listing its tools again failed, the old list stays: {}",
                    shared.name,
                    outside(&e.why())
                );
            }
        }
        Err(_) => {
            if lock(&shared.log).listing.allow() {
                tracing::warn!(
                    "MCP toolset {}: listing its tools again took more than {within:?}, the old list stays",
                    shared.name
                );
            }
        }
    }
}

pub(super) use OpenError as ListError;

//! The relay leg (feature `relay`, on by default): the brain dials the Cortex relay and every call
//! of the agent rides one WebSocket, each binary message prefixed with its session's 16 raw bytes
//! (docs/protocol.md §2.2). Use it when the brain cannot accept inbound connections, or to run the
//! same agent on many machines against one relay URL.
//!
//! ```no_run
//! use voqalize::prelude::*;
//! use voqalize::relay::Relay;
//! # struct Echo;
//! # impl Brain for Echo {
//! #     async fn on_user_message(&self, t: &mut Turn, m: UserMessage) -> BrainResult { t.say(&m.text); Ok(()) }
//! # }
//! # async fn run() -> Result<(), voqalize::relay::RelayError> {
//! let relay = Relay::builder("wss://cortex.example/agent", "v1.4.2")
//!     .api_key(std::env::var("VOQAL_API_KEY").unwrap_or_default())
//!     .build()?; // the headers are checked here, not at the first connect
//! relay.serve(|| Echo, std::future::pending::<()>()).await?;
//! # Ok(()) }
//! ```
//!
//! The same brains and factories serve both legs: each session runs the same runtime as on the
//! direct leg (lanes, barge-in, heard truth, `fallible` factories). What the relay adds:
//! * **sessions by prefix**: a `SessionStart` on a new prefix makes a fresh brain; other frames
//!   for an unknown prefix are dropped; a session that ends frees its prefix;
//! * **a fair writer**: one frame per session in turn, every ready frame fed and flushed once per
//!   batch, so a busy session cannot starve the others; each session's backlog is bounded in bytes
//!   ([`HostBuilder::max_write_backlog_bytes`]) and so is the connection's
//!   ([`RelayBuilder::max_backlog_bytes`](HostBuilder::max_backlog_bytes));
//! * **liveness, owned by the connection**: a Ping every 20 s, and a relay that sends nothing (not
//!   even a Pong) or takes no bytes past its deadline is redialled; TCP keepalive on the socket
//!   ([`HostBuilder::keepalive`]). Sessions run no Ping deadline of their own: a silent caller stays
//!   up. A session the brain ends for its own reasons (a bound, an error, a panic, shutdown) is
//!   always told to the relay with its `End`;
//! * **reconnect**: with backoff from 0.1 s doubling to 60 s, ±10 % jitter, 10 s per attempt; a
//!   connection that closes before it stayed up 30 s is backed off like a failed dial
//!   ([`RelayBuilder::reconnect_backoff`](HostBuilder::reconnect_backoff)). HTTP 401/403 on the upgrade fail at once
//!   ([`RelayError::AuthRejected`]); close 4000 is permanent ([`RelayError::NoAgent`]); any other
//!   close reconnects and ends every session (each runs `on_session_end`; nothing is replayed);
//! * **limits per session**: a message over a session's [`HostBuilder::max_message_bytes`] ends that
//!   session only (its `End` goes to the relay), or is skipped for a prefix with no session, up to
//!   the socket's own bound: that much plus the prefix plus [`RelayBuilder::frame_headroom`](HostBuilder::frame_headroom),
//!   8 MiB + 16 bytes at the defaults. A message over the socket's bound loses the connection
//!   (every call on it ends; the relay is redialled);
//! * **bad input**: a text frame, a frame shorter than 16 bytes or a malformed envelope is logged
//!   (once per window) and skipped; it never stops `serve`;
//! * **graceful shutdown**, the direct leg's: when the future given to [`Relay::serve`] completes,
//!   or the [`Shutdown`](crate::host::Shutdown) it follows is triggered
//!   ([`HostBuilder::shutdown`]), no new session is taken (each `SessionStart` is answered with
//!   its `End`: the relay protocol has no refusal of its own), running calls get the drain timeout
//!   to finish, then the rest end with `End` and `on_session_end` told
//!   [`EndReason::Shutdown`](crate::EndReason::Shutdown). A second trigger ends them at once. The
//!   relay's calls count in the shutdown's [`DrainReport`] and its
//!   [`Health`](crate::host::Health), beside the direct leg's.

mod connect;
mod inbox;
pub(crate) mod mux;
mod outbound;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::brain::MakeBrain;
use crate::host::{Admission, DrainReport, HostBuilder, HostOptions};

pub use connect::RelayError;

/// A session's id on the relay: 16 raw bytes, echoed byte for byte.
type Prefix = [u8; 16];

/// The bytes of a [`Prefix`] in front of every message.
const PREFIX: usize = 16;

/// The longest duration a setting takes: longer ones (`Duration::MAX` for "never") are taken as a
/// year, so deadlines computed from them cannot overflow.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// The relay's cap on calls by default ([`HostBuilder::max_sessions`]).
const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// The relay connection's own settings (the sessions' are the [`HostOptions`] built beside them).
#[derive(Debug, Clone, Copy)]
struct Settings {
    ping_interval: Duration,
    pong_timeout: Duration,
    first_delay: Duration,
    max_delay: Duration,
    backoff_reset_after: Duration,
    give_up_after: Duration,
    frame_headroom: usize,
    max_backlog: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ping_interval: Duration::from_secs(20),
            pong_timeout: Duration::from_secs(20),
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(60),
            backoff_reset_after: Duration::from_secs(30),
            give_up_after: Duration::from_secs(60),
            frame_headroom: 7 * 1024 * 1024,
            max_backlog: 16 * 1024 * 1024,
        }
    }
}

/// How the `Authorization` header of each connect attempt is made.
#[derive(Clone)]
enum Authorization {
    Static(String),
    Provider(Arc<dyn Fn() -> String + Send + Sync>),
}

/// Builds a [`Relay`]: a [`HostBuilder`] for the relay leg, with the settings both legs share
/// (session limits, `shutdown`, `record`, `max_sessions`, `keepalive`...) and the relay's own
/// below (its `/agent` URL, the agent version, exactly one of an API key and an authorization
/// provider, reconnect and socket settings). Setters never fail: [`build`](HostBuilder::build)
/// checks the whole.
pub type RelayBuilder = HostBuilder<RelayLeg>;

/// The relay leg's own settings in a [`HostBuilder`] ([`RelayBuilder`]).
pub struct RelayLeg {
    url: String,
    version: String,
    api_key: Option<String>,
    provider: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    drain: Option<Duration>,
    settings: Settings,
}

impl std::fmt::Debug for RelayLeg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayLeg")
            .field("url", &self.url)
            .field("version", &self.version)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// A configured connection to the Cortex relay. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    url: String,
    version: String,
    authorization: Authorization,
    options: HostOptions,
    /// The calls it hosts now, against `max_sessions`; its clones count together.
    admission: Admission,
    drain: Duration,
    settings: Settings,
    /// Whether a connection to the relay is up now; its clones share it.
    connected: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("url", &self.url)
            .field("version", &self.version)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay at `url` (the `/agent` URL, `ws://` or `wss://`, used exactly as given), announcing
    /// agent `version` in `X-Agent-Version`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use voqalize::relay::Relay;
    ///
    /// let relay = Relay::builder("wss://cortex.example/agent", "coach-1.4.0")
    ///     .api_key("your-agent-key")
    ///     .drain_timeout(Duration::from_secs(20))
    ///     .build()?;
    /// # Ok::<(), voqalize::relay::RelayError>(())
    /// ```
    pub fn builder(url: impl Into<String>, version: impl Into<String>) -> RelayBuilder {
        HostBuilder::with_leg(RelayLeg {
            url: url.into(),
            version: version.into(),
            api_key: None,
            provider: None,
            drain: None,
            settings: Settings::default(),
        })
    }

    /// Serves every call the relay routes to this agent until `shutdown` completes and the
    /// running calls have drained, or the relay refuses the agent for good. Reconnects on its own
    /// after any other close. Returns what the drain did: the relay's calls that finished during
    /// it and those it ended (with a shutdown shared with the direct leg, that leg's so far too).
    ///
    /// When the relay follows a [`Shutdown`](crate::host::Shutdown)
    /// ([`HostBuilder::shutdown`]), that one drives the drain (its timeout, its second trigger,
    /// its report); pass `shutdown.triggered()` or `std::future::pending()` as `shutdown` then.
    /// Otherwise `shutdown` completing starts a drain of [`RelayBuilder::drain_timeout`](HostBuilder::drain_timeout).
    ///
    /// The connection runs in a task of its own on the runtime's workers, beside its calls'
    /// tasks, wherever this is awaited (`#[tokio::main]` awaits on the main thread, from where
    /// each frame would cross threads); dropping the returned future stops it and every call on it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use voqalize::host::Shutdown;
    /// use voqalize::prelude::*;
    /// use voqalize::relay::Relay;
    /// # struct Echo;
    /// # impl Brain for Echo {
    /// #     async fn on_user_message(&self, t: &mut Turn, m: UserMessage) -> BrainResult { t.say(&m.text); Ok(()) }
    /// # }
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// // One drain for every leg this process serves: SIGTERM drains for 30 s, a second one ends.
    /// let shutdown = Shutdown::new(Duration::from_secs(30)).on_signals();
    /// let relay = Relay::builder("wss://cortex.example/agent", "coach-1.4.0")
    ///     .api_key("your-agent-key")
    ///     .shutdown(&shutdown)
    ///     .build()?;
    /// let report = relay.serve(|| Echo, shutdown.triggered()).await?;
    /// println!("{} calls finished, {} ended by the shutdown", report.drained, report.ended);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`RelayError::AuthRejected`] when the relay answers the upgrade with 401 or 403 (check the
    /// API key); [`RelayError::NoAgent`] when it closes with 4000.
    pub async fn serve<M: MakeBrain>(
        &self,
        factory: M,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<DrainReport, RelayError> {
        crate::metrics::leg_serving(crate::metrics::leg(false));
        mux::serve(self, Arc::new(factory), shutdown).await
    }
}

impl Relay {
    /// Whether a connection to the relay is up now (while [`serve`](Self::serve) runs): what
    /// [`Health::relay`](crate::host::Health::relay) makes readiness follow.
    pub fn connected(&self) -> bool {
        self.connected.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Marks the connection up or down.
    pub(crate) fn set_connected(&self, up: bool) {
        self.connected
            .store(up, std::sync::atomic::Ordering::Release);
    }

    /// The bytes one session may have waiting for the socket: `max_write_backlog_bytes`, at
    /// least one write batch (so a tiny setting does not refuse ordinary frames).
    fn session_backlog(&self) -> usize {
        self.options.max_write_backlog().max(outbound::BATCH_BYTES)
    }
}

impl HostBuilder<RelayLeg> {
    /// A static API key, sent as `Authorization: Bearer <key>` on every connect.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.leg.api_key = Some(key.into());
        self
    }

    /// Called on every connect attempt for the whole `Authorization` header value (`Bearer ...`
    /// included), for rotating tokens.
    pub fn authorization_provider(
        mut self,
        provider: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        self.leg.provider = Some(Arc::new(provider));
        self
    }

    /// How long running calls may go on after shutdown was asked for (default 30 s). Past it,
    /// each call still running ends: the relay gets its `End`, then the socket closes with 1000.
    /// For a relay that follows no [`Shutdown`](crate::host::Shutdown): with one
    /// ([`HostBuilder::shutdown`]) its own timeout applies, and [`build`](HostBuilder::build)
    /// fails naming `drain_timeout`.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.leg.drain = Some(timeout.min(LONGEST));
        self
    }

    /// The wait before redialling: `first_delay` (default 0.1 s, at least 1 ms), doubled after
    /// each failed attempt and each connection that ended sooner than
    /// [`RelayBuilder::backoff_reset_after`](HostBuilder::backoff_reset_after), up to `max_delay` (default 60 s), jittered by ±10 %.
    /// A relay that accepts and then closes at once (any close but 4000, or a plain EOF) is backed
    /// off exactly like one that refuses the connection.
    pub fn reconnect_backoff(mut self, first_delay: Duration, max_delay: Duration) -> Self {
        self.leg.settings.first_delay = first_delay.clamp(Duration::from_millis(1), LONGEST);
        self.leg.settings.max_delay = max_delay.clamp(self.leg.settings.first_delay, LONGEST);
        self
    }

    /// How long a connection must stay up for the reconnect delay to start over at its first
    /// value (default 30 s). Shorter connections keep doubling it.
    pub fn backoff_reset_after(mut self, up: Duration) -> Self {
        self.leg.settings.backoff_reset_after = up;
        self
    }

    /// How long [`Relay::serve`] goes on dialling while every attempt fails in a way waiting does
    /// not heal: the relay's host does not resolve (DNS), or its TLS handshake fails (a wrong
    /// port, a proxy, a certificate the platform does not trust). Past it, `serve` returns
    /// [`RelayError::Unreachable`] (default 60 s: a DNS blip or a relay being redeployed
    /// recovers within it). A refused connection, a timeout or an HTTP 5xx is a relay that is not
    /// up yet, and is retried without end; a refused API key (401/403) ends `serve` at once.
    pub fn give_up_after(mut self, lasting: Duration) -> Self {
        self.leg.settings.give_up_after = lasting;
        self
    }

    /// Bytes the relay socket accepts in one message beyond a session's largest
    /// (`HostBuilder::max_message_bytes`, 1 MiB by default) and its 16-byte prefix (default
    /// 7 MiB). The socket's bound is their sum: 8 MiB + 16 bytes (8,388,624) at the defaults.
    ///
    /// Within the socket's bound, a message whose envelope is over its session's
    /// `max_message_bytes` ends that session only (its reader reads the frames before it first):
    /// `on_session_end` is told
    /// [`BoundExceeded(InboundMessage)`](crate::session::BoundExceeded::InboundMessage) and the
    /// relay gets the session's `End`. For a prefix with no session it is skipped. Both are logged
    /// once per window; the connection and every other call on it go on.
    ///
    /// Over the socket's bound, the message cannot be skipped (the WebSocket cannot be read past a
    /// message it refuses): the connection is lost, every call on it ends
    /// ([`TransportLost(RelayLost)`](crate::session::TransportLoss::RelayLost), nothing replayed),
    /// and the relay is redialled with backoff.
    ///
    /// Memory: the socket holds a message whole before the demux sees it, one at a time, for the
    /// one relay connection (not per call): up to the socket's bound, and about twice that while a
    /// message sent in fragments is put together.
    pub fn frame_headroom(mut self, bytes: usize) -> Self {
        self.leg.settings.frame_headroom = bytes;
        self
    }

    /// How many bytes every session of the connection together may have waiting for the relay
    /// socket (default 16 MiB; at least one session's `max_write_backlog_bytes`). Past it, or past
    /// a session's own bound, the session's writer waits; its outbound lane then fills as on the
    /// direct leg. A relay that takes no bytes for `pong_timeout` is redialled
    /// ([`HostBuilder::keepalive`]).
    pub fn max_backlog_bytes(mut self, bytes: usize) -> Self {
        self.leg.settings.max_backlog = bytes;
        self
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`RelayError::Config`] when both or neither of the API key and the provider are given, the
    /// URL is not `ws://` or `wss://`, or the version or key cannot be an HTTP header value.
    pub fn build(self) -> Result<Relay, RelayError> {
        let config = |why: &str| RelayError::Config(why.to_owned());
        let leg = &self.leg;
        if !(leg.url.starts_with("ws://") || leg.url.starts_with("wss://")) {
            return Err(config("the relay URL must start with ws:// or wss://"));
        }
        connect::header_value(&leg.version)
            .map_err(|_| config("the agent version cannot be an HTTP header value"))?;
        if leg.drain.is_some() && self.shutdown.is_some() {
            return Err(config(
                "drain_timeout: the relay follows a Shutdown, whose own drain timeout applies \
                 (set it with Shutdown::new)",
            ));
        }
        let authorization = match (leg.api_key.as_ref(), leg.provider.as_ref()) {
            (Some(key), None) => {
                let value = format!("Bearer {key}");
                connect::header_value(&value)
                    .map_err(|_| config("api_key: the key cannot be an HTTP header value"))?;
                Authorization::Static(value)
            }
            (None, Some(provider)) => Authorization::Provider(provider.clone()),
            _ => {
                return Err(config(
                    "pass exactly one of api_key and authorization_provider",
                ));
            }
        };
        let mut settings = leg.settings;
        let least = Duration::from_millis(10);
        if let Some((ping_interval, pong_timeout)) = self.keepalive {
            settings.ping_interval = ping_interval.clamp(least, LONGEST);
            settings.pong_timeout = pong_timeout.clamp(least, LONGEST);
        }
        let max_sessions = self.max_sessions.unwrap_or(DEFAULT_MAX_SESSIONS);
        let drain = leg.drain.unwrap_or(Duration::from_secs(30));
        let (url, version) = (self.leg.url, self.leg.version);
        // The calls' options: no token (the relay authenticates the agent), no load (the relay
        // routes each call), no Ping deadline per call (the connection owns liveness).
        let options = HostOptions {
            limits: self.limits,
            socket: self.socket,
            max_sessions: Some(max_sessions),
            shutdown: self.shutdown,
            recorder: self.recorder,
            ..HostOptions::allow_unverified()
        };
        Ok(Relay {
            url,
            version,
            authorization,
            admission: Admission::new(&options),
            options,
            drain,
            settings,
            connected: Arc::default(),
        })
    }
}

/// Probes that follow a relay (here, not in `host`: the host layer is below the relay).
impl crate::host::Health {
    /// Readiness also follows `relay`'s connection: not ready while it is down (the process
    /// could take no call then). The body gains `"relay_connected"`.
    #[must_use]
    pub fn relay(self, relay: &Relay) -> Self {
        let relay = relay.clone();
        self.follow_relay(move || relay.connected())
    }
}

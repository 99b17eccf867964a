//! Hosting a brain on the direct leg: Voqalize dials the brain, one WebSocket per call
//! (docs/protocol.md §2.1, §5).
//!
//! * [`run_session`] runs one call over any [`Channel`] once the WebSocket is upgraded: it verifies
//!   the token, drives the brain, and closes the channel (4000 for a bad token, 1008 without a
//!   session id, 1000 after the call).
//! * [`serve`] runs the direct leg's own WebSocket server (an accept loop); [`accept`] hosts one
//!   accepted TCP stream. They need no feature and name no dependency's type.
//! * Adapters for a server you already run, each behind the feature of the crate whose types it
//!   names (and so follows that crate's major version): `host::axum` (feature `axum`:
//!   `brain_route`, an axum route) and `host::tungstenite` (feature `tungstenite`: a
//!   [`Channel`] over a tokio-tungstenite socket you accepted yourself).
//! * In production: [`Shutdown`] drains the calls on SIGTERM (both legs), [`Health`] answers the
//!   platform's probes, [`Load`] refuses calls while the process is busy, and
//!   [`HostBuilder::max_sessions`] caps them.
//!
//! # Configuring a host: one builder for both legs
//!
//! * [`HostOptions::builder`] gives a `HostBuilder<Direct>` (`build()`: `Result<HostOptions,
//!   HostError>`); `Relay::builder(url, version)` (feature `relay`) gives a `HostBuilder<RelayLeg>`
//!   (`build()`: `Result<Relay, RelayError>`). Setters never fail; `build()` checks the whole and
//!   names what is wrong (reqwest's way, as the provider builders).
//! * A setting both legs have is one method of every [`HostBuilder`]: the session limits,
//!   `shutdown`, `record`, `max_sessions` (one server's calls), `keepalive` (the leg's liveness:
//!   each call's Pings, or the relay connection's), `max_message_bytes`, `max_write_backlog_bytes`.
//! * A leg's own settings are methods of that leg's builder only, so one that does not apply does
//!   not compile: the direct leg's keys, `load`, `socket_buffers`, `session_start_timeout`; the
//!   relay's authorization, reconnect and socket settings, `drain_timeout`.
//! * What can still clash is an error from `build()` naming the setting: an unreadable key, no
//!   key left, keys with `allow_unverified` ([`HostError::Conflict`]); on the relay,
//!   `drain_timeout` beside a `shutdown` (whose own timeout rules), a bad URL, version or key.
//! * [`HostOptions::production`] and [`HostOptions::allow_unverified`] are ready-made options
//!   (`builder().build()` and `builder().allow_unverified().build()`, which cannot fail).

mod accept;
mod admission;
pub mod auth;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod axum;
mod builder;
mod coalesce;
pub(crate) mod dial;
mod drain;
mod health;
pub(crate) mod listen;
mod load;
mod refusal;
#[cfg(feature = "tungstenite")]
#[cfg_attr(docsrs, doc(cfg(feature = "tungstenite")))]
pub mod tungstenite;
pub(crate) mod ws;

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{self, Either};
use tracing::Instrument;

pub use crate::brain::{Fallible, MakeBrain, fallible};
pub use crate::channel::{Channel, ChannelError, ChannelReceiver, ChannelSender, Incoming};
pub use accept::{AcceptError, HANDSHAKE_TIMEOUT, accept, serve, set_keepalive};
pub use admission::Admission;
#[cfg(any(feature = "axum", feature = "relay"))]
pub(crate) use admission::Admitted;
pub use auth::{Claims, PRODUCTION_PUBLIC_KEY};
pub use builder::{Direct, HostBuilder};
pub(crate) use drain::Hosted;
pub use drain::{DrainReport, Shutdown};
pub use health::Health;
pub use load::{DEFAULT_THRESHOLD, Load};
pub(crate) use refusal::Refused;

use crate::runtime::{self, Limits, Outcome, out_of_line};

/// Close code for a token that failed verification; Voqalize treats it as permanent.
pub const CLOSE_UNAUTHORIZED: u16 = 4000;
/// Close code for an upgrade without `?session_id=`.
pub const CLOSE_POLICY: u16 = 1008;
/// Close code for a call refused because the server is shutting down ("try again later").
pub const CLOSE_TRY_AGAIN: u16 = 1013;
pub use crate::channel::{CLOSE_INTERNAL, CLOSE_NORMAL, CLOSE_TOO_BIG};

/// Why a call could not be hosted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// No verification keys and no `allow_unverified`: every token would be refused.
    #[error(
        "no verification keys: pass at least one PEM public key to \
         HostBuilder::public_keys, or call HostBuilder::allow_unverified() for development"
    )]
    NoKeys,
    /// A public key could not be read (PEM, SPKI or PKCS#1 RSA).
    #[error("unreadable public key")]
    BadKey(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The token failed verification; the channel was closed with 4000. The message shows the
    /// session id as every string from a peer is shown (clipped, control characters escaped).
    #[error("unauthorized session {}", crate::logline::outside(session_id))]
    Rejected {
        /// The session id the upgrade named, as the peer sent it.
        session_id: String,
    },
    /// The WebSocket connection could not be accepted (TCP or handshake failure).
    #[error("could not accept the connection")]
    Handshake(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// Two settings of a [`HostBuilder`] that cannot go together: `setting` is the one to drop or
    /// change, `why` says what it clashes with.
    #[error("{setting}: {why}")]
    Conflict {
        /// The setting, as the builder's method is named.
        setting: &'static str,
        /// What it clashes with.
        why: &'static str,
    },
    /// The server is shutting down ([`HostBuilder::shutdown`]): the call was refused, closed with
    /// 1013 ("try again later").
    #[error("the server is shutting down; the call was refused")]
    ShuttingDown,
    /// The upgrade had no `session_id` query parameter; the channel was closed with 1008.
    #[error("expected ?session_id= on the upgrade URL")]
    MissingSessionId,
    /// Sending on the channel failed; the session was ended (turns cancelled, `on_session_end` ran).
    #[error("the session ended because sending failed")]
    SendFailed(#[source] ChannelError),
}

/// How calls are accepted on the direct leg: which keys are trusted and the session's queue
/// bounds and timeouts. Made by [`HostOptions::builder`] (or ready-made: [`production`](Self::production),
/// [`allow_unverified`](Self::allow_unverified)). Cheap to clone; share one across connections.
#[derive(Clone)]
pub struct HostOptions {
    pub(crate) verifier: auth::Verifier,
    pub(crate) limits: Limits,
    pub(crate) socket: SocketLimits,
    /// The cap on calls hosted at once by one server ([`Admission`] counts them).
    pub(crate) max_sessions: Option<usize>,
    /// The shutdown the calls follow, when one was given.
    pub(crate) shutdown: Option<Shutdown>,
    /// Above its threshold no new call is taken, when one was given.
    pub(crate) load: Option<Load>,
    /// Where calls are recorded, when they are.
    pub(crate) recorder: Option<crate::record::Recorder>,
    /// Told every answered tool call of every call (the testing kit's driver).
    pub(crate) tool_watch: Option<crate::session::ToolWatch>,
    /// Told every turn that ran to its end, of every call (the testing kit's driver).
    pub(crate) turn_watch: Option<crate::session::TurnWatch>,
}

/// The default of [`HostBuilder::max_chunk_bytes`](crate::host::HostBuilder::max_chunk_bytes): 16 KiB, far above any real text delta and far
/// below the socket's message limit.
const DEFAULT_CHUNK_BYTES: usize = 16 * 1024;

/// The most bytes a WebSocket frame header takes (a 64-bit length and a mask): the write backlog
/// holds a whole message of the limit, header included.
const FRAME_HEADER_BYTES: usize = 14;

/// The WebSocket's buffers and size limits, per connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SocketLimits {
    pub(crate) read_buffer: usize,
    pub(crate) write_buffer: usize,
    pub(crate) max_write_backlog: usize,
    pub(crate) max_message: usize,
}

/// The session limits every builder starts from.
pub(crate) fn default_limits() -> Limits {
    Limits {
        max_lane_frames: 256,
        max_lane_bytes: 2 * 1024 * 1024,
        max_turns: 4,
        request_timeout: Duration::from_secs(10),
        start_timeout: Duration::from_secs(10),
        max_json: 64 * 1024,
        ping_interval: Duration::from_secs(20),
        pong_timeout: Duration::from_secs(20),
        max_frame: SocketLimits::default().max_message,
        chunk_bytes: DEFAULT_CHUNK_BYTES,
        session_keepalive: true,
    }
}

impl Default for SocketLimits {
    fn default() -> Self {
        SocketLimits {
            read_buffer: 512,
            write_buffer: 0,
            max_write_backlog: 1024 * 1024,
            max_message: 1024 * 1024,
        }
    }
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = match &self.verifier {
            auth::Verifier::Keys(k) => format!("{} key(s)", k.len()),
            auth::Verifier::Unverified => "unverified".to_owned(),
        };
        f.debug_struct("HostOptions")
            .field("verifier", &keys)
            .field("limits", &self.limits)
            .field("socket", &self.socket)
            .field("max_sessions", &self.max_sessions)
            .field("load", &self.load)
            .field("recorder", &self.recorder)
            .finish()
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        Self::production()
    }
}

impl HostOptions {
    /// A builder of options, every setting at its default (the production key trusted); see
    /// [`HostBuilder`]. Its setters never fail: `build()` checks the whole.
    ///
    /// ```
    /// use std::time::Duration;
    /// use voqalize::host::{HostOptions, Shutdown};
    ///
    /// let shutdown = Shutdown::new(Duration::from_secs(30));
    /// let options = HostOptions::builder()
    ///     .shutdown(&shutdown)
    ///     .max_sessions(200)
    ///     .build()?;
    /// # Ok::<(), voqalize::host::HostError>(())
    /// ```
    pub fn builder() -> HostBuilder<Direct> {
        HostBuilder::with_leg(Direct::default())
    }

    /// Trusts only the embedded production key ([`PRODUCTION_PUBLIC_KEY`]), every other setting
    /// at its default: what a brain serving real Voqalize calls wants (`builder().build()`, which
    /// cannot fail).
    pub fn production() -> Self {
        // The embedded key is a constant a unit test parses, so this cannot fail in a released
        // build; if it ever did, every token is refused (fail closed) and the log says why.
        let keys = match auth::parse_key(PRODUCTION_PUBLIC_KEY) {
            Ok(key) => vec![key],
            Err(e) => {
                tracing::error!(
                    "brain: the embedded production key does not parse ({e}); every token will be refused"
                );
                Vec::new()
            }
        };
        HostOptions {
            verifier: auth::Verifier::Keys(keys),
            limits: default_limits(),
            socket: SocketLimits::default(),
            max_sessions: None,
            shutdown: None,
            load: None,
            recorder: None,
            tool_watch: None,
            turn_watch: None,
        }
    }

    /// Tells `watch` of every answered tool call (the testing kit's driver lists them per turn;
    /// reached as `__kit::watch_tools`).
    pub(crate) fn watch_tools(mut self, watch: crate::session::ToolWatch) -> Self {
        self.tool_watch = Some(watch);
        self
    }

    /// Tells `watch` of every turn that ran to its end (reached as `__kit::watch_turns`).
    pub(crate) fn watch_turns(mut self, watch: crate::session::TurnWatch) -> Self {
        self.turn_watch = Some(watch);
        self
    }

    /// A tape for a call starting now (for `session_id`, when the host knows it), when calls are
    /// recorded and this one is to be.
    pub(crate) fn tape(&self, session_id: Option<&str>) -> Option<Arc<crate::record::Tape>> {
        self.recorder.as_ref().and_then(|r| r.tape(session_id))
    }

    /// Whether the load these options follow is above its threshold: no new call is taken.
    pub(crate) fn overloaded(&self) -> bool {
        self.load.as_ref().is_some_and(Load::is_over)
    }

    /// Whether a shutdown these options follow is draining: no new call is taken.
    pub(crate) fn draining(&self) -> bool {
        self.shutdown.as_ref().is_some_and(Shutdown::is_draining)
    }

    /// The shutdown these options follow.
    pub(crate) fn shutting(&self) -> Option<&Shutdown> {
        self.shutdown.as_ref()
    }

    /// Accepts every connection without checking a token, every other setting at its default
    /// (`builder().allow_unverified().build()`, which cannot fail). For development only: see
    /// [`HostBuilder::allow_unverified`].
    pub fn allow_unverified() -> Self {
        HostOptions {
            verifier: auth::Verifier::Unverified,
            ..Self::production()
        }
    }

    /// Whether an upgrade with an `Origin` header (from a web page) is refused: when no token is
    /// checked (see [`allow_unverified`](Self::allow_unverified)).
    pub(crate) fn refuses_web_pages(&self) -> bool {
        matches!(self.verifier, auth::Verifier::Unverified)
    }

    /// The session limits these options set.
    #[cfg(feature = "relay")]
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// The largest inbound message of one session, in bytes ([`HostBuilder::max_message_bytes`](crate::host::HostBuilder::max_message_bytes)).
    #[cfg(feature = "relay")]
    pub(crate) fn max_message(&self) -> usize {
        self.socket.max_message
    }

    /// How many bytes may wait unsent for one session ([`HostBuilder::max_write_backlog_bytes`](crate::host::HostBuilder::max_write_backlog_bytes)).
    #[cfg(feature = "relay")]
    pub(crate) fn max_write_backlog(&self) -> usize {
        self.socket.max_write_backlog
    }

    /// The tokio-tungstenite configuration these options call for (buffers and size limits); public
    /// as `tungstenite::websocket_config` (feature `tungstenite`), so these options name no
    /// dependency's type.
    pub(crate) fn websocket_config(
        &self,
    ) -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
        let s = self.socket;
        tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(s.read_buffer)
            .write_buffer_size(s.write_buffer)
            // The backlog bound holds a whole message beyond the write buffer, header included.
            .max_write_buffer_size(
                s.max_write_backlog
                    .max(s.write_buffer + s.max_message + FRAME_HEADER_BYTES),
            )
            .max_message_size(Some(s.max_message))
            .max_frame_size(Some(s.max_message))
    }

    /// Verifies an upgrade's token for `session_id` without running anything.
    ///
    /// # Errors
    /// [`HostError::Rejected`] when the token fails.
    pub fn verify(
        &self,
        authorization: Option<&str>,
        session_id: &str,
    ) -> Result<Claims, HostError> {
        self.verifier.verify(authorization, session_id)
    }
}

/// What Voqalize sent on the WebSocket upgrade.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Upgrade {
    /// The `session_id` query parameter.
    pub session_id: Option<String>,
    /// The `Authorization` header value (`Bearer <jwt>`).
    pub authorization: Option<String>,
}

impl Upgrade {
    /// Reads `session_id` from a request target or URI query such as `/voice?a=1&session_id=x`.
    pub fn from_query(query: Option<&str>, authorization: Option<String>) -> Self {
        // A request target (origin form, `/path?query`) carries the query after its first `?`; a
        // bare query (what `Uri::query` gives) is used whole, `?` included.
        let query = query.map(|q| match q.strip_prefix('/') {
            Some(target) => target.split_once('?').map_or("", |(_, query)| query),
            None => q,
        });
        let session_id = query.and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, v)| k == "session_id" && !v.is_empty())
                .map(|(_, v)| v.into_owned())
        });
        Upgrade {
            session_id,
            authorization,
        }
    }
}

/// Hosts one call on an upgraded channel and returns when it is over.
///
/// Verifies the upgrade's token (close 4000 and [`HostError::Rejected`] on failure, before the brain
/// is made), then drives a brain from `factory` until Voqalize sends `End` or `Cancel`, the peer
/// closes, or a send fails; `on_session_end` has run when it returns. It then closes the channel
/// with 1000 ([`CLOSE_INTERNAL`], 1011, when the brain built a frame over the message limit and
/// ended the call in its place). Every log line inside carries `service="brain"`, `session_id`, and `tenant_id` /
/// `agent_id` from the verified claims.
///
/// # Errors
/// [`HostError::MissingSessionId`] (closed with 1008), [`HostError::Rejected`] (closed with 4000),
/// [`HostError::SendFailed`] when the channel broke under the session.
///
/// The channel is split before the returned future first runs, so the future does not carry the
/// unsplit channel for the call's whole life (a few hundred bytes a call).
pub fn run_session<C: Channel, M: MakeBrain>(
    channel: C,
    factory: Arc<M>,
    upgrade: Upgrade,
    options: &HostOptions,
) -> impl Future<Output = Result<(), HostError>> + Send + '_ {
    let (sender, receiver) = channel.split();
    host_split(sender, receiver, factory, upgrade, options)
}

/// [`run_session`] once the channel is split.
///
/// The upgrade is decided (its token verified, the drain checked) when the future first runs, and
/// the future of a call that goes ahead then holds the running session and what its end needs, no
/// more: an async function would carry its arguments, the token's claims and the upgrade beside
/// the session for the call's whole life (some hundreds of bytes a call). The steps are chained
/// (`lazy`, `then`), each state in place of the one before.
fn host_split<'o, S: ChannelSender, R: ChannelReceiver, M: MakeBrain>(
    sender: S,
    receiver: R,
    factory: Arc<M>,
    upgrade: Upgrade,
    options: &'o HostOptions,
) -> impl Future<Output = Result<(), HostError>> + Send + 'o {
    future::lazy(move |_| verify_upgrade(upgrade, options)).then(move |verified| {
        let Verified { span, hosted, call } = match verified {
            Ok(verified) => verified,
            Err((code, reason, error)) => {
                return Either::Left(async move {
                    let mut sender = sender;
                    out_of_line(sender.close(code, reason)).await;
                    // The receiving half goes once the close is sent.
                    drop(receiver);
                    Err(error)
                });
            }
        };
        let receiver = drain::Watched::new(receiver, options.shutting().map(Shutdown::ending));
        let session =
            runtime::run(sender, receiver, factory, options.limits, call).instrument(span);
        // Chained, not awaited in an async block: a block would hold the session's future
        // twice, once as what it captured and once as what it awaits.
        Either::Right(session.then(move |(outcome, sender)| async move {
            let code = match &outcome {
                Outcome::Ended { close, .. } => *close,
                Outcome::SendFailed(_) => CLOSE_NORMAL,
            };
            if let Some(mut sender) = sender {
                out_of_line(sender.close(code, "")).await;
            }
            drop(hosted);
            match outcome {
                Outcome::Ended { .. } => Ok(()),
                Outcome::SendFailed(cause) => Err(HostError::SendFailed(cause)),
            }
        }))
    })
}

/// What a verified upgrade goes ahead with: the call's span, its place in the shutdown's count,
/// what the session knows of it.
struct Verified {
    span: tracing::Span,
    hosted: Option<Hosted>,
    call: runtime::Call,
}

/// Why an upgrade is refused: the close code and reason the channel is closed with, and the error.
type Refusal = (u16, &'static str, HostError);

/// Decides an upgrade: its session id, its token (identity in logs comes only from the verified
/// claims), the drain.
fn verify_upgrade(upgrade: Upgrade, options: &HostOptions) -> Result<Verified, Refusal> {
    let Some(session_id) = upgrade.session_id else {
        return Err((
            CLOSE_POLICY,
            "expected ?session_id=",
            HostError::MissingSessionId,
        ));
    };
    let span = tracing::info_span!(
        "session",
        service = "brain",
        session_id = %crate::logline::outside_n(&session_id, 64),
        tenant_id = tracing::field::Empty,
        agent_id = tracing::field::Empty,
    );
    let claims = span
        .in_scope(|| options.verify(upgrade.authorization.as_deref(), &session_id))
        .map_err(|e| (CLOSE_UNAUTHORIZED, "unauthorized", e))?;
    if let Some(t) = claims.tenant_id() {
        span.record("tenant_id", t.as_str());
    }
    if let Some(a) = claims.agent_id() {
        span.record("agent_id", a.as_str());
    }
    if options.draining() {
        return Err((CLOSE_TRY_AGAIN, "shutting down", HostError::ShuttingDown));
    }
    let hosted = options.shutting().map(Shutdown::hosting);
    let connection = Some(Arc::from(session_id.as_str()));
    let call = runtime::Call {
        tape: options.tape(connection.as_deref()),
        tool_watch: options.tool_watch.clone(),
        turn_watch: options.turn_watch.clone(),
        connection,
    };
    Ok(Verified { span, hosted, call })
}

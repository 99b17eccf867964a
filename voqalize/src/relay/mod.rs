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
//! let relay = Relay::new("wss://cortex.example/agent", "v1.4.2")
//!     .api_key(std::env::var("VOQAL_API_KEY").unwrap_or_default())
//!     .build()?; // the headers are checked here, not at the first connect
//! relay.serve(|| Echo, std::future::pending::<()>()).await
//! # }
//! ```
//!
//! The same brains and factories serve both legs: each session runs the same runtime as on the
//! direct leg (lanes, barge-in, heard truth, `fallible` factories). What the relay adds:
//! * **sessions by prefix**: a `SessionStart` on a new prefix makes a fresh brain; other frames
//!   for an unknown prefix are dropped; a session that ends frees its prefix;
//! * **a fair writer**: one frame per session in turn, so a busy session cannot starve the others;
//!   a session's own backlog is bounded like on the direct leg;
//! * **reconnect**: with backoff from 0.1 s doubling to 60 s, ±10 % jitter, 10 s per attempt. HTTP
//!   401/403 on the upgrade fail at once ([`RelayError::AuthRejected`]); close 4000 is permanent
//!   ([`RelayError::NoAgent`]); any other close reconnects and ends every session (each runs
//!   `on_session_end`; nothing is replayed);
//! * **bad input**: a text frame, a frame shorter than 16 bytes or a malformed envelope is logged
//!   (once per window) and skipped; it never stops `serve`;
//! * **graceful shutdown**: when the future given to [`Relay::serve`] completes, no new session is
//!   taken, running calls get [`RelayBuilder::drain_timeout`] to finish, then the rest end.

mod connect;
mod mux;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::brain::MakeBrain;
use crate::host::HostOptions;

pub use connect::RelayError;
#[doc(hidden)]
pub use mux::RelayInbound;

/// How the `Authorization` header of each connect attempt is made.
#[derive(Clone)]
enum Authorization {
    Static(String),
    Provider(Arc<dyn Fn() -> String + Send + Sync>),
}

/// Builds a [`Relay`]: the relay's `/agent` URL, the agent version, and exactly one of an API
/// key and an authorization provider.
#[must_use]
pub struct RelayBuilder {
    url: String,
    version: String,
    api_key: Option<String>,
    provider: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    options: HostOptions,
    drain: Duration,
}

/// A configured connection to the Cortex relay. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    url: String,
    version: String,
    authorization: Authorization,
    options: HostOptions,
    drain: Duration,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("url", &self.url)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay at `url` (the `/agent` URL, `ws://` or `wss://`, used exactly as given), announcing
    /// agent `version` in `X-Agent-Version`.
    // Returns the builder, as the model layers do: a relay only exists once `build` checked it.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(url: impl Into<String>, version: impl Into<String>) -> RelayBuilder {
        RelayBuilder {
            url: url.into(),
            version: version.into(),
            api_key: None,
            provider: None,
            options: HostOptions::allow_unverified(),
            drain: Duration::from_secs(30),
        }
    }

    /// Serves every call the relay routes to this agent until `shutdown` completes or the relay
    /// refuses the agent for good. Reconnects on its own after any other close.
    ///
    /// # Errors
    /// [`RelayError::AuthRejected`] when the relay answers the upgrade with 401 or 403 (check the
    /// API key); [`RelayError::NoAgent`] when it closes with 4000.
    pub async fn serve<M: MakeBrain>(
        &self,
        factory: M,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), RelayError> {
        mux::serve(self, Arc::new(factory), shutdown).await
    }
}

impl RelayBuilder {
    /// A static API key, sent as `Authorization: Bearer <key>` on every connect.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Called on every connect attempt for the whole `Authorization` header value (`Bearer ...`
    /// included), for rotating tokens.
    pub fn authorization_provider(
        mut self,
        provider: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        self.provider = Some(Arc::new(provider));
        self
    }

    /// The session limits (queue bound, timeouts, JSON size...) each call runs with; token checks
    /// do not apply on this leg (the relay authenticates the agent). Default:
    /// `HostOptions::allow_unverified()`'s limits.
    pub fn host_options(mut self, options: HostOptions) -> Self {
        self.options = options;
        self
    }

    /// How long running calls may go on after shutdown was asked for (default 30 s).
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain = timeout;
        self
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`RelayError::Config`] when both or neither of the API key and the provider are given, the
    /// URL is not `ws://` or `wss://`, or the version or key cannot be an HTTP header value.
    pub fn build(self) -> Result<Relay, RelayError> {
        let config = |why: &str| RelayError::Config(why.to_owned());
        if !(self.url.starts_with("ws://") || self.url.starts_with("wss://")) {
            return Err(config("the relay URL must start with ws:// or wss://"));
        }
        connect::header_value(&self.version)
            .map_err(|_| config("the agent version cannot be an HTTP header value"))?;
        let authorization = match (self.api_key, self.provider) {
            (Some(key), None) => {
                let value = format!("Bearer {key}");
                connect::header_value(&value)
                    .map_err(|_| config("the API key cannot be an HTTP header value"))?;
                Authorization::Static(value)
            }
            (None, Some(provider)) => Authorization::Provider(provider),
            _ => {
                return Err(config(
                    "pass exactly one of api_key and authorization_provider",
                ));
            }
        };
        Ok(Relay {
            url: self.url,
            version: self.version,
            authorization,
            options: self.options,
            drain: self.drain,
        })
    }
}

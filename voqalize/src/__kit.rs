//! The seams the `voqalize-testing` crate and the workspace's benchmarks and fuzz target reach
//! into. **Not an API**: hidden from the docs, outside semver, and any item here may change or go
//! in any release. A brain has no use for it; build on the public modules instead.
//!
//! What is here, and for whom:
//! * [`dial`]: dial a brain as Voqalize does (the testing kit's driver over a socket);
//! * [`watch_tools`] and [`AnsweredTool`]: be told every answered tool call of the calls hosted
//!   with some options (the driver's turn records);
//! * [`watch_turns`]: be told every turn that ran to its end (the evals' driver knows a turn is
//!   over without a quiet window);
//! * [`json_or_text`]: a body as a recording keeps it (the replay's stand-in matches requests so);
//! * [`outside`], [`outside_n`], [`chain`]: the crate's one way to put a string from outside, or
//!   an error and its causes, into a log line or a report;
//! * [`http_client`] (feature `model`): the pooled provider client (the replay forwards with it);
//! * [`bench`] (feature `model`): request building measured in isolation (benchmarks, fuzzing);
//! * [`ask`] and [`Asked`] (feature `model`): one model request outside a turn, no tools, its
//!   text within a byte bound and its token counts (the evals' simulated caller and judge);
//! * [`RelayInbound`] (feature `relay`): the relay's inbound frame parser (fuzzing).

use std::fmt::Display;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::host::HostOptions;

/// Why a brain could not be dialled, or a client not built: what failed, with its source.
pub type DialError = crate::host::dial::DialError;

/// Dials `url` (`ws://host:port[/path][?query]`, plain TCP) as Voqalize does: `session_id` set in
/// the query (replacing one already there), `token` sent as a bearer token when given. `config`
/// bounds what the brain may send back.
///
/// # Errors
/// A URL that is not `ws://` or has no host, a refused connection, a failed handshake.
pub async fn dial(
    url: &str,
    session_id: &str,
    token: Option<&str>,
    config: Option<WebSocketConfig>,
) -> Result<WebSocketStream<TcpStream>, DialError> {
    crate::host::dial::dial(url, session_id, token, config).await
}

/// One answered tool call of a session hosted with [`watch_tools`]' options.
#[derive(Debug, Clone)]
pub struct AnsweredTool {
    /// The turn the call was made in.
    pub turn_id: u64,
    /// The tool's name.
    pub name: String,
    /// The arguments it was called with.
    pub arguments: serde_json::Value,
    /// What the tool answered, as the model was told it.
    pub outcome: String,
    /// `in_turn`, `after_barge_in` or `background`.
    pub end: &'static str,
}

/// `options` that tell `watch` of every answered tool call of each call hosted with them.
#[must_use]
pub fn watch_tools(
    options: HostOptions,
    watch: impl Fn(AnsweredTool) + Send + Sync + 'static,
) -> HostOptions {
    options.watch_tools(crate::session::ToolWatch(Arc::new(
        move |a: crate::session::Answered| {
            watch(AnsweredTool {
                turn_id: a.turn_id,
                name: a.name,
                arguments: a.arguments,
                outcome: a.outcome,
                end: a.end,
            });
        },
    )))
}

/// `options` that tell `watch` the id of every turn whose task ran to its end (the brain's
/// `on_user_message`, `on_user_idle` or greeting returned; not a turn cut by a barge-in or the
/// call's end), of each call hosted with them, and how many frames the session had queued to
/// send by then (the turn's last among them): a peer that has read that many has all of it.
#[must_use]
pub fn watch_turns(
    options: HostOptions,
    watch: impl Fn(u64, u64) + Send + Sync + 'static,
) -> HostOptions {
    options.watch_turns(crate::session::TurnWatch(Arc::new(watch)))
}

/// A body or arguments as a recording keeps them: JSON when it parses (and nests at most 100
/// deep), else its text.
#[must_use]
pub fn json_or_text(bytes: &[u8]) -> serde_json::Value {
    crate::record::json_or_text(bytes)
}

/// `text` from outside as a log line shows it: its first 200 characters, then `… (N bytes)` when
/// it was longer, every control character escaped.
pub fn outside(text: &str) -> impl Display + '_ {
    crate::logline::outside(text)
}

/// [`outside`] cut at `max` characters.
pub fn outside_n(text: &str, max: usize) -> impl Display + '_ {
    crate::logline::outside_n(text, max)
}

/// `error` and each of its sources, joined with `: `.
#[must_use]
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    crate::logline::chain(error)
}

/// The pooled HTTP/1.1 client the model layers use, with `connect` as its connect + TLS timeout.
///
/// # Errors
/// When the TLS configuration cannot be built.
#[cfg(feature = "model")]
pub fn http_client(connect: std::time::Duration) -> Result<reqwest::Client, DialError> {
    Ok(crate::model::http::client(connect, None)?)
}

/// What [`ask`] answered: the reply's text and the tokens it used, by TurnStep count name.
#[cfg(feature = "model")]
pub use crate::voice::ask::Asked;

/// The layer inside a [`ModelLayer`](crate::voice::ModelLayer) (the evals' caller and judge
/// take any layer, as `Model::new` does).
#[cfg(feature = "model")]
pub fn layer_of(
    layer: &crate::voice::ModelLayer,
) -> std::sync::Arc<dyn crate::model::layer::Layer> {
    layer.layer().clone()
}

/// One model request outside a turn, as the handoff summary makes it: `instruction`, then
/// `messages` in order (each [`Role::User`](crate::model::layer::Role) or `Role::Model` text;
/// `Role::Results` is refused), no tools. The reply's text is read until it reaches `max_bytes`
/// (the part that reaches it is kept whole, so clip where an exact bound matters; a response past
/// four times that, or 16 KiB, is cut); its usage is mapped to counts as a TurnStep names them.
/// No timeout beyond the layer's own timers: bound the call with `tokio::time::timeout`.
///
/// # Errors
/// The request could not be built, sent or read, or the provider answered an error: what failed
/// and its causes, clipped and escaped as a log line shows text from outside ([`outside_n`], 500
/// characters).
#[cfg(feature = "model")]
pub async fn ask(
    layer: &dyn crate::model::layer::Layer,
    instruction: &str,
    messages: &[(crate::model::layer::Role, String)],
    max_bytes: usize,
) -> Result<Asked, String> {
    crate::voice::ask::ask(layer, instruction, messages, max_bytes)
        .await
        .map_err(|why| crate::logline::outside_n(&why, 500).to_string())
}

/// Request building and SSE decoding measured in isolation (`benches/voice.rs`, the fuzz target).
#[cfg(feature = "model")]
pub mod bench {
    pub use crate::voice::bench::*;
}

/// The relay's inbound frame parser (the fuzz target).
#[cfg(feature = "relay")]
pub use crate::relay::mux::RelayInbound;

//! The tokio-tungstenite adapter (feature `tungstenite`): [`Channel`](super::Channel) for any
//! tokio-tungstenite `WebSocketStream`, for a server that accepts connections itself and runs each
//! call with [`run_session`](super::run_session). It names tokio-tungstenite's types by design, so
//! it follows that crate's major version; [`serve`](super::serve) and [`accept`](super::accept)
//! need no feature.

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::HostOptions;

pub use super::ws::{TungsteniteChannel, TungsteniteReceiver, TungsteniteSender};

/// The tokio-tungstenite configuration `options` call for (buffers and size limits), for a server
/// that accepts connections itself and runs each with [`run_session`](super::run_session) over a
/// [`TungsteniteChannel`].
pub fn websocket_config(options: &HostOptions) -> WebSocketConfig {
    options.websocket_config()
}

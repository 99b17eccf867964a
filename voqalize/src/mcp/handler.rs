//! A call's progress routed to the turn that waits for it (at most one line per
//! `progress_every`, clipped), for the gate (`gate.rs`), which takes the server's notifications
//! before rmcp's service sees them; and the client's side of the connection for rmcp.

use std::sync::Arc;

use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};

use super::Shared;
use crate::recover::lock;

/// The client side of one connection: the notifications it uses are taken by the gate.
pub(crate) struct Handler;

impl ClientHandler for Handler {
    /// Who the client is, and the newest protocol version that opens with `initialize`: rmcp's
    /// default offers `2026-07-28`, whose sessions have no `initialize` handshake, and a server
    /// of the current protocol (the conformance suite's among them) refuses it.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("voqalize", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Queues a call's progress `message` to be spoken, unless one was within `progress_every` (or
/// the call is not waited for any more).
pub(super) fn spoken(shared: &Arc<Shared>, token: u64, message: &str) {
    let every = shared.settings.progress_every;
    let mut calls = lock(&shared.progress);
    let Some(call) = calls.get_mut(&token) else {
        return;
    };
    let now = std::time::Instant::now();
    if call
        .last
        .is_some_and(|last| now.duration_since(last) < every)
    {
        return;
    }
    call.last = Some(now);
    let line = &message[..message.floor_char_boundary(crate::session::MAX_PROGRESS_BYTES)];
    // A full lane drops the line: the caller hears the next one.
    let _ = call.lane.try_send(line.to_owned());
}

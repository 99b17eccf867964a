//! What the client does with the server's notifications: a call's progress routed to the turn
//! that waits for it (at most one line per `progress_every`), and `tools/list_changed` noted for
//! the supervisor, which lists the tools again between turns.

use std::sync::{Arc, Weak};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, NumberOrString, ProgressNotificationParam,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RoleClient};

use super::Shared;
use crate::recover::lock;

/// The client side of one connection: it holds the toolset weakly (the toolset owns it).
pub(crate) struct Handler {
    pub(crate) shared: Weak<Shared>,
}

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

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let NumberOrString::Number(token) = params.progress_token.0 else {
            return;
        };
        let Some(message) = params.message.filter(|m| !m.trim().is_empty()) else {
            return;
        };
        spoken(&shared, token.cast_unsigned(), &message);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.list_changed.notify_one();
        }
    }
}

/// Queues a call's progress `message` to be spoken, unless one was within `progress_every` (or
/// the call is not waited for any more).
fn spoken(shared: &Arc<Shared>, token: u64, message: &str) {
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

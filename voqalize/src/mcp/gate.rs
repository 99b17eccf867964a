//! What a server may send besides answers, taken at the transport, before rmcp's service sees
//! it: rmcp logs every notification it receives whole, at info level, and answers a request it
//! does not serve with a warning, so a server sending 1 MiB log notifications every 10 ms would
//! write 100 MB of log lines a second. Here a call's progress is routed to its turn (clipped,
//! at most one line per `progress_every`), `tools/list_changed` is handed to the supervisor,
//! every other notification is dropped unread, and a request other than `ping` is answered
//! "method not found" by the gate itself; none of it is logged.

use std::future::Future;
use std::sync::Weak;

use rmcp::RoleClient;
use rmcp::model::ServerRequest;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, NumberOrString, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::Shared;
use super::handler::spoken;

/// A transport with the gate in front of what it receives.
pub(super) struct Gate<T> {
    pub(super) inner: T,
    pub(super) shared: Weak<Shared>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Gate<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.inner.receive().await? {
                JsonRpcMessage::Notification(n) => self.noted(n.notification),
                JsonRpcMessage::Request(r)
                    if !matches!(r.request, ServerRequest::PingRequest(_)) =>
                {
                    let refused = ErrorData::new(
                        ErrorCode::METHOD_NOT_FOUND,
                        "this client serves no requests but ping",
                        None,
                    );
                    // Awaited here: a server that sends requests and does not read the answers
                    // stops being read itself.
                    let _ = self
                        .inner
                        .send(JsonRpcMessage::error(refused, Some(r.id)))
                        .await;
                }
                other => return Some(other),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl<T> Gate<T> {
    /// Acts on a notification the client uses; drops the rest.
    fn noted(&self, notification: ServerNotification) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        match notification {
            ServerNotification::ProgressNotification(n) => {
                let NumberOrString::Number(token) = n.params.progress_token.0 else {
                    return;
                };
                if let Some(message) = n.params.message.filter(|m| !m.trim().is_empty()) {
                    spoken(&shared, token.cast_unsigned(), &message);
                }
            }
            ServerNotification::ToolListChangedNotification(_) => shared.list_changed.notify_one(),
            _ => {}
        }
    }
}

//! The model-backed brain both benches measure: a desk with two tools, whose `on_session_end`
//! may tell a bench that a call ended.

use tokio::sync::mpsc;
use voqalize::prelude::*;

/// A booking.
#[json_type]
pub(crate) struct Booking {
    /// The city.
    city: String,
    /// How many people.
    party: u32,
}

/// The brain: every turn to its model, which may open a booking or show help.
pub(crate) struct Desk {
    pub(crate) model: Model,
    /// Told when a call's `on_session_end` ran.
    pub(crate) ended: Option<mpsc::UnboundedSender<()>>,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }

    async fn on_session_end(&self, _: &Session, _: EndReason) {
        if let Some(ended) = &self.ended {
            let _ = ended.send(());
        }
    }
}

#[brain]
impl Desk {
    /// Put the booking form on screen.
    #[tool]
    async fn open_booking(&self, args: Booking) -> String {
        format!("opened for {} in {}", args.party, args.city)
    }

    /// Show help.
    #[tool]
    async fn show_help(&self) -> &'static str {
        "shown"
    }
}

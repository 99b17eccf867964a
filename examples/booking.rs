//! Booking: a tool that asks the user to confirm on screen, and the app's answer coming back.
//!
//! `confirm_booking` puts a confirmation card on the app's screen (a typed UI command) and returns
//! at once: the model reads "shown; waiting for the user to confirm, nonce N" and tells the user to
//! check the screen. When the user taps, the app sends a typed app event; `on_rtvi` reads it and
//! adds a note to the conversation ("(The user confirmed booking N on screen.)"), which the model
//! reads from its next request on. No tool ever waits for the user: a turn that waited would hold
//! the call silent, and a barge-in would drop it.
//!
//! ```text
//! GEMINI_API_KEY=... cargo run --example booking -- --allow-unverified
//! OPENAI_API_KEY=... cargo run --example booking -- --allow-unverified --provider openai --model gpt-6-sol
//! cargo run --example booking -- --allow-unverified --provider chat --base-url http://localhost:4000 --model my-route
//! ```
//!
//! The app answers with an RTVI `ui-event`:
//! `{"event": "booking_confirmed", "payload": {"nonce": 1}}` (or `booking_declined`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;
#[path = "support/model.rs"]
mod model;

const INSTRUCTION: &str = "You book restaurant tables on a voice call. Answer in one or two short \
spoken sentences. Once you know the restaurant, the party size and the time, call \
confirm_booking, then ask the user to confirm on their screen. A booking is made only when a note \
says the user confirmed it.";

/// A table to book.
#[json_type]
struct Booking {
    /// The restaurant's name.
    restaurant: String,
    /// How many people.
    people: u32,
    /// When, as the user said it ("Friday at 8 pm").
    time: String,
}

/// The confirmation card the app shows: `{"command": "confirm_booking", "payload": {...}}`.
#[json_type]
#[derive(Action)]
struct ConfirmBooking {
    nonce: u32,
    restaurant: String,
    people: u32,
    time: String,
}

/// What the app tells the brain about a card.
#[derive(Debug, AppEvent)]
enum CardAnswer {
    /// The user tapped "Confirm".
    BookingConfirmed { nonce: u32 },
    /// The user tapped "Cancel".
    BookingDeclined { nonce: u32 },
}

/// One call's booking desk: its voice core and the cards on screen, by nonce.
struct Desk {
    model: Model,
    cards: Mutex<HashMap<u32, Booking>>,
    next_nonce: AtomicU32,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }

    async fn on_rtvi(&self, _session: &Session, message: Rtvi) -> BrainResult {
        let Some(answer) = parse_app_event::<CardAnswer>(&message) else {
            return Ok(()); // not ours; parse_app_event logged anything malformed
        };
        let (nonce, confirmed) = match answer {
            CardAnswer::BookingConfirmed { nonce } => (nonce, true),
            CardAnswer::BookingDeclined { nonce } => (nonce, false),
        };
        // Only a card this call showed, and only once.
        let Some(booking) = self.cards.lock().unwrap().remove(&nonce) else {
            tracing::warn!("an answer for booking {nonce}, which is not on screen");
            return Ok(());
        };
        tracing::info!(
            "booking {nonce} at {}: confirmed={confirmed}",
            booking.restaurant
        );
        let verb = if confirmed { "confirmed" } else { "declined" };
        self.model
            .append_note(&format!("(The user {verb} booking {nonce} on screen.)"));
        Ok(())
    }
}

#[brain]
impl Desk {
    /// Show the booking on the user's screen for them to confirm. Returns at once; the user's
    /// answer arrives later as a note.
    #[tool]
    async fn confirm_booking(&self, booking: Booking) -> Result<String, SessionError> {
        let nonce = self.next_nonce.fetch_add(1, Ordering::Relaxed);
        let card = ConfirmBooking {
            nonce,
            restaurant: booking.restaurant.clone(),
            people: booking.people,
            time: booking.time.clone(),
        };
        self.cards.lock().unwrap().insert(nonce, booking);
        self.session().dispatch(&card)?;
        Ok(format!(
            "shown; waiting for the user to confirm, nonce {nonce}"
        ))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (layer, host) = model::model_and_host();
    let tools = host.console_tools();
    host.serve(move || Desk {
        model: tools.apply(Model::new(layer.clone()).instruction(INSTRUCTION)),
        cards: Mutex::new(HashMap::new()),
        next_nonce: AtomicU32::new(1),
    })
    .await
}

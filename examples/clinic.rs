//! The Clinic: a call in stages. `Verify` looks the caller up by name and date of birth, `Booking`
//! offers the open slots and books one, `Confirm` reads the booking back and sends a reminder.
//! Each request declares only its stage's tools and the transitions out of it; `verified` moves
//! the call to `Booking` starting afresh from one note (who the caller is), `booked` moves it to
//! `Confirm` keeping the conversation, and either refuses a move the desk cannot back (a patient
//! not looked up, a slot not open): the model reads why. Entering `Booking` speaks a line and puts
//! the patient's calendar on the app's screen (a typed UI command). The brain is in
//! `support/clinic.rs`.
//!
//! ```text
//! cargo run --example clinic -- --provider offline --console
//! GEMINI_API_KEY=... cargo run --example clinic -- --allow-unverified
//! OPENAI_API_KEY=... cargo run --example clinic -- --allow-unverified --provider openai --model gpt-6-sol
//! cargo run --example clinic -- --allow-unverified --provider chat --base-url http://localhost:11434/v1 --model qwen3:8b
//! ```
//!
//! `--provider offline` answers with a stand-in model in this process that plays each stage by a
//! few rules (`support/clinic_offline.rs`), reading the stage from the tools its request declares. Say
//! "I'm Ana Lima, born 1984-03-12" (or Ben Okafor, 1990-11-02; Chloé Martin, 1975-06-30), then a
//! day ("Tuesday", "Wednesday", "Friday"). `--console` serves the voice console beside the brain
//! and prints its URL; its timeline shows each tool call and transition. It serves on
//! `ws://127.0.0.1:8787` (`--listen` to change it); `--public-key PEM` or `--production` instead
//! of `--allow-unverified` to check Voqalize's tokens.

use std::sync::Arc;

use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;
#[path = "support/clinic.rs"]
mod clinic;
#[path = "support/clinic_offline.rs"]
mod clinic_offline;
#[path = "support/model.rs"]
mod model;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (layer, host) = model::model_and_host_or_offline(clinic_offline::desk).await;
    let tools = host.console_tools();
    // One set of records for the process: a slot one caller books is gone for the next.
    let records = Arc::new(clinic::Ledger::new());
    host.serve(move || clinic::Desk::new(tools.apply(Model::new(layer.clone())), records.clone()))
        .await
}

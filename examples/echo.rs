//! The smallest brain: it says back what it heard.
//!
//! ```text
//! cargo run --example echo -- --listen 127.0.0.1:8787 --allow-unverified
//! cargo run --example echo -- --listen 127.0.0.1:8787 --public-key conf_pub.pem
//! ```

use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;

/// Says back what the user said.
struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        turn.say(&message.text);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    cli::serve(|| Echo).await
}

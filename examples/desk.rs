//! The help desk: an `on_user_message` that makes sure every turn says something.
//!
//! A model sometimes answers a turn with tool calls only, or with nothing at all, and the caller
//! hears silence. This brain lets the model answer as usual, and when the turn spoke no word
//! (`turn.has_spoken()` is still false), asks once more with `ToolChoice::None`, which makes the
//! model answer in speech.
//!
//! ```text
//! GEMINI_API_KEY=... cargo run --example desk -- --allow-unverified
//! OPENAI_API_KEY=... cargo run --example desk -- --allow-unverified --provider openai --model gpt-6-sol
//! cargo run --example desk -- --allow-unverified --provider chat --base-url http://localhost:8000/v1 --model Qwen/Qwen3-8B
//! ```

use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;
#[path = "support/model.rs"]
mod model;

const INSTRUCTION: &str = "You are the help desk of a web shop, on a voice call. Answer in one or \
two short spoken sentences.";

/// An order to look up.
#[json_type]
struct Order {
    /// The order number the user gave, digits only.
    number: String,
}

/// One call's help desk.
struct HelpDesk {
    model: Model,
}

impl Brain for HelpDesk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await?;
        if !turn.has_spoken() {
            // Tools only, or nothing: ask again, and this time the model must speak.
            self.model
                .respond_with(self, turn, ToolChoice::None)
                .await?;
        }
        Ok(())
    }
}

#[brain]
impl HelpDesk {
    /// Where an order is: its status and the day it is expected.
    #[tool]
    async fn order_status(&self, order: Order) -> String {
        format!("order {}: shipped, arriving tomorrow", order.number)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (layer, host) = model::model_and_host();
    let tools = host.console_tools();
    host.serve(move || HelpDesk {
        model: tools.apply(
            Model::new(layer.clone())
                .instruction(INSTRUCTION)
                .fallback_line("Sorry, I didn't catch that. Could you say it again?"),
        ),
    })
    .await
}

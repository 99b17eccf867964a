//! The Coach: a model-backed brain with three tools. `show` puts a section of the app's screen in
//! front of the user (a typed UI command), `log_meal` records a meal, and `weekly_average` is
//! `#[needs_result_now]`: the model reads its result before it goes on speaking.
//!
//! ```text
//! cargo run --example coach -- --provider offline --console
//! GEMINI_API_KEY=... cargo run --example coach -- --allow-unverified
//! OPENAI_API_KEY=... cargo run --example coach -- --allow-unverified --provider openai --model gpt-6-sol
//! cargo run --example coach -- --allow-unverified --provider chat --base-url http://localhost:11434/v1 --model qwen3:8b
//! ```
//!
//! `--provider offline` answers with a stand-in model in this process that follows a few rules
//! (`offline` below) and calls the tools; `--console` serves the voice console beside the brain
//! and prints its URL. It serves on `ws://127.0.0.1:8787` (`--listen` to change it); `--public-key PEM` or
//! `--production` instead of `--allow-unverified` to check Voqalize's tokens.

use std::sync::atomic::{AtomicU32, Ordering};

use voqalize::prelude::*;
use voqalize_testing::{ReadBack, Reply, Said};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/model.rs"]
mod model;

const INSTRUCTION: &str = "You are a friendly diabetes coach on a voice call. Answer in one or two \
short spoken sentences, with no lists or markdown. When the user mentions eating, log the meal. \
Show the part of the screen you are talking about.";

/// The parts of the screen.
#[json_type]
#[serde(rename_all = "lowercase")]
enum SectionName {
    Today,
    Week,
}

/// Which part of the screen to show.
#[json_type]
struct Section {
    /// Section to show.
    name: SectionName,
}

/// The UI command the app receives: `{"command": "show_section", "payload": {"name": ...}}`.
#[json_type]
#[derive(Action)]
struct ShowSection {
    name: SectionName,
}

/// One call's coach: its voice core, and the meals logged during the call.
struct Coach {
    model: Model,
    meals: AtomicU32,
}

impl Brain for Coach {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Coach {
    /// Put a section of the screen in front of the user.
    #[tool]
    async fn show(&self, args: Section) -> Result<&'static str, SessionError> {
        self.session().dispatch(&ShowSection { name: args.name })?;
        Ok("shown")
    }

    /// Record that the user ate, now.
    #[tool]
    async fn log_meal(&self) -> String {
        let n = self.meals.fetch_add(1, Ordering::Relaxed) + 1;
        format!("logged; {n} meal(s) today")
    }

    /// The user's average glucose this week, in mmol/L.
    #[tool]
    #[needs_result_now]
    async fn weekly_average(&self) -> f64 {
        5.4
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (layer, host) = model::model_and_host_or_offline(offline).await;
    // With --console, the console's timeline shows each tool call and its result.
    let tools = host.console_tools();
    host.serve(move || Coach {
        model: tools.apply(Model::new(layer.clone()).instruction(INSTRUCTION)),
        meals: AtomicU32::new(0),
    })
    .await
}

/// How `--provider offline` plays the model, with no key and no network: a few rules over the
/// caller's last words that call the coach's tools as a model would, so the console's timeline
/// shows them. A request after a `#[needs_result_now]` call speaks its result.
fn offline(request: &ReadBack) -> Reply {
    if let Some(Said::Result { output, .. }) = request.said.last() {
        let result = serde_json::from_str::<serde_json::Value>(output)
            .ok()
            .and_then(|v| v.get("result").map(ToString::to_string))
            .unwrap_or_else(|| "not known".to_owned());
        return Reply::new()
            .text(&format!(
                "Your average this week is {result} millimoles per litre."
            ))
            .finish();
    }
    let heard = request
        .said
        .iter()
        .rev()
        .find_map(|said| match said {
            Said::User(text) => Some(text.to_lowercase()),
            _ => None,
        })
        .unwrap_or_default();
    let says = |words: &[&str]| words.iter().any(|w| heard.contains(w));
    if says(&["ate", "eat", "meal", "breakfast", "lunch", "dinner"]) {
        Reply::new()
            .text("Got it, I'm logging that meal for you.")
            .call("log_meal", voqalize::json!({}))
            .finish()
    } else if says(&["average", "glucose"]) {
        Reply::new()
            .call("weekly_average", voqalize::json!({}))
            .finish()
    } else if says(&["week", "today"]) {
        let name = if says(&["week"]) { "week" } else { "today" };
        Reply::new()
            .text(&format!("Here is {name} on your screen."))
            .call("show", voqalize::json!({ "name": name }))
            .finish()
    } else {
        Reply::new()
            .text(
                "I'm the offline stand-in for a model, so I only follow a few rules. Tell me \
                 what you ate and I'll log it, ask for your weekly average, or ask to see this \
                 week or today on the screen. Talk over me to barge in.",
            )
            .finish()
    }
}

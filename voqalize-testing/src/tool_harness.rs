//! Unit-testing one tool inside a real session: [`ToolHarness`] wraps a brain's tool table as a
//! brain, and [`Voqalize::call_tool`] runs one call through it, so `self.session()` works in the
//! tool exactly as on a live call and everything it dispatched or reported is recorded.
//!
//! ```
//! use voqalize::prelude::*;
//! use voqalize_testing::{ToolHarness, Voqalize};
//!
//! /// Which section to show.
//! #[json_type]
//! struct Section { name: String }
//!
//! /// The UI command the app receives.
//! #[json_type]
//! #[derive(Action)]
//! struct ShowSection { name: String }
//!
//! struct Coach;
//!
//! #[brain]
//! impl Coach {
//!     /// Put a section of the screen in front of the user.
//!     #[tool]
//!     async fn show(&self, args: Section) -> Result<&'static str, SessionError> {
//!         self.session().dispatch(&ShowSection { name: args.name })?;
//!         Ok("shown")
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), voqalize_testing::DriverError> {
//! let mut voqalize = Voqalize::in_process(|| ToolHarness(Coach));
//! voqalize.start_silent().await?;
//! let call = voqalize.call_tool("show", serde_json::json!({"name": "week"})).await?;
//! assert_eq!(call.response, serde_json::json!({"result": "shown"}));
//! assert_eq!(call.ui_commands[0]["command"], "show_section");
//! # Ok(()) }
//! ```

use serde_json::Value;

use crate::driver::{DriverError, Voqalize};
use voqalize::brain::{Brain, BrainResult};
use voqalize::session::Turn;
use voqalize::tools::{Arguments, Toolbox};
use voqalize::wire::{TurnStep, UserMessage};

/// Marks a user message the harness reads as a tool call: `<MARK><name>\n<JSON arguments>`.
const MARK: &str = "\u{1}voqalize-tool-call\u{1}";

/// A brain that runs calls to `B`'s tools, one per user message, and says each result as JSON.
/// Serve it with [`Voqalize::in_process`] (or over a socket) and call [`Voqalize::call_tool`].
#[derive(Debug, Default)]
pub struct ToolHarness<B>(pub B);

impl<B: Toolbox> Brain for ToolHarness<B> {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        let Some(call) = message.text.strip_prefix(MARK) else {
            return Err("ToolHarness only runs calls made with Voqalize::call_tool".into());
        };
        let (name, arguments) = call.split_once('\n').unwrap_or((call, "{}"));
        let tools = self.0.tools_for_turn();
        let outcome = self
            .0
            .call_tool(&tools, name, Arguments::Raw(arguments.to_owned()))
            .await;
        turn.say(&outcome.response().to_string());
        Ok(())
    }
}

/// What one tool call through [`Voqalize::call_tool`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// What the model would read: `{"result": ...}` or `{"error": "..."}`.
    pub response: Value,
    /// The UI commands the tool dispatched (`{"command", "payload"}`), in order.
    pub ui_commands: Vec<Value>,
    /// The TurnSteps it reported.
    pub steps: Vec<TurnStep>,
}

impl Voqalize {
    /// Calls the tool `name` with `arguments` on a brain served as a [`ToolHarness`], inside the
    /// session like a model's call: the tool can use `self.session()`. Returns what the model
    /// would read and what the tool dispatched and reported.
    ///
    /// # Errors
    /// As [`user_says`](Self::user_says); [`DriverError::Undecodable`] never (the harness says
    /// valid JSON).
    pub async fn call_tool(
        &mut self,
        name: &str,
        arguments: Value,
    ) -> Result<ToolCall, DriverError> {
        let (commands, steps) = (self.ui_commands().len(), self.turn_steps().len());
        let turn = self
            .user_says(&format!("{MARK}{name}\n{arguments}"))
            .await?;
        let response = serde_json::from_str(&turn.text()).unwrap_or(Value::Null);
        Ok(ToolCall {
            response,
            ui_commands: self.ui_commands()[commands..].to_vec(),
            steps: self.turn_steps()[steps..].to_vec(),
        })
    }
}

//! The reference command grammar of the Voqalize conformance suite (docs/protocol.md §4.16), as a brain.
//!
//! Run it, then point the published suite at it:
//! ```text
//! cargo run --example conformance -- --listen 127.0.0.1:8787 --public-key conf_pub.pem
//! python -m voqalize.conformance --brain-url ws://127.0.0.1:8787 --private-key conf_priv.pem
//! ```
//! It keeps the conversation it committed (only what the user heard), and answers the suite's
//! `__voqal.conformance.dump` client-message with a `__voqal.conformance.state` ui-command.

use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::sleep;
use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;

/// The committed state the suite reads back.
#[derive(Default, Serialize)]
struct State {
    messages: Vec<Value>,
    app_messages: Vec<Value>,
    cancelled: Vec<Value>,
}

impl Action for State {
    const NAME: &'static str = "__voqal.conformance.state";
}

/// The suite's `do ...` command opens a panel.
#[derive(Serialize)]
struct OpenPanel {
    foo: String,
}

impl Action for OpenPanel {
    const NAME: &'static str = "open_panel";
}

#[derive(Default)]
struct Reference {
    state: Mutex<State>,
}

impl Reference {
    fn commit(&self, role: &str, content: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state
            .messages
            .push(json!({ "role": role, "content": content }));
    }
}

const SENTINEL: &str = "NEVER_HEARD_AFTER_BARGE_IN";

impl Brain for Reference {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("hello".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        let text = message.text.as_str();
        self.commit("user", text);
        if let Some(rest) = text.strip_prefix("say ") {
            turn.say(rest);
        } else if text == "two" {
            turn.say("first");
            turn.say("second");
        } else if text == "count slowly" {
            let mut unit = turn.open_unit();
            unit.write("one. ");
            sleep(Duration::from_millis(50)).await;
            unit.write("two. ");
            sleep(Duration::from_millis(50)).await;
            unit.write("three. ");
            sleep(Duration::from_millis(500)).await;
            unit.write(SENTINEL);
        } else if let Some(topic) = text.strip_prefix("tell me ") {
            let mut unit = turn.open_unit();
            unit.write(&format!("Once upon a time, the story of {topic}. "));
            sleep(Duration::from_millis(500)).await;
            unit.write(&format!("unfolds to its conclusion. {SENTINEL}"));
        } else if let Some(answer) = text.strip_prefix("cancel after ") {
            let fin = {
                let mut unit = turn.open_unit();
                unit.write("Here is a hint: ");
                unit.write(&format!("{answer}. "));
                let id = unit.id();
                unit.session().cancel_speech(id).await?
            };
            self.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .cancelled
                .push(json!({
                    "speech_id": fin.speech_id,
                    "heard": fin.heard,
                    "generated": fin.generated,
                }));
            turn.say("Let me put that differently.");
        } else if let Some(rest) = text.strip_prefix("wait then ") {
            let mut unit = turn.open_unit();
            sleep(Duration::from_millis(500)).await;
            unit.write(&format!("delayed {rest}"));
        } else if text == "raise" {
            return Err("deliberate fault before speaking".into());
        } else if let Some(rest) = text.strip_prefix("speak then raise ") {
            turn.say(rest);
            return Err("deliberate fault after speaking".into());
        } else if text.starts_with("do ") {
            turn.say("on it");
            turn.session().dispatch(&OpenPanel {
                foo: "bar".to_owned(),
            })?;
        } else {
            turn.say(&format!("you said {text}"));
        }
        Ok(())
    }

    async fn on_user_idle(&self, turn: &mut Turn, idle: UserIdle) -> BrainResult {
        turn.say(&format!("still there {}", idle.level));
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, finalized: Finalized) -> BrainResult {
        if !finalized.heard.is_empty() {
            self.commit("assistant", &finalized.heard);
        }
        Ok(())
    }

    async fn on_rtvi(&self, session: &Session, message: Rtvi) -> BrainResult {
        if message.kind != RtviType::ClientMessage {
            return Ok(());
        }
        let Some(Value::Object(data)) = message.data else {
            return Ok(());
        };
        let name = data.get("t").cloned().unwrap_or(Value::Null);
        if name == "__voqal.conformance.dump" {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            session.dispatch(&*state)?;
            return Ok(());
        }
        let payload = match data.get("d") {
            None | Some(Value::Null) => json!({}),
            Some(d) => d.clone(),
        };
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .app_messages
            .push(json!({ "name": name, "data": payload }));
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    cli::serve(Reference::default).await
}

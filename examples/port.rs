//! Bringing an agent you already have: give its streamed answer a voice.
//!
//! The agent below stands in for yours: it keeps its own history (its own message type) and
//! answers with a stream of text pieces, as most agent frameworks and model clients do. The brain
//! around it does two things:
//!
//! * `history.speak(turn, answer, AnswerPart::Say)` speaks the stream as one speech unit, opened
//!   on the first piece and closed at the end (a barge-in stops reading it), and files it in a
//!   [`HeardHistory`] of the agent's own message type;
//! * `on_finalize` hands every `Finalize` to the history, which cuts each answer to what the user
//!   actually heard (the greeting included, cut to the heard prefix after a barge-in), so the
//!   agent never believes it said what the user never heard.
//!
//! No model layer, no API key:
//!
//! ```text
//! cargo run --example port -- --allow-unverified
//! cargo run --example port -- --listen 127.0.0.1:8787 --public-key conf_pub.pem
//! ```

use voqalize::prelude::*;

#[path = "support/cli.rs"]
mod cli;

/// The agent you already have (a stand-in): its history type and its streamed answer.
mod agent {
    use std::time::Duration;

    use futures_util::Stream;
    use futures_util::stream;

    /// Who said a line.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Role {
        User,
        Assistant,
    }

    /// One line of the agent's history.
    #[derive(Debug, Clone)]
    pub struct Message {
        pub role: Role,
        pub text: String,
    }

    /// What the agent's stream fails with (a dropped connection, a provider error...).
    #[derive(Debug, thiserror::Error)]
    #[error("the agent failed: {0}")]
    pub struct AgentError(pub String);

    /// Answers the last user line, word by word, like a model streaming tokens.
    pub fn answer(history: &[Message]) -> impl Stream<Item = Result<String, AgentError>> + Send {
        let said_before = history.iter().filter(|m| m.role == Role::Assistant).count();
        let last = history
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map_or(String::new(), |m| m.text.clone());
        let reply = format!("You said: {last}. I have spoken {said_before} times so far.");
        let words: Vec<String> = reply.split_inclusive(' ').map(str::to_owned).collect();
        stream::unfold(words.into_iter(), |mut words| async move {
            let word = words.next()?;
            tokio::time::sleep(Duration::from_millis(30)).await; // the model thinking
            Some((Ok(word), words))
        })
    }
}

use agent::{Message, Role};

const GREETING: &str = "Hello! I'm an agent you already had, now with a voice.";

/// One call: the agent's own history, holding what the user heard.
struct Ported {
    history: HeardHistory<Message>,
}

impl Brain for Ported {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some(GREETING.into())) // heard truth files it like any unit
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        self.history.push(Message {
            role: Role::User,
            text: message.text,
        });
        let history = self.history.messages();
        let answer = agent::answer(&history);
        if let Err(e) = self.history.speak(turn, answer, AnswerPart::Say).await {
            // What was spoken before the failure stays spoken (and heard truth files it).
            tracing::error!("{e}");
            turn.say("Sorry, something went wrong on my side.");
        }
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, finalized: Finalized) -> BrainResult {
        self.history.heard(&finalized);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    cli::serve(|| Ported {
        history: HeardHistory::new(|text| Message {
            role: Role::Assistant,
            text,
        }),
    })
    .await
}

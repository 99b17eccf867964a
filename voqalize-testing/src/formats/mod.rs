//! The built-in providers' wire formats for the stand-in ([`Provider`] as a [`WireFormat`]): how
//! a scripted reply is written as each built-in provider's events (`write.rs`), and how a
//! recorded request is read back in neutral terms (`read.rs`).

mod read;
mod write;

use serde_json::{Value, json};

use crate::wire_format::{ReadBack, Recorded, StreamWriter, WireFormat};
use read::{read_anthropic, read_chat, read_gemini, read_interactions, read_openai};
use write::{AnthropicWriter, ChatWriter, GeminiWriter, InteractionsWriter, OpenAiWriter};

/// Which built-in provider's wire format the server speaks. New providers are added as variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provider {
    /// Gemini `streamGenerateContent?alt=sse`: `data:` chunks of candidates, ended by a
    /// `finishReason`.
    Gemini,
    /// OpenAI Responses: named events, ended by `response.completed`.
    OpenAi,
    /// Chat completions: `data:` chunks of choices, ended by `finish_reason` and `[DONE]`.
    Chat,
    /// Anthropic Messages: named events of content blocks, ended by `message_stop`.
    Anthropic,
    /// Gemini Interactions: named events of bracketed steps, ended by `interaction.completed`
    /// and `[DONE]`.
    Interactions,
}

impl WireFormat for Provider {
    fn base_path(&self) -> &str {
        match self {
            Provider::Gemini | Provider::Anthropic | Provider::Interactions => "",
            Provider::OpenAi | Provider::Chat => "/v1",
        }
    }

    fn writer(&self) -> Box<dyn StreamWriter> {
        match self {
            Provider::Gemini => Box::new(GeminiWriter),
            Provider::OpenAi => Box::new(OpenAiWriter::default()),
            Provider::Chat => Box::new(ChatWriter::default()),
            Provider::Anthropic => Box::new(AnthropicWriter::default()),
            Provider::Interactions => Box::new(InteractionsWriter::default()),
        }
    }

    fn error_body(&self, message: &str) -> Value {
        match self {
            Provider::Gemini => {
                json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
            }
            Provider::OpenAi | Provider::Chat => {
                json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})
            }
            Provider::Anthropic => {
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
            }
            Provider::Interactions => {
                json!({"error": {"code": "invalid_request", "message": message}})
            }
        }
    }

    fn read(&self, request: &Recorded) -> ReadBack {
        let body = &request.body;
        match self {
            Provider::Gemini => read_gemini(body),
            Provider::OpenAi => read_openai(body),
            Provider::Chat => read_chat(body),
            Provider::Anthropic => read_anthropic(body),
            Provider::Interactions => read_interactions(body),
        }
    }
}

pub(super) fn text_of(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// A JSON text field read back as JSON (arguments and outputs sent as strings).
pub(super) fn json_of(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        other => other.clone(),
    }
}

/// A result as JSON text, whether the request sent it as a string or as an object.
pub(super) fn output_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

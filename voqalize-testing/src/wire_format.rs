//! What a provider's wire format is to the kit: [`WireFormat`] writes a response stream
//! ([`StreamWriter`]) and reads a [`Recorded`] request back in neutral terms ([`ReadBack`],
//! [`Said`]). The stand-in server ([`ModelServer`](crate::ModelServer)) and the built-in formats
//! ([`Provider`](crate::Provider)) both build on it.

use serde_json::Value;

/// A provider's wire format as the stand-in writes it and as the layer conformance kit reads it
/// back: implement it for a layer of your own (see [`LayerKit`](crate::LayerKit)) and start a server with
/// [`ModelServer::start_with`](crate::ModelServer::start_with). [`Provider`](crate::Provider) implements it for the built-in layers.
pub trait WireFormat: Send + Sync + 'static {
    /// The path the layer's base URL names on the server: `""` (Gemini) or `"/v1"` (OpenAI,
    /// chat). Default: `""`.
    fn base_path(&self) -> &str {
        ""
    }
    /// A writer for one response stream.
    fn writer(&self) -> Box<dyn StreamWriter>;
    /// The provider's JSON error body for an HTTP error answer saying `message` (what
    /// [`Reply::error_status`](crate::Reply::error_status) sends).
    fn error_body(&self, message: &str) -> Value;
    /// One recorded request read back in the kit's neutral notation: the instruction, the tools
    /// declared and the conversation, in order. The kit compares the user's and the model's
    /// words exactly, calls by name and JSON arguments, and a result by what its output text
    /// holds (the tool's answer, or `error`), so a format may wrap results as it likes.
    fn read(&self, request: &Recorded) -> ReadBack;
}

/// Writes one response stream in a provider's format, step by step: each method returns the
/// bytes to send (whole SSE events, `data: ..\n\n` and the like), written in order.
pub trait StreamWriter: Send {
    /// A text piece.
    fn text(&mut self, text: &str) -> Vec<String>;
    /// A reasoning part; default: nothing (a provider without reasoning).
    fn thought(&mut self, text: &str) -> Vec<String> {
        let _ = text;
        Vec::new()
    }
    /// A complete function call, under the call id `id` (`call_1`, `call_2`... in reply order).
    fn call(&mut self, id: &str, name: &str, arguments: &Value) -> Vec<String>;
    /// The provider's terminal event: a normal stop, or (`malformed`) the provider's "the model's
    /// call did not parse" finish where it has one; with `usage` (prompt and output tokens) when
    /// the reply reports it.
    fn finish(&mut self, malformed: bool, usage: Option<(u64, u64)>) -> Vec<String>;
    /// An error event inside the stream saying `message`, as the provider sends one.
    fn error(&mut self, message: &str) -> Vec<String>;
    /// One event the layer reads and ignores (for [`Reply::keep_alive`](crate::Reply::keep_alive)).
    fn keep_alive(&mut self) -> String;
}

/// One model request read back in neutral terms ([`WireFormat::read`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadBack {
    /// The system instruction, if the request carried one.
    pub instruction: Option<String>,
    /// The names of the tools declared, in order.
    pub tools: Vec<String>,
    /// The conversation, oldest first.
    pub said: Vec<Said>,
}

/// One item of a request's conversation, in neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// The user's words (or a note the brain added).
    User(String),
    /// The model's words.
    Model(String),
    /// A call the model made.
    Call {
        /// The call id, where the format carries one.
        id: Option<String>,
        /// The function.
        name: String,
        /// Its arguments, as JSON.
        arguments: Value,
    },
    /// A result filed for a call.
    Result {
        /// The call id it answers, where the format carries one.
        id: Option<String>,
        /// The result as the request carries it, as JSON text (`{"result":..}` or
        /// `{"error":..}`).
        output: String,
    },
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Path and query, such as `/v1/models/m:streamGenerateContent?alt=sse`.
    pub target: String,
    /// Request headers, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body, parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
}

impl Recorded {
    /// The first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

//! What a tool call is given and what it gives back: its [`Arguments`] as the provider sent them,
//! and its [`ToolOutcome`] (a result, or a [`ToolError`] the model reads).

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

/// A tool call's arguments as the provider sent them.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// Already a JSON value (Gemini's `args`).
    Json(Value),
    /// JSON text (OpenAI's and chat completions' `arguments`); empty text reads as `{}`.
    Raw(String),
}

impl From<Value> for Arguments {
    fn from(v: Value) -> Self {
        Arguments::Json(v)
    }
}

impl From<String> for Arguments {
    fn from(s: String) -> Self {
        Arguments::Raw(s)
    }
}

impl From<&str> for Arguments {
    fn from(s: &str) -> Self {
        Arguments::Raw(s.to_owned())
    }
}

/// Why a call produced no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The brain has no tool of that name.
    Unknown,
    /// The tool exists but is not in this turn's set.
    Hidden,
    /// The arguments are not JSON, not an object, or do not fit the argument struct.
    InvalidArguments,
    /// The tool returned `Err`, or its result could not be serialised.
    Failed,
    /// The tool panicked.
    Panicked,
    /// A tool guard refused the call or withheld its result (`Model::before_tool`,
    /// `Model::after_tool`), or failed and so refused it.
    Refused,
    /// The user barged in and the tool's run was stopped before it finished
    /// (`#[tool(on_barge_in = cancel)]`).
    Cancelled,
    /// The tool did not finish within its timeout (`#[tool(timeout = "...")]`, or the model's
    /// `tool_timeout`) and its run was stopped.
    TimedOut,
}

impl ToolErrorKind {
    /// The kind as a short snake_case name (`invalid_arguments`), as logs and spans show it.
    pub fn name(self) -> &'static str {
        match self {
            ToolErrorKind::Unknown => "unknown",
            ToolErrorKind::Hidden => "hidden",
            ToolErrorKind::InvalidArguments => "invalid_arguments",
            ToolErrorKind::Failed => "failed",
            ToolErrorKind::Panicked => "panicked",
            ToolErrorKind::Refused => "refused",
            ToolErrorKind::Cancelled => "cancelled",
            ToolErrorKind::TimedOut => "timed_out",
        }
    }
}

/// A call that produced no result; `message` is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What went wrong.
    pub kind: ToolErrorKind,
    /// The text the model reads.
    pub message: String,
}

impl ToolError {
    pub(crate) fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// What a call produced, and how long it took (argument parsing included).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The tool's result as JSON, or the error the model reads instead.
    pub result: Result<Value, ToolError>,
    /// Time spent on the call.
    pub elapsed: Duration,
}

impl ToolOutcome {
    /// The function response the model reads: `{"result": ...}` or `{"error": "..."}`.
    pub fn response(&self) -> Value {
        match &self.result {
            Ok(v) => json!({ "result": v }),
            Err(e) => json!({ "error": e.message }),
        }
    }

    /// Whether the call produced an error instead of a result.
    pub fn is_error(&self) -> bool {
        self.result.is_err()
    }
}

//! The Responses request: `input` items built from the neutral conversation, and the tool
//! declarations, borrowing what it replays from the history (see `model::body`).

use serde_json::{Value, json};

use crate::model::body::Json;
use crate::model::history::{Call, Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{arguments_text, build_error, check_only, instruction, user_text};
use crate::tools::{Arguments, ToolDecl};

use super::{OpenAi, PROVIDER};

impl OpenAi {
    /// The request body for `spec`.
    pub(super) fn body<'a>(&'a self, spec: &RequestSpec<'a>) -> Result<Json<'a>, StreamError> {
        let cfg = &self.inner;
        let mut body = Vec::with_capacity(9 + cfg.options.len());
        body.push(("model", Json::Str(&cfg.model)));
        if let Some(text) = instruction(spec.instruction) {
            body.push(("instructions", Json::Str(text)));
        }
        body.push(("input", Json::Array(input(spec)?)));
        body.push(("stream", Json::Bool(true)));
        body.push(("store", Json::Bool(false)));
        body.extend(Json::entries(&cfg.options));
        if !spec.tools.is_empty() {
            let tools = spec.tools.iter().map(|t| tool(t, cfg.strict)).collect();
            body.push(("tools", Json::Array(tools)));
            let choice = match spec.choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    json!({"type": "function", "name": name})
                }
            };
            body.push(("tool_choice", Json::Owned(choice)));
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        if let Some(effort) = &cfg.reasoning {
            body.push((
                "reasoning",
                Json::Object(vec![("effort", Json::Str(effort))]),
            ));
            body.push((
                "include",
                Json::Array(vec![Json::Str("reasoning.encrypted_content")]),
            ));
        }
        Ok(Json::Object(body))
    }
}

/// The context as `input` items.
fn input<'a>(spec: &RequestSpec<'a>) -> Result<Vec<Json<'a>>, StreamError> {
    let mut out = Vec::with_capacity(spec.history.len() + 1);
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(PROVIDER, &entry.parts)?;
                if !text.is_empty() {
                    out.push(message("user", text.into()));
                }
            }
            Role::Model => model_items(entry, &mut out)?,
            Role::Results => {
                for part in &entry.parts {
                    let Part::Result(r) = part else {
                        return Err(build_error(
                            PROVIDER,
                            format!("a results turn holds {part:?}"),
                        ));
                    };
                    let Some(call_id) = &r.call_id else {
                        return Err(build_error(
                            PROVIDER,
                            format!("the result for {} has no call id", r.name),
                        ));
                    };
                    out.push(Json::Object(vec![
                        ("type", Json::Str("function_call_output")),
                        ("call_id", Json::Str(call_id)),
                        ("output", Json::Owned(Value::String(r.response.to_string()))),
                    ]));
                }
            }
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        out.push(message("user", Json::Str(note)));
    }
    Ok(out)
}

/// A tool's function declaration, its schema borrowed (as [`ToolDecl::openai`] makes it).
fn tool(tool: &ToolDecl, strict: bool) -> Json<'_> {
    let (strict, parameters) = tool.openai_parameters(strict);
    Json::Object(vec![
        ("type", Json::Str("function")),
        ("name", Json::Str(tool.name())),
        ("description", Json::Str(tool.description())),
        ("parameters", Json::Value(parameters)),
        ("strict", Json::Bool(strict)),
    ])
}

/// A `{"role": .., "content": ..}` input message.
fn message<'a>(role: &'a str, content: Json<'a>) -> Json<'a> {
    Json::Object(vec![("role", Json::Str(role)), ("content", content)])
}

/// A model turn, in order: each run of text parts as one assistant message, each call as a
/// `function_call` item, and each reasoning item only where the item it led to follows it as the
/// model produced it (docs/protocol.md §6.15). Without `store`, OpenAI accepts a reasoning item
/// only with its `encrypted_content`, and only immediately followed by its own output item, with
/// that item's id: the message (`msg_…`) the caller heard in full, or the call (`fc_…`) as it
/// was made. A message heard only in part (heard truth rewrote it), a call the core refused or
/// rewrote, or a turn that ends after the reasoning: the reasoning goes, and the text or call is
/// sent as ours (no id).
fn model_items<'a>(entry: &'a Entry, out: &mut Vec<Json<'a>>) -> Result<(), StreamError> {
    let mut run = TextRun::default();
    // Reasoning items waiting for the item they led to.
    let mut held: Vec<&Value> = Vec::new();
    for part in &entry.parts {
        match part {
            Part::Text { text, trimmed, .. } => run.push(text, *trimmed),
            Part::Thought { raw } => {
                if run.flush(out) {
                    held.clear();
                }
                if replayable_reasoning(raw) {
                    held.push(raw);
                }
            }
            Part::Other { raw } if raw.get("type").and_then(Value::as_str) == Some("message") => {
                if !held.is_empty() && run.is_exactly(message_text(raw)) {
                    out.extend(held.drain(..).map(Json::Value));
                    out.push(Json::Value(raw));
                    run.clear();
                } else {
                    run.flush(out);
                }
                held.clear();
            }
            Part::Call { call, raw } => {
                if run.flush(out) {
                    held.clear();
                }
                if !held.is_empty() && made_as_received(call, raw) {
                    out.extend(held.drain(..).map(Json::Value));
                    out.push(Json::Value(raw));
                } else {
                    out.push(function_call(call)?);
                }
                held.clear();
            }
            // Only the layer's own decoder fills model turns, and it keeps nothing else.
            Part::Other { .. } => {}
            Part::Result(_) => {
                return Err(build_error(PROVIDER, "a model turn holds a call's result"));
            }
        }
    }
    run.flush(out);
    Ok(())
}

/// A run of text parts of one model turn, sent as one assistant message.
#[derive(Default)]
struct TextRun {
    text: String,
    /// Heard truth rewrote or dropped text of the run.
    trimmed: bool,
}

impl TextRun {
    fn push(&mut self, text: &str, trimmed: bool) {
        self.text.push_str(text);
        self.trimmed |= trimmed;
    }

    /// Whether the run is the message's text exactly as the model wrote it, all of it heard.
    fn is_exactly(&self, message: Option<String>) -> bool {
        !self.trimmed && !self.text.is_empty() && message.as_deref() == Some(self.text.as_str())
    }

    fn clear(&mut self) {
        self.text.clear();
        self.trimmed = false;
    }

    /// Sends the run as a plain assistant message of ours. `true` when there was a run (text, or
    /// text heard as nothing): a reasoning item before it is not followed by its own item.
    fn flush(&mut self, out: &mut Vec<Json<'_>>) -> bool {
        let had = !self.text.is_empty() || self.trimmed;
        if !self.text.is_empty() {
            let text = Value::String(std::mem::take(&mut self.text));
            out.push(message("assistant", Json::Owned(text)));
        }
        self.trimmed = false;
        had
    }
}

/// The text of a `message` output item: its `output_text` (and `refusal`) contents, in order.
fn message_text(item: &Value) -> Option<String> {
    let content = item.get("content")?.as_array()?;
    let mut text = String::new();
    for c in content {
        match c.get("type").and_then(Value::as_str) {
            Some("output_text") => text.push_str(c.get("text")?.as_str()?),
            Some("refusal") => text.push_str(c.get("refusal")?.as_str()?),
            _ => return None,
        }
    }
    Some(text)
}

/// Whether a reasoning item can go back to the API at all: only with its `encrypted_content`.
fn replayable_reasoning(raw: &Value) -> bool {
    raw.get("encrypted_content")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
}

/// Whether a call is the `function_call` item the model produced (`raw`), unchanged by the core.
fn made_as_received(call: &Call, raw: &Value) -> bool {
    let field = |k: &str| raw.get(k).and_then(Value::as_str);
    field("id").is_some_and(|id| !id.is_empty())
        && field("call_id") == call.id.as_deref()
        && field("name") == Some(call.name.as_str())
        && match &call.arguments {
            Arguments::Raw(text) => field("arguments") == Some(text.as_str()),
            Arguments::Json(_) => false,
        }
}

/// A `function_call` input item: `call_id`, never the output item's `id` (it names an item that
/// was not stored, and the call's output is matched by `call_id`).
fn function_call(call: &Call) -> Result<Json<'_>, StreamError> {
    let Some(call_id) = &call.id else {
        return Err(build_error(
            PROVIDER,
            format!("the call to {} has no call id", call.name),
        ));
    };
    Ok(Json::Object(vec![
        ("type", Json::Str("function_call")),
        ("call_id", Json::Str(call_id)),
        ("name", Json::Str(&call.name)),
        ("arguments", arguments_text(&call.arguments).into()),
    ]))
}

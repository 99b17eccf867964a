//! The chat-completions request: `messages` built from the neutral conversation, and the tool declarations.

use serde_json::{Map, Value, json};

use crate::model::history::{Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{arguments_text, build_error, check_only, instruction, user_text};

use super::{Chat, error_name};

impl Chat {
    /// The request body for `spec`.
    pub(super) fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
        let cfg = &self.inner;
        let provider = error_name(&cfg.provider);
        let mut body = Map::new();
        body.insert("model".into(), json!(cfg.model));
        body.insert("messages".into(), Value::Array(messages(provider, spec)?));
        if !spec.tools.is_empty() {
            let (tools, choice) = match spec.choice {
                ToolChoice::Auto => (spec.tools.chat(cfg.strict), json!("auto")),
                ToolChoice::None => (spec.tools.chat(cfg.strict), json!("none")),
                ToolChoice::Only(name) => {
                    check_only(provider, spec.tools, name)?;
                    if cfg.model.contains("/responses/") {
                        // A chat route onto the Responses API does not carry a named tool
                        // choice: declare only that tool and require a call.
                        let only: Vec<Value> = spec
                            .tools
                            .iter()
                            .filter(|t| t.name() == name)
                            .map(|t| t.chat(cfg.strict))
                            .collect();
                        (only, json!("required"))
                    } else {
                        (
                            spec.tools.chat(cfg.strict),
                            json!({"type": "function", "function": {"name": name}}),
                        )
                    }
                }
            };
            body.insert("tools".into(), Value::Array(tools));
            body.insert("tool_choice".into(), choice);
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(provider, spec.tools, name)?;
        }
        if let Some(effort) = &cfg.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        for (k, v) in &cfg.options {
            body.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(body))
    }
}

/// The context as chat messages.
fn messages(provider: &str, spec: &RequestSpec<'_>) -> Result<Vec<Value>, StreamError> {
    let mut out = Vec::with_capacity(spec.history.len() + 2);
    if let Some(text) = instruction(spec.instruction) {
        out.push(json!({"role": "system", "content": text}));
    }
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(provider, &entry.parts)?;
                if !text.is_empty() {
                    out.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Model => {
                if let Some(message) = assistant(provider, entry)? {
                    out.push(message);
                }
            }
            Role::Results => {
                for part in &entry.parts {
                    let Part::Result(r) = part else {
                        return Err(build_error(
                            provider,
                            format!("a results turn holds {part:?}"),
                        ));
                    };
                    let Some(call_id) = &r.call_id else {
                        return Err(build_error(
                            provider,
                            format!("the result for {} has no call id", r.name),
                        ));
                    };
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": r.response.to_string(),
                    }));
                }
            }
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        out.push(json!({"role": "user", "content": note}));
    }
    Ok(out)
}

/// A model turn as one assistant message: all its text joined (text said after a call moves
/// before it; the message has one content), then its calls. `None` when it has neither: an empty
/// assistant message is refused by several servers. Reasoning is not sent back.
fn assistant(provider: &str, entry: &Entry) -> Result<Option<Value>, StreamError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for part in &entry.parts {
        match part {
            Part::Text { text: t, .. } => text.push_str(t),
            Part::Call { call, .. } => {
                let Some(id) = &call.id else {
                    return Err(build_error(
                        provider,
                        format!("the call to {} has no call id", call.name),
                    ));
                };
                calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_text(&call.arguments)},
                }));
            }
            Part::Thought { .. } | Part::Other { .. } => {}
            Part::Result(_) => {
                return Err(build_error(provider, "a model turn holds a call's result"));
            }
        }
    }
    if text.is_empty() && calls.is_empty() {
        return Ok(None);
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if text.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        },
    );
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Ok(Some(Value::Object(message)))
}

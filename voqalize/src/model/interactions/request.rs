//! The Interactions request: the conversation as typed steps (`user_input`, `thought`,
//! `model_output`, `function_call`, `function_result`), the tool declarations, the generation
//! config; stateless (`store: false`), so the whole context goes over on every request.

use serde_json::{Map, Value, json};

use crate::model::history::{Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{arguments_text, build_error, check_only, instruction, user_text};
use crate::tools::Dialect;

use super::{Interactions, PROVIDER};

impl Interactions {
    /// The request body for `spec`.
    pub(super) fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
        let cfg = &self.inner;
        let mut body = Map::new();
        body.insert("model".into(), json!(cfg.model));
        body.insert("input".into(), Value::Array(steps(spec)?));
        if let Some(text) = instruction(spec.instruction) {
            body.insert("system_instruction".into(), json!(text));
        }
        let mut generation = Map::new();
        if let Some(level) = &cfg.thinking_level {
            generation.insert("thinking_level".into(), json!(level));
        }
        if !spec.tools.is_empty() {
            let tools: Vec<Value> = spec
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": t.name(), "description": t.description(),
                        "parameters": t.parameters(Dialect::OpenAi)})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match spec.choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    json!({"allowed_tools": {"mode": "any", "tools": [name]}})
                }
            };
            generation.insert("tool_choice".into(), choice);
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        if !generation.is_empty() {
            body.insert("generation_config".into(), Value::Object(generation));
        }
        body.insert("stream".into(), Value::Bool(true));
        body.insert("store".into(), Value::Bool(false));
        for (k, v) in &cfg.options {
            body.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(body))
    }
}

fn user_input(text: &str) -> Value {
    json!({"type": "user_input", "content": [{"type": "text", "text": text}]})
}

/// The conversation as steps, oldest first.
fn steps(spec: &RequestSpec<'_>) -> Result<Vec<Value>, StreamError> {
    let mut out = Vec::with_capacity(spec.history.len() + 1);
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(PROVIDER, &entry.parts)?;
                if !text.is_empty() {
                    out.push(user_input(&text));
                }
            }
            Role::Model => model_steps(entry, &mut out)?,
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
                    let mut step = json!({"type": "function_result", "call_id": call_id,
                        "name": r.name, "result": r.response.to_string()});
                    if r.response.get("error").is_some() {
                        step["is_error"] = Value::Bool(true);
                    }
                    out.push(step);
                }
            }
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        out.push(user_input(note));
    }
    Ok(out)
}

/// A model turn as steps in stream order: thoughts (dropped with the words heard truth cut, which
/// they led to), the words as one `model_output` per run of text, calls.
fn model_steps(entry: &Entry, out: &mut Vec<Value>) -> Result<(), StreamError> {
    let cut = entry
        .parts
        .iter()
        .any(|p| matches!(p, Part::Text { trimmed: true, .. }));
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut Vec<Value>| {
        if !text.is_empty() {
            let words = std::mem::take(text);
            out.push(json!({"type": "model_output", "content": [{"type": "text", "text": words}]}));
        }
    };
    for part in &entry.parts {
        match part {
            Part::Text { text: t, .. } => text.push_str(t),
            Part::Thought { raw } if !cut => {
                flush(&mut text, out);
                out.push(raw.clone());
            }
            Part::Call { call, .. } => {
                flush(&mut text, out);
                let Some(id) = &call.id else {
                    return Err(build_error(
                        PROVIDER,
                        format!("the call to {} has no call id", call.name),
                    ));
                };
                let arguments: Value = serde_json::from_str(&arguments_text(&call.arguments))
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                out.push(json!({"type": "function_call", "id": id, "name": call.name,
                    "arguments": arguments}));
            }
            Part::Result(_) => {
                return Err(build_error(PROVIDER, "a model turn holds a call's result"));
            }
            _ => {}
        }
    }
    flush(&mut text, out);
    Ok(())
}

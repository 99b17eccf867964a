//! The Interactions request: the conversation as typed steps (`user_input`, `thought`,
//! `model_output`, `function_call`, `function_result`), the tool declarations, the generation
//! config; stateless (`store: false`), so the whole context goes over on every request. The body
//! borrows what it replays from the history (see `model::body`).

use serde_json::{Value, json};

use crate::model::body::Json;
use crate::model::history::{Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{arguments_text, build_error, check_only, instruction, user_text};
use crate::tools::Dialect;

use super::{Interactions, PROVIDER};

impl Interactions {
    /// The request body for `spec`.
    pub(super) fn body<'a>(&'a self, spec: &RequestSpec<'a>) -> Result<Json<'a>, StreamError> {
        let cfg = &self.inner;
        let mut body = Vec::with_capacity(7 + cfg.options.len());
        body.push(("model", Json::Str(&cfg.model)));
        body.push(("input", Json::Array(steps(spec)?)));
        if let Some(text) = instruction(spec.instruction) {
            body.push(("system_instruction", Json::Str(text)));
        }
        let mut generation = Vec::with_capacity(2);
        if let Some(level) = &cfg.thinking_level {
            generation.push(("thinking_level", Json::Str(level)));
        }
        if !spec.tools.is_empty() {
            let tools = spec
                .tools
                .iter()
                .map(|t| {
                    Json::Object(vec![
                        ("type", Json::Str("function")),
                        ("name", Json::Str(t.name())),
                        ("description", Json::Str(t.description())),
                        ("parameters", Json::Value(t.parameters(Dialect::OpenAi))),
                    ])
                })
                .collect();
            body.push(("tools", Json::Array(tools)));
            let choice = match spec.choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    json!({"allowed_tools": {"mode": "any", "tools": [name]}})
                }
            };
            generation.push(("tool_choice", Json::Owned(choice)));
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        if !generation.is_empty() {
            body.push(("generation_config", Json::Object(generation)));
        }
        body.push(("stream", Json::Bool(true)));
        body.push(("store", Json::Bool(false)));
        body.extend(Json::entries(&cfg.options));
        Ok(Json::Object(body))
    }
}

/// A step of `kind` whose content is one text.
fn text_step<'a>(kind: &'a str, text: Json<'a>) -> Json<'a> {
    let content = Json::Object(vec![("type", Json::Str("text")), ("text", text)]);
    Json::Object(vec![
        ("type", Json::Str(kind)),
        ("content", Json::Array(vec![content])),
    ])
}

/// The conversation as steps, oldest first.
fn steps<'a>(spec: &RequestSpec<'a>) -> Result<Vec<Json<'a>>, StreamError> {
    let mut out = Vec::with_capacity(spec.history.len() + 1);
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(PROVIDER, &entry.parts)?;
                if !text.is_empty() {
                    out.push(text_step("user_input", text.into()));
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
                    let mut step = vec![
                        ("type", Json::Str("function_result")),
                        ("call_id", Json::Str(call_id)),
                        ("name", Json::Str(&r.name)),
                        ("result", Json::Owned(Value::String(r.response.to_string()))),
                    ];
                    if r.response.get("error").is_some() {
                        step.push(("is_error", Json::Bool(true)));
                    }
                    out.push(Json::Object(step));
                }
            }
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        out.push(text_step("user_input", Json::Str(note)));
    }
    Ok(out)
}

/// A model turn as steps in stream order: thoughts (dropped with the words heard truth cut, which
/// they led to), the words as one `model_output` per run of text, calls.
fn model_steps<'a>(entry: &'a Entry, out: &mut Vec<Json<'a>>) -> Result<(), StreamError> {
    let cut = entry
        .parts
        .iter()
        .any(|p| matches!(p, Part::Text { trimmed: true, .. }));
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut Vec<Json<'a>>| {
        if !text.is_empty() {
            let words = Value::String(std::mem::take(text));
            out.push(text_step("model_output", Json::Owned(words)));
        }
    };
    for part in &entry.parts {
        match part {
            Part::Text { text: t, .. } => text.push_str(t),
            Part::Thought { raw } if !cut => {
                flush(&mut text, out);
                out.push(Json::Value(raw));
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
                out.push(Json::Object(vec![
                    ("type", Json::Str("function_call")),
                    ("id", Json::Str(id)),
                    ("name", Json::Str(&call.name)),
                    ("arguments", Json::Owned(arguments)),
                ]));
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

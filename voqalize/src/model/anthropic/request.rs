//! The Messages request: `system`, `tools` and `messages` built from the neutral conversation,
//! with the prompt-cache marks.

use serde_json::{Map, Value, json};

use crate::model::history::{Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{build_error, check_only, instruction, user_text};
use crate::tools::{Arguments, Dialect};

use super::{Anthropic, PROVIDER};

/// The user turn put first when the conversation starts with the model's words (a greeting):
/// the Messages API refuses a first message that is not the user's (docs/protocol.md §6.15).
pub(crate) const CALL_STARTED: &str = "(The call has started.)";

impl Anthropic {
    /// The request body for `spec`.
    pub(super) fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
        let cfg = &self.inner;
        let cache = || json!({"type": "ephemeral"});
        let mut body = Map::new();
        body.insert("model".into(), json!(cfg.model));
        body.insert("max_tokens".into(), json!(cfg.max_tokens));
        if let Some(budget) = cfg.thinking_budget {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        if let Some(text) = instruction(spec.instruction) {
            let mut block = json!({"type": "text", "text": text});
            if cfg.prompt_caching {
                // Tools come before the system prompt in the cached prefix: one mark here covers
                // both, the same on every turn of the call.
                block["cache_control"] = cache();
            }
            body.insert("system".into(), json!([block]));
        }
        if !spec.tools.is_empty() {
            let mut tools: Vec<Value> = spec
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name(), "description": t.description(),
                        "input_schema": t.parameters(Dialect::OpenAi)})
                })
                .collect();
            if cfg.prompt_caching
                && instruction(spec.instruction).is_none()
                && let Some(last) = tools.last_mut()
            {
                last["cache_control"] = cache();
            }
            body.insert("tools".into(), Value::Array(tools));
            let choice = match spec.choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    json!({"type": "tool", "name": name})
                }
            };
            body.insert("tool_choice".into(), choice);
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        let mut messages = messages(spec)?;
        if cfg.prompt_caching
            && let Some(block) = messages
                .last_mut()
                .and_then(|m| m["content"].as_array_mut())
                .and_then(|c| c.last_mut())
        {
            // The conversation so far, read from the cache on the next turn.
            block["cache_control"] = cache();
        }
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), Value::Bool(true));
        for (k, v) in &cfg.options {
            body.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(body))
    }
}

/// Appends `blocks` as a message of `role`: to the last message when it has the same role (the
/// API combines consecutive turns of a role; doing it here keeps each `tool_result` first in its
/// user message, as the API requires).
fn push(out: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = out.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.extend(blocks);
        return;
    }
    out.push(json!({"role": role, "content": blocks}));
}

/// The conversation as Messages `messages`.
fn messages(spec: &RequestSpec<'_>) -> Result<Vec<Value>, StreamError> {
    let mut out: Vec<Value> = Vec::with_capacity(spec.history.len() + 2);
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(PROVIDER, &entry.parts)?;
                if !text.is_empty() {
                    push(
                        &mut out,
                        "user",
                        vec![json!({"type": "text", "text": text})],
                    );
                }
            }
            Role::Model => {
                let blocks = assistant(entry)?;
                if out.is_empty() && !blocks.is_empty() {
                    push(
                        &mut out,
                        "user",
                        vec![json!({"type": "text", "text": CALL_STARTED})],
                    );
                }
                push(&mut out, "assistant", blocks);
            }
            Role::Results => push(&mut out, "user", results(entry)?),
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        push(
            &mut out,
            "user",
            vec![json!({"type": "text", "text": note})],
        );
    }
    Ok(out)
}

/// A model turn's blocks in stream order: thinking replayed verbatim (with its signature), text,
/// calls. When heard truth cut this response's text, its thinking is dropped with it: it led to
/// words the user never heard. Empty text blocks (refused by the API) and blocks this layer does
/// not read are left out.
fn assistant(entry: &Entry) -> Result<Vec<Value>, StreamError> {
    let cut = entry
        .parts
        .iter()
        .any(|p| matches!(p, Part::Text { trimmed: true, .. }));
    let mut blocks = Vec::with_capacity(entry.parts.len());
    for part in &entry.parts {
        match part {
            Part::Thought { raw } if !cut => blocks.push(raw.clone()),
            Part::Text { text, .. } if !text.is_empty() => {
                blocks.push(json!({"type": "text", "text": text}));
            }
            Part::Call { call, .. } => {
                let Some(id) = &call.id else {
                    return Err(build_error(
                        PROVIDER,
                        format!("the call to {} has no call id", call.name),
                    ));
                };
                let input = match &call.arguments {
                    Arguments::Json(v) if v.is_object() => v.clone(),
                    Arguments::Raw(s) => serde_json::from_str::<Value>(s)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({})),
                    Arguments::Json(_) => json!({}),
                };
                blocks
                    .push(json!({"type": "tool_use", "id": id, "name": call.name, "input": input}));
            }
            Part::Result(_) => {
                return Err(build_error(PROVIDER, "a model turn holds a call's result"));
            }
            _ => {}
        }
    }
    Ok(blocks)
}

/// A results turn as `tool_result` blocks, each naming its call; an error result is marked.
fn results(entry: &Entry) -> Result<Vec<Value>, StreamError> {
    let mut blocks = Vec::with_capacity(entry.parts.len());
    for part in &entry.parts {
        let Part::Result(r) = part else {
            return Err(build_error(
                PROVIDER,
                format!("a results turn holds {part:?}"),
            ));
        };
        let Some(id) = &r.call_id else {
            return Err(build_error(
                PROVIDER,
                format!("the result for {} has no call id", r.name),
            ));
        };
        let mut block = json!({"type": "tool_result", "tool_use_id": id,
            "content": r.response.to_string()});
        if r.response.get("error").is_some() {
            block["is_error"] = Value::Bool(true);
        }
        blocks.push(block);
    }
    Ok(blocks)
}

//! The chat-completions request: `messages` built from the neutral conversation, and the tool
//! declarations, borrowing what it replays from the history (see `model::body`).

use serde_json::{Value, json};

use crate::model::body::Json;
use crate::model::history::{Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{arguments_text, build_error, check_only, instruction, user_text};

use crate::tools::ToolDecl;

use super::{Chat, error_name};

impl Chat {
    /// The request body for `spec`.
    pub(super) fn body<'a>(&'a self, spec: &RequestSpec<'a>) -> Result<Json<'a>, StreamError> {
        let cfg = &self.inner;
        let provider = error_name(&cfg.provider);
        let mut body = Vec::with_capacity(7 + cfg.options.len());
        body.push(("model", Json::Str(&cfg.model)));
        body.push(("messages", Json::Array(messages(provider, spec)?)));
        if !spec.tools.is_empty() {
            let all = || spec.tools.iter().map(|t| tool(t, cfg.strict)).collect();
            let (tools, choice) = match spec.choice {
                ToolChoice::Auto => (all(), json!("auto")),
                ToolChoice::None => (all(), json!("none")),
                ToolChoice::Only(name) => {
                    check_only(provider, spec.tools, name)?;
                    if cfg.model.contains("/responses/") {
                        // A chat route onto the Responses API does not carry a named tool
                        // choice: declare only that tool and require a call.
                        let only = spec
                            .tools
                            .iter()
                            .filter(|t| t.name() == name)
                            .map(|t| tool(t, cfg.strict))
                            .collect();
                        (only, json!("required"))
                    } else {
                        (
                            all(),
                            json!({"type": "function", "function": {"name": name}}),
                        )
                    }
                }
            };
            body.push(("tools", Json::Array(tools)));
            body.push(("tool_choice", Json::Owned(choice)));
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(provider, spec.tools, name)?;
        }
        if let Some(effort) = &cfg.reasoning_effort {
            body.push(("reasoning_effort", Json::Str(effort)));
        }
        body.push(("stream", Json::Bool(true)));
        body.push((
            "stream_options",
            Json::Object(vec![("include_usage", Json::Bool(true))]),
        ));
        body.extend(Json::entries(&cfg.options));
        Ok(Json::Object(body))
    }
}

/// A tool's function declaration, its schema borrowed (as [`ToolDecl::chat`] makes it).
fn tool(tool: &ToolDecl, strict: bool) -> Json<'_> {
    let (strict, parameters) = tool.openai_parameters(strict);
    let mut function = vec![
        ("name", Json::Str(tool.name())),
        ("description", Json::Str(tool.description())),
        ("parameters", Json::Value(parameters)),
    ];
    if strict {
        function.push(("strict", Json::Bool(true)));
    }
    Json::Object(vec![
        ("type", Json::Str("function")),
        ("function", Json::Object(function)),
    ])
}

/// A `{"role": .., "content": ..}` message.
fn message<'a>(role: &'a str, content: Json<'a>) -> Json<'a> {
    Json::Object(vec![("role", Json::Str(role)), ("content", content)])
}

/// The context as chat messages.
fn messages<'a>(provider: &str, spec: &RequestSpec<'a>) -> Result<Vec<Json<'a>>, StreamError> {
    let mut out = Vec::with_capacity(spec.history.len() + 2);
    if let Some(text) = instruction(spec.instruction) {
        out.push(message("system", Json::Str(text)));
    }
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(provider, &entry.parts)?;
                if !text.is_empty() {
                    out.push(message("user", text.into()));
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
                    out.push(Json::Object(vec![
                        ("role", Json::Str("tool")),
                        ("tool_call_id", Json::Str(call_id)),
                        (
                            "content",
                            Json::Owned(Value::String(r.response.to_string())),
                        ),
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

/// A model turn as one assistant message: all its text joined (text said after a call moves
/// before it; the message has one content), then its calls. `None` when it has neither: an empty
/// assistant message is refused by several servers. Reasoning is not sent back.
fn assistant<'a>(provider: &str, entry: &'a Entry) -> Result<Option<Json<'a>>, StreamError> {
    // The texts, joined only when there is more than one.
    let mut texts: Vec<&str> = Vec::new();
    let mut calls = Vec::new();
    for part in &entry.parts {
        match part {
            Part::Text { text: t, .. } if !t.is_empty() => texts.push(t),
            Part::Text { .. } | Part::Thought { .. } | Part::Other { .. } => {}
            Part::Call { call, .. } => {
                let Some(id) = &call.id else {
                    return Err(build_error(
                        provider,
                        format!("the call to {} has no call id", call.name),
                    ));
                };
                calls.push(Json::Object(vec![
                    ("id", Json::Str(id)),
                    ("type", Json::Str("function")),
                    (
                        "function",
                        Json::Object(vec![
                            ("name", Json::Str(&call.name)),
                            ("arguments", arguments_text(&call.arguments).into()),
                        ]),
                    ),
                ]));
            }
            Part::Result(_) => {
                return Err(build_error(provider, "a model turn holds a call's result"));
            }
        }
    }
    if texts.is_empty() && calls.is_empty() {
        return Ok(None);
    }
    let content = match texts.as_slice() {
        [] => Json::Owned(Value::Null),
        [one] => Json::Str(one),
        many => Json::Owned(Value::String(many.concat())),
    };
    let mut message = vec![("role", Json::Str("assistant")), ("content", content)];
    if !calls.is_empty() {
        message.push(("tool_calls", Json::Array(calls)));
    }
    Ok(Some(Json::Object(message)))
}

//! The Messages request: `system`, `tools` and `messages` built from the neutral conversation,
//! with the prompt-cache marks, borrowing what it replays from the history (see `model::body`).

use serde_json::{Value, json};

use crate::model::body::Json;
use crate::model::history::{Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::{Layer, StreamError};
use crate::model::origin::current_turn;
use crate::model::render::{build_error, check_only, instruction, user_text};
use crate::tools::{Arguments, Dialect};

use super::{Anthropic, PROVIDER};

/// The user turn put first when the conversation starts with the model's words (a greeting):
/// the Messages API refuses a first message that is not the user's (docs/protocol.md §6.15).
pub(crate) const CALL_STARTED: &str = "(The call has started.)";

impl Anthropic {
    /// The request body for `spec`.
    pub(super) fn body<'a>(&'a self, spec: &RequestSpec<'a>) -> Result<Json<'a>, StreamError> {
        let cfg = &self.inner;
        let mut body = Vec::with_capacity(8 + cfg.options.len());
        body.push(("model", Json::Str(&cfg.model)));
        body.push(("max_tokens", Json::Owned(json!(cfg.max_tokens))));
        // With thinking on, the last assistant turn of a tool loop must start with a thinking
        // block, and a turn must keep one thinking mode throughout
        // (<https://docs.claude.com/en/docs/build-with-claude/extended-thinking#extended-thinking-with-tool-use>):
        // a call another layer made in this turn has none, so this request goes without
        // thinking, and without the thinking of this turn's earlier steps.
        let unthinking = cfg
            .thinking_budget
            .and_then(|_| foreign_call_from(self, spec.history));
        if let Some(budget) = cfg.thinking_budget.filter(|_| unthinking.is_none()) {
            body.push((
                "thinking",
                Json::Owned(json!({"type": "enabled", "budget_tokens": budget})),
            ));
        }
        if let Some(text) = instruction(spec.instruction) {
            let mut block = text_block(Json::Str(text));
            if cfg.prompt_caching {
                // Tools come before the system prompt in the cached prefix: one mark here covers
                // both, the same on every turn of the call.
                mark(&mut block);
            }
            body.push(("system", Json::Array(vec![block])));
        }
        tools(cfg.prompt_caching, spec, &mut body)?;
        let mut messages = messages(spec, unthinking.unwrap_or(usize::MAX))?;
        if cfg.prompt_caching
            && let Some((_, blocks)) = messages.last_mut()
            && let Some(block) = blocks.last_mut()
        {
            // The conversation so far, read from the cache on the next turn.
            mark(block);
        }
        let messages = messages
            .into_iter()
            .map(|(role, content)| {
                Json::Object(vec![
                    ("role", Json::Str(role)),
                    ("content", Json::Array(content)),
                ])
            })
            .collect();
        body.push(("messages", Json::Array(messages)));
        body.push(("stream", Json::Bool(true)));
        body.extend(Json::entries(&cfg.options));
        Ok(Json::Object(body))
    }
}

/// The `tools` and `tool_choice` entries for `spec` (none without tools); with `caching`, the
/// last tool carries the cache mark when there is no instruction to carry it.
fn tools<'a>(
    caching: bool,
    spec: &RequestSpec<'a>,
    body: &mut Vec<(&'a str, Json<'a>)>,
) -> Result<(), StreamError> {
    if !spec.tools.is_empty() {
        let mut tools: Vec<Json<'a>> = spec
            .tools
            .iter()
            .map(|t| {
                Json::Object(vec![
                    ("name", Json::Str(t.name())),
                    ("description", Json::Str(t.description())),
                    ("input_schema", Json::Value(t.parameters(Dialect::OpenAi))),
                ])
            })
            .collect();
        if caching
            && instruction(spec.instruction).is_none()
            && let Some(last) = tools.last_mut()
        {
            mark(last);
        }
        body.push(("tools", Json::Array(tools)));
        let choice = match spec.choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Only(name) => {
                check_only(PROVIDER, spec.tools, name)?;
                json!({"type": "tool", "name": name})
            }
        };
        body.push(("tool_choice", Json::Owned(choice)));
    } else if let ToolChoice::Only(name) = spec.choice {
        check_only(PROVIDER, spec.tools, name)?;
    }
    Ok(())
}

/// A `{"type": "text", "text": ..}` block.
fn text_block(text: Json<'_>) -> Json<'_> {
    Json::Object(vec![("type", Json::Str("text")), ("text", text)])
}

/// Marks `block` as the end of a cached prefix (`"cache_control": {"type": "ephemeral"}`), set
/// over the block's entries as `Map::insert` would. A block that is not an object (only a
/// hand-built history holds one) is left unmarked: there is nothing to set it on.
fn mark(block: &mut Json<'_>) {
    let cache = || json!({"type": "ephemeral"});
    match block {
        Json::Object(entries) => match entries.iter_mut().find(|(k, _)| *k == "cache_control") {
            Some((_, value)) => *value = Json::Owned(cache()),
            None => entries.push(("cache_control", Json::Owned(cache()))),
        },
        Json::Value(raw @ Value::Object(_)) => {
            *block = Json::Object(Json::over(
                raw,
                vec![("cache_control", Json::Owned(cache()))],
            ));
        }
        Json::Owned(Value::Object(map)) => {
            map.insert("cache_control".into(), cache());
        }
        Json::Value(_) | Json::Owned(_) | Json::Str(_) | Json::Bool(_) | Json::Array(_) => {}
    }
}

/// A message: its role and its blocks, made into JSON once merged.
type Message<'a> = (&'static str, Vec<Json<'a>>);

/// Appends `blocks` as a message of `role`: to the last message when it has the same role (the
/// API combines consecutive turns of a role; doing it here keeps each `tool_result` first in its
/// user message, as the API requires).
fn push<'a>(out: &mut Vec<Message<'a>>, role: &'static str, blocks: Vec<Json<'a>>) {
    if blocks.is_empty() {
        return;
    }
    if let Some((last, content)) = out.last_mut()
        && *last == role
    {
        content.extend(blocks);
        return;
    }
    out.push((role, blocks));
}

/// Where the current turn starts, when a model turn of it that another layer wrote holds a call
/// (its `tool_use` has no thinking block before it).
fn foreign_call_from(layer: &dyn Layer, history: &[Entry]) -> Option<usize> {
    let current = current_turn(history);
    history
        .get(current..)?
        .iter()
        .any(|e| e.foreign_to(layer) && e.parts.iter().any(|p| matches!(p, Part::Call { .. })))
        .then_some(current)
}

/// The conversation as Messages `messages`; model turns from `unthinking` on without their
/// thinking.
fn messages<'a>(
    spec: &RequestSpec<'a>,
    unthinking: usize,
) -> Result<Vec<Message<'a>>, StreamError> {
    let mut out: Vec<Message<'a>> = Vec::with_capacity(spec.history.len() + 2);
    for (i, entry) in spec.history.iter().enumerate() {
        match entry.role {
            Role::User => {
                let text = user_text(PROVIDER, &entry.parts)?;
                if !text.is_empty() {
                    push(&mut out, "user", vec![text_block(text.into())]);
                }
            }
            Role::Model => {
                let blocks = assistant(entry, i >= unthinking)?;
                if out.is_empty() && !blocks.is_empty() {
                    push(&mut out, "user", vec![text_block(Json::Str(CALL_STARTED))]);
                }
                push(&mut out, "assistant", blocks);
            }
            Role::Results => push(&mut out, "user", results(entry)?),
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        push(&mut out, "user", vec![text_block(Json::Str(note))]);
    }
    Ok(out)
}

/// A model turn's blocks in stream order: thinking replayed verbatim (with its signature), text,
/// calls. When heard truth cut this response's text, its thinking is dropped with it: it led to
/// words the user never heard. Empty text blocks (refused by the API) and blocks this layer does
/// not read are left out; so is thinking when `unthinking` (a request sent without thinking).
fn assistant(entry: &Entry, unthinking: bool) -> Result<Vec<Json<'_>>, StreamError> {
    let cut = unthinking
        || entry
            .parts
            .iter()
            .any(|p| matches!(p, Part::Text { trimmed: true, .. }));
    let mut blocks = Vec::with_capacity(entry.parts.len());
    for part in &entry.parts {
        match part {
            Part::Thought { raw } if !cut => blocks.push(Json::Value(raw)),
            Part::Text { text, .. } if !text.is_empty() => blocks.push(text_block(Json::Str(text))),
            Part::Call { call, .. } => {
                let Some(id) = &call.id else {
                    return Err(build_error(
                        PROVIDER,
                        format!("the call to {} has no call id", call.name),
                    ));
                };
                let input = match &call.arguments {
                    Arguments::Json(v) if v.is_object() => Json::Value(v),
                    Arguments::Raw(s) => Json::Owned(
                        serde_json::from_str::<Value>(s)
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({})),
                    ),
                    Arguments::Json(_) => Json::Owned(json!({})),
                };
                blocks.push(Json::Object(vec![
                    ("type", Json::Str("tool_use")),
                    ("id", Json::Str(id)),
                    ("name", Json::Str(&call.name)),
                    ("input", input),
                ]));
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
fn results(entry: &Entry) -> Result<Vec<Json<'_>>, StreamError> {
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
        let mut block = vec![
            ("type", Json::Str("tool_result")),
            ("tool_use_id", Json::Str(id)),
            (
                "content",
                Json::Owned(Value::String(r.response.to_string())),
            ),
        ];
        if r.response.get("error").is_some() {
            block.push(("is_error", Json::Bool(true)));
        }
        blocks.push(Json::Object(block));
    }
    Ok(blocks)
}

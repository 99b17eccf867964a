//! The Gemini request: the body built from the neutral conversation and the tool declarations.

use serde_json::{Map, Value, json};

use crate::model::history::{Call, Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::StreamError;
use crate::model::render::{build_error, check_only, instruction, user_text};
use crate::tools::Arguments;

use super::{Gemini, PROVIDER};

impl Gemini {
    /// The request body for `spec`.
    pub(super) fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
        let cfg = &self.inner;
        let mut body = Map::new();
        body.insert("contents".into(), Value::Array(contents(spec)?));
        if let Some(text) = instruction(spec.instruction) {
            body.insert(
                "systemInstruction".into(),
                json!({"role": "user", "parts": [{"text": text}]}),
            );
        }
        if !spec.tools.is_empty() {
            body.insert(
                "tools".into(),
                json!([{"functionDeclarations": spec.tools.gemini()}]),
            );
            match spec.choice {
                ToolChoice::Auto => {}
                ToolChoice::None => {
                    body.insert(
                        "toolConfig".into(),
                        json!({"functionCallingConfig": {"mode": "NONE"}}),
                    );
                }
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    body.insert(
                        "toolConfig".into(),
                        json!({"functionCallingConfig": {
                            "mode": "ANY", "allowedFunctionNames": [name]}}),
                    );
                }
            }
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        let mut generation = cfg.generation_config.clone();
        if let Some(level) = &cfg.thinking_level {
            generation.insert("thinkingConfig".into(), json!({"thinkingLevel": level}));
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        for (k, v) in &cfg.options {
            body.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(body))
    }
}

/// The `contents` of a request: one content per entry, adjacent user entries (and the note)
/// merged into one content since Gemini wants turns to alternate; empty turns left out.
fn contents(spec: &RequestSpec<'_>) -> Result<Vec<Value>, StreamError> {
    let mut out: Vec<Value> = Vec::with_capacity(spec.history.len() + 1);
    // Whether the last content pushed is a plain user content (text), open for merging.
    let mut open_user = false;
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let parts = user_parts(entry)?;
                push_user(&mut out, &mut open_user, parts);
            }
            Role::Model => {
                let parts = model_parts(entry)?;
                if !parts.is_empty() {
                    out.push(json!({"role": "model", "parts": parts}));
                    open_user = false;
                }
            }
            Role::Results => {
                let parts = result_parts(entry)?;
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "parts": parts}));
                    open_user = false;
                }
            }
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        push_user(&mut out, &mut open_user, vec![json!({"text": note})]);
    }
    Ok(out)
}

/// Appends user text parts: to the last content when it is a user text content, else as a new one.
fn push_user(out: &mut Vec<Value>, open: &mut bool, parts: Vec<Value>) {
    if parts.is_empty() {
        return;
    }
    if *open && let Some(Value::Array(last)) = out.last_mut().and_then(|c| c.get_mut("parts")) {
        last.extend(parts);
        return;
    }
    out.push(json!({"role": "user", "parts": parts}));
    *open = true;
}

fn user_parts(entry: &Entry) -> Result<Vec<Value>, StreamError> {
    // Checks the entry holds only text; each non-empty text is its own part.
    user_text(PROVIDER, &entry.parts)?;
    Ok(entry
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } if !text.is_empty() => Some(json!({"text": text})),
            _ => None,
        })
        .collect())
}

/// A model turn's parts as Gemini sent them: text from `text` over the rest of `raw` (so a
/// signature stays on its part), everything else verbatim. A part that would be nothing but
/// empty text is left out: Gemini refuses it.
fn model_parts(entry: &Entry) -> Result<Vec<Value>, StreamError> {
    let mut out = Vec::with_capacity(entry.parts.len());
    for part in &entry.parts {
        let value = match part {
            Part::Text { text, raw, .. } => {
                let mut obj = match raw {
                    Value::Object(m) => m.clone(),
                    _ => Map::new(),
                };
                obj.insert("text".into(), Value::String(text.clone()));
                Value::Object(obj)
            }
            Part::Thought { raw } | Part::Other { raw } => raw.clone(),
            Part::Call { call, raw } => call_part(call, raw),
            Part::Result(_) => {
                return Err(build_error(PROVIDER, "a model turn holds a call's result"));
            }
        };
        if !is_empty_part(&value) {
            out.push(value);
        }
    }
    Ok(out)
}

/// A part with nothing to replay: not an object, empty, or only an empty `text`.
pub(super) fn is_empty_part(part: &Value) -> bool {
    match part {
        Value::Object(m) => m.iter().all(|(k, v)| k == "text" && v.as_str() == Some("")),
        _ => true,
    }
}

/// A `functionCall` part: the id, name and arguments from the call, over the rest of the part as
/// Gemini sent it (`raw`: its `thoughtSignature`, any other key), so a signature stays on its part
/// and a call the core refused is replayed with the arguments it was given instead.
fn call_part(call: &Call, raw: &Value) -> Value {
    let mut part = match raw {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut fc = match part.shift_remove("functionCall") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if let Some(id) = &call.id {
        fc.insert("id".into(), json!(id));
    }
    fc.insert("name".into(), json!(call.name));
    let args = match &call.arguments {
        Arguments::Json(v) => v.clone(),
        Arguments::Raw(s) if s.trim().is_empty() => json!({}),
        Arguments::Raw(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
    };
    fc.insert("args".into(), args);
    let mut out = Map::new();
    out.insert("functionCall".into(), Value::Object(fc));
    out.extend(part);
    Value::Object(out)
}

/// The `functionResponse` parts of a results turn, in call order; `id` only when the call had one.
fn result_parts(entry: &Entry) -> Result<Vec<Value>, StreamError> {
    entry
        .parts
        .iter()
        .map(|p| match p {
            Part::Result(r) => {
                let mut fr = Map::new();
                if let Some(id) = &r.call_id {
                    fr.insert("id".into(), json!(id));
                }
                fr.insert("name".into(), json!(r.name));
                fr.insert("response".into(), r.response.clone());
                Ok(json!({ "functionResponse": fr }))
            }
            other => Err(build_error(
                PROVIDER,
                format!("a results turn holds {other:?}"),
            )),
        })
        .collect()
}

//! The Gemini request: the body built from the neutral conversation and the tool declarations,
//! borrowing what it replays from the history (see `model::body`).

use serde_json::{Value, json};

use crate::model::body::Json;
use crate::model::history::{Call, Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::{Layer, StreamError};
use crate::model::origin::current_turn;
use crate::model::render::{build_error, check_only, instruction, user_texts};
use crate::tools::{Arguments, ToolDecl};

use super::{Gemini, PROVIDER};

impl Gemini {
    /// The request body for `spec`.
    pub(super) fn body<'a>(&'a self, spec: &RequestSpec<'a>) -> Result<Json<'a>, StreamError> {
        let cfg = &self.inner;
        let mut body = Vec::with_capacity(5 + cfg.options.len());
        body.push(("contents", Json::Array(contents(self, spec)?)));
        if let Some(text) = instruction(spec.instruction) {
            body.push((
                "systemInstruction",
                Json::Object(vec![
                    ("role", Json::Str("user")),
                    ("parts", Json::Array(vec![text_part(text)])),
                ]),
            ));
        }
        if !spec.tools.is_empty() {
            let declarations = spec.tools.iter().map(declaration).collect();
            body.push((
                "tools",
                Json::Array(vec![Json::Object(vec![(
                    "functionDeclarations",
                    Json::Array(declarations),
                )])]),
            ));
            match spec.choice {
                ToolChoice::Auto => {}
                ToolChoice::None => {
                    body.push((
                        "toolConfig",
                        Json::Owned(json!({"functionCallingConfig": {"mode": "NONE"}})),
                    ));
                }
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    body.push((
                        "toolConfig",
                        Json::Owned(json!({"functionCallingConfig": {
                            "mode": "ANY", "allowedFunctionNames": [name]}})),
                    ));
                }
            }
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        let thinking = cfg.thinking_level.as_deref().map(|level| {
            (
                "thinkingConfig",
                Json::Object(vec![("thinkingLevel", Json::Str(level))]),
            )
        });
        if thinking.is_some() || !cfg.generation_config.is_empty() {
            let generation =
                Json::over_map(Some(&cfg.generation_config), thinking.into_iter().collect());
            body.push(("generationConfig", Json::Object(generation)));
        }
        body.extend(Json::entries(&cfg.options));
        Ok(Json::Object(body))
    }
}

/// A tool's `FunctionDeclaration`, its schema borrowed (as [`ToolDecl::gemini`] makes it).
fn declaration(tool: &ToolDecl) -> Json<'_> {
    let mut declaration = vec![
        ("name", Json::Str(tool.name())),
        ("description", Json::Str(tool.description())),
    ];
    if let Some(parameters) = tool.gemini_parameters() {
        declaration.push(("parameters", Json::Value(parameters)));
    }
    Json::Object(declaration)
}

/// One content of `contents`: a role and its parts.
fn content<'a>(role: &'a str, parts: Vec<Json<'a>>) -> Json<'a> {
    Json::Object(vec![
        ("role", Json::Str(role)),
        ("parts", Json::Array(parts)),
    ])
}

/// A `{"text": ..}` part.
fn text_part(text: &str) -> Json<'_> {
    Json::Object(vec![("text", Json::Str(text))])
}

/// The signature Gemini documents for a function call it did not write (history from another
/// model or provider): with it, Gemini 3 skips the check that every call of the current turn
/// carries its signature, which otherwise answers HTTP 400.
/// <https://ai.google.dev/gemini-api/docs/thought-signatures#faqs>
pub(crate) const FOREIGN_SIGNATURE: &str = "skip_thought_signature_validator";

/// The `contents` of a request: one content per entry, adjacent user entries (and the note)
/// merged into one content since Gemini wants turns to alternate; empty turns left out. A model
/// turn another layer wrote (already without its JSON) that falls in the current turn gets
/// [`FOREIGN_SIGNATURE`] on its first call, where Gemini puts a step's signature.
fn contents<'a>(layer: &dyn Layer, spec: &RequestSpec<'a>) -> Result<Vec<Json<'a>>, StreamError> {
    let current = current_turn(spec.history);
    // The contents, each a role and its parts; made into JSON at the end, once merged.
    let mut out: Vec<(&'static str, Vec<Json<'a>>)> = Vec::with_capacity(spec.history.len() + 1);
    // Whether the last content pushed is a plain user content (text), open for merging.
    let mut open_user = false;
    for (i, entry) in spec.history.iter().enumerate() {
        match entry.role {
            Role::User => {
                let parts = user_texts(PROVIDER, &entry.parts)?
                    .filter(|t| !t.is_empty())
                    .map(text_part);
                push_user(&mut out, &mut open_user, parts);
            }
            Role::Model => {
                let placeholder = i >= current && entry.foreign_to(layer);
                let parts = model_parts(entry, placeholder)?;
                if !parts.is_empty() {
                    out.push(("model", parts));
                    open_user = false;
                }
            }
            Role::Results => {
                let parts = result_parts(entry)?;
                if !parts.is_empty() {
                    out.push(("user", parts));
                    open_user = false;
                }
            }
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        push_user(&mut out, &mut open_user, std::iter::once(text_part(note)));
    }
    Ok(out
        .into_iter()
        .map(|(role, parts)| content(role, parts))
        .collect())
}

/// Appends user text parts: to the last content when it is a user text content, else as a new one.
fn push_user<'a>(
    out: &mut Vec<(&'static str, Vec<Json<'a>>)>,
    open: &mut bool,
    parts: impl Iterator<Item = Json<'a>>,
) {
    let mut parts = parts.peekable();
    if parts.peek().is_none() {
        return;
    }
    if *open && let Some((_, last)) = out.last_mut() {
        last.extend(parts);
        return;
    }
    out.push(("user", parts.collect()));
    *open = true;
}

/// A model turn's parts as Gemini sent them: text from `text` over the rest of `raw` (so a
/// signature stays on its part), everything else verbatim. A part that would be nothing but
/// empty text is left out: Gemini refuses it. `placeholder`: the first call gets
/// [`FOREIGN_SIGNATURE`].
fn model_parts(entry: &Entry, placeholder: bool) -> Result<Vec<Json<'_>>, StreamError> {
    let mut out = Vec::with_capacity(entry.parts.len());
    let mut placeholder = placeholder;
    for part in &entry.parts {
        let value = match part {
            Part::Text { text, raw, .. } => {
                if is_empty_text_part(text, raw) {
                    continue;
                }
                Json::Object(Json::over(raw, vec![("text", Json::Str(text))]))
            }
            Part::Thought { raw } | Part::Other { raw } => {
                if is_empty_part(raw) {
                    continue;
                }
                Json::Value(raw)
            }
            Part::Call { call, raw } => {
                let mut part = call_part(call, raw);
                if std::mem::take(&mut placeholder)
                    && let Json::Object(entries) = &mut part
                    && !entries.iter().any(|(k, _)| *k == "thoughtSignature")
                {
                    entries.push(("thoughtSignature", Json::Str(FOREIGN_SIGNATURE)));
                }
                part
            }
            Part::Result(_) => {
                return Err(build_error(PROVIDER, "a model turn holds a call's result"));
            }
        };
        out.push(value);
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

/// Whether a text part is nothing but an empty `text` once `text` is set over `raw`: the
/// [`is_empty_part`] rule, for a part whose text is the history's, not `raw`'s.
fn is_empty_text_part(text: &str, raw: &Value) -> bool {
    text.is_empty()
        && raw
            .as_object()
            .is_none_or(|m| m.keys().all(|k| k == "text"))
}

/// A `functionCall` part: the id, name and arguments from the call, over the rest of the part as
/// Gemini sent it (`raw`: its `thoughtSignature`, any other key), so a signature stays on its part
/// and a call the core refused is replayed with the arguments it was given instead.
fn call_part<'a>(call: &'a Call, raw: &'a Value) -> Json<'a> {
    let args = match &call.arguments {
        Arguments::Json(v) => Json::Value(v),
        Arguments::Raw(s) if s.trim().is_empty() => Json::Owned(json!({})),
        Arguments::Raw(s) => Json::Owned(serde_json::from_str(s).unwrap_or_else(|_| json!({}))),
    };
    let mut set = Vec::with_capacity(3);
    if let Some(id) = &call.id {
        set.push(("id", Json::Str(id)));
    }
    set.push(("name", Json::Str(&call.name)));
    set.push(("args", args));
    let raw = match raw {
        Value::Object(m) => Some(m),
        _ => None,
    };
    let fc = raw
        .and_then(|m| m.get("functionCall"))
        .and_then(Value::as_object);
    let mut part = vec![("functionCall", Json::Object(Json::over_map(fc, set)))];
    part.extend(
        raw.into_iter()
            .flatten()
            .filter(|(k, _)| *k != "functionCall")
            .map(|(k, v)| (k.as_str(), Json::Value(v))),
    );
    Json::Object(part)
}

/// The `functionResponse` parts of a results turn, in call order; `id` only when the call had one.
fn result_parts(entry: &Entry) -> Result<Vec<Json<'_>>, StreamError> {
    entry
        .parts
        .iter()
        .map(|p| match p {
            Part::Result(r) => {
                let mut fr = Vec::with_capacity(3);
                if let Some(id) = &r.call_id {
                    fr.push(("id", Json::Str(id)));
                }
                fr.push(("name", Json::Str(&r.name)));
                fr.push(("response", Json::Value(&r.response)));
                Ok(Json::Object(vec![("functionResponse", Json::Object(fr))]))
            }
            other => Err(build_error(
                PROVIDER,
                format!("a results turn holds {other:?}"),
            )),
        })
        .collect()
}

//! OpenAI Responses API: `POST {base}/responses`, streamed, with `store: false`.
//!
//! Nothing is kept on OpenAI's side, so every request carries the whole context as `input`
//! items. A reasoning item is replayed only with its `encrypted_content`, and only immediately
//! followed by the item it led to, verbatim with that item's id: the message the caller heard in
//! full, or the call as the model made it. Other text and calls are replayed as ours (a call by
//! its `call_id`, without an item id). A call is complete, and runs, when its
//! `response.output_item.done` event arrives.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::history::{Call, Chunk, Entry, Part, RequestSpec, Role, ToolChoice, Usage};
use super::http::{HttpRequest, Timeouts};
use super::layer::{DecodeLimits, Decoder, Layer, StreamError};
use super::render::{
    LayerError, arguments_text, body_bytes, build_error, check_base_url, check_header, check_model,
    check_only, check_options, check_word, count, env_var, error_message, instruction,
    malformed_shape, provider_error, user_text, visible_output, without_nulls,
};
use super::sse::SseItem;
use super::within::parse_within;
use crate::tools::Arguments;

const PROVIDER: &str = "openai";

/// The API root when neither [`OpenAiBuilder::base_url`] nor `OPENAI_BASE_URL` names one.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Body keys the SDK builds: the context, the tools, streaming and storage.
const RESERVED: &[&str] = &[
    "model",
    "input",
    "instructions",
    "stream",
    "store",
    "tools",
    "tool_choice",
    "include",
    "previous_response_id",
];

/// An OpenAI Responses API layer. Cheap to clone: the configuration is shared.
///
/// ```no_run
/// # fn main() -> Result<(), voqalize::model::LayerError> {
/// use voqalize::model::OpenAi;
/// let openai = OpenAi::from_env("gpt-6-sol").reasoning("low").build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAi {
    inner: Arc<Config>,
}

struct Config {
    model: String,
    base_url: String,
    url: String,
    headers: Vec<(String, String)>,
    reasoning: Option<String>,
    strict: bool,
    timeouts: Timeouts,
    options: Map<String, Value>,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("model", &self.inner.model)
            .field("url", &self.inner.url)
            .field("reasoning", &self.inner.reasoning)
            .field("strict", &self.inner.strict)
            .finish_non_exhaustive()
    }
}

/// Configures an [`OpenAi`] layer; [`build`](Self::build) checks everything.
pub struct OpenAiBuilder {
    api_key: Option<String>,
    model: String,
    base_url: String,
    organization: Option<String>,
    project: Option<String>,
    reasoning: Option<String>,
    strict: bool,
    timeouts: Timeouts,
    options: Map<String, Value>,
    env_error: Option<LayerError>,
}

impl fmt::Debug for OpenAiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiBuilder")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("organization", &self.organization)
            .field("project", &self.project)
            .field("reasoning", &self.reasoning)
            .field("strict", &self.strict)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl OpenAi {
    /// A layer for `model` (e.g. `gpt-6-sol`) with this API key, base URL
    /// `https://api.openai.com/v1`, the model's default reasoning and `strict: false` tools. The
    /// environment is not read.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::OpenAi;
    ///
    /// let openai = OpenAi::builder("sk-your-key", "gpt-5-mini")
    ///     .reasoning("low")
    ///     .build()?;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn builder(api_key: impl Into<String>, model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            api_key: Some(api_key.into()),
            model: model.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            organization: None,
            project: None,
            reasoning: None,
            strict: false,
            timeouts: Timeouts::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer for `model` configured from the environment: the key from `OPENAI_API_KEY`, the
    /// base URL from `OPENAI_BASE_URL`, the `OpenAI-Organization` and `OpenAI-Project` headers
    /// from `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID`. Unset or empty variables are skipped; a
    /// missing key or an unreadable variable is reported by [`OpenAiBuilder::build`].
    pub fn from_env(model: impl Into<String>) -> OpenAiBuilder {
        Self::from_lookup(model, env_var)
    }

    fn from_lookup(
        model: impl Into<String>,
        get: impl Fn(&'static str) -> Result<Option<String>, LayerError>,
    ) -> OpenAiBuilder {
        let mut builder = OpenAi::builder(String::new(), model);
        let mut read = |var| match get(var) {
            Ok(v) => v,
            Err(e) => {
                builder.env_error.get_or_insert(e);
                None
            }
        };
        let key = read("OPENAI_API_KEY");
        let base_url = read("OPENAI_BASE_URL");
        let organization = read("OPENAI_ORG_ID");
        let project = read("OPENAI_PROJECT_ID");
        builder.api_key = key;
        if let Some(u) = base_url {
            builder.base_url = u;
        }
        builder.organization = organization;
        builder.project = project;
        builder
    }
}

impl OpenAiBuilder {
    /// The API root, e.g. `https://api.openai.com/v1` (`/responses` is appended).
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The `OpenAI-Organization` header.
    #[must_use]
    pub fn organization(mut self, id: impl Into<String>) -> Self {
        self.organization = Some(id.into());
        self
    }

    /// The `OpenAI-Project` header.
    #[must_use]
    pub fn project(mut self, id: impl Into<String>) -> Self {
        self.project = Some(id.into());
        self
    }

    /// `reasoning.effort` (`none`, `minimal`, `low`, `medium`, `high`...; the model's default
    /// when never called). Setting it also asks for `reasoning.encrypted_content`, so reasoning
    /// can be replayed without storing responses.
    #[must_use]
    pub fn reasoning(mut self, effort: impl Into<String>) -> Self {
        self.reasoning = Some(effort.into());
        self
    }

    /// Declares tools with `strict: true` where their schema allows it (default `false`).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Connect, first-byte and between-event timeouts.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// An extra body key sent with every request (e.g. `temperature`, `max_output_tokens`,
    /// `text`); a later call with the same key replaces it. Keys the SDK builds (`model`,
    /// `input`, `instructions`, `stream`, `store`, `tools`, `tool_choice`, `include`,
    /// `previous_response_id`) are refused by [`build`](Self::build), and so is `reasoning`
    /// together with [`reasoning`](Self::reasoning).
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// No API key ([`LayerError::MissingKey`]), or a key, organisation or project a header
    /// cannot carry; a base URL that is not `http(s)://host[/path]`; an empty model; a malformed
    /// reasoning effort; an option the SDK builds ([`LayerError::ReservedOption`]) or one that
    /// clashes with a setting ([`LayerError::OptionClash`]); an unreadable environment variable.
    pub fn build(self) -> Result<OpenAi, LayerError> {
        if let Some(e) = self.env_error {
            return Err(e);
        }
        let api_key = self.api_key.ok_or(LayerError::MissingKey {
            provider: PROVIDER,
            vars: "OPENAI_API_KEY",
        })?;
        check_header(PROVIDER, "API key", &api_key)?;
        check_model(&self.model)?;
        let base_url = check_base_url(&self.base_url)?;
        if let Some(effort) = &self.reasoning {
            check_word("reasoning effort", effort)?;
        }
        check_options(PROVIDER, &self.options, RESERVED)?;
        if self.reasoning.is_some() && self.options.contains_key("reasoning") {
            return Err(LayerError::OptionClash {
                key: "reasoning".into(),
                setting: "reasoning(effort)",
            });
        }
        let mut headers = vec![
            ("authorization".to_owned(), format!("Bearer {api_key}")),
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "text/event-stream".to_owned()),
        ];
        if let Some(org) = self.organization {
            check_header(PROVIDER, "organization", &org)?;
            headers.push(("openai-organization".to_owned(), org));
        }
        if let Some(project) = self.project {
            check_header(PROVIDER, "project", &project)?;
            headers.push(("openai-project".to_owned(), project));
        }
        Ok(OpenAi {
            inner: Arc::new(Config {
                model: self.model,
                url: format!("{base_url}/responses"),
                base_url,
                headers,
                reasoning: self.reasoning,
                strict: self.strict,
                timeouts: self.timeouts,
                options: self.options,
            }),
        })
    }
}

impl OpenAi {
    /// The request body for `spec`.
    fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
        let cfg = &self.inner;
        let mut body = Map::new();
        body.insert("model".into(), json!(cfg.model));
        if let Some(text) = instruction(spec.instruction) {
            body.insert("instructions".into(), json!(text));
        }
        body.insert("input".into(), Value::Array(input(spec)?));
        body.insert("stream".into(), Value::Bool(true));
        body.insert("store".into(), Value::Bool(false));
        for (k, v) in &cfg.options {
            body.insert(k.clone(), v.clone());
        }
        if !spec.tools.is_empty() {
            body.insert("tools".into(), json!(spec.tools.openai(cfg.strict)));
            let choice = match spec.choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Only(name) => {
                    check_only(PROVIDER, spec.tools, name)?;
                    json!({"type": "function", "name": name})
                }
            };
            body.insert("tool_choice".into(), choice);
        } else if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        if let Some(effort) = &cfg.reasoning {
            body.insert("reasoning".into(), json!({"effort": effort}));
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
        Ok(Value::Object(body))
    }
}

/// The context as `input` items.
fn input(spec: &RequestSpec<'_>) -> Result<Vec<Value>, StreamError> {
    let mut out = Vec::with_capacity(spec.history.len() + 1);
    for entry in spec.history {
        match entry.role {
            Role::User => {
                let text = user_text(PROVIDER, &entry.parts)?;
                if !text.is_empty() {
                    out.push(json!({"role": "user", "content": text}));
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
                    out.push(json!({
                        "type": "function_call_output",
                        "call_id": call_id,
                        "output": r.response.to_string(),
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

/// A model turn, in order: each run of text parts as one assistant message, each call as a
/// `function_call` item, and each reasoning item only where the item it led to follows it as the
/// model produced it (docs/protocol.md §6.15). Without `store`, OpenAI accepts a reasoning item
/// only with its `encrypted_content`, and only immediately followed by its own output item, with
/// that item's id: the message (`msg_…`) the caller heard in full, or the call (`fc_…`) as it
/// was made. A message heard only in part (heard truth rewrote it), a call the core refused or
/// rewrote, or a turn that ends after the reasoning: the reasoning goes, and the text or call is
/// sent as ours (no id).
fn model_items(entry: &Entry, out: &mut Vec<Value>) -> Result<(), StreamError> {
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
                    out.extend(held.drain(..).cloned());
                    out.push(raw.clone());
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
                    out.extend(held.drain(..).cloned());
                    out.push(raw.clone());
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
    fn flush(&mut self, out: &mut Vec<Value>) -> bool {
        let had = !self.text.is_empty() || self.trimmed;
        if !self.text.is_empty() {
            out.push(json!({"role": "assistant", "content": std::mem::take(&mut self.text)}));
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
fn function_call(call: &Call) -> Result<Value, StreamError> {
    let Some(call_id) = &call.id else {
        return Err(build_error(
            PROVIDER,
            format!("the call to {} has no call id", call.name),
        ));
    };
    Ok(json!({
        "type": "function_call",
        "call_id": call_id,
        "name": call.name,
        "arguments": arguments_text(&call.arguments),
    }))
}

impl Layer for OpenAi {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.inner.model
    }

    fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError> {
        let body = self.body(spec)?;
        Ok(HttpRequest {
            url: self.inner.url.clone(),
            headers: self.inner.headers.clone(),
            body: body_bytes(&body),
        })
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        // Each call and each reasoning item is an event of its own, whole: the core's bounds
        // (calls, arguments, parts, bytes kept) apply as they come, and its cut stops the reading.
        // An event is read within what a response may keep.
        Box::new(OpenAiDecoder::new(limits.max_kept_bytes))
    }
}

/// Decodes a Responses stream, switching on each event's `type`. An event that would take more
/// than `max_kept_bytes` in memory is not read into it: the core cuts the response there.
#[derive(Debug)]
pub(crate) struct OpenAiDecoder {
    max_kept_bytes: usize,
    done: bool,
}

impl OpenAiDecoder {
    pub(crate) fn new(max_kept_bytes: usize) -> Self {
        OpenAiDecoder {
            max_kept_bytes,
            done: false,
        }
    }

    fn event(&mut self, name: Option<&str>, data: &str) -> Result<Vec<Chunk>, StreamError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Vec::new());
        }
        let Some(event) = parse_within(PROVIDER, data, self.max_kept_bytes)? else {
            return Ok(vec![Chunk {
                too_big: true,
                ..Chunk::default()
            }]);
        };
        let Some(obj) = event.as_object() else {
            return Err(malformed_shape(PROVIDER, "an event is not a JSON object"));
        };
        let kind = obj.get("type").and_then(Value::as_str).or(name);
        let text = |delta: Option<&Value>| match delta.and_then(Value::as_str) {
            Some(d) if !d.is_empty() => vec![Chunk {
                parts: vec![Part::text(d)],
                ..Chunk::default()
            }],
            _ => Vec::new(),
        };
        match kind {
            Some("response.output_text.delta" | "response.refusal.delta") => {
                Ok(text(obj.get("delta")))
            }
            Some("response.output_item.done") => {
                let item = obj.get("item").unwrap_or(&Value::Null);
                let part = match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => call_part(item)?,
                    Some("reasoning") => Part::Thought {
                        raw: as_input_item(item),
                    },
                    // The message whose text came as deltas: kept (never spoken again) so that a
                    // reasoning item before it can be replayed with it (`model_items`). Its
                    // `status` stays: an output message given back as input requires one.
                    Some("message") => Part::Other {
                        raw: without_nulls(item),
                    },
                    _ => return Ok(Vec::new()),
                };
                Ok(vec![Chunk {
                    parts: vec![part],
                    ..Chunk::default()
                }])
            }
            Some("response.completed" | "response.incomplete") => {
                self.done = true;
                let usage = event
                    .pointer("/response/usage")
                    .filter(|u| u.is_object())
                    .map(usage);
                Ok(vec![Chunk {
                    finished: true,
                    usage,
                    ..Chunk::default()
                }])
            }
            Some("response.failed") => {
                let error = event
                    .pointer("/response/error")
                    .filter(|e| !e.is_null())
                    .map_or_else(|| "no error given".to_owned(), error_message);
                Err(provider_error(
                    PROVIDER,
                    format!("response failed: {error}"),
                ))
            }
            Some("error") => {
                let error = match obj.get("error") {
                    Some(e) if e.is_object() => error_message(e),
                    _ => {
                        let mut e = obj.clone();
                        e.shift_remove("type");
                        e.shift_remove("sequence_number");
                        error_message(&Value::Object(e))
                    }
                };
                Err(provider_error(PROVIDER, format!("stream error: {error}")))
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// An output item as an input item: without its `status` and its `null` members.
fn as_input_item(item: &Value) -> Value {
    let mut raw = without_nulls(item);
    if let Some(m) = raw.as_object_mut() {
        m.shift_remove("status");
    }
    raw
}

/// A finished `function_call` output item → a call part, the item kept as `raw` (its `id` with
/// it), replayed verbatim after the reasoning item that led to it (`model_items`).
fn call_part(item: &Value) -> Result<Part, StreamError> {
    let field = |k: &str| item.get(k).and_then(Value::as_str);
    let (Some(call_id), Some(name)) = (field("call_id"), field("name")) else {
        return Err(malformed_shape(
            PROVIDER,
            "a function_call item lacks its call_id or name",
        ));
    };
    let arguments = field("arguments").unwrap_or_default().to_owned();
    Ok(Part::Call {
        call: Call {
            id: Some(call_id.to_owned()),
            name: name.to_owned(),
            arguments: Arguments::Raw(arguments),
        },
        raw: as_input_item(item),
    })
}

/// `response.usage` → [`Usage`]; `output_tokens` holds the reasoning tokens, which are taken off
/// ([`visible_output`]).
fn usage(u: &Value) -> Usage {
    let reasoning = count(u, &["output_tokens_details", "reasoning_tokens"]);
    Usage {
        input: count(u, &["input_tokens"]),
        cached_input: count(u, &["input_tokens_details", "cached_tokens"]),
        cache_write: count(u, &["input_tokens_details", "cache_write_tokens"]),
        output: visible_output(count(u, &["output_tokens"]), reasoning, true),
        reasoning,
    }
}

impl Decoder for OpenAiDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.event(event.event.as_deref(), &event.data),
            SseItem::Bare(body) => {
                let Some(value) = parse_within(PROVIDER, &body, self.max_kept_bytes)? else {
                    return Err(provider_error(
                        PROVIDER,
                        "an error body too large to read".to_owned(),
                    ));
                };
                match value.get("error") {
                    Some(e) => Err(provider_error(PROVIDER, error_message(e))),
                    None => Err(malformed_shape(
                        PROVIDER,
                        "a bare body that is not an error",
                    )),
                }
            }
        }
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(StreamError::Truncated {
                provider: PROVIDER.into(),
                expected: "response.completed",
            })
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
#[path = "tests/openai.rs"]
mod tests;

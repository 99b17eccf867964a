//! Any OpenAI-compatible chat-completions endpoint: `POST {base}/chat/completions`, streamed.
//!
//! One layer serves OpenAI itself, LiteLLM proxies, OpenRouter, vLLM, Ollama and the like. Chat
//! messages have no slot for reasoning, so none is sent back. Text deltas are spoken as they come;
//! tool calls arrive as fragments spread over many events, so they are assembled by `index` and
//! are complete only when the stream ends: all of them come in the one finished chunk, after
//! every word of the response.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::history::{Call, Chunk, Entry, Part, RequestSpec, Role, ToolChoice, Usage};
use super::http::{HttpRequest, Timeouts};
use super::layer::{DecodeLimits, Decoder, Layer, StreamError};
use super::render::{
    LayerError, arguments_text, body_bytes, build_error, check_base_url, check_header, check_model,
    check_only, check_options, check_word, count, env_var, error_message, instruction,
    malformed_shape, provider_error, user_text, visible_output,
};
use super::sse::SseItem;
use super::within::parse_within;
use crate::logline::{outside, outside_n};
use crate::tools::Arguments;

/// The API root [`Chat::from_env`] uses when `OPENAI_BASE_URL` is not set.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Body keys the SDK builds: the context, the tools and streaming.
const RESERVED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
];

/// A chat-completions layer. Cheap to clone: the configuration is shared.
///
/// ```no_run
/// # fn main() -> Result<(), voqalize::model::LayerError> {
/// use voqalize::model::Chat;
/// // A local vLLM server needs no key.
/// let local = Chat::builder("http://localhost:8000/v1", "qwen3-8b").build()?;
/// // A LiteLLM proxy: the route's prefix names who serves the model.
/// let proxy = Chat::builder("http://litellm:4000", "anthropic/claude-haiku-5-5")
///     .api_key("sk-proxy")
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Chat {
    inner: Arc<Config>,
}

struct Config {
    model: String,
    provider: String,
    base_url: String,
    url: String,
    headers: Vec<(String, String)>,
    reasoning_effort: Option<String>,
    strict: bool,
    timeouts: Timeouts,
    options: Map<String, Value>,
}

impl fmt::Debug for Chat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chat")
            .field("model", &self.inner.model)
            .field("provider", &self.inner.provider)
            .field("url", &self.inner.url)
            .field("reasoning_effort", &self.inner.reasoning_effort)
            .field("strict", &self.inner.strict)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Chat`] layer; [`build`](Self::build) checks everything.
pub struct ChatBuilder {
    base_url: String,
    model: String,
    api_key: Option<String>,
    provider: Option<String>,
    reasoning_effort: Option<String>,
    strict: bool,
    timeouts: Timeouts,
    options: Map<String, Value>,
    env_error: Option<LayerError>,
}

impl fmt::Debug for ChatBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatBuilder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("provider", &self.provider)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("strict", &self.strict)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Chat {
    /// A layer for `model` at the API root `base_url` (`/chat/completions` is appended), with no
    /// API key (local servers need none; see [`ChatBuilder::api_key`]). `model` goes into the
    /// body as given; its route prefix (`anthropic/…`) names the provider TurnSteps report.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::Chat;
    ///
    /// // A local vLLM or Ollama server, or any OpenAI-compatible gateway.
    /// let chat = Chat::builder("http://127.0.0.1:8000/v1", "qwen3-8b")
    ///     .api_key("local-key")
    ///     .build()?;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> ChatBuilder {
        ChatBuilder {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            provider: None,
            reasoning_effort: None,
            strict: false,
            timeouts: Timeouts::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer for `model` configured from the environment as the OpenAI clients read it: the key
    /// from `OPENAI_API_KEY` (optional), the API root from `OPENAI_BASE_URL`, else
    /// `https://api.openai.com/v1`. An unreadable variable is reported by [`ChatBuilder::build`].
    pub fn from_env(model: impl Into<String>) -> ChatBuilder {
        Self::from_lookup(model, env_var)
    }

    fn from_lookup(
        model: impl Into<String>,
        get: impl Fn(&'static str) -> Result<Option<String>, LayerError>,
    ) -> ChatBuilder {
        let mut builder = Chat::builder(DEFAULT_BASE_URL, model);
        let mut read = |var| match get(var) {
            Ok(v) => v,
            Err(e) => {
                builder.env_error.get_or_insert(e);
                None
            }
        };
        let key = read("OPENAI_API_KEY");
        let base_url = read("OPENAI_BASE_URL");
        builder.api_key = key;
        if let Some(u) = base_url {
            builder.base_url = u;
        }
        builder
    }
}

impl ChatBuilder {
    /// The API key, sent as `Authorization: Bearer <key>`.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The provider TurnSteps name, instead of the company read from the model's route prefix
    /// (`gemini/`, `vertex_ai/` → `google`; `azure/` → `microsoft`; `bedrock/` → `amazon`; any
    /// other prefix as written; no prefix → empty).
    #[must_use]
    pub fn provider(mut self, name: impl Into<String>) -> Self {
        self.provider = Some(name.into());
        self
    }

    /// `reasoning_effort` (`none`, `minimal`, `low`, `medium`, `high`...; the server's default
    /// when never called).
    #[must_use]
    pub fn reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.reasoning_effort = Some(effort.into());
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

    /// An extra body key sent with every request (e.g. `temperature`, `max_tokens`, a
    /// server-specific flag); a later call with the same key replaces it. Keys the SDK builds
    /// (`model`, `messages`, `stream`, `stream_options`, `tools`, `tool_choice`) are refused by
    /// [`build`](Self::build), and so is `reasoning_effort` together with
    /// [`reasoning_effort`](Self::reasoning_effort).
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// A base URL that is not `http(s)://host[/path]`; an empty model; a key a header cannot
    /// carry; a malformed reasoning effort; an option the SDK builds
    /// ([`LayerError::ReservedOption`]) or one that clashes with a setting
    /// ([`LayerError::OptionClash`]); an unreadable environment variable.
    pub fn build(self) -> Result<Chat, LayerError> {
        if let Some(e) = self.env_error {
            return Err(e);
        }
        check_model(&self.model)?;
        let base_url = check_base_url(&self.base_url)?;
        let provider = self.provider.unwrap_or_else(|| {
            let route = route_company(&self.model);
            if route.is_empty() {
                host_company(&base_url)
            } else {
                route
            }
            .to_owned()
        });
        // `check_header` wants a static provider name for its error; the route's company is
        // dynamic, so the key's error names the layer kind instead.
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "text/event-stream".to_owned()),
        ];
        if let Some(key) = self.api_key {
            check_header("chat completions", "API key", &key)?;
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        if let Some(effort) = &self.reasoning_effort {
            check_word("reasoning effort", effort)?;
        }
        check_options("chat completions", &self.options, RESERVED)?;
        if self.reasoning_effort.is_some() && self.options.contains_key("reasoning_effort") {
            return Err(LayerError::OptionClash {
                key: "reasoning_effort".into(),
                setting: "reasoning_effort(effort)",
            });
        }
        Ok(Chat {
            inner: Arc::new(Config {
                model: self.model,
                provider,
                url: format!("{base_url}/chat/completions"),
                base_url,
                headers,
                reasoning_effort: self.reasoning_effort,
                strict: self.strict,
                timeouts: self.timeouts,
                options: self.options,
            }),
        })
    }
}

/// The company behind a route such as `anthropic/claude-x`: the prefix before the first `/`,
/// with the cloud routes named after their company; empty for a model without a prefix.
pub(crate) fn route_company(model: &str) -> &str {
    match model.split_once('/') {
        None => "",
        Some(("gemini" | "vertex_ai", _)) => "google",
        Some(("azure" | "azure_ai", _)) => "microsoft",
        Some(("bedrock", _)) => "amazon",
        Some((prefix, _)) => prefix,
    }
}

/// The company behind a provider's own API root (`https://api.x.ai/v1` → `xai`), for a model
/// without a route prefix; empty for any other host (a local server, a gateway).
pub(crate) fn host_company(base_url: &str) -> &'static str {
    let host = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split(['/', ':'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let known = [
        ("api.openai.com", "openai"),
        ("api.x.ai", "xai"),
        ("api.deepseek.com", "deepseek"),
        ("api.groq.com", "groq"),
        ("api.mistral.ai", "mistral"),
        ("openrouter.ai", "openrouter"),
        ("api.together.xyz", "together"),
        ("api.fireworks.ai", "fireworks"),
    ];
    known
        .iter()
        .find(|(h, _)| host == *h)
        .map_or("", |(_, company)| company)
}

/// The name errors give the provider: the route's company, or `chat completions` when the model
/// has no route prefix.
fn error_name(provider: &str) -> &str {
    if provider.is_empty() {
        "chat completions"
    } else {
        provider
    }
}

impl Chat {
    /// The request body for `spec`.
    fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
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

impl Layer for Chat {
    fn provider(&self) -> &str {
        &self.inner.provider
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
        Box::new(ChatDecoder::new(&self.inner.provider, limits))
    }
}

/// One tool call being assembled from fragments.
#[derive(Debug)]
struct Slot {
    index: u64,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl Slot {
    /// A call that could stand on its own: named, with whole JSON arguments (or none yet).
    fn complete(&self) -> bool {
        !self.name.is_empty()
            && (self.arguments.trim().is_empty()
                || serde_json::from_str::<serde::de::IgnoredAny>(&self.arguments).is_ok())
    }
}

/// Decodes a chat-completions stream: text at once, calls assembled until the end.
///
/// What it assembles is bounded by its [`DecodeLimits`]: at most `max_calls + 1` calls (fragments
/// of any call after those are dropped: the core cuts the response at the call past its bound
/// anyway), and at most `max_argument_bytes + 1` bytes of one call's arguments (the rest cannot
/// change the core's verdict on them).
#[derive(Debug)]
pub(crate) struct ChatDecoder {
    provider: String,
    /// The server's `completion_tokens` leaves reasoning out (xAI).
    reasoning_outside: bool,
    limits: DecodeLimits,
    slots: Vec<Slot>,
    usage: Option<Usage>,
    finish_seen: bool,
    done: bool,
}

impl ChatDecoder {
    pub(crate) fn new(provider: &str, limits: DecodeLimits) -> Self {
        ChatDecoder {
            provider: error_name(provider).to_owned(),
            reasoning_outside: provider == "xai",
            limits,
            slots: Vec::new(),
            usage: None,
            finish_seen: false,
            done: false,
        }
    }

    fn event(&mut self, data: &str) -> Result<Vec<Chunk>, StreamError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            return self.finish(true);
        }
        let Some(event) = parse_within(&self.provider, data, self.limits.max_kept_bytes)? else {
            return Ok(vec![Chunk {
                too_big: true,
                ..Chunk::default()
            }]);
        };
        let Some(obj) = event.as_object() else {
            return Err(malformed_shape(
                &self.provider,
                "a chunk is not a JSON object",
            ));
        };
        if let Some(error) = obj.get("error").filter(|e| !e.is_null()) {
            return Err(provider_error(&self.provider, error_message(error)));
        }
        if let Some(u) = obj.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(u, self.reasoning_outside));
        }
        let mut parts = Vec::new();
        let choices = match obj.get("choices") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(c)) => c.as_slice(),
            Some(_) => return Err(malformed_shape(&self.provider, "choices is not a list")),
        };
        for choice in choices {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            for key in ["content", "refusal"] {
                spoken(delta.get(key).unwrap_or(&Value::Null), &mut parts);
            }
            if let Some(Value::Array(fragments)) = delta.get("tool_calls") {
                for (position, fragment) in fragments.iter().enumerate() {
                    self.fragment(position, fragment);
                }
            }
            if choice.get("finish_reason").is_some_and(|r| !r.is_null()) {
                self.finish_seen = true;
            }
        }
        if parts.is_empty() {
            Ok(Vec::new())
        } else {
            Ok(vec![Chunk {
                parts,
                ..Chunk::default()
            }])
        }
    }

    /// Adds one `tool_calls[]` fragment. Fragments group by `index` (its position in the list
    /// when a server leaves it out); a new `id` on an index whose call is already complete starts
    /// a new call, so two calls sent on one index are never glued together. The first non-empty
    /// id and name win; argument text is concatenated, an arguments object re-serialised.
    fn fragment(&mut self, position: usize, fragment: &Value) {
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let id = fragment
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = fragment.get("function").unwrap_or(&Value::Null);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let arguments: std::borrow::Cow<'_, str> = match function.get("arguments") {
            None | Some(Value::Null) => "".into(),
            Some(Value::String(s)) => s.as_str().into(),
            Some(other) => other.to_string().into(),
        };
        let current = self.slots.iter().rposition(|s| s.index == index);
        // Whether the fragment goes on the call its index holds. Two ids tell; without them, a
        // named fragment after whole arguments is the next call (some servers send every whole
        // call on index 0, without ids): gluing it on would concatenate two JSON objects. The
        // same name again with no arguments only repeats the call's header.
        let continues = |s: &Slot| match (s.id.as_deref(), id) {
            (Some(held), Some(new)) => held == new,
            _ => {
                name.is_none()
                    || s.arguments.trim().is_empty()
                    || (name == Some(s.name.as_str()) && arguments.trim().is_empty())
            }
        };
        let slot = match current {
            Some(i) if continues(&self.slots[i]) || !self.slots[i].complete() => &mut self.slots[i],
            // A call past the bound: the core refuses the first one and reads nothing after it.
            _ if self.slots.len() > self.limits.max_calls => return,
            _ => {
                self.slots.push(Slot {
                    index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                let last = self.slots.len() - 1;
                &mut self.slots[last]
            }
        };
        if slot.id.is_none() {
            slot.id = id.map(str::to_owned);
        }
        if slot.name.is_empty()
            && let Some(n) = name
        {
            slot.name = n.to_owned();
        }
        // Past the bound by one byte (or one character) is as far as it needs to grow.
        let room = self
            .limits
            .max_argument_bytes
            .saturating_add(1)
            .saturating_sub(slot.arguments.len());
        let mut end = room.min(arguments.len());
        while !arguments.is_char_boundary(end) {
            end += 1;
        }
        slot.arguments.push_str(&arguments[..end]);
    }

    /// The finished chunk: every call in index order (arrival order within an index), then the
    /// last usage seen. At the stream's end (`done_marker` false), refused when no choice ever
    /// finished: the stream was cut. `[DONE]` is an end of its own: some servers (Novita behind
    /// OpenRouter) never set a `finish_reason` (docs/protocol.md §6.15).
    fn finish(&mut self, done_marker: bool) -> Result<Vec<Chunk>, StreamError> {
        if !self.finish_seen && !done_marker {
            return Err(StreamError::Truncated {
                provider: self.provider.clone(),
                expected: "finish_reason",
            });
        }
        self.done = true;
        let mut slots = std::mem::take(&mut self.slots);
        slots.sort_by_key(|s| s.index);
        let parts = slots
            .into_iter()
            .enumerate()
            .map(|(position, s)| {
                // By position, not index: calls sharing an index must not share an id.
                let id = s.id.unwrap_or_else(|| format!("call_{position}"));
                let arguments = if s.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    s.arguments
                };
                // Everything a `tool_calls` entry carries is in the call: no raw to keep.
                Part::Call {
                    call: Call {
                        id: Some(id),
                        name: s.name,
                        arguments: Arguments::Raw(arguments),
                    },
                    raw: Value::Null,
                }
            })
            .collect();
        Ok(vec![Chunk {
            parts,
            finished: true,
            usage: self.usage,
            ..Chunk::default()
        }])
    }
}

/// What a delta's `content` (or `refusal`) says aloud. A string is spoken. A list of typed parts
/// (Mistral's reasoning models, some gateways) speaks its `text` parts and never its `thinking`
/// (or other reasoning) parts. Reasoning sent beside the content (`reasoning_content`,
/// `reasoning`, `reasoning_details`: DeepSeek, Groq, vLLM, Ollama, OpenRouter) is never read
/// here: it is not spoken, and chat messages have no slot to send it back. A shape the decoder
/// does not know is logged once per kind ([`unknown_content`], docs/protocol.md §6.15).
fn spoken(content: &Value, parts: &mut Vec<Part>) {
    match content {
        Value::Null => {}
        Value::String(t) => {
            if !t.is_empty() {
                parts.push(Part::text(t));
            }
        }
        Value::Array(items) => {
            for item in items {
                let kind = item.get("type").and_then(Value::as_str);
                match (kind, item.get("text")) {
                    (Some("text" | "output_text"), Some(Value::String(t))) => {
                        if !t.is_empty() {
                            parts.push(Part::text(t));
                        }
                    }
                    (Some("thinking" | "reasoning" | "redacted_thinking"), _) => {}
                    _ => unknown_content(item),
                }
            }
        }
        other => unknown_content(other),
    }
}

/// A `content` shape no chat server is known to send: said once per kind (its `type`, or its JSON
/// type), for the first [`UNKNOWN_KINDS`] kinds a process meets, so a new shape is seen and a
/// server sending it in every delta writes one line, not a line per delta.
fn unknown_content(value: &Value) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let kind = match value.get("type").and_then(Value::as_str) {
        Some(t) => outside_n(t, 40).to_string(),
        None => match value {
            Value::Object(_) => "an object without a type".to_owned(),
            Value::Array(_) => "a list".to_owned(),
            Value::Bool(_) => "a boolean".to_owned(),
            Value::Number(_) => "a number".to_owned(),
            Value::String(_) | Value::Null => "a string".to_owned(),
        },
    };
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.len() >= UNKNOWN_KINDS || seen.contains(&kind) {
        return;
    }
    seen.push(kind.clone());
    drop(seen);
    let text = value.to_string();
    tracing::warn!(
        "chat completions: a delta's content has a shape this SDK does not read ({kind}), so it \
         is not spoken: {} (later ones of this kind are not logged)",
        outside(&text)
    );
}

/// How many kinds of unknown `content` a process logs (one line each) before it logs no more.
const UNKNOWN_KINDS: usize = 8;

/// A chat `usage` object → [`Usage`]. `output` is the reply's tokens without reasoning: OpenAI's
/// `completion_tokens` (and DeepSeek's, and most servers') counts reasoning inside it, so reasoning
/// is taken off; xAI's does not (`reasoning_outside`), so it is taken as sent. A count is never
/// hidden by the subtraction ([`visible_output`]).
fn usage(u: &Value, reasoning_outside: bool) -> Usage {
    let reasoning = count(u, &["completion_tokens_details", "reasoning_tokens"]);
    Usage {
        input: count(u, &["prompt_tokens"]),
        cached_input: count(u, &["prompt_tokens_details", "cached_tokens"]),
        cache_write: count(u, &["cache_creation_input_tokens"])
            .or_else(|| count(u, &["prompt_tokens_details", "cache_creation_tokens"])),
        output: visible_output(
            count(u, &["completion_tokens"]),
            reasoning,
            !reasoning_outside,
        ),
        reasoning,
    }
}

impl Decoder for ChatDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.event(&event.data),
            SseItem::Bare(body) => {
                let Some(value) = parse_within(&self.provider, &body, self.limits.max_kept_bytes)?
                else {
                    return Err(provider_error(
                        &self.provider,
                        "an error body too large to read".to_owned(),
                    ));
                };
                match value.get("error") {
                    Some(e) => Err(provider_error(&self.provider, error_message(e))),
                    None => Err(malformed_shape(
                        &self.provider,
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
            self.finish(false)
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
#[path = "tests/chat.rs"]
mod tests;

//! Gemini: `POST {base}/{version}/models/{model}:streamGenerateContent?alt=sse`.
//!
//! The request replays model turns part by part as Gemini sent them (thought signatures kept
//! byte for byte on the part that carried them), answers calls in a `user` content of
//! `functionResponse` parts, and declares every tool in one `functionDeclarations` list. Each
//! `data:` event of the response becomes one [`Chunk`]; a function call arrives whole in one part,
//! so it is complete as soon as its chunk is decoded.

use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

use super::history::{Call, Chunk, Entry, Kept, Part, RequestSpec, Role, ToolChoice, Usage};
use super::http::{HttpRequest, Timeouts};
use super::layer::{DecodeLimits, Decoder, Layer, StreamError};
use super::partial_args::Assembly;
use super::render::{
    LayerError, body_bytes, build_error, check_base_url, check_header, check_only, check_options,
    check_word, count, env_var, error_message, instruction, malformed, malformed_shape,
    provider_error, user_text,
};
use super::sse::SseItem;
use super::within::value_within;
use crate::tools::Arguments;

const PROVIDER: &str = "google";

/// The model when neither [`GeminiBuilder::model`] nor `VOQAL_GEMINI_MODEL` names one.
pub(crate) const DEFAULT_MODEL: &str = "gemini-3.5-flash";
/// The API host when neither [`GeminiBuilder::base_url`] nor `GOOGLE_GEMINI_BASE_URL` names one.
pub(crate) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// The API version when neither [`GeminiBuilder::api_version`] nor `GOOGLE_GENAI_API_VERSION`
/// names one.
pub(crate) const DEFAULT_API_VERSION: &str = "v1";
/// The thinking level sent unless [`GeminiBuilder::thinking_level`] says otherwise: the lowest
/// latency the 3.5 models accept (some models refuse it: set `LOW` for those).
pub(crate) const DEFAULT_THINKING_LEVEL: &str = "MINIMAL";

/// Top-level body keys the SDK builds (both spellings the API accepts).
const RESERVED: &[&str] = &[
    "contents",
    "systemInstruction",
    "system_instruction",
    "tools",
    "toolConfig",
    "tool_config",
];

/// Finish reasons that mean the model's output did not parse.
const MALFORMED_REASONS: &[&str] = &["MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE"];

/// A Gemini model layer. Cheap to clone: the configuration is shared.
///
/// ```no_run
/// # fn main() -> Result<(), voqalize::model::LayerError> {
/// use voqalize::model::Gemini;
/// let gemini = Gemini::from_env().thinking_level(Some("LOW")).build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Gemini {
    inner: Arc<Config>,
}

struct Config {
    api_key: String,
    model: String,
    base_url: String,
    url: String,
    thinking_level: Option<String>,
    timeouts: Timeouts,
    /// Top-level body keys other than `generationConfig`.
    options: Map<String, Value>,
    /// The user's `generationConfig` keys, merged with the thinking level.
    generation_config: Map<String, Value>,
}

impl fmt::Debug for Gemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gemini")
            .field("model", &self.inner.model)
            .field("url", &self.inner.url)
            .field("thinking_level", &self.inner.thinking_level)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Gemini`] layer; [`build`](Self::build) checks everything.
pub struct GeminiBuilder {
    api_key: Option<String>,
    model: String,
    base_url: String,
    api_version: String,
    thinking_level: Option<String>,
    timeouts: Timeouts,
    options: Map<String, Value>,
    /// An environment variable that could not be read, reported by `build`.
    env_error: Option<LayerError>,
}

impl fmt::Debug for GeminiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiBuilder")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_version", &self.api_version)
            .field("thinking_level", &self.thinking_level)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Gemini {
    /// A layer with this API key and the defaults: model `gemini-3.5-flash`, base URL
    /// `https://generativelanguage.googleapis.com`, API version `v1`, thinking level `MINIMAL`.
    /// The environment is not read.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::Gemini;
    ///
    /// let gemini = Gemini::builder("AIza-your-key")
    ///     .model("gemini-3.5-flash")
    ///     .thinking_level(Some("LOW"))
    ///     .build()?;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn builder(api_key: impl Into<String>) -> GeminiBuilder {
        GeminiBuilder {
            api_key: Some(api_key.into()),
            model: DEFAULT_MODEL.to_owned(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_version: DEFAULT_API_VERSION.to_owned(),
            thinking_level: Some(DEFAULT_THINKING_LEVEL.to_owned()),
            timeouts: Timeouts::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer configured from the environment: the key from `GOOGLE_API_KEY`, else
    /// `GEMINI_API_KEY`; the model from `VOQAL_GEMINI_MODEL`; the base URL from
    /// `GOOGLE_GEMINI_BASE_URL`; the API version from `GOOGLE_GENAI_API_VERSION` (each with the
    /// defaults of [`Gemini::builder`]). Unset or empty variables are skipped; a missing key or an
    /// unreadable variable is reported by [`GeminiBuilder::build`].
    pub fn from_env() -> GeminiBuilder {
        Self::from_lookup(env_var)
    }

    fn from_lookup(
        get: impl Fn(&'static str) -> Result<Option<String>, LayerError>,
    ) -> GeminiBuilder {
        let mut builder = Gemini::builder(String::new());
        builder.api_key = None;
        let mut read = |var| match get(var) {
            Ok(v) => v,
            Err(e) => {
                builder.env_error.get_or_insert(e);
                None
            }
        };
        let key = read("GOOGLE_API_KEY").or_else(|| read("GEMINI_API_KEY"));
        let model = read("VOQAL_GEMINI_MODEL");
        let base_url = read("GOOGLE_GEMINI_BASE_URL");
        let version = read("GOOGLE_GENAI_API_VERSION");
        builder.api_key = key;
        if let Some(m) = model {
            builder.model = m;
        }
        if let Some(u) = base_url {
            builder.base_url = u;
        }
        if let Some(v) = version {
            builder.api_version = v;
        }
        builder
    }
}

impl GeminiBuilder {
    /// The model, e.g. `gemini-3.5-flash` (a leading `models/` is accepted and removed).
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The API host, e.g. `https://generativelanguage.googleapis.com` or a proxy's URL.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API version path segment: `v1` (default) or `v1beta`.
    #[must_use]
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = version.into();
        self
    }

    /// `generationConfig.thinkingConfig.thinkingLevel` (`MINIMAL` by default; `LOW`, `MEDIUM`,
    /// `HIGH`); `None` sends no thinking config, leaving the model's default or a `thinkingConfig`
    /// passed as an option.
    #[must_use]
    pub fn thinking_level(mut self, level: Option<&str>) -> Self {
        self.thinking_level = level.map(str::to_owned);
        self
    }

    /// Connect, first-byte and between-event timeouts.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// An extra top-level body key, sent with every request (e.g. `safetySettings`,
    /// `cachedContent`). A `generationConfig` object is merged key by key into the SDK's (later
    /// calls win per key). `contents`, `systemInstruction`, `tools` and `toolConfig` are built
    /// by the SDK and refused by [`build`](Self::build).
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        let key = key.into();
        match (
            key.as_str(),
            self.options.get_mut("generationConfig"),
            value,
        ) {
            ("generationConfig", Some(Value::Object(old)), Value::Object(new)) => old.extend(new),
            (_, _, value) => {
                self.options.insert(key, value);
            }
        }
        self
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// No API key ([`LayerError::MissingKey`]) or one a header cannot carry; a base URL that is
    /// not `http(s)://host[/path]`; an empty model or one with `/`, `?`, `#` or whitespace; a bad
    /// API version or thinking level; an option the SDK builds itself
    /// ([`LayerError::ReservedOption`]); a `generationConfig` option that is not an object, or
    /// that carries `thinkingConfig` while a thinking level is set
    /// ([`LayerError::OptionClash`]); an unreadable environment variable.
    pub fn build(self) -> Result<Gemini, LayerError> {
        if let Some(e) = self.env_error {
            return Err(e);
        }
        let api_key = self.api_key.ok_or(LayerError::MissingKey {
            provider: PROVIDER,
            vars: "GOOGLE_API_KEY or GEMINI_API_KEY",
        })?;
        check_header(PROVIDER, "API key", &api_key)?;
        let model = self
            .model
            .strip_prefix("models/")
            .unwrap_or(&self.model)
            .to_owned();
        if model.is_empty()
            || model
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '#' | ':'))
        {
            return Err(LayerError::BadModel {
                model: self.model,
                why: "it must be a non-empty name without '/', '?', '#', ':' or whitespace",
            });
        }
        let base_url = check_base_url(&self.base_url)?;
        check_word("API version", &self.api_version)?;
        if let Some(level) = &self.thinking_level {
            check_word("thinking level", level)?;
        }
        let mut options = self.options;
        check_options(PROVIDER, &options, RESERVED)?;
        if options.contains_key("generation_config") {
            return Err(LayerError::BadOption {
                key: "generation_config".into(),
                expected: "spelled generationConfig (its keys are merged with the SDK's)",
            });
        }
        let generation_config = match options.shift_remove("generationConfig") {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(LayerError::BadOption {
                    key: "generationConfig".into(),
                    expected: "a JSON object",
                });
            }
        };
        if self.thinking_level.is_some()
            && let Some(key) = ["thinkingConfig", "thinking_config"]
                .into_iter()
                .find(|k| generation_config.contains_key(*k))
        {
            return Err(LayerError::OptionClash {
                key: format!("generationConfig.{key}"),
                setting: "thinking_level (pass thinking_level(None) to send your own)",
            });
        }
        let url = format!(
            "{base_url}/{}/models/{model}:streamGenerateContent?alt=sse",
            self.api_version
        );
        Ok(Gemini {
            inner: Arc::new(Config {
                api_key,
                model,
                base_url,
                url,
                thinking_level: self.thinking_level,
                timeouts: self.timeouts,
                options,
                generation_config,
            }),
        })
    }
}

impl Gemini {
    /// The request body for `spec`.
    fn body(&self, spec: &RequestSpec<'_>) -> Result<Value, StreamError> {
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
fn is_empty_part(part: &Value) -> bool {
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

impl Layer for Gemini {
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
            headers: vec![
                ("x-goog-api-key".into(), self.inner.api_key.clone()),
                ("content-type".into(), "application/json".into()),
                ("accept".into(), "text/event-stream".into()),
            ],
            body: body_bytes(&body),
        })
    }

    fn enums_as_strings(&self) -> bool {
        true
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(GeminiDecoder::new(limits))
    }
}

/// Decodes a `streamGenerateContent?alt=sse` stream: one chunk per `data:` event. One event can
/// hold any number of parts; it decodes none after the call past `max_calls`, nor after the part
/// that took the response past `max_parts` or `max_kept_bytes` (the core cuts the response there).
/// Parts are moved out of the event, never copied.
#[derive(Debug)]
pub(crate) struct GeminiDecoder {
    limits: DecodeLimits,
    calls: usize,
    /// A call streamed over several parts (`willContinue`), until its last part.
    streaming: Option<Assembly>,
    /// What the response decoded so far would keep in the history.
    kept: Kept,
    done: bool,
}

impl GeminiDecoder {
    pub(crate) fn new(limits: DecodeLimits) -> Self {
        GeminiDecoder {
            limits,
            calls: 0,
            streaming: None,
            kept: Kept::default(),
            done: false,
        }
    }

    /// Counts a decoded part against the bounds and hands it on.
    fn keep(&mut self, part: Part, parts: &mut Vec<Part>) {
        self.calls += usize::from(matches!(part, Part::Call { .. }));
        self.kept = self.kept.with(&part);
        parts.push(part);
    }

    /// One response part → what it completes: nothing while a streamed call is still open, the
    /// call before it too when a new call closes one.
    fn decode(&mut self, part: Value, parts: &mut Vec<Part>) -> Result<(), StreamError> {
        let Value::Object(mut obj) = part else {
            return Err(malformed_shape(PROVIDER, "a part is not a JSON object"));
        };
        match obj.shift_remove("functionCall") {
            None | Some(Value::Null) => {}
            Some(Value::Object(fc)) => return self.call(fc, obj, parts),
            Some(_) => {
                return Err(malformed_shape(PROVIDER, "a functionCall is not an object"));
            }
        }
        // A part that is not a call closes a streamed one.
        if let Some(open) = self.streaming.take() {
            self.keep(open.into_part(), parts);
        }
        if let Some(part) = decode_other(obj) {
            self.keep(part, parts);
        }
        Ok(())
    }

    /// A `functionCall` part (`fc`, beside the rest of its part): a whole call, or a piece of one
    /// streamed over several parts (docs/protocol.md §6.15, [`Assembly`]).
    fn call(
        &mut self,
        mut fc: Map<String, Value>,
        rest: Map<String, Value>,
        parts: &mut Vec<Part>,
    ) -> Result<(), StreamError> {
        let name = match fc.shift_remove("name") {
            Some(Value::String(n)) if !n.is_empty() => Some(n),
            _ => None,
        };
        let id = match fc.shift_remove("id") {
            Some(Value::String(id)) => Some(id),
            _ => None,
        };
        let continues = fc.shift_remove("willContinue").and_then(|v| v.as_bool()) == Some(true);
        let fragments = fc.shift_remove("partialArgs");
        let args = fc.shift_remove("args");
        // A named part starts a call, closing any open one (unless it repeats that call's id).
        let same_call = match (&self.streaming, &id) {
            (Some(open), Some(id)) => open.id.as_deref() == Some(id.as_str()),
            (Some(_), None) => name.is_none(),
            (None, _) => false,
        };
        if !same_call && let Some(open) = self.streaming.take() {
            self.keep(open.into_part(), parts);
        }
        let mut call = match self.streaming.take() {
            Some(open) => open,
            None => {
                let Some(name) = name else {
                    return Err(malformed_shape(PROVIDER, "a functionCall has no name"));
                };
                let mut call = Assembly::new(name, self.limits.max_argument_bytes);
                // The rest of the first part (its `thoughtSignature`, other keys of the call) is
                // replayed as sent; the streaming flags never are.
                call.rest = rest;
                if !fc.is_empty() {
                    call.rest.insert("functionCall".into(), Value::Object(fc));
                }
                call
            }
        };
        if call.id.is_none() {
            call.id = id;
        }
        match args {
            None | Some(Value::Null) => {}
            Some(Value::Object(a)) => call.merge_args(a),
            Some(_) => call.spoiled = Some("its args are not an object"),
        }
        if let Some(Value::Array(fragments)) = fragments {
            for f in &fragments {
                call.apply(f);
            }
        }
        if continues {
            self.streaming = Some(call);
        } else {
            self.keep(call.into_part(), parts);
        }
        Ok(())
    }

    /// Whether a part decoded now would be past a bound the core already cut the response at.
    fn past_bounds(&self) -> bool {
        self.calls > self.limits.max_calls || self.limits.passed(self.kept)
    }

    fn chunk(&mut self, data: &str) -> Result<Vec<Chunk>, StreamError> {
        // Gemini sends no `[DONE]`; a proxy in front of it may.
        if data.trim().is_empty() || data.trim() == "[DONE]" {
            return Ok(Vec::new());
        }
        let mut event = Reading::new(self);
        let mut de = serde_json::Deserializer::from_str(data);
        let read = EventSeed(&mut event)
            .deserialize(&mut de)
            .and_then(|()| de.end());
        let Reading {
            mut chunk,
            error,
            failed,
            object,
            candidates,
            blocked,
            ..
        } = event;
        if let Some(failed) = failed {
            return Err(failed);
        }
        read.map_err(|e| malformed(PROVIDER, e))?;
        if !object {
            return Err(malformed_shape(
                PROVIDER,
                "a stream chunk is not a JSON object",
            ));
        }
        if let Some(error) = error {
            return Err(provider_error(PROVIDER, error_message(&error)));
        }
        // A blocked prompt: no candidates, a block reason. A silent turn, not an error.
        if !candidates && blocked {
            chunk.finished = true;
        }
        if chunk.finished {
            self.done = true;
            // A streamed call the stream ended without closing is as complete as it will be.
            if let Some(open) = self.streaming.take() {
                self.keep(open.into_part(), &mut chunk.parts);
            }
        }
        Ok(vec![chunk])
    }
}

/// One event being read, straight from its text: parts are decoded as they are read, within the
/// decoder's bounds, so that a part past them is read through without ever being built (a
/// megabyte of tiny parts would take some sixty megabytes, and tens of milliseconds, as JSON).
/// Every other field is read within the same budget; keys the decoder does not read are skipped.
struct Reading<'d> {
    decoder: &'d mut GeminiDecoder,
    chunk: Chunk,
    /// The event's `error`, when it had one.
    error: Option<Value>,
    /// A part that is not what Gemini documents.
    failed: Option<StreamError>,
    /// The event is a JSON object (anything else is malformed).
    object: bool,
    /// Its `candidates` list holds one at least.
    candidates: bool,
    /// It carries a `promptFeedback.blockReason`.
    blocked: bool,
}

impl<'d> Reading<'d> {
    fn new(decoder: &'d mut GeminiDecoder) -> Self {
        Reading {
            decoder,
            chunk: Chunk::default(),
            error: None,
            failed: None,
            object: false,
            candidates: false,
            blocked: false,
        }
    }

    /// A field the decoder reads whole (`error`, `usageMetadata`, a finish reason...), within
    /// what a response may keep; `None` when it would take more (it is then read through).
    fn field<'de, A: MapAccess<'de>>(&self, map: &mut A) -> Result<Option<Value>, A::Error> {
        let mut left = self.decoder.limits.max_kept_bytes;
        map.next_value_seed(WithinSeed(&mut left))
    }

    /// The next part of a candidate's content: decoded and counted, or read through once the
    /// response is past a bound.
    fn part<'de, A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        if self.decoder.past_bounds() || self.chunk.too_big {
            return Ok(seq.next_element::<IgnoredAny>()?.is_some());
        }
        let limits = self.decoder.limits;
        // A part that alone would take the response past what it may keep is not built.
        let mut left = limits
            .max_kept_bytes
            .saturating_sub(self.decoder.kept.bytes)
            .saturating_add(1);
        let Some(value) = seq.next_element_seed(WithinSeed(&mut left))? else {
            return Ok(false);
        };
        let Some(value) = value else {
            self.chunk.too_big = true;
            return Ok(true);
        };
        match self.decoder.decode(value, &mut self.chunk.parts) {
            Ok(()) => Ok(true),
            Err(e) => {
                self.failed = Some(e);
                Err(serde::de::Error::custom("a part Gemini does not document"))
            }
        }
    }
}

/// A JSON value within a budget, as a seed for a field or an item (see [`value_within`]).
struct WithinSeed<'b>(&'b mut usize);

impl<'de> DeserializeSeed<'de> for WithinSeed<'_> {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        value_within(d, self.0)
    }
}

/// The visits of a shape the reader does not expect: read through and left, as a field Gemini
/// does not send would be (`candidates` that is not a list, a candidate that is not an object).
macro_rules! read_other_shapes_through {
    () => {
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
    };
    (lists) => {
        read_other_shapes_through!();
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(())
        }
    };
    (objects) => {
        read_other_shapes_through!();
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(())
        }
    };
}

/// Declares a seed over a [`Reading`] that is its own visitor, deserialized with
/// `deserialize_any`.
macro_rules! reading_seed {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        struct $name<'r, 'd>(&'r mut Reading<'d>);

        impl<'de> DeserializeSeed<'de> for $name<'_, '_> {
            type Value = ();

            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_any(self)
            }
        }

        impl $name<'_, '_> {
            fn expected(f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($what)
            }
        }
    };
}

reading_seed!(
    /// The event: `candidates`, `error`, `usageMetadata`, `promptFeedback`; the rest skipped.
    EventSeed,
    "a Gemini stream chunk"
);
reading_seed!(
    /// `candidates`: each one read.
    CandidatesSeed,
    "a list of candidates"
);
reading_seed!(
    /// One candidate: its content's parts, then its `finishReason`.
    CandidateSeed,
    "a candidate"
);
reading_seed!(
    /// A candidate's `content`: its `parts`.
    ContentSeed,
    "a content"
);
reading_seed!(
    /// A content's `parts`: each decoded, within the bounds.
    PartsSeed,
    "a list of parts"
);

impl<'de> Visitor<'de> for EventSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(lists);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let r = self.0;
        r.object = true;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "candidates" => map.next_value_seed(CandidatesSeed(&mut *r))?,
                "error" => {
                    let error = r.field(&mut map)?;
                    r.error = Some(error.unwrap_or_else(|| "an error too large to read".into()));
                }
                "usageMetadata" => {
                    let meta = r.field(&mut map)?.unwrap_or_default();
                    r.chunk.usage = Some(usage(&meta));
                }
                "promptFeedback" => {
                    let feedback = r.field(&mut map)?.unwrap_or_default();
                    r.blocked = feedback.get("blockReason").is_some_and(|b| !b.is_null());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for CandidatesSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(objects);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(CandidateSeed(&mut *self.0))?
            .is_some()
        {
            self.0.candidates = true;
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for CandidateSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(lists);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let r = self.0;
        let mut reason = Value::Null;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "content" => map.next_value_seed(ContentSeed(&mut *r))?,
                "finishReason" => reason = r.field(&mut map)?.unwrap_or_default(),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // The finish applies after the candidate's parts, wherever it stood in the object.
        if !reason.is_null() {
            r.chunk.finished = true;
            if reason
                .as_str()
                .is_some_and(|reason| MALFORMED_REASONS.contains(&reason))
            {
                r.chunk.malformed = true;
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for ContentSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(lists);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "parts" {
                map.next_value_seed(PartsSeed(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for PartsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Self::expected(f)
    }

    read_other_shapes_through!(objects);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while self.0.part(&mut seq)? {}
        Ok(())
    }
}

/// A response part that is not a call, moved into a thought, text, or something kept for replay.
/// `None` for a part with nothing in it (an empty text without a signature).
fn decode_other(mut obj: Map<String, Value>) -> Option<Part> {
    if obj.get("thought").and_then(Value::as_bool) == Some(true) {
        return Some(Part::Thought {
            raw: Value::Object(obj),
        });
    }
    // The text is moved out. Text alone needs no raw; text with a signature keeps the rest of
    // the part, its `text` key left empty in its place (rendering writes the text back there).
    let signed = obj.len() > 1;
    let text = match obj.get_mut("text") {
        Some(Value::String(text)) if !text.is_empty() => std::mem::take(text),
        _ => {
            let part = Value::Object(obj);
            return (!is_empty_part(&part)).then_some(Part::Other { raw: part });
        }
    };
    let raw = if signed {
        Value::Object(obj)
    } else {
        Value::Null
    };
    Some(Part::Text {
        text,
        raw,
        trimmed: false,
    })
}

/// `usageMetadata` → [`Usage`]: cached and reasoning read as 0 when the prompt count is given
/// without them; output is `candidatesTokenCount` (thoughts excluded), absent until the end.
fn usage(meta: &Value) -> Usage {
    let input = count(meta, &["promptTokenCount"]);
    let zero_if_prompt = |v: Option<u64>| v.or(input.map(|_| 0));
    Usage {
        input,
        cached_input: zero_if_prompt(count(meta, &["cachedContentTokenCount"])),
        cache_write: None,
        output: count(meta, &["candidatesTokenCount"]),
        reasoning: zero_if_prompt(count(meta, &["thoughtsTokenCount"])),
    }
}

impl Decoder for GeminiDecoder {
    fn item(&mut self, item: SseItem) -> Result<Vec<Chunk>, StreamError> {
        match item {
            SseItem::Event(event) => self.chunk(&event.data),
            SseItem::Bare(body) => self.chunk(&body),
        }
    }

    fn end(&mut self) -> Result<Vec<Chunk>, StreamError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(StreamError::Truncated {
                provider: PROVIDER.into(),
                expected: "finishReason",
            })
        }
    }

    fn done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
#[path = "tests/gemini.rs"]
mod tests;

//! Gemini: `POST {base}/{version}/models/{model}:streamGenerateContent?alt=sse`.
//!
//! The request replays model turns part by part as Gemini sent them (thought signatures kept
//! byte for byte on the part that carried them), answers calls in a `user` content of
//! `functionResponse` parts, and declares every tool in one `functionDeclarations` list. Each
//! `data:` event of the response becomes one [`Chunk`](crate::model::history::Chunk); a function call arrives whole in one part,
//! so it is complete as soon as its chunk is decoded.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::model::endpoint::{Endpoint, TokenFn, reach_setters};
use crate::model::history::RequestSpec;
use crate::model::http::{HttpRequest, Timeouts};
use crate::model::http_options::HttpOptions;
use crate::model::layer::{DecodeLimits, Decoder, Layer, StreamError};
use crate::model::render::{
    LayerError, check_base_url, check_header, check_options, check_word, env_var,
};

mod decode;
pub(crate) mod request;
mod scalar;
mod usage;

pub(crate) use decode::GeminiDecoder;

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
    model: String,
    endpoint: Endpoint,
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
            .field("url", &self.inner.endpoint.url)
            .field("thinking_level", &self.inner.thinking_level)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Gemini`] layer; [`build`](Self::build) checks everything.
pub struct GeminiBuilder {
    api_key: Option<String>,
    vertex: Option<(String, String)>,
    bearer: Option<TokenFn>,
    http: HttpOptions,
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
            .field("vertex", &self.vertex)
            .field("bearer", &self.bearer.as_ref().map(|_| "<a token source>"))
            .field("http", &self.http)
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
            vertex: None,
            bearer: None,
            http: HttpOptions::default(),
            model: DEFAULT_MODEL.to_owned(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_version: DEFAULT_API_VERSION.to_owned(),
            thinking_level: Some(DEFAULT_THINKING_LEVEL.to_owned()),
            timeouts: Timeouts::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer for Gemini on Vertex AI: `project`'s models in `location` (`us-central1`,
    /// `europe-west4`, or `global`), at the regional endpoint
    /// `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google/models/{model}`
    /// (`aiplatform.googleapis.com` for `global`). Vertex takes an OAuth access token, not an API
    /// key: give [`GeminiBuilder::bearer`] a source, called before each request, so rotating
    /// credentials are read fresh. The request and the stream are Gemini's.
    ///
    /// # Examples
    /// ```
    /// use std::sync::{Arc, RwLock};
    /// use voqalize::model::Gemini;
    ///
    /// // Your own task refreshes the token (gcloud, the metadata server, a workload identity).
    /// let token = Arc::new(RwLock::new(String::from("ya29.a0-first-token")));
    /// let current = token.clone();
    /// let gemini = Gemini::vertex("my-project", "europe-west4")
    ///     .model("gemini-3.5-flash")
    ///     .bearer(move || current.read().map(|t| t.clone()).unwrap_or_default())
    ///     .build()?;
    /// # let _ = gemini;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn vertex(project: impl Into<String>, location: impl Into<String>) -> GeminiBuilder {
        let location = location.into();
        let host = if location == "global" {
            "https://aiplatform.googleapis.com".to_owned()
        } else {
            format!("https://{location}-aiplatform.googleapis.com")
        };
        let mut builder = Gemini::builder(String::new());
        builder.api_key = None;
        builder.base_url = host;
        builder.vertex = Some((project.into(), location));
        builder
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
        let env = GoogleEnv::read(get);
        let mut builder = Gemini::builder(String::new());
        builder.api_key = env.key;
        builder.env_error = env.error;
        if let Some(m) = env.model {
            builder.model = m;
        }
        if let Some(u) = env.base_url {
            builder.base_url = u;
        }
        if let Some(v) = env.version {
            builder.api_version = v;
        }
        builder
    }
}

/// What Google's clients read from the environment, for both Gemini APIs: the key from
/// `GOOGLE_API_KEY`, else `GEMINI_API_KEY`; `VOQAL_GEMINI_MODEL`; `GOOGLE_GEMINI_BASE_URL`;
/// `GOOGLE_GENAI_API_VERSION`; and the first variable that could not be read.
pub(crate) struct GoogleEnv {
    pub key: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub version: Option<String>,
    pub error: Option<LayerError>,
}

impl GoogleEnv {
    pub(crate) fn read(get: impl Fn(&'static str) -> Result<Option<String>, LayerError>) -> Self {
        let mut error = None;
        let mut read = |var| match get(var) {
            Ok(v) => v,
            Err(e) => {
                error.get_or_insert(e);
                None
            }
        };
        let key = read("GOOGLE_API_KEY").or_else(|| read("GEMINI_API_KEY"));
        let model = read("VOQAL_GEMINI_MODEL");
        let base_url = read("GOOGLE_GEMINI_BASE_URL");
        let version = read("GOOGLE_GENAI_API_VERSION");
        GoogleEnv {
            key,
            model,
            base_url,
            version,
            error,
        }
    }
}

impl GeminiBuilder {
    reach_setters!(bearer);

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
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "text/event-stream".to_owned()),
        ];
        if self.bearer.is_none() {
            let api_key = self.api_key.ok_or(LayerError::MissingKey {
                provider: PROVIDER,
                vars: if self.vertex.is_some() {
                    "a bearer token source (Vertex AI takes an access token)"
                } else {
                    "GOOGLE_API_KEY or GEMINI_API_KEY"
                },
            })?;
            check_header(PROVIDER, "API key", &api_key)?;
            headers.insert(0, ("x-goog-api-key".to_owned(), api_key));
        }
        let model = model_name(self.model)?;
        let base_url = check_base_url(&self.base_url)?;
        check_word("API version", &self.api_version)?;
        if let Some(level) = &self.thinking_level {
            check_word("thinking level", level)?;
        }
        let mut options = self.options;
        let generation_config = generation_config(&mut options, self.thinking_level.is_some())?;
        let url = match &self.vertex {
            None => format!(
                "{base_url}/{}/models/{model}:streamGenerateContent?alt=sse",
                self.api_version
            ),
            Some((project, location)) => {
                check_word("Vertex AI project", project)?;
                check_word("Vertex AI location", location)?;
                format!(
                    "{base_url}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse"
                )
            }
        };
        let endpoint = Endpoint::new(base_url, url, headers, self.bearer, self.http)?;
        Ok(Gemini {
            inner: Arc::new(Config {
                model,
                endpoint,
                thinking_level: self.thinking_level,
                timeouts: self.timeouts,
                options,
                generation_config,
            }),
        })
    }
}

/// The model's name (`models/` taken off), checked to fit in the URL's path.
fn model_name(written: String) -> Result<String, LayerError> {
    let model = written
        .strip_prefix("models/")
        .unwrap_or(&written)
        .to_owned();
    if model.is_empty()
        || model
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '#' | ':'))
    {
        return Err(LayerError::BadModel {
            model: written,
            why: "it must be a non-empty name without '/', '?', '#', ':' or whitespace",
        });
    }
    Ok(model)
}

/// The options checked, and the `generationConfig` option taken out of them (its keys are
/// merged with the SDK's); with a thinking level set (`thinking`) it may not carry its own.
fn generation_config(
    options: &mut Map<String, Value>,
    thinking: bool,
) -> Result<Map<String, Value>, LayerError> {
    check_options(PROVIDER, options, RESERVED)?;
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
    if thinking
        && let Some(key) = ["thinkingConfig", "thinking_config"]
            .into_iter()
            .find(|k| generation_config.contains_key(*k))
    {
        return Err(LayerError::OptionClash {
            key: format!("generationConfig.{key}"),
            setting: "thinking_level (pass thinking_level(None) to send your own)",
        });
    }
    Ok(generation_config)
}

impl Layer for Gemini {
    fn format(&self) -> &str {
        "google.generateContent"
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.inner.model
    }

    fn base_url(&self) -> &str {
        &self.inner.endpoint.base_url
    }

    fn http(&self) -> Option<&HttpOptions> {
        self.inner.endpoint.http.as_ref()
    }

    fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError> {
        let body = self.body(spec)?;
        #[cfg(debug_assertions)]
        if spec.rendered.is_some() {
            // What was kept must be what the history renders now: a change the conversation
            // did not report would send a stale turn.
            let fresh = self.body(&RequestSpec {
                rendered: None,
                ..*spec
            })?;
            debug_assert!(fresh == body, "a kept entry went stale");
        }
        self.inner.endpoint.request_of(PROVIDER, body)
    }

    fn enums_as_strings(&self) -> bool {
        true
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(GeminiDecoder::new(limits))
    }
}

#[cfg(test)]
#[path = "../tests/gemini.rs"]
mod tests;

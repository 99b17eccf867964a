//! Gemini's Interactions API: `POST {base}/v1beta/interactions`, streamed, stateless
//! (`store: false`, the whole context on every request).
//!
//! Every step of a response arrives bracketed: `step.start`, its deltas, `step.stop`. A
//! `model_output` step's words are spoken as each delta comes (nothing is buffered to the step's
//! stop, so a barge-in keeps what was heard), a `function_call` step runs at its stop, after the
//! words before it, and a `thought` step is replayed with its signature. Nothing enters the
//! history at a step's start: a step cut between its start and its first delta leaves no trace.
//! It runs on the voice core like every layer: `#[needs_result_now]`, TurnSteps, the `turn:` line.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::model::endpoint::{Endpoint, TokenFn, reach_setters};
use crate::model::history::RequestSpec;
use crate::model::http::{HttpRequest, Timeouts};
use crate::model::http_options::HttpOptions;
use crate::model::layer::{DecodeLimits, Decoder, Layer, StreamError};
use crate::model::render::{
    LayerError, check_base_url, check_header, check_model, check_options, check_word, env_var,
};

mod decode;
mod request;

pub(crate) use decode::InteractionsDecoder;

/// Who TurnSteps say serves the model.
pub(crate) const PROVIDER: &str = "google";
/// The API host unless [`InteractionsBuilder::base_url`] names one.
pub(crate) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// The API version path segment (the Interactions API is served under `v1beta`).
pub(crate) const DEFAULT_API_VERSION: &str = "v1beta";
/// The thinking level sent unless [`InteractionsBuilder::thinking_level`] says otherwise: on a
/// voice turn, reasoning is silence the caller sits through.
pub(crate) const DEFAULT_THINKING_LEVEL: &str = "minimal";

/// Body keys the SDK builds: the context, the tools, the generation config, streaming, storage.
const RESERVED: &[&str] = &[
    "model",
    "input",
    "system_instruction",
    "tools",
    "generation_config",
    "stream",
    "store",
    "previous_interaction_id",
];

/// A layer for Gemini's Interactions API. Cheap to clone: the configuration is shared.
///
/// ```no_run
/// # fn main() -> Result<(), voqalize::model::LayerError> {
/// use voqalize::model::Interactions;
/// let gemini = Interactions::from_env().model("gemini-3.5-flash").build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Interactions {
    inner: Arc<Config>,
}

struct Config {
    model: String,
    endpoint: Endpoint,
    thinking_level: Option<String>,
    timeouts: Timeouts,
    options: Map<String, Value>,
}

impl fmt::Debug for Interactions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interactions")
            .field("model", &self.inner.model)
            .field("url", &self.inner.endpoint.url)
            .field("thinking_level", &self.inner.thinking_level)
            .finish_non_exhaustive()
    }
}

/// Configures an [`Interactions`] layer; [`build`](Self::build) checks everything.
pub struct InteractionsBuilder {
    api_key: Option<String>,
    bearer: Option<TokenFn>,
    model: String,
    base_url: String,
    api_version: String,
    thinking_level: Option<String>,
    timeouts: Timeouts,
    http: HttpOptions,
    options: Map<String, Value>,
    env_error: Option<LayerError>,
}

impl fmt::Debug for InteractionsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InteractionsBuilder")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("bearer", &self.bearer.as_ref().map(|_| "<a token source>"))
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_version", &self.api_version)
            .field("thinking_level", &self.thinking_level)
            .field("http", &self.http)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Interactions {
    /// A layer with this API key (sent as `x-goog-api-key`), the model `gemini-3.5-flash` and the
    /// `minimal` thinking level.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::Interactions;
    ///
    /// let gemini = Interactions::builder("AIza-your-key")
    ///     .model("gemini-3.5-flash")
    ///     .thinking_level(Some("low"))
    ///     .build()?;
    /// # let _ = gemini;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn builder(api_key: impl Into<String>) -> InteractionsBuilder {
        InteractionsBuilder {
            api_key: Some(api_key.into()),
            bearer: None,
            model: crate::model::gemini::DEFAULT_MODEL.to_owned(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_version: DEFAULT_API_VERSION.to_owned(),
            thinking_level: Some(DEFAULT_THINKING_LEVEL.to_owned()),
            timeouts: Timeouts::default(),
            http: HttpOptions::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer configured from the environment as [`Gemini::from_env`](crate::model::Gemini::from_env)
    /// reads it: the key from `GOOGLE_API_KEY`, else `GEMINI_API_KEY`; the model from
    /// `VOQAL_GEMINI_MODEL`; the host from `GOOGLE_GEMINI_BASE_URL`. A missing key or an
    /// unreadable variable is reported by [`InteractionsBuilder::build`].
    pub fn from_env() -> InteractionsBuilder {
        let env = crate::model::gemini::GoogleEnv::read(env_var);
        let mut builder = Interactions::builder(String::new());
        builder.api_key = env.key;
        builder.env_error = env.error;
        if let Some(m) = env.model {
            builder.model = m;
        }
        if let Some(u) = env.base_url {
            builder.base_url = u;
        }
        builder
    }
}

impl InteractionsBuilder {
    reach_setters!(bearer);

    /// The model, e.g. `gemini-3.5-flash`.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The API host (default `https://generativelanguage.googleapis.com`), a gateway's, or a
    /// stand-in's in tests.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API version path segment (default `v1beta`).
    #[must_use]
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = version.into();
        self
    }

    /// `generation_config.thinking_level` (`minimal` by default; `low`, `medium`, `high`);
    /// `None` sends none, leaving the model's default.
    #[must_use]
    pub fn thinking_level(mut self, level: Option<&str>) -> Self {
        self.thinking_level = level.map(str::to_owned);
        self
    }

    /// An extra top-level body key sent with every request (`safety_settings`, `service_tier`);
    /// a later call with the same key replaces it. Keys the SDK builds (`model`, `input`,
    /// `system_instruction`, `tools`, `generation_config`, `stream`, `store`,
    /// `previous_interaction_id`) are refused by [`build`](Self::build).
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// No key and no bearer source ([`LayerError::MissingKey`]), or a key a header cannot carry;
    /// a base URL that is not `http(s)://host[/path]`; an empty model; a bad API version or
    /// thinking level; an option the SDK builds ([`LayerError::ReservedOption`]); a bad
    /// [`HttpOptions`] setting; an unreadable environment variable.
    pub fn build(self) -> Result<Interactions, LayerError> {
        if let Some(e) = self.env_error {
            return Err(e);
        }
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "text/event-stream".to_owned()),
        ];
        if self.bearer.is_none() {
            let key = self.api_key.ok_or(LayerError::MissingKey {
                provider: PROVIDER,
                vars: "GOOGLE_API_KEY or GEMINI_API_KEY",
            })?;
            check_header(PROVIDER, "API key", &key)?;
            headers.insert(0, ("x-goog-api-key".to_owned(), key));
        }
        check_model(&self.model)?;
        check_word("API version", &self.api_version)?;
        if let Some(level) = &self.thinking_level {
            check_word("thinking level", level)?;
        }
        let base_url = check_base_url(&self.base_url)?;
        check_options(PROVIDER, &self.options, RESERVED)?;
        let url = format!("{base_url}/{}/interactions", self.api_version);
        let endpoint = Endpoint::new(base_url, url, headers, self.bearer, self.http)?;
        Ok(Interactions {
            inner: Arc::new(Config {
                model: self.model,
                endpoint,
                thinking_level: self.thinking_level,
                timeouts: self.timeouts,
                options: self.options,
            }),
        })
    }
}

impl Layer for Interactions {
    fn format(&self) -> &str {
        "google.interactions"
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

    fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    fn http(&self) -> Option<&HttpOptions> {
        self.inner.endpoint.http.as_ref()
    }

    fn build(&self, spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError> {
        let body = self.body(spec)?;
        self.inner.endpoint.request(PROVIDER, &body)
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(InteractionsDecoder::new(limits))
    }
}

#[cfg(test)]
#[path = "../tests/interactions.rs"]
mod tests;

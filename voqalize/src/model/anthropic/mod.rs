//! Anthropic's Messages API: `POST {base}/v1/messages`, streamed.
//!
//! Text deltas are spoken as they come. A `tool_use` block's arguments arrive as
//! `input_json_delta` fragments and the call is complete at its `content_block_stop`, so it runs
//! mid-stream, after the words before it. Thinking blocks are replayed verbatim with their
//! signatures, and dropped with the text they led to when heard truth cuts it. The system prompt
//! and the tools are the same on every turn of a call, so they carry a prompt-cache mark (and so
//! does the conversation's last block): every turn after the first reads them from the cache,
//! fewer input tokens billed and a faster first word; TurnSteps count the cache's reads and writes.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::model::endpoint::{Endpoint, reach_setters};
use crate::model::history::RequestSpec;
use crate::model::http::{HttpRequest, Timeouts};
use crate::model::http_options::HttpOptions;
use crate::model::layer::{DecodeLimits, Decoder, Layer, StreamError};
use crate::model::render::{
    LayerError, check_base_url, check_header, check_model, check_options, check_word, env_var,
};

mod decode;
mod request;

pub(crate) use decode::AnthropicDecoder;

/// Who TurnSteps say serves the model.
pub(crate) const PROVIDER: &str = "anthropic";
/// The API root [`Anthropic::from_env`] uses when `ANTHROPIC_BASE_URL` is not set.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent unless [`AnthropicBuilder::version`] says otherwise.
pub(crate) const DEFAULT_VERSION: &str = "2023-06-01";
/// The most tokens one reply may take unless [`AnthropicBuilder::max_tokens`] says otherwise:
/// far more than a spoken reply needs, so it only stops a runaway.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 2048;

/// Body keys the SDK builds: the context, the tools, streaming, and the builder's settings.
const RESERVED: &[&str] = &[
    "model",
    "messages",
    "system",
    "stream",
    "tools",
    "tool_choice",
    "max_tokens",
    "thinking",
];

/// A layer for Anthropic's Messages API. Cheap to clone: the configuration is shared.
///
/// ```no_run
/// # fn main() -> Result<(), voqalize::model::LayerError> {
/// use voqalize::model::Anthropic;
/// let claude = Anthropic::builder("sk-ant-...", "claude-haiku-4-5").build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Anthropic {
    inner: Arc<Config>,
}

struct Config {
    model: String,
    endpoint: Endpoint,
    max_tokens: u32,
    thinking_budget: Option<u32>,
    prompt_caching: bool,
    timeouts: Timeouts,
    options: Map<String, Value>,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("model", &self.inner.model)
            .field("url", &self.inner.endpoint.url)
            .field("max_tokens", &self.inner.max_tokens)
            .field("thinking_budget", &self.inner.thinking_budget)
            .field("prompt_caching", &self.inner.prompt_caching)
            .finish_non_exhaustive()
    }
}

/// Configures an [`Anthropic`] layer; [`build`](Self::build) checks everything.
pub struct AnthropicBuilder {
    api_key: Option<String>,
    model: String,
    base_url: String,
    version: String,
    max_tokens: u32,
    thinking_budget: Option<u32>,
    prompt_caching: bool,
    timeouts: Timeouts,
    http: HttpOptions,
    options: Map<String, Value>,
    env_error: Option<LayerError>,
}

impl fmt::Debug for AnthropicBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicBuilder")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("version", &self.version)
            .field("max_tokens", &self.max_tokens)
            .field("thinking_budget", &self.thinking_budget)
            .field("prompt_caching", &self.prompt_caching)
            .field("http", &self.http)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Anthropic {
    /// A layer for `model` (`claude-sonnet-4-5`, `claude-haiku-4-5`...) with the API key `api_key`,
    /// sent as `x-api-key`.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::Anthropic;
    ///
    /// let claude = Anthropic::builder("sk-ant-test", "claude-haiku-4-5")
    ///     .max_tokens(1024)
    ///     .build()?;
    /// # let _ = claude;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn builder(api_key: impl Into<String>, model: impl Into<String>) -> AnthropicBuilder {
        AnthropicBuilder {
            api_key: Some(api_key.into()),
            model: model.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            version: DEFAULT_VERSION.to_owned(),
            max_tokens: DEFAULT_MAX_TOKENS,
            thinking_budget: None,
            prompt_caching: true,
            timeouts: Timeouts::default(),
            http: HttpOptions::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer for `model` configured from the environment as Anthropic's clients read it: the
    /// key from `ANTHROPIC_API_KEY`, the API root from `ANTHROPIC_BASE_URL`, else
    /// `https://api.anthropic.com`. A missing key or an unreadable variable is reported by
    /// [`AnthropicBuilder::build`].
    pub fn from_env(model: impl Into<String>) -> AnthropicBuilder {
        let mut builder = Anthropic::builder(String::new(), model);
        builder.api_key = None;
        let mut read = |var| match env_var(var) {
            Ok(v) => v,
            Err(e) => {
                builder.env_error.get_or_insert(e);
                None
            }
        };
        let key = read("ANTHROPIC_API_KEY");
        let base_url = read("ANTHROPIC_BASE_URL");
        builder.api_key = key;
        if let Some(u) = base_url {
            builder.base_url = u;
        }
        builder
    }
}

impl AnthropicBuilder {
    reach_setters!();

    /// The API root (default `https://api.anthropic.com`; `/v1/messages` is appended): a gateway,
    /// or a stand-in in tests.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The `anthropic-version` header (default `2023-06-01`).
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The most tokens one reply may take (default 2,048). Must exceed the thinking budget.
    #[must_use]
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// Extended thinking with a budget of `tokens` (at least 1,024, below
    /// [`max_tokens`](Self::max_tokens)); off when never called. Thinking delays the first
    /// word; for a voice call keep the budget small.
    #[must_use]
    pub fn thinking(mut self, tokens: u32) -> Self {
        self.thinking_budget = Some(tokens);
        self
    }

    /// Whether the system prompt, the tools and the conversation so far carry prompt-cache marks
    /// (`cache_control`, default on). A prompt shorter than the model's cacheable minimum is
    /// simply not cached; turning the marks off only makes sense for a gateway that refuses them.
    #[must_use]
    pub fn prompt_caching(mut self, on: bool) -> Self {
        self.prompt_caching = on;
        self
    }

    /// An extra body key sent with every request (`temperature`, `top_k`, `metadata`...); a later
    /// call with the same key replaces it. Keys the SDK builds (`model`, `messages`, `system`,
    /// `stream`, `tools`, `tool_choice`, `max_tokens`, `thinking`) are refused by
    /// [`build`](Self::build): use the builder's methods.
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// No key ([`LayerError::MissingKey`]) or one a header cannot carry; a base URL that is not
    /// `http(s)://host[/path]`; an empty model; a malformed version; a thinking budget below
    /// 1,024 or not below `max_tokens` ([`LayerError::BadSetting`]); an option the SDK builds
    /// ([`LayerError::ReservedOption`]); an unreadable environment variable.
    pub fn build(self) -> Result<Anthropic, LayerError> {
        if let Some(e) = self.env_error {
            return Err(e);
        }
        let key = self.api_key.ok_or(LayerError::MissingKey {
            provider: PROVIDER,
            vars: "ANTHROPIC_API_KEY",
        })?;
        check_header(PROVIDER, "API key", &key)?;
        check_model(&self.model)?;
        check_word("API version", &self.version)?;
        let base_url = check_base_url(&self.base_url)?;
        let bad = |value: u32, why| LayerError::BadSetting {
            setting: "thinking budget",
            value: value.to_string(),
            why,
        };
        if let Some(budget) = self.thinking_budget {
            if budget < 1024 {
                return Err(bad(budget, "the API's minimum is 1,024 tokens"));
            }
            if budget >= self.max_tokens {
                return Err(bad(budget, "it must be below max_tokens"));
            }
        }
        if self.max_tokens == 0 {
            return Err(LayerError::BadSetting {
                setting: "max_tokens",
                value: "0".into(),
                why: "a reply needs at least one token",
            });
        }
        check_options(PROVIDER, &self.options, RESERVED)?;
        let headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "text/event-stream".to_owned()),
            ("x-api-key".to_owned(), key),
            ("anthropic-version".to_owned(), self.version),
        ];
        let url = format!("{base_url}/v1/messages");
        let endpoint = Endpoint::new(base_url, url, headers, None, self.http)?;
        Ok(Anthropic {
            inner: Arc::new(Config {
                model: self.model,
                endpoint,
                max_tokens: self.max_tokens,
                thinking_budget: self.thinking_budget,
                prompt_caching: self.prompt_caching,
                timeouts: self.timeouts,
                options: self.options,
            }),
        })
    }
}

impl Layer for Anthropic {
    fn format(&self) -> &str {
        "anthropic.messages"
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
        self.inner.endpoint.request(PROVIDER, &body)
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(AnthropicDecoder::new(limits))
    }
}

#[cfg(test)]
#[path = "../tests/anthropic.rs"]
mod tests;

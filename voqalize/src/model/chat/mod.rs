//! Any OpenAI-compatible chat-completions endpoint: `POST {base}/chat/completions`, streamed.
//!
//! One layer serves OpenAI itself, LiteLLM proxies, OpenRouter, vLLM, Ollama and the like. Chat
//! messages have no slot for reasoning, so none is sent back. Text deltas are spoken as they come;
//! tool calls arrive as fragments spread over many events, so they are assembled by `index` and
//! are complete only when the stream ends: all of them come in the one finished chunk, after
//! every word of the response.

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

pub(crate) use decode::ChatDecoder;

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
    endpoint: Endpoint,
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
            .field("url", &self.inner.endpoint.url)
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
    /// Azure OpenAI ([`Chat::azure`]).
    azure: bool,
    /// Azure's dated `api-version`; `None`: the v1 API, which takes none.
    api_version: Option<String>,
    bearer: Option<TokenFn>,
    http: HttpOptions,
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
            .field("azure", &self.azure)
            .field("api_version", &self.api_version)
            .field("bearer", &self.bearer.as_ref().map(|_| "<a token source>"))
            .field("http", &self.http)
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
            azure: false,
            api_version: None,
            bearer: None,
            http: HttpOptions::default(),
            provider: None,
            reasoning_effort: None,
            strict: false,
            timeouts: Timeouts::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer for chat completions on Azure OpenAI: the resource at `endpoint`
    /// (`https://my-resource.openai.azure.com`) and its `deployment`. Requests go to Azure's v1
    /// API, `{endpoint}/openai/v1/chat/completions` with the deployment as the model, unless
    /// [`ChatBuilder::api_version`] names a dated version (then the deployment URL
    /// `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=…`). Authenticate
    /// with [`ChatBuilder::api_key`] (sent as `api-key`) or [`ChatBuilder::bearer`] (Entra ID).
    /// TurnSteps name `microsoft` as the provider.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::Chat;
    ///
    /// let azure = Chat::azure("https://my-resource.openai.azure.com", "gpt-4o-mini-voice")
    ///     .api_key("azure-key")
    ///     .api_version("2024-10-21")
    ///     .build()?;
    /// # let _ = azure;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn azure(endpoint: impl Into<String>, deployment: impl Into<String>) -> ChatBuilder {
        let mut builder = Chat::builder(endpoint, deployment);
        builder.azure = true;
        builder.provider = Some("microsoft".to_owned());
        builder
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
    reach_setters!(bearer);

    /// Azure only: a dated `api-version` (`2024-10-21`), which sends requests to the deployment
    /// URL; [`build`](Self::build) refuses it on a layer that is not [`Chat::azure`]'s.
    #[must_use]
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = Some(version.into());
        self
    }

    /// The API key, sent as `Authorization: Bearer <key>` (as `api-key` on Azure).
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
        match (self.api_key, self.bearer.is_some(), self.azure) {
            (_, true, _) => {}
            (Some(key), false, azure) => {
                check_header("chat completions", "API key", &key)?;
                headers.push(if azure {
                    ("api-key".to_owned(), key)
                } else {
                    ("authorization".to_owned(), format!("Bearer {key}"))
                });
            }
            (None, false, true) => {
                return Err(LayerError::MissingKey {
                    provider: "microsoft",
                    vars: "an Azure key (api_key) or a bearer token source",
                });
            }
            (None, false, false) => {}
        }
        let url = chat_url(
            &base_url,
            self.azure,
            self.api_version.as_deref(),
            &self.model,
        )?;
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
        let endpoint = Endpoint::new(base_url, url, headers, self.bearer, self.http)?;
        Ok(Chat {
            inner: Arc::new(Config {
                model: self.model,
                provider,
                endpoint,
                reasoning_effort: self.reasoning_effort,
                strict: self.strict,
                timeouts: self.timeouts,
                options: self.options,
            }),
        })
    }
}

/// The chat completions URL under `base_url`: OpenAI's, or Azure OpenAI's (`azure`), by
/// deployment (`model`) when an `api_version` is given.
fn chat_url(
    base_url: &str,
    azure: bool,
    api_version: Option<&str>,
    model: &str,
) -> Result<String, LayerError> {
    Ok(match (azure, api_version) {
        (false, None) => format!("{base_url}/chat/completions"),
        (false, Some(version)) => {
            return Err(LayerError::BadSetting {
                setting: "api_version",
                value: version.to_owned(),
                why: "only Azure OpenAI takes an api-version (Chat::azure)",
            });
        }
        (true, None) => format!("{base_url}/openai/v1/chat/completions"),
        (true, Some(version)) => {
            check_word("API version", version)?;
            check_word("Azure deployment", model)?;
            format!("{base_url}/openai/deployments/{model}/chat/completions?api-version={version}")
        }
    })
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

impl Layer for Chat {
    fn format(&self) -> &str {
        "chat.completions"
    }

    fn provider(&self) -> &str {
        &self.inner.provider
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
        self.inner
            .endpoint
            .request(error_name(&self.inner.provider), &body)
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(ChatDecoder::new(&self.inner.provider, limits))
    }
}

#[cfg(test)]
#[path = "../tests/chat.rs"]
mod tests;

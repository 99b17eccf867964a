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

pub(crate) use decode::OpenAiDecoder;

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
    /// `openai`, or `microsoft` on Azure.
    provider: &'static str,
    endpoint: Endpoint,
    reasoning: Option<String>,
    strict: bool,
    timeouts: Timeouts,
    options: Map<String, Value>,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("model", &self.inner.model)
            .field("url", &self.inner.endpoint.url)
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
    /// Azure OpenAI ([`OpenAi::azure`]).
    azure: bool,
    /// Azure's dated `api-version`; `None`: the v1 API, which takes none.
    api_version: Option<String>,
    bearer: Option<TokenFn>,
    http: HttpOptions,
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
            .field("azure", &self.azure)
            .field("api_version", &self.api_version)
            .field("bearer", &self.bearer.as_ref().map(|_| "<a token source>"))
            .field("http", &self.http)
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
            azure: false,
            api_version: None,
            bearer: None,
            http: HttpOptions::default(),
            organization: None,
            project: None,
            reasoning: None,
            strict: false,
            timeouts: Timeouts::default(),
            options: Map::new(),
            env_error: None,
        }
    }

    /// A layer for the Responses API on Azure OpenAI: the resource at `endpoint`
    /// (`https://my-resource.openai.azure.com`) and its `deployment`, which goes where the model
    /// does. Requests go to Azure's v1 API, `{endpoint}/openai/v1/responses`, unless
    /// [`OpenAiBuilder::api_version`] names a dated version (then
    /// `{endpoint}/openai/responses?api-version=…`). Authenticate with
    /// [`OpenAiBuilder::api_key`] (sent as `api-key`) or [`OpenAiBuilder::bearer`] (Entra ID).
    /// TurnSteps name `microsoft` as the provider.
    ///
    /// # Examples
    /// ```
    /// use voqalize::model::OpenAi;
    ///
    /// let azure = OpenAi::azure("https://my-resource.openai.azure.com", "gpt-5-mini-voice")
    ///     .api_key("azure-key")
    ///     .build()?;
    /// # let _ = azure;
    /// # Ok::<(), voqalize::model::LayerError>(())
    /// ```
    pub fn azure(endpoint: impl Into<String>, deployment: impl Into<String>) -> OpenAiBuilder {
        let mut builder = OpenAi::builder(String::new(), deployment);
        builder.api_key = None;
        builder.base_url = endpoint.into();
        builder.azure = true;
        builder
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
    reach_setters!(bearer);

    /// The API root, e.g. `https://api.openai.com/v1` (`/responses` is appended).
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API key: sent as `Authorization: Bearer` to OpenAI, as `api-key` to Azure.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Azure only: a dated `api-version` (`2025-04-01-preview`), for a resource without the v1
    /// API; [`build`](Self::build) refuses it on a layer that is not [`OpenAi::azure`]'s.
    #[must_use]
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = Some(version.into());
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
        check_model(&self.model)?;
        let base_url = check_base_url(&self.base_url)?;
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "text/event-stream".to_owned()),
        ];
        if self.bearer.is_none() {
            let api_key = self.api_key.ok_or(LayerError::MissingKey {
                provider: PROVIDER,
                vars: if self.azure {
                    "an Azure key (api_key) or a bearer token source"
                } else {
                    "OPENAI_API_KEY"
                },
            })?;
            check_header(PROVIDER, "API key", &api_key)?;
            headers.push(if self.azure {
                ("api-key".to_owned(), api_key)
            } else {
                ("authorization".to_owned(), format!("Bearer {api_key}"))
            });
        }
        let url = match (self.azure, &self.api_version) {
            (false, None) => format!("{base_url}/responses"),
            (false, Some(_)) => {
                return Err(LayerError::BadSetting {
                    setting: "api_version",
                    value: self.api_version.unwrap_or_default(),
                    why: "only Azure OpenAI takes an api-version (OpenAi::azure)",
                });
            }
            (true, None) => format!("{base_url}/openai/v1/responses"),
            (true, Some(version)) => {
                check_word("API version", version)?;
                format!("{base_url}/openai/responses?api-version={version}")
            }
        };
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
        if let Some(org) = self.organization {
            check_header(PROVIDER, "organization", &org)?;
            headers.push(("openai-organization".to_owned(), org));
        }
        if let Some(project) = self.project {
            check_header(PROVIDER, "project", &project)?;
            headers.push(("openai-project".to_owned(), project));
        }
        let endpoint = Endpoint::new(base_url, url, headers, self.bearer, self.http)?;
        Ok(OpenAi {
            inner: Arc::new(Config {
                model: self.model,
                provider: if self.azure { "microsoft" } else { PROVIDER },
                endpoint,
                reasoning: self.reasoning,
                strict: self.strict,
                timeouts: self.timeouts,
                options: self.options,
            }),
        })
    }
}

impl Layer for OpenAi {
    fn format(&self) -> &str {
        "openai.responses"
    }

    fn provider(&self) -> &str {
        self.inner.provider
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
        // Each call and each reasoning item is an event of its own, whole: the core's bounds
        // (calls, arguments, parts, bytes kept) apply as they come, and its cut stops the reading.
        // An event is read within what a response may keep.
        Box::new(OpenAiDecoder::new(limits.max_kept_bytes))
    }
}

#[cfg(test)]
#[path = "../tests/openai.rs"]
mod tests;

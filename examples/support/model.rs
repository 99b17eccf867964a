//! The command line of the model-backed examples: the hosting flags of `cli.rs`, and which
//! provider answers (`--provider`, `--model`, `--base-url`...), its key read from the environment.

use std::sync::OnceLock;

use clap::Parser;
use voqalize::model::{Anthropic, Chat, Gemini, Interactions, LayerError, OpenAi};
use voqalize::voice::ModelLayer;
use voqalize_testing::{ModelServer, ReadBack, Reply};

use crate::cli::Args;

/// Which provider answers.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Google Gemini (`GEMINI_API_KEY` or `GOOGLE_API_KEY`).
    Gemini,
    /// The OpenAI Responses API (`OPENAI_API_KEY`).
    Openai,
    /// Any OpenAI-compatible chat-completions endpoint: a LiteLLM proxy, vLLM, Ollama...
    /// (`OPENAI_API_KEY` when the server wants one).
    Chat,
    /// Anthropic's Messages API (`ANTHROPIC_API_KEY`).
    Anthropic,
    /// Gemini's Interactions API (`GEMINI_API_KEY` or `GOOGLE_API_KEY`).
    Interactions,
    /// Gemini on Vertex AI (`--vertex-project`, `--vertex-location`; an access token in
    /// `GOOGLE_ACCESS_TOKEN`, e.g. from `gcloud auth print-access-token`).
    Vertex,
    /// Azure OpenAI, Responses API (`--azure-endpoint`, `--model` the deployment;
    /// `AZURE_OPENAI_API_KEY`).
    Azure,
    /// Azure OpenAI, chat completions (as `azure`).
    AzureChat,
    /// No provider: a stand-in model in this process plays the part by the example's own rules
    /// (`coach` has some: it calls its tools when you mention a meal, your average or the
    /// screen; `mcp_desk` calls its MCP server's tools; `clinic` walks its stages). No key, no
    /// network.
    Offline,
}

/// Serve a model-backed Voqalize brain on a WebSocket.
#[derive(Parser, Debug)]
pub struct ModelArgs {
    #[command(flatten)]
    pub host: Args,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

/// Which provider answers, and how it is reached (the model flags without the hosting ones).
#[derive(clap::Args, Debug)]
pub struct ProviderArgs {
    /// The provider that answers each turn.
    #[arg(long = "provider", value_enum, default_value = "gemini")]
    pub which: Provider,
    /// The provider's API root: a proxy for gemini/openai; the server for chat, such as
    /// http://localhost:4000 (LiteLLM), http://localhost:8000/v1 (vLLM) or
    /// http://localhost:11434/v1 (Ollama). Default: OPENAI_BASE_URL for chat, the
    /// provider's own API otherwise.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model. Default: gemini-3.5-flash (or VOQAL_GEMINI_MODEL) for gemini,
    /// interactions and vertex, gpt-6-sol for openai, claude-haiku-4-5 for anthropic; required
    /// for chat, and the deployment's name for azure.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// vertex: the Google Cloud project.
    #[arg(long, value_name = "PROJECT")]
    pub vertex_project: Option<String>,
    /// vertex: the region (us-central1, europe-west4...) or global.
    #[arg(long, value_name = "LOCATION", default_value = "global")]
    pub vertex_location: String,
    /// azure, azure-chat: the resource's endpoint, https://<resource>.openai.azure.com.
    /// Default: AZURE_OPENAI_ENDPOINT.
    #[arg(long, value_name = "URL")]
    pub azure_endpoint: Option<String>,
    /// azure, azure-chat: a dated api-version (default: Azure's v1 API, which takes none).
    #[arg(long, value_name = "VERSION")]
    pub api_version: Option<String>,
}

impl ProviderArgs {
    /// The provider layer these flags and the environment describe, or a message saying
    /// what to set.
    pub fn layer(&self) -> Result<ModelLayer, String> {
        let built = match self.which {
            Provider::Gemini => {
                let mut b = Gemini::from_env();
                if let Some(m) = &self.model {
                    b = b.model(m);
                }
                if let Some(u) = &self.base_url {
                    b = b.base_url(u);
                }
                b.build().map(ModelLayer::from)
            }
            Provider::Openai => {
                let mut b = OpenAi::from_env(self.model.as_deref().unwrap_or("gpt-6-sol"));
                if let Some(u) = &self.base_url {
                    b = b.base_url(u);
                }
                b.build().map(ModelLayer::from)
            }
            Provider::Chat => {
                let base_url = match &self.base_url {
                    Some(u) => u.clone(),
                    None => std::env::var("OPENAI_BASE_URL").map_err(|_| {
                        "--provider chat needs the server's API root: pass --base-url \
                         (e.g. http://localhost:11434/v1 for Ollama) or set OPENAI_BASE_URL"
                            .to_owned()
                    })?,
                };
                let model = self.model.as_deref().ok_or(
                    "--provider chat needs --model: the name the server knows, \
                     e.g. qwen3:8b on Ollama or the model_name of a LiteLLM route",
                )?;
                let mut b = Chat::builder(base_url, model);
                if let Ok(key) = std::env::var("OPENAI_API_KEY")
                    && !key.is_empty()
                {
                    b = b.api_key(key);
                }
                b.build().map(ModelLayer::from)
            }
            Provider::Anthropic => {
                let mut b =
                    Anthropic::from_env(self.model.as_deref().unwrap_or("claude-haiku-4-5"));
                if let Some(u) = &self.base_url {
                    b = b.base_url(u);
                }
                b.build().map(ModelLayer::from)
            }
            Provider::Interactions => {
                let mut b = Interactions::from_env();
                if let Some(m) = &self.model {
                    b = b.model(m);
                }
                if let Some(u) = &self.base_url {
                    b = b.base_url(u);
                }
                b.build().map(ModelLayer::from)
            }
            Provider::Vertex => {
                let project = self
                    .vertex_project
                    .as_deref()
                    .ok_or("--provider vertex needs --vertex-project: the Google Cloud project")?;
                // What a token refresher of yours would keep current; read here once.
                let token = std::env::var("GOOGLE_ACCESS_TOKEN").map_err(|_| {
                    "--provider vertex needs an access token in GOOGLE_ACCESS_TOKEN \
                     (gcloud auth print-access-token)"
                        .to_owned()
                })?;
                let mut b =
                    Gemini::vertex(project, &self.vertex_location).bearer(move || token.clone());
                if let Some(m) = &self.model {
                    b = b.model(m);
                }
                if let Some(u) = &self.base_url {
                    b = b.base_url(u);
                }
                b.build().map(ModelLayer::from)
            }
            Provider::Azure | Provider::AzureChat => {
                let endpoint = match &self.azure_endpoint {
                    Some(u) => u.clone(),
                    None => std::env::var("AZURE_OPENAI_ENDPOINT").map_err(|_| {
                        "--provider azure needs --azure-endpoint \
                         (https://<resource>.openai.azure.com) or AZURE_OPENAI_ENDPOINT"
                            .to_owned()
                    })?,
                };
                let deployment = self
                    .model
                    .as_deref()
                    .ok_or("--provider azure needs --model: the deployment's name")?;
                let key = std::env::var("AZURE_OPENAI_API_KEY").map_err(|_| {
                    "--provider azure needs a key in AZURE_OPENAI_API_KEY".to_owned()
                })?;
                if self.which == Provider::Azure {
                    let mut b = OpenAi::azure(endpoint, deployment).api_key(key);
                    if let Some(v) = &self.api_version {
                        b = b.api_version(v);
                    }
                    b.build().map(ModelLayer::from)
                } else {
                    let mut b = Chat::azure(endpoint, deployment).api_key(key);
                    if let Some(v) = &self.api_version {
                        b = b.api_version(v);
                    }
                    b.build().map(ModelLayer::from)
                }
            }
            Provider::Offline => {
                return Err(
                    "--provider offline: this example has no rules for a stand-in \
                            model (coach, mcp_desk and clinic have): pass another --provider and its key"
                        .to_owned(),
                );
            }
        };
        built.map_err(|e| match e {
            LayerError::MissingKey { vars, .. } => format!(
                "--provider {} needs an API key: set {vars}",
                self.provider_name()
            ),
            other => format!("--provider {}: {other}", self.provider_name()),
        })
    }

    fn provider_name(&self) -> &'static str {
        match self.which {
            Provider::Gemini => "gemini",
            Provider::Openai => "openai",
            Provider::Chat => "chat",
            Provider::Anthropic => "anthropic",
            Provider::Interactions => "interactions",
            Provider::Vertex => "vertex",
            Provider::Azure => "azure",
            Provider::AzureChat => "azure-chat",
            Provider::Offline => "offline",
        }
    }
}

/// Parses the command line: the provider layer (built from the flags and the environment)
/// and the hosting flags, to [`Args::serve`] a brain with. Exits with a message saying what to
/// set when the layer cannot be built (no API key, no base URL for chat...).
#[allow(dead_code)] // coach, mcp_desk and clinic parse with `model_and_host_or_offline`
pub fn model_and_host() -> (ModelLayer, Args) {
    with_layer(ModelArgs::parse())
}

/// The layer the parsed flags describe, with the hosting flags; exits saying what to set when it
/// cannot be built.
fn with_layer(args: ModelArgs) -> (ModelLayer, Args) {
    match args.provider.layer() {
        Ok(layer) => (layer, args.host),
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(2);
        }
    }
}

/// The stand-in model `--provider offline` talks to, kept for the life of the process.
static STAND_IN: OnceLock<ModelServer> = OnceLock::new();

/// As [`model_and_host`], and with `--provider offline`, the layer talks to a stand-in model in
/// this process that answers each request with `rules`' reply to it (what the request says, read
/// back in neutral terms: the conversation and the tools declared).
#[allow(dead_code)] // only the examples with rules for a stand-in model
pub async fn model_and_host_or_offline(
    rules: impl Fn(&ReadBack) -> Reply + Send + Sync + 'static,
) -> (ModelLayer, Args) {
    layer_and_host_or_offline(ModelArgs::parse(), rules).await
}

/// As [`model_and_host_or_offline`], from flags an example parsed itself (its own flags beside
/// these, as `mcp_desk`'s `--mcp-command`).
#[allow(dead_code)] // only the examples with rules for a stand-in model
pub async fn layer_and_host_or_offline(
    args: ModelArgs,
    rules: impl Fn(&ReadBack) -> Reply + Send + Sync + 'static,
) -> (ModelLayer, Args) {
    if args.provider.which != Provider::Offline {
        return with_layer(args);
    }
    match stand_in(rules).await {
        Ok(layer) => (layer, args.host),
        Err(e) => {
            eprintln!("error: --provider offline: {e}");
            std::process::exit(2);
        }
    }
}

/// Starts the stand-in model on a free port of 127.0.0.1 and gives a layer that talks to it.
async fn stand_in(
    rules: impl Fn(&ReadBack) -> Reply + Send + Sync + 'static,
) -> Result<ModelLayer, Box<dyn std::error::Error>> {
    let server = ModelServer::start(voqalize_testing::Provider::Gemini).await?;
    server.answer_with(rules);
    let layer = Gemini::builder("offline")
        .model("stand-in")
        .base_url(server.base_url())
        .build()?;
    let _ = STAND_IN.set(server);
    Ok(ModelLayer::from(layer))
}

/// Shows a model's tool runs in the console's timeline, when `--console` is on.
#[derive(Clone)]
pub struct ToolsShown(Option<voqalize::console::Console>);

impl ToolsShown {
    /// `model`, reporting its tool runs to the console.
    pub fn apply(&self, model: voqalize::voice::Model) -> voqalize::voice::Model {
        match &self.0 {
            Some(console) => model.on_tool_run(console.tool_observer()),
            None => model,
        }
    }
}

impl Args {
    /// With `--console`, what shows each tool run of a model in the console's timeline.
    pub fn console_tools(&self) -> ToolsShown {
        ToolsShown(self.console.is_some().then(|| self.console_handle()))
    }
}

//! OpenTelemetry GenAI spans, through `tracing`: one `chat` span per model request and one
//! `execute_tool` span per tool run, named and attributed as the OpenTelemetry semantic
//! conventions for generative AI say, so that `tracing-opentelemetry` exports them to any OTel
//! backend with no code in the SDK (which does not depend on OpenTelemetry). A tool's arguments
//! and result are never recorded, as they are never in a TurnStep.
//!
//! Both are `info` spans with the target `voqalize::gen_ai`.

use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use crate::model::history::Usage;
use crate::model::layer::Layer;

/// The target of every GenAI span: filter on it (`voqalize::gen_ai=info`).
pub(crate) const TARGET: &str = "voqalize::gen_ai";

/// The span of one model request, opened before it is sent: operation, provider and model now
/// (and `voqalize.stage`, the workflow's stage, when the `Model` follows stages; and
/// `voqalize.fallback.from` and `voqalize.fallback.reason`, the model of the layer this request
/// took over from and why, when a fallback chain moved on); the response's id, finish reason,
/// usage and time to first chunk when they are known. A request a hedge beat has the
/// `error.type` `hedged_out`.
pub(crate) fn chat(layer: &dyn Layer) -> Span {
    tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = %format_args!("chat {}", layer.model()),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(layer),
        gen_ai.request.model = layer.model(),
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        voqalize.first_chunk_ms = Empty,
        voqalize.stage = Empty,
        voqalize.fallback.from = Empty,
        voqalize.fallback.reason = Empty,
        "error.type" = Empty,
    )
}

/// Records what the request's stream said of itself on its span.
pub(crate) fn record_response(
    span: &Span,
    usage: Option<Usage>,
    first: Option<Duration>,
    response_id: Option<&str>,
    finish_reason: Option<&str>,
) {
    if let Some(usage) = usage {
        if let Some(n) = usage.input {
            span.record("gen_ai.usage.input_tokens", n);
        }
        // OpenTelemetry counts reasoning tokens in the output, as providers bill them.
        if let Some(n) = usage.billed_output() {
            span.record("gen_ai.usage.output_tokens", n);
        }
    }
    if let Some(first) = first {
        span.record(
            "voqalize.first_chunk_ms",
            u64::try_from(first.as_millis()).unwrap_or(u64::MAX),
        );
    }
    if let Some(id) = response_id {
        span.record("gen_ai.response.id", id);
    }
    if let Some(reason) = finish_reason {
        span.record("gen_ai.response.finish_reasons", reason);
    }
}

/// The span of one tool run: its name; `error.type` when it failed (`cancelled`, `timed_out`
/// among the kinds); `voqalize.tool.end` when it was answered (`in_turn`, `after_barge_in`,
/// `background`). A tool of an MCP server (`mcp_server`) also carries `mcp.method.name`
/// (`tools/call`, as OpenTelemetry's MCP conventions name it) and `voqalize.mcp.server`, its
/// toolset's name.
pub(crate) fn execute_tool(name: &str, mcp_server: Option<&str>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {name}"),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.type = "function",
        "error.type" = Empty,
        voqalize.tool.end = Empty,
        mcp.method.name = Empty,
        voqalize.mcp.server = Empty,
    );
    if let Some(server) = mcp_server {
        span.record("mcp.method.name", "tools/call");
        span.record("voqalize.mcp.server", server);
    }
    span
}

/// The well-known `gen_ai.provider.name` for a layer: `gcp.gemini` or `gcp.vertex_ai` for
/// Google's, `azure.ai.openai` for Azure's, otherwise the layer's own provider name (`openai`,
/// `anthropic`, or what a chat-completions layer was named).
pub(crate) fn provider_name(layer: &dyn Layer) -> &str {
    let base = layer.base_url();
    match layer.provider() {
        "google" if base.contains("aiplatform.googleapis.com") => "gcp.vertex_ai",
        "google" => "gcp.gemini",
        "microsoft" => "azure.ai.openai",
        "openai" if base.contains(".openai.azure.com") => "azure.ai.openai",
        other => other,
    }
}

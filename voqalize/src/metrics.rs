//! Metrics through the [`metrics`](https://docs.rs/metrics) facade: install any recorder (the
//! Prometheus, OpenTelemetry or StatsD exporters of that ecosystem) and the SDK's figures appear
//! in it; with none installed, recording costs a load and a branch.
//!
//! Every label takes a fixed, small set of values: no session id, no turn id, nothing a peer or
//! a model chooses (a tool's label is the name a brain declared, `unknown` for any other; a
//! provider's is the layer's own name). Durations are in seconds, as Prometheus wants them.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `voqalize_calls_open` | gauge | `leg` | calls hosted now (`direct` or `relay`), 0 from when the leg serves (an autoscaler finds every pod's series) |
//! | `voqalize_calls_started_total` | counter | `leg` | calls whose `SessionStart` made a brain |
//! | `voqalize_calls_ended_total` | counter | `leg`, `reason` | calls ended, by [`EndReason`](crate::EndReason): `ended`, `cancelled`, `by_brain`, `transport_lost`, `bound_exceeded`, `shutdown` |
//! | `voqalize_calls_refused_total` | counter | `reason` | calls refused before they started: `draining`, `overloaded`, `at_capacity`, `web_page` |
//! | `voqalize_turns_total` | counter | | turns answering a user message |
//! | `voqalize_first_chunk_seconds` | histogram | | from a user message read to its turn's first `SpeechChunk` queued for the socket |
//! | `voqalize_barge_ins_total` | counter | | `Interruption`s read |
//! | `voqalize_frames_shed_total` | counter | `lane` | droppable frames shed by a congested lane: `inbound`, `outbound`, `rtvi` |
//! | `voqalize_bounds_tripped_total` | counter | `bound` | a bound hit: the session's `lane`, `inbound_message`, `outbound_frame` (each ends the call); the voice core's `response_bytes`, `kept_bytes`, `parts`, `calls`, `argument_bytes`, `tool_runs`, `turn_deadline` (each cuts a response) |
//! | `voqalize_model_requests_total` | counter | `provider`, `outcome` | model requests: `ok`, `cancelled` (a barge-in), `hedged_out` (a hedged request the other one beat), `timeout`, `rate_limited` (429), `status_4xx`, `status_5xx`, `http`, `stream` |
//! | `voqalize_model_first_byte_seconds` | histogram | `provider` | from a request sent to its first decoded chunk |
//! | `voqalize_model_tokens_total` | counter | `provider`, `kind` | tokens the provider reported: `input`, `output` (reasoning included, as billed); a count over `model::layer::Usage::MAX_COUNT` (100,000,000) in one request is a provider's bug and is not added (the counter never wraps back) |
//! | `voqalize_tool_runs_total` | counter | `tool`, `outcome`, `end` | tool calls answered: `ok`, or the error's kind: `refused` (a guard), `hidden` (tools off for the reply), `unknown`, `invalid_arguments`, `failed`, `panicked`, `cancelled` (a barge-in stopped it), `timed_out`; `end`: `in_turn`, `after_barge_in` (it ran on after the user cut in, or was cancelled then), `background` |
//! | `voqalize_tool_run_seconds` | histogram | `tool` | how long each tool that ran took |
//! | `voqalize_model_fallbacks_total` | counter | `from`, `to`, `reason` | a request of a [fallback chain](crate::voice::Fallback) that moved on before the model's first words, by the models of the layer left and the layer asked next (`none` when no layer was left to ask) and why: a request outcome above, or `breaker_open` (the layer was skipped), `unbuildable` (the layer could not express the request) |
//! | `voqalize_model_breaker_state` | gauge | `provider`, `model` | a chain layer's circuit breaker: 0 closed, 1 half-open (one request probes it), 2 open (skipped by every call) |
//! | `voqalize_model_breaker_transitions_total` | counter | `provider`, `model`, `state` | a breaker's changes, by the state it moved to: `open`, `half_open`, `closed` |
//! | `voqalize_model_hedges_total` | counter | `won` | hedged requests (a chain's [`hedge_after`](crate::voice::Fallback::hedge_after)), by which brought the first words: `first` (the hedge was cancelled) or `second` |
//! | `voqalize_stage_transitions_total` | counter | `from`, `to` | a call's moves between the stages of its workflow, by the stages' names as its `#[derive(Stages)]` enum declares them |
//! | `voqalize_history_summaries_total` | counter | `outcome` | summaries of a long call's older history: `replaced` (in place), `stale` (the call ended or a handoff restarted the history meanwhile), `failed`, `timeout`, `empty` (no text, or only a function call); each but the first two leaves the bounds to drop |
//!
//! `provider` is the OpenTelemetry GenAI provider name the request's span carries (`gcp.gemini`,
//! `openai`, `anthropic`, `azure.ai.openai`, or a chat-completions layer's own name).
//!
//! ```no_run
//! // First the exporter of your choice, such as metrics-exporter-prometheus:
//! //     let handle = PrometheusBuilder::new().install_recorder()?;  // handle.render() is /metrics
//! // then the descriptions, so each series has its HELP line and unit:
//! voqalize::metrics::describe();
//! ```

use std::time::Duration;

use ::metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

/// Calls hosted now, by `leg`.
pub const CALLS_OPEN: &str = "voqalize_calls_open";
/// Calls started, by `leg`.
pub const CALLS_STARTED: &str = "voqalize_calls_started_total";
/// Calls ended, by `leg` and `reason`.
pub const CALLS_ENDED: &str = "voqalize_calls_ended_total";
/// Calls refused before they started, by `reason`.
pub const CALLS_REFUSED: &str = "voqalize_calls_refused_total";
/// Turns answering a user message.
pub const TURNS: &str = "voqalize_turns_total";
/// From a user message read to its turn's first `SpeechChunk`, in s.
pub const FIRST_CHUNK: &str = "voqalize_first_chunk_seconds";
/// `Interruption`s read.
pub const BARGE_INS: &str = "voqalize_barge_ins_total";
/// Droppable frames shed, by `lane`.
pub const FRAMES_SHED: &str = "voqalize_frames_shed_total";
/// Bounds hit, by `bound`.
pub const BOUNDS_TRIPPED: &str = "voqalize_bounds_tripped_total";
/// Model requests, by `provider` and `outcome`.
pub const MODEL_REQUESTS: &str = "voqalize_model_requests_total";
/// From a model request sent to its first decoded chunk, in s, by `provider`.
pub const MODEL_FIRST_BYTE: &str = "voqalize_model_first_byte_seconds";
/// Tokens the provider reported, by `provider` and `kind`.
pub const MODEL_TOKENS: &str = "voqalize_model_tokens_total";
/// Tool calls answered, by `tool` and `outcome`.
pub const TOOL_RUNS: &str = "voqalize_tool_runs_total";
/// How long each tool that ran took, in s, by `tool`.
pub const TOOL_RUN_SECONDS: &str = "voqalize_tool_run_seconds";
/// A fallback chain's requests that moved on to the next layer, by `from`, `to` and `reason`.
pub const MODEL_FALLBACKS: &str = "voqalize_model_fallbacks_total";
/// A chain layer's circuit breaker: 0 closed, 1 half-open, 2 open; by `provider` and `model`.
pub const MODEL_BREAKER_STATE: &str = "voqalize_model_breaker_state";
/// A chain layer's breaker changes, by `provider`, `model` and `state`.
pub const MODEL_BREAKER_TRANSITIONS: &str = "voqalize_model_breaker_transitions_total";
/// Hedged requests, by which brought the first words (`won`: `first` or `second`).
pub const MODEL_HEDGES: &str = "voqalize_model_hedges_total";
/// A call's moves between the stages of its workflow, by `from` and `to`.
pub const STAGE_TRANSITIONS: &str = "voqalize_stage_transitions_total";
/// Summaries of a long call's older history, by `outcome`.
pub const HISTORY_SUMMARIES: &str = "voqalize_history_summaries_total";

/// Registers each metric's description and unit with the recorder installed now: call it once,
/// after installing one, for the exporter's HELP lines. Recording works without it.
pub fn describe() {
    describe_gauge!(CALLS_OPEN, Unit::Count, "Calls hosted now.");
    describe_counter!(
        CALLS_STARTED,
        Unit::Count,
        "Calls whose SessionStart made a brain."
    );
    describe_counter!(CALLS_ENDED, Unit::Count, "Calls ended, by why.");
    describe_counter!(
        CALLS_REFUSED,
        Unit::Count,
        "Calls refused before they started, by why."
    );
    describe_counter!(TURNS, Unit::Count, "Turns answering a user message.");
    describe_histogram!(
        FIRST_CHUNK,
        Unit::Seconds,
        "From a user message read to its turn's first SpeechChunk."
    );
    describe_counter!(BARGE_INS, Unit::Count, "Interruptions read.");
    describe_counter!(
        FRAMES_SHED,
        Unit::Count,
        "Droppable frames shed by a congested lane."
    );
    describe_counter!(BOUNDS_TRIPPED, Unit::Count, "Bounds hit, by which.");
    describe_counter!(
        MODEL_REQUESTS,
        Unit::Count,
        "Model requests, by provider and outcome."
    );
    describe_histogram!(
        MODEL_FIRST_BYTE,
        Unit::Seconds,
        "From a model request sent to its first decoded chunk."
    );
    describe_counter!(MODEL_TOKENS, Unit::Count, "Tokens the provider reported.");
    describe_counter!(
        TOOL_RUNS,
        Unit::Count,
        "Tool calls answered, by tool and outcome."
    );
    describe_histogram!(
        TOOL_RUN_SECONDS,
        Unit::Seconds,
        "How long each tool that ran took."
    );
    describe_counter!(
        MODEL_FALLBACKS,
        Unit::Count,
        "Fallback chain requests that moved on to the next layer before the first words."
    );
    describe_gauge!(
        MODEL_BREAKER_STATE,
        Unit::Count,
        "A chain layer's circuit breaker: 0 closed, 1 half-open, 2 open."
    );
    describe_counter!(
        MODEL_BREAKER_TRANSITIONS,
        Unit::Count,
        "A chain layer's circuit breaker changes, by the state it moved to."
    );
    describe_counter!(
        MODEL_HEDGES,
        Unit::Count,
        "Hedged model requests, by which brought the first words."
    );
    describe_counter!(
        STAGE_TRANSITIONS,
        Unit::Count,
        "Moves between the stages of a call's workflow, by from and to."
    );
    describe_counter!(
        HISTORY_SUMMARIES,
        Unit::Count,
        "Summaries of a long call's older history, by outcome."
    );
}

/// Which way a call came: over its own WebSocket, or over the Cortex relay.
pub(crate) fn leg(direct: bool) -> &'static str {
    if direct { "direct" } else { "relay" }
}

/// A leg began to serve: its calls gauge exists from now on, at 0 until a call starts (an
/// autoscaler reading calls per pod finds every pod's series, a pod with no call included).
pub(crate) fn leg_serving(leg: &'static str) {
    gauge!(CALLS_OPEN, "leg" => leg).increment(0.0);
}

/// A call started.
pub(crate) fn call_started(leg: &'static str) {
    counter!(CALLS_STARTED, "leg" => leg).increment(1);
    gauge!(CALLS_OPEN, "leg" => leg).increment(1.0);
}

/// A started call ended, for `reason` (an [`EndReason`](crate::EndReason)'s label).
pub(crate) fn call_ended(leg: &'static str, reason: &'static str) {
    counter!(CALLS_ENDED, "leg" => leg, "reason" => reason).increment(1);
    gauge!(CALLS_OPEN, "leg" => leg).decrement(1.0);
}

/// A call was refused before it started.
pub(crate) fn call_refused(reason: &'static str) {
    counter!(CALLS_REFUSED, "reason" => reason).increment(1);
}

/// A turn answering a user message started.
pub(crate) fn turn() {
    counter!(TURNS).increment(1);
}

/// A turn's first chunk went out `after` its user message was read.
pub(crate) fn first_chunk(after: Duration) {
    histogram!(FIRST_CHUNK).record(after.as_secs_f64());
}

/// An `Interruption` was read.
pub(crate) fn barge_in() {
    counter!(BARGE_INS).increment(1);
}

/// A droppable frame was shed on `lane`.
pub(crate) fn shed(lane: &'static str) {
    counter!(FRAMES_SHED, "lane" => lane).increment(1);
}

/// A bound was hit.
pub(crate) fn bound_tripped(bound: &'static str) {
    counter!(BOUNDS_TRIPPED, "bound" => bound).increment(1);
}

/// The outcomes a model request is counted with (`voqalize_model_requests_total`'s `outcome`).
#[cfg(feature = "model")]
const REQUEST_OUTCOMES: [&str; 9] = [
    "ok",
    "cancelled",
    "hedged_out",
    "timeout",
    "rate_limited",
    "status_4xx",
    "status_5xx",
    "http",
    "stream",
];

/// The most providers whose series are kept made ([`model_series`]); past them (a process with
/// more chat layers of its own names than this), a provider's series are made per request.
#[cfg(feature = "model")]
const MAX_PROVIDERS: usize = 32;

/// What the SDK's series are registered with: this module, at level `INFO`, as the `metrics`
/// macros would.
#[cfg(feature = "model")]
static METADATA: ::metrics::Metadata<'static> =
    ::metrics::Metadata::new(module_path!(), ::metrics::Level::INFO, Some(module_path!()));

/// One provider's model-request series, their keys made once ([`model_series`]): counting a
/// request then copies no name and builds no label list (it did, nine allocations a request).
#[cfg(feature = "model")]
#[derive(Debug)]
pub(crate) struct ModelSeries {
    provider: String,
    /// `voqalize_model_requests_total` by outcome, in [`REQUEST_OUTCOMES`]' order.
    requests: Vec<::metrics::Key>,
    first_byte: ::metrics::Key,
    input_tokens: ::metrics::Key,
    output_tokens: ::metrics::Key,
}

#[cfg(feature = "model")]
impl ModelSeries {
    fn new(provider: &str) -> Self {
        use ::metrics::{Key, Label};
        let key = |name: &'static str, extra: Option<(&'static str, &'static str)>| {
            let mut labels = vec![Label::new("provider", provider.to_owned())];
            labels.extend(extra.map(|(k, v)| Label::from_static_parts(k, v)));
            Key::from_parts(name, labels)
        };
        ModelSeries {
            provider: provider.to_owned(),
            requests: REQUEST_OUTCOMES
                .iter()
                .map(|&outcome| key(MODEL_REQUESTS, Some(("outcome", outcome))))
                .collect(),
            first_byte: key(MODEL_FIRST_BYTE, None),
            input_tokens: key(MODEL_TOKENS, Some(("kind", "input"))),
            output_tokens: key(MODEL_TOKENS, Some(("kind", "output"))),
        }
    }
}

/// The series of `provider`'s model requests: made at its first request, then shared (at most
/// [`MAX_PROVIDERS`] kept). A provider's label is the layer's own name, a handful per process.
#[cfg(feature = "model")]
pub(crate) fn model_series(provider: &str) -> std::sync::Arc<ModelSeries> {
    use std::sync::{Arc, PoisonError, RwLock};
    static SERIES: RwLock<Vec<Arc<ModelSeries>>> = RwLock::new(Vec::new());
    let find = |all: &[Arc<ModelSeries>]| all.iter().find(|s| s.provider == provider).cloned();
    if let Some(series) = find(&SERIES.read().unwrap_or_else(PoisonError::into_inner)) {
        return series;
    }
    let mut all = SERIES.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(series) = find(&all) {
        return series;
    }
    let series = Arc::new(ModelSeries::new(provider));
    if all.len() < MAX_PROVIDERS {
        all.push(series.clone());
    }
    series
}

/// A model request of `series` ended with `outcome`: its time to first chunk and the usage it
/// reported.
#[cfg(feature = "model")]
pub(crate) fn model_request(
    series: &ModelSeries,
    outcome: &'static str,
    first: Option<Duration>,
    tokens: (Option<u64>, Option<u64>),
) {
    ::metrics::with_recorder(|recorder| {
        let known = REQUEST_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .and_then(|i| series.requests.get(i));
        match known {
            Some(key) => recorder.register_counter(key, &METADATA),
            None => recorder.register_counter(
                &::metrics::Key::from_parts(
                    MODEL_REQUESTS,
                    vec![
                        ::metrics::Label::new("provider", series.provider.clone()),
                        ::metrics::Label::from_static_parts("outcome", outcome),
                    ],
                ),
                &METADATA,
            ),
        }
        .increment(1);
        if let Some(first) = first {
            recorder
                .register_histogram(&series.first_byte, &METADATA)
                .record(first.as_secs_f64());
        }
        let (input, output) = tokens;
        if let Some(n) = input {
            recorder
                .register_counter(&series.input_tokens, &METADATA)
                .increment(n);
        }
        if let Some(n) = output {
            recorder
                .register_counter(&series.output_tokens, &METADATA)
                .increment(n);
        }
    });
}

/// A chain's request moved on from the layer of model `from` to that of `to` (`none`: no layer
/// was left), for `reason`. Model names are the brain's configuration: a handful per process.
#[cfg(feature = "model")]
pub(crate) fn model_fallback(from: &str, to: &str, reason: &'static str) {
    counter!(MODEL_FALLBACKS, "from" => from.to_owned(), "to" => to.to_owned(), "reason" => reason)
        .increment(1);
}

/// A chain layer's breaker moved to `state` (its gauge `value`).
#[cfg(feature = "model")]
pub(crate) fn breaker_state(provider: &str, model: &str, state: &'static str, value: f64) {
    let (provider, model) = (provider.to_owned(), model.to_owned());
    gauge!(MODEL_BREAKER_STATE, "provider" => provider.clone(), "model" => model.clone())
        .set(value);
    counter!(MODEL_BREAKER_TRANSITIONS, "provider" => provider, "model" => model, "state" => state)
        .increment(1);
}

/// A hedged request was answered first by the `first` request or the `second`.
#[cfg(feature = "model")]
pub(crate) fn hedge(won: &'static str) {
    counter!(MODEL_HEDGES, "won" => won).increment(1);
}

/// The call moved from stage `from` to `to` (names a `#[derive(Stages)]` enum declares).
#[cfg(feature = "model")]
pub(crate) fn stage_transition(from: &'static str, to: &'static str) {
    counter!(STAGE_TRANSITIONS, "from" => from, "to" => to).increment(1);
}

/// A summary of a long call's older history ended with `outcome`.
#[cfg(feature = "model")]
pub(crate) fn history_summary(outcome: &'static str) {
    counter!(HISTORY_SUMMARIES, "outcome" => outcome).increment(1);
}

/// A tool call was answered with `outcome`; `ran` is how long the tool ran, when it did.
#[cfg(feature = "model")]
pub(crate) fn tool_run(
    tool: std::borrow::Cow<'static, str>,
    outcome: &'static str,
    end: &'static str,
    ran: Option<Duration>,
) {
    counter!(TOOL_RUNS, "tool" => tool.clone(), "outcome" => outcome, "end" => end).increment(1);
    if let Some(ran) = ran {
        histogram!(TOOL_RUN_SECONDS, "tool" => tool).record(ran.as_secs_f64());
    }
}

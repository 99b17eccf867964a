//! What a model-backed turn reports: one `turn:` log line, a `model` TurnStep per request and a
//! `tool` TurnStep per tool call (docs/protocol.md §6.2, §4.10), and the session's summarisers
//! for what its turns log (§6.14).

use std::time::{Duration, Instant};

use crate::logline::{Repeated, outside};
use crate::model::layer::{Chunk, Usage};
use crate::session::{Session, Step};

/// How far apart turns must be for each to write its `turn:` line: a person takes longer than
/// this to say something new, a flood of UserMessages does not.
pub(crate) const TURN_LINE_WINDOW: Duration = Duration::from_secs(1);

/// What one session's turns may log, each kind through its own summariser: the first line, then
/// a count per window. A provider, a model or a caller can make every turn write each of these,
/// so none may be written per turn unsummed (docs/protocol.md §6.14).
#[derive(Debug)]
pub(crate) struct TurnLog {
    /// The `turn:` line: each turn's at a human pace ([`TURN_LINE_WINDOW`] apart), one per
    /// window and a count in a flood.
    pub turns: Repeated,
    /// A bound a turn reached: a response cut, `max_tool_hops`.
    pub bounds: Repeated,
    /// A model request that failed (the provider's error, a timeout, a broken stream).
    pub failed_requests: Repeated,
    /// A turn whose model wrote a function call as text (its retry, giving up, the cut after
    /// speech: one verdict for all of a turn's lines).
    pub calls_as_text: Repeated,
    /// A tool call that failed (an unknown tool, arguments that do not fit, an `Err`, a panic).
    pub failed_calls: Repeated,
    /// A tool call over [`TOOL_BUDGET_MS`](crate::tools::TOOL_BUDGET_MS).
    pub slow_tools: Repeated,
    /// A call or a result a tool guard refused.
    pub guard_refusals: Repeated,
    /// A tool guard that failed or panicked (the call refused, or the result withheld).
    pub guard_failures: Repeated,
    /// A token count over [`Usage::MAX_COUNT`] (left out).
    pub token_counts: Repeated,
    /// A fallback chain's request that moved on to the next layer before its first words.
    pub fallbacks: Repeated,
}

impl Default for TurnLog {
    fn default() -> Self {
        TurnLog {
            turns: Repeated::with_window(
                "`turn:` lines of turns under 1 s apart",
                TURN_LINE_WINDOW,
            ),
            bounds: Repeated::new("turns that reached a bound"),
            failed_requests: Repeated::new("failed model requests"),
            calls_as_text: Repeated::new("turns with a function call written as text"),
            failed_calls: Repeated::new("tool calls that failed"),
            slow_tools: Repeated::new("tool calls over the time budget"),
            guard_refusals: Repeated::new("tool calls or results a guard refused"),
            guard_failures: Repeated::new("tool guards that failed"),
            token_counts: Repeated::new("token counts over the sanity bound"),
            fallbacks: Repeated::new("requests that moved on to the next layer of their chain"),
        }
    }
}

/// Counts and sums over one turn (one `respond`).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Model requests made (the retry and the forced last request included).
    pub hops: u32,
    /// Tools run (unknown and failed calls included).
    pub calls: u32,
    /// Calls to tools marked `#[needs_result_now]`.
    pub awaited: u32,
    /// Usage summed over the turn's requests; `None` while no request reported any.
    pub usage: Option<Usage>,
    /// The last stop of the turn's requests that was not a normal end, as the provider said it
    /// ([`Chunk::abnormal_stop`](crate::model::history::Chunk::abnormal_stop)).
    pub stop: Option<String>,
    /// Calls a stop cut off before their arguments were complete (none of them ran).
    pub cut_calls: u32,
    /// The first layer the turn's requests left for the next of their chain, and why:
    /// `model:reason`.
    pub fallback: Option<String>,
}

impl Tally {
    pub(crate) fn add(&mut self, usage: Option<Usage>) {
        if let Some(u) = usage {
            self.usage = Some(self.usage.map_or(u, |t| t.add(u)));
        }
    }
}

/// When the turn started, first heard from the model, and first spoke.
#[derive(Debug)]
pub(crate) struct Clock {
    pub started: Instant,
    pub open: Option<Duration>,
    pub speak: Option<Duration>,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Clock {
            started: Instant::now(),
            open: None,
            speak: None,
        }
    }

    pub(crate) fn mark_open(&mut self) {
        self.open.get_or_insert_with(|| self.started.elapsed());
    }

    pub(crate) fn mark_speak(&mut self) {
        self.speak.get_or_insert_with(|| self.started.elapsed());
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

fn ms_or_none(d: Option<Duration>) -> String {
    d.map_or_else(|| "none".to_owned(), |d| format!("{}ms", ms(d)))
}

/// The one `turn:` line: `turn: model=.. hops=.. calls=.. awaited=.. speechless=yes|no open=..
/// speak=.. total=.. prompt=.. cached=.. output=.. thoughts=..` (or `— no usage reported` after
/// `total` when no request reported usage), then ` cut_calls=N` when a stop cut calls off,
/// ` fallback=model:reason` when a request left a layer of its chain for the next (the first such
/// of the turn; `model=` names the layer that answered last), ` request_id=..` when the provider
/// gave one, and last ` stop=..` when a request stopped short
/// of a normal end: the provider's reason and detail, escaped and cut ([`outside`]), so it may
/// hold spaces and runs to the end of the line.
pub(crate) fn turn_line(
    model: &str,
    tally: &Tally,
    clock: &Clock,
    request_id: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    let mut line = format!(
        "turn: model={model} hops={} calls={} awaited={} speechless={} open={} speak={} total={}ms",
        tally.hops,
        tally.calls,
        tally.awaited,
        if clock.speak.is_some() { "no" } else { "yes" },
        ms_or_none(clock.open),
        ms_or_none(clock.speak),
        ms(clock.started.elapsed()),
    );
    // Writing to a String cannot fail.
    let _ = match tally.usage {
        None => write!(line, " — no usage reported"),
        Some(u) => write!(
            line,
            " prompt={} cached={} output={} thoughts={}",
            u.input.unwrap_or(0),
            u.cached_input.unwrap_or(0),
            u.output.unwrap_or(0),
            u.reasoning.unwrap_or(0),
        ),
    };
    if tally.cut_calls > 0 {
        let _ = write!(line, " cut_calls={}", tally.cut_calls);
    }
    if let Some(fallback) = &tally.fallback {
        let _ = write!(line, " fallback={}", outside(fallback));
    }
    if let Some(id) = request_id {
        let _ = write!(line, " request_id={}", outside(id));
    }
    if let Some(stop) = &tally.stop {
        let _ = write!(line, " stop={}", outside(stop));
    }
    line
}

fn clamp_ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// One model request, as its TurnStep reports it.
#[derive(Debug)]
pub(crate) struct Hop {
    pub started: Instant,
    pub first: Option<Duration>,
    pub usage: Option<Usage>,
    /// The request's GenAI span, and what its stream said of itself for it.
    pub span: tracing::Span,
    pub response_id: Option<String>,
    pub finish_reason: Option<String>,
    /// The request's outcome in the metrics; until it ends, a barge-in's (`cancelled`).
    pub outcome: &'static str,
    /// The provider's series in the metrics; none once the request is counted.
    pub provider: Option<std::sync::Arc<crate::metrics::ModelSeries>>,
    /// Set when the request lost a hedged race: dropped, it counts as `hedged_out`.
    pub lost: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Drop for Hop {
    /// A request the turn dropped before it ended (a barge-in) is counted too.
    fn drop(&mut self) {
        let lost = self
            .lost
            .as_ref()
            .is_some_and(|l| l.load(std::sync::atomic::Ordering::Relaxed));
        if lost && self.provider.is_some() {
            self.outcome = "hedged_out";
            self.span.record("error.type", "hedged_out");
        }
        self.count();
    }
}

impl Hop {
    pub(crate) fn start(span: tracing::Span, provider: &str) -> Self {
        Hop {
            started: Instant::now(),
            first: None,
            usage: None,
            span,
            response_id: None,
            finish_reason: None,
            outcome: "cancelled",
            provider: Some(crate::metrics::model_series(provider)),
            lost: None,
        }
    }

    /// What a chunk says of the request: its first output's time, its usage (a later report
    /// replaces an earlier one; each count past [`Usage::MAX_COUNT`] is left out), the
    /// response's id and finish reason. Gives the first count left out: its name and value.
    pub(crate) fn heard(&mut self, chunk: &Chunk) -> Option<(&'static str, u64)> {
        self.first.get_or_insert_with(|| self.started.elapsed());
        let mut over = None;
        if let Some(usage) = chunk.usage {
            let (usage, past) = usage.bounded();
            self.usage = Some(usage);
            over = past;
        }
        if chunk.response_id.is_some() {
            self.response_id.clone_from(&chunk.response_id);
        }
        if chunk.finish_reason.is_some() {
            self.finish_reason.clone_from(&chunk.finish_reason);
        }
        over
    }

    /// Counts the request in the metrics, once: with its outcome so far.
    fn count(&mut self) {
        if let Some(provider) = self.provider.take() {
            let usage = self.usage.unwrap_or_default();
            crate::metrics::model_request(
                &provider,
                self.outcome,
                self.first,
                (usage.input, usage.billed_output()),
            );
        }
    }

    /// Records what the stream said of itself on the request's span (which closes when the
    /// `Hop` drops), and counts it in the metrics: `ok` unless it failed, or a barge-in
    /// (`cancelled`) stopped its stream.
    pub(crate) fn record(&mut self, cancelled: bool) {
        if self.outcome == "cancelled" && !cancelled {
            self.outcome = "ok";
        }
        self.count();
        super::spans::record_response(
            &self.span,
            self.usage,
            self.first,
            self.response_id.as_deref(),
            self.finish_reason.as_deref(),
        );
    }

    /// The `model` step: duration from the request to the end of its stream, first output, the
    /// request's last usage as counts.
    pub(crate) fn step(&self, model: &str, provider: &str) -> Step {
        let mut step = Step::new("model", model)
            .provider(provider)
            .duration_ms(clamp_ms(self.started.elapsed()));
        if let Some(first) = self.first {
            step = step.first_output_ms(clamp_ms(first));
        }
        for (k, v) in self.usage.unwrap_or_default().counts() {
            step = step.count(k, v);
        }
        step
    }
}

/// Reports `step` for turn `turn_id` when the session can take steps. A model request's step is
/// reported even when a barge-in cut its turn (`always`): it was paid for.
pub(crate) fn report(session: &Session, step: Step, turn_id: u64, always: bool) {
    let sent = if always {
        session.report_step_always(step, turn_id)
    } else {
        session.report_step(step, Some(turn_id))
    };
    if let Err(e) = sent {
        tracing::debug!(
            "turn {turn_id}: step not reported: {}",
            crate::logline::chain(&e)
        );
    }
}

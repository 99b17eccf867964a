//! One model-backed turn: requests, the stream, speech, tool calls, and the cleanup a barge-in
//! still runs (docs/protocol.md §6).
//!
//! A turn is one request, plus a follow-up after a `#[needs_result_now]` tool (at most
//! `max_tool_hops`, the last one forced to speak) and at most one retry after a call written as
//! text. Speech opens lazily on the first word the guard releases; each tool runs the moment its
//! call arrives, after the speech before it is on the wire, and its result is filed right after
//! the call. A barge-in drops the turn's future at its next `.await`: [`TurnState`]'s `Drop` then
//! removes an unanswered call, strips a unit whose words were never released, reports the request
//! it paid for and logs the `turn:` line.
//!
//! Every response is read within the session's [`Bounds`] (docs/protocol.md §6.14): a bound that
//! trips cuts the response where it tripped, answers the call that tripped it with an error the
//! model reads, and logs one warning for the turn.

use std::time::{Duration, Instant};

use serde_json::json;

use super::Model;
use super::bounds::{Bounds, Tripped, kept_name};
use super::guard::{Guard, RETRY_NOTE};
use super::report::{Clock, Hop, Tally, TurnLog, report, turn_line};
use crate::brain::BrainResult;
use crate::logline::{Repeated, outside, outside_n};
use crate::model::history::{Call, Kept, Part, RequestSpec, Role, ToolResult, arguments_bytes};
use crate::model::http::{self, EventStream};
use crate::model::layer::Decoder;
use crate::model::{ModelError, StreamError, ToolChoice};
use crate::session::{Session, SpeechUnit, Step, Turn};
use crate::tools::{
    Arguments, TOOL_BUDGET_MS, ToolError, ToolErrorKind, ToolOutcome, ToolSet, Toolbox,
    restore_enum_strings,
};

/// How long a tool waits for the speech before its call to reach the socket.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// How many stream items and parts a turn handles before it yields its worker: a provider that
/// sends a megabyte of tiny events (or one event of a hundred thousand parts) at once must not
/// hold up the other calls the worker serves.
const WORK_PER_YIELD: usize = 64;

/// How many characters of a failed request's error its log line keeps (the error holds the
/// provider's own words).
const ERROR_CHARS: usize = 500;

/// Why a request failed: the transport, the provider's stream, or the turn's deadline.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error(transparent)]
    Http(#[from] ModelError),
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error("the turn passed its {0:?} deadline")]
    Deadline(Duration),
}

/// How one request ended, for the turn loop.
#[derive(Debug, Default)]
struct HopEnd {
    /// A `#[needs_result_now]` tool ran.
    awaited: bool,
    /// A call failed as text or malformed (the turn may ask once more).
    stranded: bool,
    /// A bound cut the response.
    cut: Option<Tripped>,
}

impl HopEnd {
    fn add(&mut self, other: HopEnd) {
        self.awaited |= other.awaited;
        self.stranded |= other.stranded;
        self.cut = self.cut.or(other.cut);
    }
}

/// One response being written: its model turn in the history, the guard on its text, the
/// speech unit once a word was released.
struct Response<'t> {
    entry: u64,
    guard: Guard,
    /// What the response keeps in the history so far, for the bounds on it.
    kept: Kept,
    called: bool,
    calls: usize,
    results: Option<u64>,
    speech: Option<SpeechUnit<'t>>,
}

/// Everything a turn must still clean up or report if its future is dropped.
pub(crate) struct TurnState<'t> {
    model: &'t Model,
    turn: &'t Turn,
    session: Session,
    tally: Tally,
    clock: Clock,
    response: Option<Response<'t>>,
    /// The model turn and call ordinal of the tool now running.
    running: Option<(u64, usize)>,
    hop: Option<Hop>,
    /// The provider's id of the last request, for the `turn:` line.
    request_id: Option<String>,
    bounds: Bounds,
    /// When the turn's deadline passes.
    deadline: tokio::time::Instant,
    /// Tools run this turn, over all its requests.
    runs: usize,
    /// Calls read from the request in flight.
    hop_calls: usize,
    /// The first bound that tripped this turn (its one warning is logged then).
    tripped: Option<Tripped>,
    /// Items and parts handled since the turn last yielded its worker.
    work: usize,
    /// Whether the turn writes its lines about calls written as text, once decided.
    text_calls_loud: Option<bool>,
    done: bool,
}

impl<'t> TurnState<'t> {
    fn new(model: &'t Model, turn: &'t Turn) -> Self {
        let bounds = model.inner.settings.bounds;
        TurnState {
            model,
            turn,
            session: turn.session().clone(),
            tally: Tally::default(),
            clock: Clock::start(),
            response: None,
            running: None,
            hop: None,
            request_id: None,
            bounds,
            deadline: tokio::time::Instant::now() + bounds.turn_deadline,
            runs: 0,
            hop_calls: 0,
            tripped: None,
            work: 0,
            text_calls_loud: None,
            done: false,
        }
    }

    /// Counts one item or part handled; yields the worker every [`WORK_PER_YIELD`].
    async fn pace(&mut self) {
        self.work += 1;
        if self.work >= WORK_PER_YIELD {
            self.work = 0;
            tokio::task::yield_now().await;
        }
    }

    /// A bound tripped: the first of the turn is logged, once per turn and through the session's
    /// summariser (a provider that trips a bound on every turn writes one line per 10 s).
    fn trip(&mut self, bound: Tripped) {
        if self.tripped.is_some() {
            return;
        }
        self.tripped = Some(bound);
        if allowed(self.model, |log| &mut log.bounds) {
            tracing::warn!(
                "turn: model={} cut a response: {}; what was said stays",
                self.model.inner.layer.model(),
                bound.what()
            );
        }
    }

    /// Whether the turn writes its lines about a function call written as text (the retry, giving
    /// up, the cut after speech): decided at the first through the session's summariser, so a
    /// turn writes all of them or none and a model that does it every turn writes one turn's.
    fn loud_about_text_calls(&mut self) -> bool {
        let model = self.model;
        *self
            .text_calls_loud
            .get_or_insert_with(|| allowed(model, |log| &mut log.calls_as_text))
    }

    /// Whether the call about to be read passes a bound: the calls of this response, its
    /// arguments' bytes, the tools this turn ran (a call that would not run counts for neither).
    fn over_bound(&self, call: &Call, runs: bool) -> Option<Tripped> {
        let b = &self.bounds;
        if self.hop_calls >= b.calls_per_response {
            Some(Tripped::Calls(b.calls_per_response))
        } else if arguments_bytes(&call.arguments) > b.argument_bytes {
            Some(Tripped::ArgumentBytes(b.argument_bytes))
        } else if runs && self.runs >= b.tool_runs {
            Some(Tripped::ToolRuns(b.tool_runs))
        } else {
            None
        }
    }

    /// Whether keeping the next part, which makes the response's tally `kept`, passes a bound on
    /// what one response keeps: its parts, or its bytes as the history counts them.
    fn over_kept(&self, kept: Kept) -> Option<Tripped> {
        let b = &self.bounds;
        if kept.parts > b.parts_per_response {
            Some(Tripped::Parts(b.parts_per_response))
        } else if kept.bytes > b.response_bytes {
            Some(Tripped::KeptBytes(b.response_bytes))
        } else {
            None
        }
    }

    /// Files a call that passed a bound: in the history with no arguments (a name no tool has is
    /// cut), answered with an error the model reads; no tool runs and no `tool` step is reported.
    fn refuse(&mut self, entry: u64, call: Call, raw: serde_json::Value, bound: Tripped) {
        let r = self.response();
        r.calls += 1;
        r.called = true;
        let name = kept_name(&call.name);
        let result = ToolResult {
            call_id: call.id.clone(),
            name: name.clone(),
            response: json!({ "error": bound.answer(&name) }),
        };
        let call = Call {
            id: call.id,
            name,
            arguments: Arguments::Raw("{}".to_owned()),
        };
        self.model
            .conversation()
            .extend(entry, Part::Call { call, raw });
        let mut results = self.response().results;
        self.model.conversation().file(entry, &mut results, result);
        self.response().results = results;
    }

    fn steps_on(&self) -> bool {
        self.model.inner.settings.report_steps
    }

    /// Ends the request in flight: its usage joins the turn's, its `model` step is reported.
    fn end_hop(&mut self) {
        if let Some(hop) = self.hop.take() {
            self.tally.add(hop.usage);
            if self.steps_on() {
                let layer = &self.model.inner.layer;
                let step = hop.step(layer.model(), layer.provider());
                report(&self.session, step, self.turn.id(), true);
            }
        }
    }

    /// Opens the response's model turn at its first part, of any kind.
    fn response(&mut self) -> &mut Response<'t> {
        let model = self.model;
        self.response.get_or_insert_with(|| Response {
            entry: model.conversation().push(Role::Model, Vec::new()),
            guard: Guard::new(),
            kept: Kept::default(),
            called: false,
            calls: 0,
            results: None,
            speech: None,
        })
    }

    /// Speaks released pieces, opening the unit at the first one.
    fn speak(&mut self, pieces: Vec<String>) {
        if pieces.iter().all(String::is_empty) {
            return;
        }
        let turn = self.turn;
        let model = self.model;
        let Some(r) = self.response.as_mut() else {
            return;
        };
        if r.speech.is_none() {
            let unit = turn.open_unit();
            if unit.started() {
                model.conversation().speaking(unit.id(), Some(r.entry));
            }
            r.speech = Some(unit);
            self.clock.mark_speak();
        }
        if let Some(unit) = r.speech.as_mut() {
            for p in pieces.iter().filter(|p| !p.is_empty()) {
                unit.write(p);
            }
        }
    }

    /// Closes the response at its finish (or the stream's end). True when it failed to make a
    /// call it tried to make: written as text, or malformed.
    fn close_response(&mut self, malformed: bool, settle: bool) -> bool {
        if settle && let Some(r) = self.response.as_mut() {
            let speak = r.guard.settle(malformed);
            self.speak(speak);
        }
        let Some(mut r) = self.response.take() else {
            return malformed;
        };
        if let Some(unit) = r.speech.take() {
            unit.close();
        }
        let leaked = r.guard.leaked() == Some(true);
        if leaked {
            self.model.conversation().strip(r.entry, &r.guard.said());
        }
        (leaked || r.guard.malformed()) && !r.called
    }

    /// Closes a response a bound cut: its speech ends, held text is never released, and the
    /// history keeps only what was said (and its calls). No retry follows a cut.
    fn cut_response(&mut self) {
        let Some(mut r) = self.response.take() else {
            return;
        };
        let started = r.speech.as_ref().is_some_and(SpeechUnit::started);
        if let Some(unit) = r.speech.take() {
            unit.close();
        }
        if r.guard.leaked() != Some(false) {
            let said = if started {
                r.guard.said()
            } else {
                String::new()
            };
            self.model.conversation().strip(r.entry, &said);
        }
    }

    /// Turn cleanup, on every exit: a barge-in, an error, or the end.
    fn finish(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let mut conversation = self.model.conversation();
        if let Some((entry, ordinal)) = self.running.take() {
            conversation.drop_call(entry, ordinal);
        }
        if let Some(r) = self.response.take() {
            let started = r.speech.as_ref().is_some_and(SpeechUnit::started);
            if r.guard.leaked() != Some(false) || (r.speech.is_some() && !started) {
                // Cut while its opening was held, while a call written as text streamed, or
                // before its SpeechStart went out: none of its text was heard.
                let said = if started {
                    r.guard.said()
                } else {
                    String::new()
                };
                conversation.strip(r.entry, &said);
            }
        }
        drop(conversation);
        self.end_hop();
        if !allowed(self.model, |log| &mut log.turns) {
            return;
        }
        let layer = &self.model.inner.layer;
        let line = turn_line(layer.model(), &self.tally, &self.clock);
        match &self.request_id {
            Some(id) => tracing::info!("{line} request_id={}", outside(id)),
            None => tracing::info!("{line}"),
        }
    }
}

impl Drop for TurnState<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Runs one turn against the model: `choice` for every request but a forced last one.
pub(crate) async fn run<B: Toolbox + ?Sized>(
    model: &Model,
    brain: &B,
    turn: &Turn,
    choice: ToolChoice,
) -> BrainResult {
    let tools = brain.tools_for_turn();
    let mut st = TurnState::new(model, turn);
    let max_hops = model.inner.settings.max_tool_hops;
    let (mut retried, mut note, mut followups) = (false, false, 0usize);
    loop {
        st.tally.hops += 1;
        let capped = followups > 0 && followups == max_hops;
        if capped && allowed(model, |log| &mut log.bounds) {
            tracing::warn!(
                "turn: model={} reached max_tool_hops={max_hops}; the last request may not call a tool",
                model.inner.layer.model()
            );
        }
        // After a bound tripped, a follow-up the turn owes is its last request, with tools off.
        let forced = capped || (followups > 0 && st.tripped.is_some());
        let request_choice = if forced {
            ToolChoice::None
        } else {
            choice.clone()
        };
        let end = match hop(&mut st, brain, &tools, &request_choice, note).await {
            Ok(end) => end,
            Err(e) => {
                failed(&mut st, &e);
                return Ok(());
            }
        };
        note = false;
        if end.stranded && end.cut.is_none() {
            let m = model.inner.layer.model();
            let loud = st.loud_about_text_calls();
            if retried {
                if loud {
                    tracing::warn!(
                        "turn: model={m} wrote a function call as text or malformed again; the turn ends without it"
                    );
                }
                break;
            }
            if loud {
                tracing::warn!(
                    "turn: model={m} wrote a function call as text or malformed; none of it was spoken and nothing ran — asking once more"
                );
            }
            retried = true;
            note = true;
            continue;
        }
        if !end.awaited || followups == max_hops || forced {
            break;
        }
        followups += 1;
    }
    st.finish();
    Ok(())
}

/// A request failed: log it with the provider and status, close what was speaking (it stays in
/// the history with its partial text and is finalized like any unit), and speak the fallback line
/// when the turn had said nothing yet, so the caller is not left in silence.
fn failed(st: &mut TurnState<'_>, e: &RequestError) {
    if let RequestError::Http(ModelError::Status {
        request_id: Some(id),
        ..
    }) = e
    {
        st.request_id = Some(id.clone());
    }
    if let RequestError::Deadline(after) = e {
        st.trip(Tripped::Deadline(*after));
    } else if allowed(st.model, |log| &mut log.failed_requests) {
        let layer = &st.model.inner.layer;
        tracing::error!(
            "turn: model={} provider={} request failed: {}",
            layer.model(),
            layer.provider(),
            outside_n(&e.to_string(), ERROR_CHARS)
        );
    }
    st.end_hop();
    if let Some(r) = st.response.as_mut()
        && let Some(unit) = r.speech.take()
    {
        unit.close();
    }
    if st.clock.speak.is_none()
        && let Some(line) = &st.model.inner.settings.fallback
    {
        st.model.say_line(st.turn, line, false);
        st.clock.mark_speak();
    }
    st.finish();
}

/// Waits for `future` until the turn's `deadline`.
async fn before<T>(
    deadline: tokio::time::Instant,
    limit: Duration,
    future: impl Future<Output = T>,
) -> Result<T, RequestError> {
    if tokio::time::Instant::now() >= deadline {
        return Err(RequestError::Deadline(limit));
    }
    tokio::time::timeout_at(deadline, future)
        .await
        .map_err(|_| RequestError::Deadline(limit))
}

/// One request and its stream, read within the turn's bounds and deadline.
async fn hop<B: Toolbox + ?Sized>(
    st: &mut TurnState<'_>,
    brain: &B,
    tools: &ToolSet,
    choice: &ToolChoice,
    note: bool,
) -> Result<HopEnd, RequestError> {
    let layer = st.model.inner.layer.clone();
    let request = {
        let conversation = st.model.conversation();
        let instruction = st.model.instruction_now();
        let spec = RequestSpec {
            instruction: instruction.as_deref(),
            history: conversation.entries(),
            note: note.then_some(RETRY_NOTE),
            tools,
            choice,
        };
        layer.build(&spec)?
    };
    st.hop = Some(Hop::start());
    st.hop_calls = 0;
    let (bounds, deadline) = (st.bounds, st.deadline);
    let limit = bounds.turn_deadline;
    let open = http::open(&request, layer.timeouts(), bounds.response_bytes);
    let mut stream: EventStream = before(deadline, limit, open).await??;
    st.request_id = stream.request_id().map(str::to_owned);
    let mut decoder: Box<dyn Decoder> = layer.decoder(bounds.decode());
    let mut end = HopEnd::default();
    let tools_off = matches!(choice, ToolChoice::None);
    loop {
        let chunks = match before(deadline, limit, stream.next()).await? {
            Some(Ok(item)) => decoder.item(item)?,
            Some(Err(ModelError::ResponseTooLarge { limit })) => {
                end.cut = Some(Tripped::ResponseBytes(limit));
                break;
            }
            Some(Err(e)) => return Err(e.into()),
            None => {
                for chunk in decoder.end()? {
                    end.add(chunk_in(st, brain, tools, tools_off, chunk).await);
                    if end.cut.is_some() {
                        break;
                    }
                }
                break;
            }
        };
        for chunk in chunks {
            end.add(chunk_in(st, brain, tools, tools_off, chunk).await);
            if end.cut.is_some() {
                break;
            }
        }
        if end.cut.is_some() || decoder.done() {
            break;
        }
        st.pace().await;
    }
    drop(stream);
    if let Some(bound) = end.cut {
        st.cut_response();
        st.trip(bound);
    } else if st.response.is_some() {
        // The stream ended with a response still open: close it so its speech is bracketed.
        end.stranded |= st.close_response(false, true);
    }
    st.end_hop();
    Ok(end)
}

/// One decoded chunk: parts in order (a call runs the moment it is read), then the finish. A call
/// past a bound is refused and ends the chunk: the response is cut there.
async fn chunk_in<B: Toolbox + ?Sized>(
    st: &mut TurnState<'_>,
    brain: &B,
    tools: &ToolSet,
    tools_off: bool,
    chunk: crate::model::history::Chunk,
) -> HopEnd {
    st.clock.mark_open();
    if let Some(hop) = st.hop.as_mut() {
        hop.first.get_or_insert_with(|| hop.started.elapsed());
        if chunk.usage.is_some() {
            hop.usage = chunk.usage;
        }
    }
    let mut end = HopEnd::default();
    let mut speak = Vec::new();
    for part in joined(chunk.parts) {
        // Released words are on their way before the turn yields: a barge-in that lands here
        // must find every released word in a unit, or it would stay in the history unsaid.
        st.speak(std::mem::take(&mut speak));
        st.pace().await;
        let r = st.response();
        let (entry, kept) = (r.entry, r.kept.with(&part));
        // A part past what a response may keep is not kept, and the response is cut there.
        if let Some(bound) = st.over_kept(kept) {
            end.cut = Some(bound);
            return end;
        }
        st.response().kept = kept;
        match part {
            Part::Call { mut call, raw } => {
                // Speech before a call is heard before the tool runs, with a tail the guard
                // held in case it began a call written as text: this call is a real one.
                speak.extend(st.response().guard.before_call());
                st.speak(std::mem::take(&mut speak));
                if let Some(bound) = st.over_bound(&call, !tools_off) {
                    st.refuse(entry, call, raw, bound);
                    end.cut = Some(bound);
                    return end;
                }
                st.hop_calls += 1;
                st.session.flushed(FLUSH_WAIT).await;
                let r = st.response();
                let ordinal = r.calls;
                r.calls += 1;
                r.called = true;
                let kept = kept_name(&call.name);
                let name = std::mem::replace(&mut call.name, kept);
                let (arguments, call_id) = (call.arguments.clone(), call.id.clone());
                let kept = call.name.clone();
                st.model
                    .conversation()
                    .extend(entry, Part::Call { call, raw });
                st.running = Some((entry, ordinal));
                let started = Instant::now();
                let outcome = if tools_off {
                    refused(&kept)
                } else {
                    st.runs += 1;
                    let arguments = match tools.get(&name) {
                        Some(decl) if st.model.inner.layer.enums_as_strings() => {
                            restore_enum_strings(decl, arguments)
                        }
                        _ => arguments,
                    };
                    let outcome = brain.call_tool(tools, &name, arguments).await;
                    if let Err(e) = &outcome.result
                        && allowed(st.model, |log| &mut log.failed_calls)
                    {
                        tracing::warn!("tool {} failed: {}", outside(&name), outside(&e.message));
                    }
                    over_budget(st.model, tools, &name, &outcome);
                    outcome
                };
                let result = ToolResult {
                    call_id,
                    name: kept.clone(),
                    response: outcome.response(),
                };
                let mut results = st.response().results;
                st.model.conversation().file(entry, &mut results, result);
                st.response().results = results;
                st.running = None;
                st.tally.calls += 1;
                // A `tool` step for a tool that ran; a call refused because tools were off did not.
                if st.steps_on() && !tools_off {
                    let ms = u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX);
                    report(
                        &st.session,
                        Step::new("tool", kept).duration_ms(ms),
                        st.turn.id(),
                        false,
                    );
                }
                if !tools_off && tools.get(&name).is_some_and(|t| t.needs_result_now()) {
                    st.tally.awaited += 1;
                    end.awaited = true;
                }
            }
            Part::Text { text, raw, trimmed } => {
                let released = st.response().guard.release(&text);
                speak.extend(released);
                st.model
                    .conversation()
                    .extend(entry, Part::Text { text, raw, trimmed });
            }
            other => st.model.conversation().extend(entry, other),
        }
    }
    // The decoder left a part (or an event) unread: it would have passed what a response keeps.
    if chunk.too_big {
        st.speak(speak);
        end.cut = Some(Tripped::KeptBytes(st.bounds.response_bytes));
        return end;
    }
    if chunk.finished
        && let Some(r) = st.response.as_mut()
    {
        speak.extend(r.guard.settle(chunk.malformed));
    }
    st.speak(speak);
    if let Some(r) = st.response.as_mut()
        && r.guard.leaked() == Some(true)
        && let Some(unit) = r.speech.take()
    {
        if st.loud_about_text_calls() {
            tracing::warn!(
                "turn: model={} wrote a function call as text after speech began; the words before it were spoken and none of the call was",
                st.model.inner.layer.model()
            );
        }
        unit.close();
    }
    if chunk.finished {
        if st.response.is_some() {
            end.stranded |= st.close_response(chunk.malformed, false);
        } else if chunk.malformed {
            end.stranded = true;
        }
    }
    end
}

/// Whether a line of the kind `kind` picks from the session's [`TurnLog`] is written now; when it
/// is not, it is counted, and summed up later.
fn allowed(model: &Model, kind: impl FnOnce(&mut TurnLog) -> &mut Repeated) -> bool {
    kind(&mut crate::recover::lock(&model.inner.log)).allow()
}

/// A tool that ran over [`TOOL_BUDGET_MS`]: the user waited for it. Logged once per session,
/// then counted (a model can call a slow tool sixteen times a reply, every turn).
fn over_budget(model: &Model, tools: &ToolSet, name: &str, outcome: &ToolOutcome) {
    let ms = outcome.elapsed.as_secs_f64() * 1000.0;
    if ms > TOOL_BUDGET_MS as f64
        && let Some(tool) = tools.get(name)
        && allowed(model, |log| &mut log.slow_tools)
    {
        tracing::warn!(
            "tool {} took {}ms, over the {TOOL_BUDGET_MS}ms budget; the user waited for it",
            tool.method(),
            ms.round()
        );
    }
}

/// The parts of one chunk with each run of plain text joined into one piece (one event may hold
/// thousands of text parts: they are one piece to screen, speak and store).
fn joined(parts: Vec<Part>) -> Vec<Part> {
    let mut out: Vec<Part> = Vec::with_capacity(parts.len());
    for part in parts {
        if let Part::Text {
            text: more,
            raw: serde_json::Value::Null,
            trimmed: false,
        } = &part
            && let Some(Part::Text {
                text,
                raw: serde_json::Value::Null,
                trimmed: false,
            }) = out.last_mut()
        {
            text.push_str(more);
            continue;
        }
        out.push(part);
    }
    out
}

/// A call on a request that allowed none: not run, answered with an error the model reads.
fn refused(name: &str) -> ToolOutcome {
    ToolOutcome {
        result: Err(ToolError::new(
            ToolErrorKind::Hidden,
            format!(
                "no tool may be called in this reply, so '{name}' did not run; answer in speech"
            ),
        )),
        elapsed: Duration::ZERO,
    }
}

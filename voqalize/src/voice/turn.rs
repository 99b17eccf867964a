//! One model-backed turn: requests, the stream, speech, tool calls, and the cleanup a barge-in
//! still runs (docs/protocol.md §6).
//!
//! A turn is one request, plus a follow-up after a `#[needs_result_now]` tool (at most
//! `max_tool_hops`, the last one forced to speak) and at most one retry after a call written as
//! text. Each response has one owner, a [`Response`]: the turn reads the stream, hands the
//! response its parts, and runs each tool the moment its call arrives, after the speech before it
//! is on the wire (`turn/calls.rs`). A barge-in drops the turn's future at its next `.await`:
//! [`TurnState`]'s `Drop` then stops the runs that end with the turn (their calls answered as
//! cancelled), abandons the open response (unheard text is cut; every call stays, answered now or
//! when its run ends), reports the request it paid for and logs the `turn:` line.
//!
//! Every response is read within the session's [`Bounds`] (docs/protocol.md §6.14): a bound that
//! trips cuts the response where it tripped, answers the call that tripped it with an error the
//! model reads, and logs one warning for the turn.

mod calls;
mod failure;

use std::iter::Peekable;
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::Model;
use super::bounds::{Bounds, Tripped};
use super::conversation::Conversation;
use super::guard::RETRY_NOTE;
use super::report::{Clock, Hop, Tally, TurnLog, report, turn_line};
use super::response::{Closed, Ending, Response};
use super::spans;
use super::taping::Taping;
use crate::brain::BrainResult;
use crate::logline::Repeated;
use crate::model::history::{Call, Chunk, Part, RequestSpec, Usage, arguments_bytes, label_of};
use crate::model::http::{self, EventStream};
use crate::model::layer::{Decoder, HttpRequest, Layer, SseItem};
use crate::model::{ModelError, ToolChoice};
use crate::session::{Session, Turn};
use crate::tools::{ToolSet, Toolbox};
use calls::Answering;
use failure::{RequestError, layer_code};

/// How many stream items and parts a turn handles before it yields its worker: a provider that
/// sends a megabyte of tiny events (or one event of a hundred thousand parts) at once must not
/// hold up the other calls the worker serves.
const WORK_PER_YIELD: usize = 64;

/// How one request ended, for the turn loop.
#[derive(Debug, Default)]
struct RequestEnd {
    /// A `#[needs_result_now]` tool ran.
    awaited: bool,
    /// A call failed as text or malformed (the turn may ask once more).
    stranded: bool,
    /// A bound cut the response.
    cut: Option<Tripped>,
}

impl RequestEnd {
    fn add(&mut self, other: RequestEnd) {
        self.awaited |= other.awaited;
        self.stranded |= other.stranded;
        self.cut = self.cut.or(other.cut);
    }
}

/// Everything a turn must still clean up or report if its future is dropped.
pub(crate) struct TurnState<'t> {
    model: &'t Model,
    turn: &'t Turn,
    session: Session,
    tally: Tally,
    clock: Clock,
    /// The response being written, from its first part to its finish.
    response: Option<Response<'t>>,
    hop: Option<Hop>,
    /// The provider's id of the last request, for the `turn:` line.
    request_id: Option<String>,
    bounds: Bounds,
    /// When the turn's deadline passes.
    deadline: tokio::time::Instant,
    /// Tools run this turn, over all its requests.
    runs: usize,
    /// Calls read from the request in flight.
    request_calls: usize,
    /// The first bound that tripped this turn (its one warning is logged then).
    tripped: Option<Tripped>,
    /// Items and parts handled since the turn last yielded its worker.
    work: usize,
    /// Whether the turn writes its lines about calls written as text, once decided.
    text_calls_loud: Option<bool>,
    /// The call's brain as a shared toolbox (a run can then outlive the turn), once decided.
    shared: Option<Option<std::sync::Arc<dyn Toolbox>>>,
    /// The progress lines of the turn's tools, waiting to be spoken: made at the turn's first
    /// tool run (a turn without one allocates nothing for it).
    progress: Option<(mpsc::Sender<String>, mpsc::Receiver<String>)>,
    /// The runs the turn waits for, for their filler.
    waiting: Vec<calls::InFlight>,
    /// The last key given to a run the turn waits for.
    next_key: u64,
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
            hop: None,
            request_id: None,
            bounds,
            deadline: deadline_after(bounds.turn_deadline),
            runs: 0,
            request_calls: 0,
            tripped: None,
            work: 0,
            text_calls_loud: None,
            shared: None,
            progress: None,
            waiting: Vec::new(),
            next_key: 0,
            done: false,
        }
    }

    /// Counts one stream item handled; yields the worker every [`WORK_PER_YIELD`] items and parts.
    async fn pace(&mut self) {
        self.work += 1;
        self.yield_if_due().await;
    }

    /// Yields the worker once [`WORK_PER_YIELD`] items and parts were handled since it last did.
    async fn yield_if_due(&mut self) {
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
        crate::metrics::bound_tripped(bound.label());
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
        if self.request_calls >= b.calls_per_response {
            Some(Tripped::Calls(b.calls_per_response))
        } else if arguments_bytes(&call.arguments) > b.argument_bytes {
            Some(Tripped::ArgumentBytes(b.argument_bytes))
        } else if runs && self.runs >= b.tool_runs {
            Some(Tripped::ToolRuns(b.tool_runs))
        } else {
            None
        }
    }

    fn steps_on(&self) -> bool {
        self.model.inner.settings.report_steps
    }

    /// Ends the request in flight: its usage joins the turn's, its `model` step is reported.
    fn end_request(&mut self) {
        if let Some(mut hop) = self.hop.take() {
            hop.record(self.turn.is_cancelled());
            self.tally.add(hop.usage);
            if self.steps_on() {
                let layer = &self.model.inner.layer;
                let step = hop.step(layer.model(), layer.provider());
                report(&self.session, step, self.turn.id(), true);
            }
        }
    }

    /// The response being written, opened at its first part (of any kind).
    fn response(&mut self, conversation: &mut Conversation) -> &mut Response<'t> {
        let turn = self.turn;
        self.response
            .get_or_insert_with(|| Response::open(turn, conversation))
    }

    /// A bound cut the open response: it ends where it is (see [`Response::abandon`]).
    fn cut(&mut self, bound: Tripped) {
        if let Some(r) = self.response.take() {
            r.abandon(&mut self.model.conversation());
        }
        self.trip(bound);
    }

    /// The open response ended (a finish with no response open is stranded when malformed: the
    /// model tried to make a call and nothing came of it).
    fn close(&mut self, ending: Ending) -> Closed {
        match self.response.take() {
            Some(r) => r.close(&mut self.model.conversation(), ending, &mut self.clock),
            None if ending == Ending::Malformed => Closed::Stranded,
            None => Closed::Answered,
        }
    }

    /// Turn cleanup, on every exit: a barge-in, an error, or the end.
    fn finish(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        self.stop_runs();
        if let Some(r) = self.response.take() {
            r.abandon(&mut self.model.conversation());
        }
        self.end_request();
        if !allowed(self.model, |log| &mut log.turns) {
            return;
        }
        let layer = &self.model.inner.layer;
        let line = turn_line(
            layer.model(),
            &self.tally,
            &self.clock,
            self.request_id.as_deref(),
        );
        tracing::info!("{line}");
    }
}

impl Drop for TurnState<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Runs one turn against the model: `choice` for every request but a forced last one.
pub(crate) async fn run(
    model: &Model,
    brain: &dyn Toolbox,
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
        let end = match st.request(brain, &tools, &request_choice, note).await {
            Ok(end) => end,
            Err(e) => {
                st.failed(&e);
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

/// When a turn that may wait on the model for `limit` must end: a limit no clock can add (a
/// brain's `Duration::MAX` for "no deadline") is a century.
fn deadline_after(limit: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
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

/// The chunks of one read of the stream (`next`), and whether it was the stream's last: its end,
/// or a response past its byte bound (`end` is cut then).
fn decode(
    layer: &dyn Layer,
    decoder: &mut dyn Decoder,
    next: Option<Result<SseItem, ModelError>>,
    end: &mut RequestEnd,
) -> Result<(Vec<Chunk>, bool), RequestError> {
    match next {
        Some(Ok(item)) => {
            let chunks = layer_code(layer.provider(), "decoding the stream", || {
                decoder.item(item)
            })?;
            Ok((chunks, false))
        }
        Some(Err(ModelError::ResponseTooLarge { limit })) => {
            end.cut = Some(Tripped::ResponseBytes(limit));
            Ok((Vec::new(), true))
        }
        Some(Err(e)) => Err(e.into()),
        None => {
            let rest = layer_code(layer.provider(), "ending the stream", || decoder.end())?;
            Ok((rest, true))
        }
    }
}

/// What [`TurnState::write_parts`] stopped at.
enum Next {
    /// A call, kept in the response's tally and with the speech before it released: run it.
    Call(Call, Value),
    /// The worker is due a yield; more parts follow.
    Yield,
    /// The chunk has no more parts.
    Done,
}

impl TurnState<'_> {
    /// One request and its stream, read within the turn's bounds and deadline.
    async fn request(
        &mut self,
        brain: &dyn Toolbox,
        tools: &ToolSet,
        choice: &ToolChoice,
        note: bool,
    ) -> Result<RequestEnd, RequestError> {
        let layer = self.model.inner.layer.clone();
        // A run that went on after a barge-in is answered before the model reads the history.
        super::runs::all_answered(&self.model.inner).await;
        let request = {
            let conversation = self.model.conversation();
            let instruction = self.model.instruction_now();
            let spec = RequestSpec {
                instruction: instruction.as_deref(),
                history: conversation.entries(),
                note: note.then_some(RETRY_NOTE),
                tools,
                choice,
            };
            layer_code(layer.provider(), "building the request", || {
                layer.build(&spec)
            })?
        };
        let span = spans::chat(&*layer);
        self.hop = Some(Hop::start(span.clone(), spans::provider_name(&*layer)));
        self.request_calls = 0;
        self.stream(brain, tools, choice, &*layer, &request)
            .instrument(span)
            .await
    }

    /// Sends `request` and reads its stream (inside the request's span).
    async fn stream(
        &mut self,
        brain: &dyn Toolbox,
        tools: &ToolSet,
        choice: &ToolChoice,
        layer: &dyn Layer,
        request: &HttpRequest,
    ) -> Result<RequestEnd, RequestError> {
        let (bounds, deadline) = (self.bounds, self.deadline);
        let limit = bounds.turn_deadline;
        let (mut taping, opened) = self.open(layer, request).await?;
        let stream = taping.read(opened);
        self.request_id = stream.request_id().map(str::to_owned);
        let mut decoder: Box<dyn Decoder> = layer.decoder(bounds.decode());
        let mut end = RequestEnd::default();
        let tools_off = matches!(choice, ToolChoice::None);
        // The calls being answered: their tools run while the stream is read on. A barge-in
        // drops them (their tools are cancelled).
        let mut answering: Answering<'_> = FuturesUnordered::new();
        // A failed read (the deadline, a stall, a broken stream) ends the reading, not the tools
        // already running: they finish and file their results first, as one tool at a time would.
        // One timer for the whole stream (one made per read would be registered with the runtime
        // and removed again for every event).
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        let read: Result<(), RequestError> = loop {
            // Past the deadline nothing more is read, whatever the timer has not yet fired for.
            if tokio::time::Instant::now() >= deadline {
                break Err(RequestError::Deadline(limit));
            }
            let next = tokio::select! {
                biased;
                () = &mut expiry => break Err(RequestError::Deadline(limit)),
                () = self.answer_next(&mut answering, &mut end), if !answering.is_empty() => continue,
                next = stream.next() => next,
            };
            let (chunks, last) = match decode(layer, &mut *decoder, next, &mut end) {
                Ok(decoded) => decoded,
                Err(e) => break Err(e),
            };
            for chunk in chunks {
                end.add(
                    self.chunk(brain, tools, tools_off, chunk, &mut answering)
                        .await,
                );
                if end.cut.is_some() {
                    break;
                }
            }
            if last || end.cut.is_some() || decoder.done() {
                break Ok(());
            }
            self.pace().await;
        };
        // The stream is dropped (its connection closed) before the tools are waited for.
        taping.ended(read.as_ref().err().map(ToString::to_string));
        // Every call has its result before the response is cut or closed, before a follow-up, and
        // before a failed request is reported.
        self.answer_all(&mut answering, &mut end).await;
        read?;
        if let Some(bound) = end.cut {
            self.cut(bound);
        } else if self.response.is_some() {
            // The stream ended with a response still open: close it so its speech is bracketed.
            end.stranded |= self.close(Ending::Finished) == Closed::Stranded;
        }
        self.end_request();
        Ok(end)
    }

    /// Sends `request` within the turn's deadline. On a recorded call, the request's line is
    /// written however it ends (a barge-in drops the stream's future mid-stream).
    async fn open(
        &self,
        layer: &dyn Layer,
        request: &HttpRequest,
    ) -> Result<(Taping, EventStream), RequestError> {
        let (bounds, deadline) = (self.bounds, self.deadline);
        let open = http::open(
            request,
            layer.timeouts(),
            bounds.response_bytes,
            layer.http(),
        );
        let taping = Taping::sent(self.session.tape(), layer, request);
        match before(deadline, bounds.turn_deadline, open).await {
            Ok(Ok(stream)) => Ok((taping, stream)),
            Ok(Err(e)) => {
                taping.unanswered(&e);
                Err(e.into())
            }
            Err(e) => {
                taping.unsent(&e);
                Err(e)
            }
        }
    }

    /// One decoded chunk: parts in order (a call runs the moment it is read), then the finish. A part
    /// or a call past a bound ends the chunk: the response is cut there.
    async fn chunk<'a>(
        &mut self,
        brain: &'a dyn Toolbox,
        tools: &'a ToolSet,
        tools_off: bool,
        chunk: Chunk,
        answering: &mut Answering<'a>,
    ) -> RequestEnd {
        self.clock.mark_open();
        self.heard_of(&chunk);
        let mut end = RequestEnd::default();
        let mut parts = joined(chunk.parts).into_iter().peekable();
        while parts.peek().is_some() {
            let ran = match self.write_parts(&mut parts) {
                Ok(Next::Done) => break,
                Ok(Next::Yield) => {
                    self.yield_if_due().await;
                    Ok(())
                }
                Ok(Next::Call(call, raw)) => {
                    self.dispatch(brain, tools, tools_off, (call, raw), answering, &mut end)
                        .await
                }
                Err(bound) => Err(bound),
            };
            if let Err(bound) = ran {
                end.cut = Some(bound);
                return end;
            }
        }
        // The decoder left a part (or an event) unread: it would have passed what a response keeps.
        if chunk.too_big {
            end.cut = Some(Tripped::KeptBytes(self.bounds.response_bytes));
            return end;
        }
        if let Some(Part::Call { call, raw }) = chunk.cut_call {
            self.cut_off(call, raw);
        }
        let stopped = self
            .response
            .as_mut()
            .is_some_and(Response::stop_speaking_if_leaked);
        if stopped && self.loud_about_text_calls() {
            tracing::warn!(
                "turn: model={} wrote a function call as text after speech began; the words before it were spoken and none of the call was",
                self.model.inner.layer.model()
            );
        }
        if chunk.finished {
            // The response's results are filed before it closes.
            self.answer_all(answering, &mut end).await;
            let ending = if chunk.malformed {
                Ending::Malformed
            } else {
                Ending::Finished
            };
            end.stranded |= self.close(ending) == Closed::Stranded;
        }
        end
    }

    /// Writes the chunk's parts into the open response, under one lock of the conversation,
    /// until a call, a due yield, or the end of the parts.
    ///
    /// # Errors
    /// The bound the next part would pass (what one response keeps): the part is not kept.
    fn write_parts(
        &mut self,
        parts: &mut Peekable<impl Iterator<Item = Part>>,
    ) -> Result<Next, Tripped> {
        let model = self.model;
        let mut conversation = model.conversation();
        self.response(&mut conversation);
        let Some(r) = self.response.as_mut() else {
            return Ok(Next::Done);
        };
        while self.work < WORK_PER_YIELD {
            let Some(part) = parts.next() else {
                return Ok(Next::Done);
            };
            self.work += 1;
            r.keep(&part, &self.bounds)?;
            match part {
                Part::Call { call, raw } => {
                    // Speech before a call is heard before the tool runs, with a tail the guard
                    // held in case it began a call written as text: this call is a real one.
                    r.before_call(&mut conversation, &mut self.clock);
                    return Ok(Next::Call(call, raw));
                }
                part => r.write(&mut conversation, part, &mut self.clock),
            }
        }
        Ok(if parts.peek().is_some() {
            Next::Yield
        } else {
            Next::Done
        })
    }

    /// What a chunk says of its request, for its span, its step and the `turn:` line: a stop
    /// that was not a normal end, and (on the request's [`Hop`]) its usage, a count past
    /// [`Usage::MAX_COUNT`] left out and logged.
    fn heard_of(&mut self, chunk: &Chunk) {
        if let Some(stop) = &chunk.abnormal_stop {
            self.tally.stop = Some(label_of(stop));
        }
        let over = self.hop.as_mut().and_then(|hop| hop.heard(chunk));
        if let Some((name, n)) = over
            && allowed(self.model, |log| &mut log.token_counts)
        {
            let layer = &self.model.inner.layer;
            tracing::warn!(
                "turn: model={} provider={} reported {name}={n}, over the {} a request may \
                 report: not counted",
                layer.model(),
                layer.provider(),
                Usage::MAX_COUNT
            );
        }
    }

    /// A call the stop cut off before its arguments were complete: the speech before it goes
    /// out (it was a real call), and it is filed with no arguments, answered with an error the
    /// model reads. Its tool never runs.
    fn cut_off(&mut self, call: Call, raw: Value) {
        let model = self.model;
        let mut conversation = model.conversation();
        self.response(&mut conversation);
        if let Some(r) = self.response.as_mut() {
            r.before_call(&mut conversation, &mut self.clock);
            r.cut_off(&mut conversation, call, raw);
            self.tally.cut_calls += 1;
        }
    }
}

/// Whether a line of the kind `kind` picks from the session's [`TurnLog`] is written now; when it
/// is not, it is counted, and summed up later.
fn allowed(model: &Model, kind: impl FnOnce(&mut TurnLog) -> &mut Repeated) -> bool {
    super::runs::allowed(&model.inner, kind)
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

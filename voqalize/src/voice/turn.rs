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

use std::time::{Duration, Instant};

use super::Model;
use super::guard::{Guard, RETRY_NOTE};
use super::report::{Clock, Hop, Tally, report, turn_line};
use crate::brain::BrainResult;
use crate::model::history::{Part, RequestSpec, Role, ToolResult};
use crate::model::http::{self, EventStream};
use crate::model::layer::Decoder;
use crate::model::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::model::{ModelError, StreamError, ToolChoice};
use crate::session::{Session, SpeechUnit, Step, Turn};
use crate::tools::{ToolError, ToolErrorKind, ToolOutcome, ToolSet, Toolbox};

/// How long a tool waits for the speech before its call to reach the socket.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Why a request failed: the transport, or the provider's stream.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error(transparent)]
    Http(#[from] ModelError),
    #[error(transparent)]
    Stream(#[from] StreamError),
}

/// One response being written: its model turn in the history, the guard on its text, the
/// speech unit once a word was released.
struct Response<'t> {
    entry: u64,
    guard: Guard,
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
    done: bool,
}

impl<'t> TurnState<'t> {
    fn new(model: &'t Model, turn: &'t Turn) -> Self {
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
            done: false,
        }
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
        let layer = &self.model.inner.layer;
        let line = turn_line(layer.model(), &self.tally, &self.clock);
        match &self.request_id {
            Some(id) => tracing::info!("{line} request_id={id}"),
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
        let forced = followups > 0 && followups == max_hops;
        if forced {
            tracing::warn!(
                "turn: model={} reached max_tool_hops={max_hops}; the last request may not call a tool",
                model.inner.layer.model()
            );
        }
        let request_choice = if forced {
            ToolChoice::None
        } else {
            choice.clone()
        };
        let (awaited, stranded) = match hop(&mut st, brain, &tools, &request_choice, note).await {
            Ok(outcome) => outcome,
            Err(e) => {
                failed(&mut st, &e);
                return Ok(());
            }
        };
        note = false;
        if stranded {
            let m = model.inner.layer.model();
            if retried {
                tracing::warn!(
                    "turn: model={m} wrote a function call as text or malformed again; the turn ends without it"
                );
                break;
            }
            tracing::warn!(
                "turn: model={m} wrote a function call as text or malformed; none of it was spoken and nothing ran — asking once more"
            );
            retried = true;
            note = true;
            continue;
        }
        if !awaited || followups == max_hops {
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
    let layer = &st.model.inner.layer;
    tracing::error!(
        "turn: model={} provider={} request failed: {e}",
        layer.model(),
        layer.provider()
    );
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

/// One request and its stream. Returns (a marked tool ran, a call failed as text or malformed).
async fn hop<B: Toolbox + ?Sized>(
    st: &mut TurnState<'_>,
    brain: &B,
    tools: &ToolSet,
    choice: &ToolChoice,
    note: bool,
) -> Result<(bool, bool), RequestError> {
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
    let mut stream: EventStream =
        http::open(&request, layer.timeouts(), DEFAULT_MAX_EVENT_BYTES).await?;
    st.request_id = stream.request_id().map(str::to_owned);
    let mut decoder: Box<dyn Decoder> = layer.decoder();
    let (mut awaited, mut stranded) = (false, false);
    let tools_off = matches!(choice, ToolChoice::None);
    loop {
        let chunks = match stream.next().await {
            Some(item) => decoder.item(item?)?,
            None => {
                for chunk in decoder.end()? {
                    let (a, s) = chunk_in(st, brain, tools, tools_off, chunk).await;
                    awaited |= a;
                    stranded |= s;
                }
                break;
            }
        };
        for chunk in chunks {
            let (a, s) = chunk_in(st, brain, tools, tools_off, chunk).await;
            awaited |= a;
            stranded |= s;
        }
        if decoder.done() {
            break;
        }
    }
    drop(stream);
    if st.response.is_some() {
        // The stream ended with a response still open: close it so its speech is bracketed.
        stranded |= st.close_response(false, true);
    }
    st.end_hop();
    Ok((awaited, stranded))
}

/// One decoded chunk: parts in order (a call runs the moment it is read), then the finish.
async fn chunk_in<B: Toolbox + ?Sized>(
    st: &mut TurnState<'_>,
    brain: &B,
    tools: &ToolSet,
    tools_off: bool,
    chunk: crate::model::history::Chunk,
) -> (bool, bool) {
    st.clock.mark_open();
    if let Some(hop) = st.hop.as_mut() {
        hop.first.get_or_insert_with(|| hop.started.elapsed());
        if chunk.usage.is_some() {
            hop.usage = chunk.usage;
        }
    }
    let (mut awaited, mut stranded) = (false, false);
    let mut speak = Vec::new();
    for part in chunk.parts {
        let entry = st.response().entry;
        match part {
            Part::Call { call, raw } => {
                // Speech before a call is heard before the tool runs, with a tail the guard
                // held in case it began a call written as text: this call is a real one.
                speak.extend(st.response().guard.before_call());
                st.speak(std::mem::take(&mut speak));
                st.session.flushed(FLUSH_WAIT).await;
                let r = st.response();
                let ordinal = r.calls;
                r.calls += 1;
                r.called = true;
                let (name, arguments, call_id) =
                    (call.name.clone(), call.arguments.clone(), call.id.clone());
                st.model
                    .conversation()
                    .extend(entry, Part::Call { call, raw });
                st.running = Some((entry, ordinal));
                let started = Instant::now();
                let outcome = if tools_off {
                    refused(&name)
                } else {
                    brain.call_tool(tools, &name, arguments).await
                };
                let result = ToolResult {
                    call_id,
                    name: name.clone(),
                    response: outcome.response(),
                };
                let mut results = st.response().results;
                st.model.conversation().file(entry, &mut results, result);
                st.response().results = results;
                st.running = None;
                st.tally.calls += 1;
                if st.steps_on() {
                    let ms = u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX);
                    report(
                        &st.session,
                        Step::new("tool", name.clone()).duration_ms(ms),
                        st.turn.id(),
                        false,
                    );
                }
                if !tools_off && tools.get(&name).is_some_and(|t| t.needs_result_now()) {
                    st.tally.awaited += 1;
                    awaited = true;
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
        tracing::warn!(
            "turn: model={} wrote a function call as text after speech began; the words before it were spoken and none of the call was",
            st.model.inner.layer.model()
        );
        unit.close();
    }
    if chunk.finished {
        if st.response.is_some() {
            stranded |= st.close_response(chunk.malformed, false);
        } else if chunk.malformed {
            stranded = true;
        }
    }
    (awaited, stranded)
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

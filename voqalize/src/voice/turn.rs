//! One model-backed turn: requests, the stream, speech, tool calls, and the cleanup a barge-in
//! still runs (docs/protocol.md §6).
//!
//! A turn is one request, plus a follow-up after a `#[needs_result_now]` tool (at most
//! `max_tool_hops`, the last one forced to speak) and at most one retry after a call written as
//! text. Each response has one owner, a [`Response`]: the turn reads the stream, hands the
//! response its parts, and runs each tool the moment its call arrives, after the speech before it
//! is on the wire. A barge-in drops the turn's future at its next `.await`:
//! [`TurnState`]'s `Drop` then stops the runs that end with the turn (their calls answered as
//! cancelled), abandons the open response (unheard text is cut; every call stays, answered now or
//! when its run ends), reports the request it paid for and logs the `turn:` line.
//!
//! Every response is read within the session's [`Bounds`] (docs/protocol.md §6.14): a bound that
//! trips cuts the response where it tripped, answers the call that tripped it with an error the
//! model reads, and logs one warning for the turn.
//!
//! By job: this file holds the turn's state and its loop over requests; `turn/stream.rs` reads a
//! request's stream into the response; `turn/dispatch.rs` starts each call's tool;
//! `turn/waiting.rs` waits for the runs (with the filler and the tools' progress);
//! `turn/bookkeeping.rs` keeps the turn's tally, bounds, response and `turn:` line;
//! `turn/failure.rs` handles a request that fails; `turn/attempt.rs` takes a request to its first
//! words on the layer (of a fallback chain) that answers it, and `turn/reading.rs` reads one item
//! of a stream for both.

mod attempt;
mod bookkeeping;
mod dispatch;
mod failure;
mod reading;
mod stream;
mod waiting;

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Model;
use super::bounds::{Bounds, Tripped};
use super::report::{Clock, Hop, Tally, TurnLog};
use super::response::Response;
use crate::brain::BrainResult;
use crate::logline::Repeated;
use crate::model::ToolChoice;
use crate::model::layer::Layer;
use crate::session::{Session, Turn};
use crate::tools::{ToolSet, Toolbox};

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

/// What a request's calls are answered with: the toolbox, the turn's tools, and whether the
/// request allowed none (its calls are then refused, not run).
#[derive(Clone, Copy)]
struct Calling<'a> {
    brain: &'a dyn Toolbox,
    tools: &'a ToolSet,
    off: bool,
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
    /// The layer of the request in flight, or of the last one: which answered.
    answering: Option<Arc<dyn Layer>>,
    /// Where in its fallback chain (by the chain's address) the turn was last answered: the
    /// turn's later requests ask there first.
    sticky: Option<(usize, usize)>,
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
    waiting: Vec<waiting::InFlight>,
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
            answering: None,
            sticky: None,
            bounds,
            // A brain's `Duration::MAX` (no deadline) is as far as the clock reaches.
            deadline: crate::model::http::from_now(bounds.turn_deadline),
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
}

impl TurnState<'_> {
    /// The layer that answers the turn (of the request in flight, or the last): the first the
    /// turn asks, before any request went out.
    fn layer(&self) -> Arc<dyn Layer> {
        self.answering
            .clone()
            .unwrap_or_else(|| self.model.layer_now())
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
    model.begin_stages(brain, turn);
    let mut epoch = model.stage_epoch();
    let mut tools = model.turn_tools(brain, turn);
    let mut st = TurnState::new(model, turn);
    let max_hops = model.inner.settings.max_tool_hops;
    let (mut retried, mut note, mut followups) = (false, false, 0usize);
    loop {
        // A transition since the last request: the conversation crosses as its context says,
        // and the request declares the new stage's tools.
        crate::voice::runs::all_answered(&model.inner).await;
        super::workflow::hand_off(model, turn).await;
        if model.stage_epoch() != epoch {
            epoch = model.stage_epoch();
            tools = model.turn_tools(brain, turn);
        }
        st.tally.hops += 1;
        let capped = followups > 0 && followups == max_hops;
        if capped && allowed(model, |log| &mut log.bounds) {
            tracing::warn!(
                "turn: model={} reached max_tool_hops={max_hops}; the last request may not call a tool",
                st.layer().model()
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
            let layer = st.layer();
            let m = layer.model();
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

/// Whether a line of the kind `kind` picks from the session's [`TurnLog`] is written now; when it
/// is not, it is counted, and summed up later.
fn allowed(model: &Model, kind: impl FnOnce(&mut TurnLog) -> &mut Repeated) -> bool {
    super::runs::allowed(&model.inner, kind)
}

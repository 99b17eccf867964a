//! The turn's bookkeeping: its tally and `turn:` line, the bounds it trips (one warning a turn),
//! the request in flight and its step, the open response, pacing the worker, and the cleanup every
//! exit runs.

use super::{TurnState, WORK_PER_YIELD, allowed};
use crate::model::history::{Call, Chunk, Usage, arguments_bytes, label_of};
use crate::voice::bounds::Tripped;
use crate::voice::conversation::Conversation;
use crate::voice::report::{report, turn_line};
use crate::voice::response::{Closed, Ending, Response};

impl<'t> TurnState<'t> {
    /// Counts one stream item handled; yields the worker every [`WORK_PER_YIELD`] items and parts.
    pub(super) async fn pace(&mut self) {
        self.work += 1;
        self.yield_if_due().await;
    }

    /// Yields the worker once [`WORK_PER_YIELD`] items and parts were handled since it last did.
    pub(super) async fn yield_if_due(&mut self) {
        if self.work >= WORK_PER_YIELD {
            self.work = 0;
            tokio::task::yield_now().await;
        }
    }

    /// A bound tripped: the first of the turn is logged, once per turn and through the session's
    /// summariser (a provider that trips a bound on every turn writes one line per 10 s).
    pub(super) fn trip(&mut self, bound: Tripped) {
        if self.tripped.is_some() {
            return;
        }
        self.tripped = Some(bound);
        crate::metrics::bound_tripped(bound.label());
        if allowed(self.model, |log| &mut log.bounds) {
            tracing::warn!(
                "turn: model={} cut a response: {}; what was said stays",
                self.layer().model(),
                bound.what()
            );
        }
    }

    /// Whether the turn writes its lines about a function call written as text (the retry, giving
    /// up, the cut after speech): decided at the first through the session's summariser, so a
    /// turn writes all of them or none and a model that does it every turn writes one turn's.
    pub(super) fn loud_about_text_calls(&mut self) -> bool {
        let model = self.model;
        *self
            .text_calls_loud
            .get_or_insert_with(|| allowed(model, |log| &mut log.calls_as_text))
    }

    /// Whether the call about to be read passes a bound: the calls of this response, its
    /// arguments' bytes, the tools this turn ran (a call that would not run counts for neither).
    pub(super) fn over_bound(&self, call: &Call, runs: bool) -> Option<Tripped> {
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

    /// Whether the turn reports its steps (`model` and `tool` steps, when the model is told to).
    pub(super) fn steps_on(&self) -> bool {
        self.model.inner.settings.report_steps
    }

    /// Ends the request in flight: its usage joins the turn's, its `model` step is reported.
    pub(super) fn end_request(&mut self) {
        if let Some(mut hop) = self.hop.take() {
            hop.record(self.turn.is_cancelled());
            self.tally.add(hop.usage);
            if self.steps_on() {
                let layer = self.layer();
                let step = hop.step(layer.model(), layer.provider());
                report(&self.session, step, self.turn.id(), true);
            }
        }
    }

    /// The response being written, opened at its first part (of any kind).
    pub(super) fn response(&mut self, conversation: &mut Conversation) -> &mut Response<'t> {
        let response = match self.response.take() {
            Some(response) => response,
            // Written by the layer that answers, so a later request to another renders it as
            // foreign (docs/protocol.md §6.9).
            None => {
                let origin = self.model.origin_of(&*self.layer());
                Response::open(self.turn, conversation, origin)
            }
        };
        self.response.insert(response)
    }

    /// A bound cut the open response: it ends where it is (see [`Response::abandon`]).
    pub(super) fn cut(&mut self, bound: Tripped) {
        if let Some(r) = self.response.take() {
            r.abandon(&mut self.model.conversation());
        }
        self.trip(bound);
    }

    /// The open response ended (a finish with no response open is stranded when malformed: the
    /// model tried to make a call and nothing came of it).
    pub(super) fn close(&mut self, ending: Ending) -> Closed {
        match self.response.take() {
            Some(r) => r.close(&mut self.model.conversation(), ending, &mut self.clock),
            None if ending == Ending::Malformed => Closed::Stranded,
            None => Closed::Answered,
        }
    }

    /// Turn cleanup, on every exit: a barge-in, an error, or the end.
    pub(super) fn finish(&mut self) {
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
        let layer = self.layer();
        let line = turn_line(
            layer.model(),
            &self.tally,
            &self.clock,
            self.request_id.as_deref(),
        );
        tracing::info!("{line}");
    }

    /// What a chunk says of its request, for its span, its step and the `turn:` line: a stop
    /// that was not a normal end, and (on the request's [`Hop`]) its usage, a count past
    /// [`Usage::MAX_COUNT`] left out and logged.
    pub(super) fn heard_of(&mut self, chunk: &Chunk) {
        if let Some(stop) = &chunk.abnormal_stop {
            self.tally.stop = Some(label_of(stop));
        }
        let over = self.hop.as_mut().and_then(|hop| hop.heard(chunk));
        if let Some((name, n)) = over
            && allowed(self.model, |log| &mut log.token_counts)
        {
            let layer = self.layer();
            tracing::warn!(
                "turn: model={} provider={} reported {name}={n}, over the {} a request may \
                 report: not counted",
                layer.model(),
                layer.provider(),
                Usage::MAX_COUNT
            );
        }
    }
}

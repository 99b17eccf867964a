//! A request up to the model's first words: built for the layer that answers it, sent, and its
//! stream read until it brings text or a call (or ends). Until then nothing was spoken and no
//! tool ran, so a failure moves on to the next layer of a fallback chain, in the same turn
//! (docs/protocol.md §6.18), and a hedged request can still be cancelled. What was read is held
//! for `stream.rs`, which reads on from there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::Instrument;

use super::failure::{RequestError, layer_code};
use super::reading::{Read, before, decode};
use super::{TurnState, WORK_PER_YIELD};
use crate::model::ToolChoice;
use crate::model::history::{Chunk, Kept, Part, RequestSpec};
use crate::model::http::{self, ModelError};
use crate::model::layer::{Decoder, HttpRequest, Layer};
use crate::model::origin::for_layer;
use crate::tools::ToolSet;
use crate::voice::ModelLayer;
use crate::voice::bounds::Tripped;
use crate::voice::guard::RETRY_NOTE;
use crate::voice::layers::{Chain, Ticket};
use crate::voice::report::Hop;
use crate::voice::spans;
use crate::voice::taping::Taping;

/// What a request asks, whichever layer answers it.
#[derive(Clone, Copy)]
pub(super) struct Asking<'a> {
    pub(super) tools: &'a ToolSet,
    pub(super) choice: &'a ToolChoice,
    /// Whether the request carries the note after a call written as text.
    pub(super) note: bool,
}

/// One request on one layer, up to its first words.
pub(super) struct Attempt {
    pub(super) layer: Arc<dyn Layer>,
    /// Its place in the chain (0 without one).
    at: usize,
    /// Its leave from the layer's breaker, told the verdict.
    ticket: Option<Ticket>,
    /// The layer this request took over from, and why, for its span.
    left: Option<(String, &'static str)>,
    /// It races another request (a hedge): set when the other won, before it is dropped, so its
    /// request counts as `hedged_out`.
    lost: Option<Arc<AtomicBool>>,
    pub(super) hop: Option<Hop>,
    pub(super) taping: Option<Taping>,
    pub(super) decoder: Option<Box<dyn Decoder>>,
    /// The chunks read so far, in order.
    pub(super) early: Vec<Chunk>,
    /// The stream ended (`early` holds the decoder's last chunks).
    pub(super) ended: bool,
    /// The response passed its byte bound while it was read.
    pub(super) cut: Option<Tripped>,
    /// What `early` keeps, as a response counts it.
    kept: Kept,
}

impl Attempt {
    fn new(layer: Arc<dyn Layer>, at: usize, ticket: Option<Ticket>) -> Attempt {
        Attempt {
            layer,
            at,
            ticket,
            left: None,
            lost: None,
            hop: None,
            taping: None,
            decoder: None,
            early: Vec::new(),
            ended: false,
            cut: None,
            kept: Kept::default(),
        }
    }
}

/// Whether a chunk brings the response's first words: text, a call, or its end.
fn speaks(chunk: &Chunk) -> bool {
    chunk.finished
        || chunk.malformed
        || chunk.too_big
        || chunk.cut_call.is_some()
        || chunk.parts.iter().any(|part| match part {
            Part::Text { text, .. } => !text.is_empty(),
            Part::Call { .. } => true,
            _ => false,
        })
}

/// The layers a turn's request may ask: one, or a chain's.
struct Layers<'a> {
    first: &'a Arc<dyn Layer>,
    chain: Option<&'a Chain>,
}

impl Layers<'_> {
    fn len(&self) -> usize {
        self.chain.map_or(1, Chain::len)
    }

    fn layer(&self, i: usize) -> Arc<dyn Layer> {
        self.chain
            .map_or_else(|| self.first.clone(), |c| c.layer(i).clone())
    }

    /// Layer `i` may be asked now (with its breaker's ticket), or its breaker is open.
    fn admit(&self, i: usize) -> Result<Option<Ticket>, ()> {
        match self.chain {
            None => Ok(None),
            Some(chain) => chain.admit(i).map(Some).ok_or(()),
        }
    }
}

/// What a hedged race ended with: the request that brought the first words, if either did,
/// after the failures before it, in the order they came.
type Raced = Vec<(Attempt, Result<(), RequestError>)>;

impl TurnState<'_> {
    /// The request, up to the model's first words: from the layer that answered this turn last
    /// (the first, at a turn's start) on down the chain, skipping a layer whose breaker is open,
    /// moving on after a failure, hedged when the chain says.
    ///
    /// # Errors
    /// The turn's deadline; the last layer's failure; [`RequestError::Unavailable`] when every
    /// layer was skipped.
    pub(super) async fn until_first_words(
        &mut self,
        asking: Asking<'_>,
    ) -> Result<Attempt, RequestError> {
        let chain: ModelLayer = self.model.chain_now();
        let layers = Layers {
            first: chain.layer(),
            chain: chain.fallback().map(|c| &**c),
        };
        let key = chain.fallback().map_or(0, |c| Arc::as_ptr(c) as usize);
        let n = layers.len();
        let mut i = match self.sticky {
            Some((k, at)) if k == key => at.min(n - 1),
            _ => 0,
        };
        let mut failed: Option<RequestError> = None;
        let mut left: Option<(String, &'static str)> = None;
        while i < n {
            let Ok(ticket) = layers.admit(i) else {
                left = Some(self.moved_on(&*layers.layer(i), "breaker_open", &layers, i, None));
                i += 1;
                continue;
            };
            let mut attempt = Attempt::new(layers.layer(i), i, ticket);
            attempt.left = left.take();
            let hedge = layers
                .chain
                .and_then(|c| c.hedge_after)
                .filter(|_| i + 1 < n);
            let raced = match hedge {
                Some(after) => {
                    attempt.lost = Some(Arc::default());
                    // From the heap: two requests' states side by side would size every turn's
                    // future for them (some 11 kB more, copied as each turn starts), hedged or not.
                    Box::pin(self.hedged(attempt, after, &layers, asking)).await
                }
                None => vec![self.prelude(attempt, i + 1 == n, asking).await],
            };
            for (mut attempt, result) in raced {
                let at = attempt.at;
                match result {
                    Ok(()) => {
                        if let Some(ticket) = attempt.ticket.take() {
                            ticket.succeeded();
                        }
                        self.sticky = Some((key, at));
                        return Ok(attempt);
                    }
                    Err(e @ RequestError::Deadline(_)) => {
                        self.hop = attempt.hop.take();
                        return Err(e);
                    }
                    Err(e) => {
                        if let (Some(ticket), Some(chain)) = (attempt.ticket.take(), layers.chain)
                            && e.outage()
                        {
                            ticket.failed(&chain.breaker, e.retry_after(), chain.max_retry_after);
                        }
                        self.attempt_failed(&mut attempt, &e);
                        if at + 1 < n {
                            left = Some(self.moved_on(
                                &*attempt.layer,
                                e.outcome(),
                                &layers,
                                at,
                                Some(&e),
                            ));
                        }
                        i = i.max(at + 1);
                        failed = Some(e);
                    }
                }
            }
        }
        Err(failed.unwrap_or(RequestError::Unavailable))
    }

    /// A request that failed before its first words: its span and metrics say why, and its
    /// `model` step is reported (it was paid for).
    fn attempt_failed(&mut self, attempt: &mut Attempt, e: &RequestError) {
        let Some(mut hop) = attempt.hop.take() else {
            return;
        };
        hop.span.record("error.type", e.kind());
        hop.outcome = e.outcome();
        if let RequestError::Http(crate::model::ModelError::Status {
            request_id: Some(id),
            ..
        }) = e
        {
            self.request_id = Some(id.clone());
        }
        self.answering = Some(attempt.layer.clone());
        self.hop = Some(hop);
        self.end_request();
    }

    /// The request leaves layer `at` (`from`) for the next, for `reason`: counted, reported as a
    /// `fallback` step, logged (summed up), and named on the `turn:` line. Gives what the next
    /// request's span says of it.
    fn moved_on(
        &mut self,
        from: &dyn Layer,
        reason: &'static str,
        layers: &Layers<'_>,
        at: usize,
        error: Option<&RequestError>,
    ) -> (String, &'static str) {
        let to = (at + 1 < layers.len()).then(|| layers.layer(at + 1));
        let to_model = to.as_ref().map_or("none", |l| l.model());
        crate::metrics::model_fallback(from.model(), to_model, reason);
        if self.steps_on() {
            let step = crate::session::Step::new("fallback", from.model())
                .provider(from.provider())
                .count(reason, 1);
            crate::voice::report::report(&self.session, step, self.turn.id(), true);
        }
        self.tally
            .fallback
            .get_or_insert_with(|| format!("{}:{reason}", from.model()));
        if super::allowed(self.model, |log| &mut log.fallbacks) {
            let why = error.map_or_else(
                || "its breaker is open".to_owned(),
                |e| crate::logline::outside_n(&crate::logline::chain(e), 300).to_string(),
            );
            tracing::warn!(
                "turn: model={} provider={} left before its first words ({reason}: {why}); asking model={to_model}",
                from.model(),
                from.provider(),
            );
        }
        (from.model().to_owned(), reason)
    }

    /// `attempt` raced against the next layer's, sent once `after` passed without its first
    /// words: the first to bring them wins and the other is cancelled (dropped: its connection
    /// closed, its request counted as `hedged_out` with what usage it reported).
    async fn hedged(
        &self,
        attempt: Attempt,
        after: Duration,
        layers: &Layers<'_>,
        asking: Asking<'_>,
    ) -> Raced {
        let next = attempt.at + 1;
        let retry_next = next + 1 == layers.len();
        let first_lost = attempt.lost.clone().unwrap_or_default();
        let first = self.prelude(attempt, false, asking);
        tokio::pin!(first);
        tokio::select! {
            biased;
            done = &mut first => return vec![done],
            () = tokio::time::sleep(after) => {}
        }
        let Ok(ticket) = layers.admit(next) else {
            return vec![first.await];
        };
        let mut second = Attempt::new(layers.layer(next), next, ticket);
        let second_lost: Arc<AtomicBool> = Arc::default();
        second.lost = Some(second_lost.clone());
        let second = self.prelude(second, retry_next, asking);
        tokio::pin!(second);
        tokio::select! {
            biased;
            (a, r) = &mut first => match r {
                Ok(()) => {
                    second_lost.store(true, Ordering::Relaxed);
                    crate::metrics::hedge("first");
                    vec![(a, Ok(()))]
                }
                Err(e) => vec![(a, Err(e)), second.await],
            },
            (b, r) = &mut second => match r {
                Ok(()) => {
                    first_lost.store(true, Ordering::Relaxed);
                    crate::metrics::hedge("second");
                    vec![(b, Ok(()))]
                }
                Err(e) => vec![(b, Err(e)), first.await],
            },
        }
    }

    /// One request on `attempt`'s layer, up to its first words (with the transport's one retry
    /// when `retry`): what was read stays on the attempt.
    async fn prelude(
        &self,
        mut attempt: Attempt,
        retry: bool,
        asking: Asking<'_>,
    ) -> (Attempt, Result<(), RequestError>) {
        let result = self.send(&mut attempt, retry, asking).await;
        (attempt, result)
    }

    /// Builds the request for the attempt's layer, sends it and reads to the first words.
    async fn send(
        &self,
        attempt: &mut Attempt,
        retry: bool,
        asking: Asking<'_>,
    ) -> Result<(), RequestError> {
        let layer = attempt.layer.clone();
        let request = self.build(&*layer, asking)?;
        let span = spans::chat(&*layer);
        if let Some(stage) = self.model.stage_name() {
            span.record("voqalize.stage", stage);
        }
        if let Some((from, reason)) = &attempt.left {
            span.record("voqalize.fallback.from", from.as_str());
            span.record("voqalize.fallback.reason", *reason);
        }
        let mut hop = Hop::start(span.clone(), spans::provider_name(&*layer));
        hop.lost.clone_from(&attempt.lost);
        attempt.hop = Some(hop);
        attempt.taping = Some(Taping::sent(self.session.tape(), &*layer, &request));
        self.first_words(attempt, &request, retry)
            .instrument(span)
            .await
    }

    /// The request for `layer`: the instruction, the history, the tools and the choice.
    fn build(&self, layer: &dyn Layer, asking: Asking<'_>) -> Result<HttpRequest, RequestError> {
        let conversation = self.model.conversation();
        let instruction = self.model.instruction_now();
        // Borrowed unless a turn in it is another layer's (docs/protocol.md §6.9).
        let history = for_layer(conversation.entries(), layer);
        let spec = RequestSpec {
            instruction: instruction.as_deref(),
            history: &history,
            note: asking.note.then_some(RETRY_NOTE),
            tools: asking.tools,
            choice: asking.choice,
            rendered: Some(conversation.rendered()),
        };
        Ok(layer_code(
            layer.provider(),
            "building the request",
            || layer.build(&spec),
        )?)
    }

    /// Opens the request's stream before the turn's deadline and reads it until the first words,
    /// its end, or a bound.
    async fn first_words(
        &self,
        attempt: &mut Attempt,
        request: &HttpRequest,
        retry: bool,
    ) -> Result<(), RequestError> {
        let layer = attempt.layer.clone();
        let (deadline, limit) = (self.deadline, self.bounds.turn_deadline);
        let Some(taping) = attempt.taping.as_mut() else {
            return Ok(());
        };
        let first_byte = layer.timeouts().first_byte;
        // Until the layer reads its first chunk, an event it ignores (a keep-alive) is no first
        // byte: the layer's first-byte timeout still runs, from the request's sending.
        let silent_until = tokio::time::Instant::now()
            .checked_add(first_byte)
            .filter(|until| *until < deadline);
        let open = http::open_with(
            request,
            layer.timeouts(),
            self.bounds.response_bytes,
            layer.http(),
            retry,
        );
        let stream = match before(deadline, limit, open).await {
            Ok(Ok(stream)) => taping.read(stream),
            Ok(Err(e)) => {
                taping.unanswered(&e);
                return Err(e.into());
            }
            Err(e) => {
                taping.unsent(&e);
                return Err(e);
            }
        };
        let mut decoder = layer.decoder(self.bounds.decode());
        let mut work = 0;
        loop {
            let by = silent_until
                .filter(|_| attempt.early.is_empty())
                .unwrap_or(deadline);
            let read = match before(by, limit, stream.next()).await {
                Ok(next) => decode(&*layer, &mut *decoder, next),
                Err(_) if by < deadline => Err(ModelError::FirstByteTimeout(first_byte).into()),
                Err(e) => Err(e),
            };
            let chunks = match read {
                Ok(Read::Chunks(chunks)) => chunks,
                Ok(Read::Last(chunks)) => {
                    attempt.ended = true;
                    chunks
                }
                Ok(Read::Cut(bound)) => {
                    attempt.cut = Some(bound);
                    break;
                }
                Err(e) => {
                    taping.ended(Some(e.to_string()));
                    return Err(e);
                }
            };
            let mut words = attempt.ended || decoder.done();
            for chunk in chunks {
                if let Some(hop) = &mut attempt.hop {
                    hop.heard(&chunk);
                }
                for part in &chunk.parts {
                    attempt.kept = attempt.kept.with(part);
                }
                words |= speaks(&chunk) || self.bounds.over_kept(attempt.kept).is_some();
                attempt.early.push(chunk);
            }
            if words {
                break;
            }
            work += 1;
            if work % WORK_PER_YIELD == 0 {
                tokio::task::yield_now().await;
            }
        }
        attempt.decoder = Some(decoder);
        Ok(())
    }
}

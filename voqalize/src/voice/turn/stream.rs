//! Reading the model's stream: one request sent, its events decoded into chunks within the
//! turn's bounds and deadline, each chunk's parts written into the open response, and each call
//! handed to `dispatch` the moment it is read (its tool runs while the stream is read on).

use std::iter::Peekable;

use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tracing::Instrument;

use super::attempt::{Asking, Attempt};
use super::failure::RequestError;
use super::reading::{Read, decode};
use super::waiting::Answering;
use super::{Calling, RequestEnd, TurnState, WORK_PER_YIELD};
use crate::model::ToolChoice;
use crate::model::history::{Call, Chunk, Part};
use crate::model::http::EventStream;
use crate::model::layer::{Decoder, Layer};
use crate::tools::{ToolSet, Toolbox};
use crate::voice::bounds::Tripped;
use crate::voice::response::{Closed, Ending, Response};

/// What [`TurnState::write_parts`] stopped at.
enum Next {
    /// A call, kept in the response's tally and with the speech before it released: run it.
    Call(Call, Value),
    /// The worker is due a yield; more parts follow.
    Yield,
    /// The chunk has no more parts.
    Done,
}

/// What a request read before its first words, handed on to be written.
struct Early {
    chunks: Vec<Chunk>,
    /// The stream ended with them.
    ended: bool,
    /// The response passed its byte bound after them.
    cut: Option<Tripped>,
}

impl TurnState<'_> {
    /// One request and its stream, read within the turn's bounds and deadline: up to its first
    /// words on the layer (of a chain, maybe) that answers (`attempt.rs`), then on from there.
    pub(super) async fn request(
        &mut self,
        brain: &dyn Toolbox,
        tools: &ToolSet,
        choice: &ToolChoice,
        note: bool,
    ) -> Result<RequestEnd, RequestError> {
        // A run that went on after a barge-in is answered before the model reads the history.
        crate::voice::runs::all_answered(&self.model.inner).await;
        let asking = Asking {
            tools,
            choice,
            note,
        };
        let mut attempt = self.until_first_words(asking).await?;
        self.answering = Some(attempt.layer.clone());
        self.hop = attempt.hop.take();
        let span = self
            .hop
            .as_ref()
            .map_or_else(tracing::Span::none, |hop| hop.span.clone());
        self.request_calls = 0;
        let calling = Calling {
            brain,
            tools,
            off: matches!(choice, ToolChoice::None),
        };
        self.stream(calling, attempt).instrument(span).await
    }

    /// Reads on the stream of the request that brought its first words (inside the request's
    /// span): the calls it makes are all answered, and the response cut or closed, before it
    /// returns.
    async fn stream(
        &mut self,
        calling: Calling<'_>,
        attempt: Attempt,
    ) -> Result<RequestEnd, RequestError> {
        let Attempt {
            layer,
            taping,
            decoder,
            early,
            ended,
            cut,
            ..
        } = attempt;
        let (Some(mut taping), Some(mut decoder)) = (taping, decoder) else {
            return Ok(RequestEnd::default());
        };
        let mut end = RequestEnd::default();
        // The calls being answered: their tools run while the stream is read on. A barge-in
        // drops them (their tools are cancelled).
        let mut answering: Answering<'_> = FuturesUnordered::new();
        // A failed read (the deadline, a stall, a broken stream) ends the reading, not the tools
        // already running: they finish and file their results first, as one tool at a time would.
        let read = match taping.stream() {
            Some(stream) => {
                self.request_id = stream.request_id().map(str::to_owned);
                let early = Early {
                    chunks: early,
                    ended,
                    cut,
                };
                self.read(
                    calling,
                    &*layer,
                    stream,
                    early,
                    &mut *decoder,
                    &mut answering,
                    &mut end,
                )
                .await
            }
            None => Ok(()),
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

    /// Reads `stream` until it ends, the decoder saw its terminal event, a bound cuts the
    /// response, or the turn's deadline passes; answers the runs that end meanwhile.
    ///
    /// # Errors
    /// The deadline, a failed read, or an event the decoder cannot read.
    #[allow(clippy::too_many_arguments)]
    async fn read<'a>(
        &mut self,
        calling: Calling<'a>,
        layer: &dyn Layer,
        stream: &mut EventStream,
        early: Early,
        decoder: &mut dyn Decoder,
        answering: &mut Answering<'a>,
        end: &mut RequestEnd,
    ) -> Result<(), RequestError> {
        // What came before the first words (and they) first.
        for chunk in early.chunks {
            if end.cut.is_some() {
                return Ok(());
            }
            end.add(self.chunk(calling, chunk, answering).await);
        }
        end.cut = end.cut.or(early.cut);
        if early.ended || end.cut.is_some() || decoder.done() {
            return Ok(());
        }
        let (deadline, limit) = (self.deadline, self.bounds.turn_deadline);
        // One timer for the whole stream (one made per read would be registered with the runtime
        // and removed again for every event).
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        loop {
            // Past the deadline nothing more is read, whatever the timer has not yet fired for.
            if tokio::time::Instant::now() >= deadline {
                return Err(RequestError::Deadline(limit));
            }
            let next = tokio::select! {
                biased;
                () = &mut expiry => return Err(RequestError::Deadline(limit)),
                () = self.answer_next(answering, end), if !answering.is_empty() => continue,
                next = stream.next() => next,
            };
            let (chunks, last) = match decode(layer, decoder, next)? {
                Read::Chunks(chunks) => (chunks, false),
                Read::Last(chunks) => (chunks, true),
                Read::Cut(bound) => {
                    end.cut = Some(bound);
                    return Ok(());
                }
            };
            for chunk in chunks {
                end.add(self.chunk(calling, chunk, answering).await);
                if end.cut.is_some() {
                    break;
                }
            }
            if last || end.cut.is_some() || decoder.done() {
                return Ok(());
            }
            self.pace().await;
        }
    }

    /// One decoded chunk: parts in order (a call runs the moment it is read), then the finish. A part
    /// or a call past a bound ends the chunk: the response is cut there.
    async fn chunk<'a>(
        &mut self,
        calling: Calling<'a>,
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
                    self.dispatch(calling, (call, raw), answering, &mut end)
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
        self.stop_speaking_if_leaked();
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

    /// The chunk's parts are written: a function call written as text after speech began stops
    /// the speaking there (the words before it were spoken, none of the call is).
    fn stop_speaking_if_leaked(&mut self) {
        let stopped = self
            .response
            .as_mut()
            .is_some_and(Response::stop_speaking_if_leaked);
        if stopped && self.loud_about_text_calls() {
            tracing::warn!(
                "turn: model={} wrote a function call as text after speech began; the words before it were spoken and none of the call was",
                self.layer().model()
            );
        }
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

/// The parts of one chunk with each run of plain text joined into one piece (one event may hold
/// thousands of text parts: they are one piece to screen, speak and store).
fn joined(mut parts: Vec<Part>) -> Vec<Part> {
    // In place: a chunk of one part, the usual case, is handed on as it came.
    parts.dedup_by(|next, kept| match (next, kept) {
        (
            Part::Text {
                text: more,
                raw: serde_json::Value::Null,
                trimmed: false,
            },
            Part::Text {
                text,
                raw: serde_json::Value::Null,
                trimmed: false,
            },
        ) => {
            text.push_str(more);
            true
        }
        _ => false,
    });
    parts
}

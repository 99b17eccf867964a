//! Waiting for the runs of a turn's calls: each answered as it ends, the caller hearing the
//! tools' progress meanwhile and a filler when a tool keeps it waiting (docs/protocol.md §6.8);
//! and the runs that end with the turn stopped when it ends.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use super::{RequestEnd, TurnState};
use crate::session::MAX_PROGRESS_BYTES;
use crate::tools::ToolDecl;
use crate::voice::runs;

/// A run the turn waits for has ended: its call is answered.
pub(super) struct Answered {
    /// The run's key among the turn's runs in flight.
    pub(super) key: u64,
    /// A `#[needs_result_now]` tool: the model is asked again once the response is answered.
    pub(super) awaited: bool,
}

/// The runs of the request in flight that the turn waits for: each future is one run (or the
/// end of a run's task), polled while the stream is read on.
pub(super) type Answering<'a> =
    FuturesUnordered<Pin<Box<dyn Future<Output = Answered> + Send + 'a>>>;

/// A run the turn waits for, as the filler sees it.
pub(super) struct InFlight {
    key: u64,
    started: Instant,
    /// What the response had spoken when the call was made: a filler is for silence since.
    spoken_at: u64,
    /// The line spoken if the caller waits too long: the tool's own, else the model's.
    filler: Option<Arc<str>>,
}

impl TurnState<'_> {
    /// Notes a run the turn waits for, for its filler: its key.
    pub(super) fn in_flight(&mut self, decl: Option<&ToolDecl>, started: Instant) -> u64 {
        self.next_key += 1;
        let filler = decl
            .and_then(ToolDecl::filler)
            .map(Arc::from)
            .or_else(|| self.model.inner.settings.filler.clone());
        let spoken_at = self.response.as_ref().map_or(0, |r| r.spoken());
        self.waiting.push(InFlight {
            key: self.next_key,
            started,
            spoken_at,
            filler,
        });
        self.next_key
    }

    /// A `#[needs_result_now]` call was answered: the model is asked again after the response.
    pub(super) fn awaited(&mut self, awaited: bool, end: &mut RequestEnd) {
        if awaited {
            self.tally.awaited += 1;
            end.awaited = true;
        }
    }

    /// When the filler is due, if one may be spoken: the oldest run waited for that has a filler,
    /// with nothing said since its call, once it has run [`filler_after`].
    ///
    /// [`filler_after`]: crate::voice::Model::filler_after
    fn filler_due(&self) -> Option<(Instant, Arc<str>)> {
        let response = self.response.as_ref()?;
        if !response.filler_allowed() {
            return None;
        }
        let after = self.model.inner.settings.filler_after;
        self.waiting
            .iter()
            .filter(|w| w.spoken_at == response.spoken())
            .filter_map(|w| Some((w.started.checked_add(after)?, w.filler.clone()?)))
            .min_by_key(|(at, _)| *at)
    }

    /// Speaks `line` while tools run, as the response's words.
    fn side_line(&mut self, line: &str, filler: bool) {
        let model = self.model;
        let mut conversation = model.conversation();
        if let Some(r) = self.response.as_mut() {
            r.side_line(
                &mut conversation,
                line,
                filler,
                (&mut self.clock, &self.bounds),
            );
        }
    }

    /// Speaks a tool's progress `line` (cut to [`MAX_PROGRESS_BYTES`]).
    fn progress_line(&mut self, line: &str) {
        let line = &line[..line.floor_char_boundary(MAX_PROGRESS_BYTES)];
        self.side_line(line, false);
    }

    /// Waits for the next run the turn waits for to end (its call is answered by then); the
    /// caller hears the tools' progress meanwhile, and a filler when one keeps it waiting.
    pub(super) async fn answer_next(
        &mut self,
        answering: &mut Answering<'_>,
        end: &mut RequestEnd,
    ) {
        loop {
            let filler = self.filler_due();
            let due = filler.as_ref().map(|(at, _)| *at);
            let filler_sleep = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answered = answering.next() => {
                    if let Some(Answered { key, awaited }) = answered {
                        self.waiting.retain(|w| w.key != key);
                        self.awaited(awaited, end);
                    }
                    // A line the run queued just before it returned is spoken now, before the
                    // model's next words, not during some later tool (or never).
                    while let Some(line) = self
                        .progress
                        .as_mut()
                        .and_then(|(_, lines)| lines.try_recv().ok())
                    {
                        self.progress_line(&line);
                    }
                    return;
                }
                Some(line) = next_line(&mut self.progress) => self.progress_line(&line),
                () = filler_sleep => {
                    if let Some((_, line)) = filler {
                        self.side_line(&line, true);
                    }
                }
            }
        }
    }

    /// Waits until every run the turn waits for has ended: before the response closes or is
    /// cut, so its results are filed right after it, and before any follow-up is asked.
    pub(super) async fn answer_all(&mut self, answering: &mut Answering<'_>, end: &mut RequestEnd) {
        while !answering.is_empty() {
            self.answer_next(answering, end).await;
        }
    }

    /// The turn ends (a barge-in, teardown, or its end): each run that ends with it and still
    /// runs is stopped, and its call answered as cancelled.
    pub(super) fn stop_runs(&mut self) {
        let Some(response) = self.response.as_mut() else {
            return;
        };
        for (slot, abort) in response.take_stopping() {
            if let Some(abort) = abort {
                abort.abort();
            }
            runs::settle(&slot, runs::cancelled);
        }
    }
}

/// The next progress line of the turn's tools; never, before the turn's first tool run.
async fn next_line(
    progress: &mut Option<(mpsc::Sender<String>, mpsc::Receiver<String>)>,
) -> Option<String> {
    match progress {
        Some((_, lines)) => lines.recv().await,
        None => std::future::pending().await,
    }
}

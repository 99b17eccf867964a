//! Long calls: the history summarised, not dropped (docs/protocol.md §6.19).
//!
//! Opt in with [`Model::summarize_history`]. After each turn and each `Finalize`, when the
//! history has passed its high-water mark (a share of its budgets: entries, bytes, and tokens
//! estimated from bytes), the older exchanges the caller heard are sent to a summary request in
//! the background: never while a turn waits, one at a time per call, aborted with the call. When
//! it returns, they are replaced by one summary entry first in the history (`conversation/
//! compact.rs`); a later summary folds in the previous one. Until then, and when it fails, the
//! bounds drop the oldest exchanges as without summaries.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::ask::{Unsummarised, summarise};
use super::conversation::Conversation;
use super::{Inner, Model, ModelLayer};
use crate::model::history::Role;
use crate::model::layer::Layer;
use crate::recover::lock;

/// The default of [`HistorySummary::token_budget`]: 32,000 tokens.
pub const HISTORY_TOKEN_BUDGET: usize = 32_000;
/// The default of [`HistorySummary::high_water`]: 75 (%).
pub const HIGH_WATER_PERCENT: u8 = 75;
/// The default of [`HistorySummary::max_summary_bytes`]: 2 KiB.
pub const MAX_HISTORY_SUMMARY_BYTES: usize = 2 * 1024;
/// The default of [`HistorySummary::timeout`]: 20 s.
pub const HISTORY_SUMMARY_TIMEOUT: Duration = Duration::from_secs(20);
/// The most notes [`Model::pin_note`] keeps pinned: 8 (a ninth unpins the oldest).
pub const MAX_PINNED_NOTES: usize = 8;
/// The most bytes of pinned notes kept, counted as `max_history_bytes` counts: 8 KiB (one note's
/// text is cut to half of it; past it the oldest pins are unpinned).
pub const MAX_PINNED_BYTES: usize = 8 * 1024;

/// The most bytes of heard history one summary request reads: the newest 32 KiB of what it
/// replaces.
const MAX_TRANSCRIPT_BYTES: usize = 32 * 1024;

/// Failed summary requests in a row after which a call stops asking (it drops, as without
/// summaries); a summary that comes back starts the count again.
const MAX_FAILURES: usize = 3;

/// What the summary request is told when [`HistorySummary::instruction`] does not say.
const INSTRUCTION: &str = "You keep the notes of a long phone call. From the summary so far (if \
any) and the transcript that follows it, write one summary an agent can go on from: who the \
caller is (name, numbers, order or account ids, dates exactly as said), what they want, what was \
agreed or done, and what is still open. Plain sentences, at most 150 words, only facts stated.";

/// A history budget or setting that cannot work, refused by [`Model::summarize_history`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    /// A budget or bound was zero: `what` names the setting.
    #[error("{what} is zero: a history summary needs a budget above zero")]
    Zero {
        /// The setting's name (`token_budget`, `max_summary_bytes`, `timeout`).
        what: &'static str,
    },
    /// The high-water mark is not below the budget (or is 0): summaries would start only once
    /// the history is already being dropped.
    #[error("high_water is {percent}%: it must be between 1 and 99 (% of each budget)")]
    HighWater {
        /// The percentage given.
        percent: u8,
    },
    /// The estimate of bytes per token is not a positive, finite number.
    #[error("bytes_per_token is {value}: it must be a positive, finite number")]
    BytesPerToken {
        /// The value given.
        value: f64,
    },
    /// The token budget cannot hold the instruction and one summary: every request would be
    /// over it before the call says a word.
    #[error(
        "the history budget ({budget_bytes} bytes: {tokens} tokens at {bytes_per_token} bytes each) \
         is smaller than the instruction ({instruction_bytes} bytes) and one summary \
         ({summary_bytes} bytes)"
    )]
    BelowInstruction {
        /// The token budget.
        tokens: usize,
        /// The estimate of bytes per token.
        bytes_per_token: f64,
        /// The budget in bytes.
        budget_bytes: usize,
        /// The `Model`'s instruction, in bytes.
        instruction_bytes: usize,
        /// [`HistorySummary::max_summary_bytes`].
        summary_bytes: usize,
    },
    /// The summary instruction is blank.
    #[error("the summary instruction is blank")]
    BlankInstruction,
}

/// How a [`Model`] summarises a long call's history instead of dropping it: which layer writes
/// the summary, the budgets it keeps the history within, and when it starts. Give it to
/// [`Model::summarize_history`], which checks it.
///
/// The history's budgets are the `Model`'s [`max_history`](Model::max_history) (entries) and
/// [`max_history_bytes`](Model::max_history_bytes), and this one's
/// [`token_budget`](Self::token_budget) (tokens, estimated from bytes: see
/// [`bytes_per_token`](Self::bytes_per_token)). All three are hard bounds: past one, the oldest
/// exchanges are dropped, as without summaries. Past the [`high_water`](Self::high_water) share
/// of any of them, a summary is asked for in the background, so it is usually in place before a
/// bound is reached.
#[derive(Clone)]
pub struct HistorySummary {
    pub(crate) layer: ModelLayer,
    pub(crate) instruction: Arc<str>,
    pub(crate) token_budget: usize,
    pub(crate) bytes_per_token: Option<f64>,
    pub(crate) high_water: u8,
    pub(crate) max_summary_bytes: usize,
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for HistorySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistorySummary")
            .field("layer", &self.layer)
            .field("token_budget", &self.token_budget)
            .field("bytes_per_token", &self.bytes_per_token)
            .field("high_water", &self.high_water)
            .field("max_summary_bytes", &self.max_summary_bytes)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HistorySummary {
    /// Summaries written by `layer` (the call's own, or a cheaper one), with a budget of
    /// [`HISTORY_TOKEN_BUDGET`] tokens, a high-water mark of [`HIGH_WATER_PERCENT`] %, summaries
    /// of at most [`MAX_HISTORY_SUMMARY_BYTES`] and a timeout of [`HISTORY_SUMMARY_TIMEOUT`].
    pub fn new(layer: impl Into<ModelLayer>) -> HistorySummary {
        HistorySummary {
            layer: layer.into(),
            instruction: Arc::from(INSTRUCTION),
            token_budget: HISTORY_TOKEN_BUDGET,
            bytes_per_token: None,
            high_water: HIGH_WATER_PERCENT,
            max_summary_bytes: MAX_HISTORY_SUMMARY_BYTES,
            timeout: HISTORY_SUMMARY_TIMEOUT,
        }
    }

    /// The most tokens of history (default [`HISTORY_TOKEN_BUDGET`], 32,000), estimated as the
    /// history's bytes (as [`max_history_bytes`](Model::max_history_bytes) counts them) divided
    /// by [`bytes_per_token`](Self::bytes_per_token). The instruction is not counted in it, but
    /// it must exceed the instruction and one summary ([`SummaryError::BelowInstruction`]).
    #[must_use]
    pub fn token_budget(mut self, tokens: usize) -> HistorySummary {
        self.token_budget = tokens;
        self
    }

    /// The estimate of bytes per token for [`token_budget`](Self::token_budget). By default it
    /// is the summarised `Model`'s provider's: 3.5 for `anthropic`, 4 for any other (Gemini's and
    /// OpenAI's tokenizers average about 4 bytes of English per token). The history counts some
    /// 200 bytes per part besides its text, so the estimate errs high: a budget is reached early,
    /// never late.
    #[must_use]
    pub fn bytes_per_token(mut self, bytes: f64) -> HistorySummary {
        self.bytes_per_token = Some(bytes);
        self
    }

    /// The share of each budget, in percent, past which a summary is asked for (default
    /// [`HIGH_WATER_PERCENT`], 75; 1 to 99). A summary aims to bring the history to half of it.
    #[must_use]
    pub fn high_water(mut self, percent: u8) -> HistorySummary {
        self.high_water = percent;
        self
    }

    /// What the summary request is told (its system instruction). The request's one message
    /// holds the summary so far, if any, and what the caller heard of the exchanges it replaces.
    #[must_use]
    pub fn instruction(mut self, text: impl Into<String>) -> HistorySummary {
        self.instruction = Arc::from(text.into());
        self
    }

    /// The most bytes of a summary kept (default [`MAX_HISTORY_SUMMARY_BYTES`], 2 KiB): a longer
    /// one is cut there (and marked with its length); the reply is read no further than that.
    #[must_use]
    pub fn max_summary_bytes(mut self, bytes: usize) -> HistorySummary {
        self.max_summary_bytes = bytes;
        self
    }

    /// How long a summary request may take (default [`HISTORY_SUMMARY_TIMEOUT`], 20 s). No turn
    /// waits for it; past it the request is dropped and the history is dropped as without
    /// summaries until the next try.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> HistorySummary {
        self.timeout = timeout;
        self
    }

    /// The estimate of bytes per token for `layer`.
    fn per_token(&self, layer: &dyn Layer) -> f64 {
        self.bytes_per_token
            .unwrap_or(if layer.provider() == "anthropic" {
                3.5
            } else {
                4.0
            })
    }

    /// The token budget in bytes, for `layer`.
    pub(crate) fn budget_bytes(&self, layer: &dyn Layer) -> usize {
        // Bounded: a budget past what memory holds is no budget.
        let bytes = self.token_budget as f64 * self.per_token(layer);
        if bytes >= usize::MAX as f64 {
            usize::MAX
        } else {
            bytes as usize
        }
    }

    /// Refuses settings that cannot work, for a `Model` over `layer` with `instruction`.
    fn check(&self, layer: &dyn Layer, instruction: Option<&str>) -> Result<(), SummaryError> {
        for (what, zero) in [
            ("token_budget", self.token_budget == 0),
            ("max_summary_bytes", self.max_summary_bytes == 0),
            ("timeout", self.timeout.is_zero()),
        ] {
            if zero {
                return Err(SummaryError::Zero { what });
            }
        }
        if !(1..=99).contains(&self.high_water) {
            return Err(SummaryError::HighWater {
                percent: self.high_water,
            });
        }
        if let Some(value) = self.bytes_per_token
            && !(value.is_finite() && value > 0.0)
        {
            return Err(SummaryError::BytesPerToken { value });
        }
        if self.instruction.trim().is_empty() {
            return Err(SummaryError::BlankInstruction);
        }
        let instruction_bytes = instruction.map_or(0, str::len);
        let budget_bytes = self.budget_bytes(layer);
        if instruction_bytes.saturating_add(self.max_summary_bytes) >= budget_bytes {
            return Err(SummaryError::BelowInstruction {
                tokens: self.token_budget,
                bytes_per_token: self.per_token(layer),
                budget_bytes,
                instruction_bytes,
                summary_bytes: self.max_summary_bytes,
            });
        }
        Ok(())
    }
}

/// A call's summaries: the one in flight (aborted with the call) and how the past ones went.
#[derive(Debug, Default)]
pub(crate) struct Summaries {
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    tally: Arc<Tally>,
}

/// How a call's summary requests went.
#[derive(Debug, Default)]
struct Tally {
    failures: AtomicUsize,
    /// A summary failed: said once per call.
    warned: AtomicBool,
}

impl Drop for Summaries {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

impl Model {
    /// Summarises the history of a long call instead of dropping it: when it nears a budget,
    /// the older exchanges the caller heard are replaced by a summary written by `summary`'s
    /// layer, in the background (see [`HistorySummary`] and docs/model-brains.md, "Long calls").
    /// Kept verbatim: the instruction, the pinned notes ([`pin_note`](Self::pin_note)), and
    /// every model turn that made a tool call with its results. If a summary request fails,
    /// times out or says nothing (a reply that only calls a function is neither run nor kept),
    /// the history is dropped as without summaries and a warning is logged once per call; after
    /// 3 failures in a row the call stops asking.
    ///
    /// Give it after [`instruction`](Self::instruction): the instruction is checked against the
    /// budget (one set later with [`set_instruction`](Self::set_instruction) is not).
    ///
    /// # Errors
    /// [`SummaryError`]: a zero budget, bound or timeout; a high-water mark not between 1 and 99
    /// %; a bytes-per-token estimate that is not a positive number; a blank summary instruction;
    /// a token budget that cannot hold the instruction and one summary.
    pub fn summarize_history(self, summary: HistorySummary) -> Result<Model, SummaryError> {
        let instruction = lock(&self.inner.instruction).clone();
        summary.check(&**self.inner.layer.layer(), instruction.as_deref())?;
        let summary = Arc::new(summary);
        Ok(self.with(|s| s.summary = Some(summary)))
    }

    /// Adds a note to the conversation, as [`append_note`](Self::append_note) does, that is kept
    /// verbatim for the rest of the call: never summarised, never dropped by the history's
    /// bounds ("(The caller's order number is 4411.)"). At most [`MAX_PINNED_NOTES`] notes and
    /// [`MAX_PINNED_BYTES`] of them stay pinned, and at most half of the history's own bounds
    /// ([`max_history`](Self::max_history), the bytes): past either the oldest pins become
    /// ordinary notes; a note's text past half of the pins' bytes is cut. A stage handoff that starts
    /// the conversation again (`fresh` or `summary`) leaves them behind too.
    pub fn pin_note(&self, text: &str) {
        self.conversation()
            .pin(text, MAX_PINNED_NOTES, MAX_PINNED_BYTES);
    }
}

/// The byte bound of a history over `layer`: `bytes` (`max_history_bytes`), or the token budget
/// in bytes when `summary` is on and it is lower.
pub(crate) fn history_bytes(
    summary: Option<&HistorySummary>,
    bytes: usize,
    layer: &dyn Layer,
) -> usize {
    summary.map_or(bytes, |s| bytes.min(s.budget_bytes(layer)))
}

/// After a turn or a `Finalize`: asks for a summary in the background when the history has
/// passed its high-water mark and none is in flight. Never waits.
pub(crate) fn after(inner: &Inner) {
    let Some(setup) = inner.settings.summary.clone() else {
        return;
    };
    let summaries = &inner.summaries;
    if summaries.tally.failures.load(Ordering::Relaxed) >= MAX_FAILURES {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut task = lock(&summaries.task);
    if task.as_ref().is_some_and(|t| !t.is_finished()) {
        return; // one at a time
    }
    let max_entries = inner.settings.max_history.max(8);
    let max_bytes = history_bytes(
        Some(&setup),
        inner.settings.max_history_bytes,
        &**inner.layer.layer(),
    );
    let share = |of: usize, percent: usize| of.saturating_mul(percent) / 100;
    let high = usize::from(setup.high_water);
    let window = {
        let conversation = lock(&inner.conversation);
        let (entries, bytes) = conversation.load();
        if entries <= share(max_entries, high) && bytes <= share(max_bytes, high) {
            return;
        }
        // A summary that would replace little (a call whose turns are mostly tool calls, which
        // stay verbatim) waits until a quarter of the high-water mark would go: no summary
        // every turn, and no transcript made for nothing.
        conversation.window(
            (share(max_entries, high / 2), share(max_bytes, high / 2)),
            (share(max_entries, high) / 4, share(max_bytes, high) / 4),
            MAX_TRANSCRIPT_BYTES,
        )
    };
    let Some(window) = window else {
        return;
    };
    let conversation = Arc::downgrade(&inner.conversation);
    let tally = summaries.tally.clone();
    *task = Some(runtime.spawn(ask_and_replace(setup, window, conversation, tally)));
}

/// The summary request, then the replacement (with no lock held across the request).
async fn ask_and_replace(
    setup: Arc<HistorySummary>,
    window: super::conversation::Window,
    conversation: Weak<Mutex<Conversation>>,
    tally: Arc<Tally>,
) {
    let message = match &window.previous {
        Some(previous) => format!(
            "Summary so far:\n{previous}\n\nTranscript since:\n{}",
            window.transcript
        ),
        None => format!("Transcript:\n{}", window.transcript),
    };
    let messages = [(Role::User, message)];
    let made = summarise(
        &setup.layer,
        &setup.instruction,
        &messages,
        setup.max_summary_bytes,
        setup.timeout,
    )
    .await;
    let outcome = match made {
        Ok(summary) => match conversation.upgrade() {
            // A provider that was down for a while must not stop the summaries of the call.
            Some(c) if lock(&c).replace(&window, &summary) => {
                tally.failures.store(0, Ordering::Relaxed);
                "replaced"
            }
            _ => "stale",
        },
        Err(why) => failed(&tally, &why, &**setup.layer.layer()),
    };
    crate::metrics::history_summary(outcome);
}

/// A failed summary: counted, and logged once per call.
fn failed(tally: &Tally, why: &Unsummarised, layer: &dyn Layer) -> &'static str {
    tally.failures.fetch_add(1, Ordering::Relaxed);
    if !tally.warned.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "history: the summary of older exchanges failed (model={}: {}); the oldest are dropped instead (said once per call)",
            crate::logline::outside(layer.model()),
            crate::logline::outside(&why.why())
        );
    }
    why.label()
}

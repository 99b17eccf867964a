//! The caller's side of a simulated call: the [`Caller`] trait, and [`Scripted`], the caller that
//! says fixed lines (fully offline and deterministic).

use std::future::Future;
use std::pin::Pin;

use super::transcript::{Ending, Transcript};

/// A boxed future a [`Caller`] returns (a caller is used as `dyn Caller` by the runner).
pub type CallerFuture<'a> = Pin<Box<dyn Future<Output = Result<Next, CallerError>> + Send + 'a>>;

/// What the caller does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Says this line (sent as the user's finalized text of a new turn).
    Say(String),
    /// Hangs up, as `ending` says (`GoalMet`, `GaveUp`, `ScriptDone`), after saying `last` when
    /// it is `Some` (a goodbye: sent, and the agent's answer to it played out, before hanging up).
    HangUp {
        /// A last line said before hanging up.
        last: Option<String>,
        /// Why the caller hung up.
        ending: Ending,
    },
}

/// Why a caller could not make its move (its model request failed, or answered nothing usable).
#[derive(Debug, thiserror::Error)]
#[error("the simulated caller failed: {why}")]
pub struct CallerError {
    /// What failed, clipped and escaped.
    pub why: String,
}

/// The caller's side of a simulated call. The runner asks it for each move with the call so far
/// (what the caller heard: [`Transcript::heard`]), sends its line, plays the agent's answer out
/// (barging in as the scenario says), and asks again, until it hangs up or the turn limit.
pub trait Caller: Send {
    /// The next move, given the call so far (`call.lines` ends with the agent's last answer, or
    /// is empty or holds only the greeting before the first move).
    fn next<'a>(&'a mut self, call: &'a Transcript) -> CallerFuture<'a>;

    /// The token counts of this caller's own model requests so far, summed by name; none for a
    /// caller that asks no model.
    fn counts(&self) -> std::collections::BTreeMap<String, u64> {
        std::collections::BTreeMap::new()
    }
}

/// A caller that says fixed lines in order, whatever the agent answers, then hangs up
/// ([`Ending::ScriptDone`]): fully offline and deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scripted {
    lines: Vec<String>,
    next: usize,
}

impl Scripted {
    /// A caller that says `lines` in order.
    pub fn new<I, S>(lines: I) -> Scripted
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Scripted {
            lines: lines.into_iter().map(Into::into).collect(),
            next: 0,
        }
    }
}

impl Caller for Scripted {
    fn next<'a>(&'a mut self, _call: &'a Transcript) -> CallerFuture<'a> {
        let next = match self.lines.get(self.next) {
            Some(line) => Next::Say(line.clone()),
            None => Next::HangUp {
                last: None,
                ending: Ending::ScriptDone,
            },
        };
        self.next += 1;
        Box::pin(std::future::ready(Ok(next)))
    }
}

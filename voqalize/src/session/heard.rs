//! [`HeardLines`]: what the user heard of this brain's speech, for a history the brain keeps
//! itself (an agent it already had, given a voice).

use std::sync::Mutex;

use super::Finalized;
use crate::recover::lock;

/// The lines the user heard, one per speech unit, in the order Voqalize finalized them: what a
/// history you keep yourself should hold as the assistant's words (heard truth).
///
/// Feed it every `Finalize` from [`Brain::on_finalize`](crate::Brain::on_finalize) with
/// [`record`](Self::record), and before each answer [`take`](Self::take) the lines heard since the
/// last take into your own history. A unit is recorded as what was *heard* of it (a barge-in cuts
/// it to the heard prefix), the greeting included; a unit nobody heard (`heard` empty: cut before
/// its first word played, or silent) records nothing, so your history never holds an empty or
/// unheard assistant line.
///
/// ```
/// use voqalize::prelude::*;
///
/// let heard = HeardLines::new();
/// let finalized = |speech_id, heard: &str, generated: &str| Finalized {
///     speech_id,
///     heard: heard.into(),
///     generated: generated.into(),
/// };
/// heard.record(&finalized(1, "Hi! How can I help?", "Hi! How can I help?")); // the greeting
/// heard.record(&finalized(2, "Your table is", "Your table is booked for eight.")); // barged in
/// heard.record(&finalized(3, "", "And anything else?")); // cut before a word played
/// assert_eq!(heard.take(), ["Hi! How can I help?", "Your table is"]);
/// assert!(heard.take().is_empty());
/// ```
#[derive(Debug, Default)]
pub struct HeardLines {
    lines: Mutex<Vec<String>>,
}

impl HeardLines {
    /// An empty record.
    pub fn new() -> Self {
        HeardLines::default()
    }

    /// Records what the user heard of one unit; call it from `on_finalize` with every
    /// [`Finalized`]. Returns false (and records nothing) for a unit nobody heard.
    pub fn record(&self, finalized: &Finalized) -> bool {
        if finalized.heard.is_empty() {
            return false;
        }
        lock(&self.lines).push(finalized.heard.clone());
        true
    }

    /// The heard lines recorded since the last take, oldest first.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.lines))
    }
}

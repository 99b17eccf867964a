//! Playing a turn until the brain has done what a recording says it did: how
//! [`Replay`](crate::Replay) knows a turn is over without waiting out its timeout.

use std::time::Duration;

use tokio::time::Instant;

use super::observed::{Observed, TurnRecord};
use super::{DriverError, Voqalize};
use voqalize::wire::RtviType;

/// What one turn of a recorded call did, counted. A replayed turn is over once the brain has done
/// at least as much (and left no more units open than the recorded turn did).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Speech units it opened.
    pub(crate) units: usize,
    /// Of them, those that ended (a SpeechEnd, or the brain's SpeechCancel).
    pub(crate) ended: usize,
    /// TurnSteps it reported.
    pub(crate) steps: usize,
    /// UI commands naming the turn (RTVI `ui-command` with its turn id).
    pub(crate) ui_commands: usize,
}

impl Observed {
    /// Whether the brain did as much on `turn_id` as `outcome` says, and has no more units of it
    /// still open than `outcome` had.
    fn reached(&self, turn_id: u64, outcome: Outcome) -> bool {
        let (mut opened, mut ended) = (0, 0);
        for unit in self.units_of(turn_id) {
            opened += 1;
            ended += usize::from(unit.ended);
        }
        let steps = self.steps.iter().filter(|s| s.turn_id == turn_id).count();
        let ui_commands = self
            .rtvi
            .iter()
            .filter(|r| r.kind == RtviType::UiCommand && r.turn_id == Some(turn_id))
            .count();
        opened >= outcome.units
            && ended >= outcome.ended
            && opened - ended <= outcome.units.saturating_sub(outcome.ended)
            && steps >= outcome.steps
            && ui_commands >= outcome.ui_commands
    }
}

impl Voqalize {
    /// Plays out the greeting (turn 1) until the brain did as much as `outcome` (or sent `End`,
    /// or the turn of a brain this driver runs is over), for at most `within`; then until the
    /// turn is over (as [`user_says`](Self::user_says) says), and each ended unit is finalized
    /// with all its text.
    pub(crate) async fn greeting_until(
        &mut self,
        outcome: Outcome,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        self.settle_at(1, outcome, within).await
    }

    /// The user says `text`, played out as [`greeting_until`](Self::greeting_until).
    pub(crate) async fn user_says_until(
        &mut self,
        text: &str,
        outcome: Outcome,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        self.settle_at(turn_id, outcome, within).await
    }

    /// A `UserIdle`, played out as [`greeting_until`](Self::greeting_until).
    pub(crate) async fn user_idle_until(
        &mut self,
        level: u32,
        idle_ms: u32,
        outcome: Outcome,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_idle(level, idle_ms).await?;
        self.settle_at(turn_id, outcome, within).await
    }

    async fn settle_at(
        &mut self,
        turn_id: u64,
        outcome: Outcome,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        // A brain that ended the call, or a turn that is over, will do no more.
        let deadline = Instant::now() + within;
        let wake = self.turns_ended.clone();
        while !(self.seen.end || self.seen.reached(turn_id, outcome) || self.turn_over(turn_id)) {
            if !self.pump_waking(deadline, Some(&wake.wake)).await? {
                break;
            }
        }
        self.quiesce_turn(turn_id).await?;
        self.finalize_turn(turn_id).await?;
        Ok(self.turn(turn_id))
    }
}

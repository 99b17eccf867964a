//! What the driver saw of the brain: turns, units, UI commands, RTVI, errors, steps, requests,
//! and the protocol violations it noticed.

use serde_json::Value;

use super::observed::{ToolCalled, TurnRecord, UnitRecord};
use voqalize::wire::{Config, ErrorFrame, Frame, Rtvi, TurnStep};

use super::Voqalize;

impl Voqalize {
    /// The session id the driver uses.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// What was seen of turn `turn_id`.
    pub fn turn(&self, turn_id: u64) -> TurnRecord {
        TurnRecord {
            turn_id,
            units: self.seen.units_of(turn_id).cloned().collect(),
            interrupted: false,
            heard: None,
            tools: crate::lock(&self.tools)
                .iter()
                .filter(|(turn, _)| *turn == turn_id)
                .map(|(_, call)| call.clone())
                .collect(),
        }
    }

    /// Every tool call answered so far, of every turn, in the order answered, with its turn id
    /// (of a brain the driver runs itself).
    pub fn tool_calls(&self) -> Vec<(u64, ToolCalled)> {
        crate::lock(&self.tools).clone()
    }

    /// Every unit seen, by speech id.
    pub fn units(&self) -> impl Iterator<Item = &UnitRecord> {
        self.seen.units.values()
    }

    /// ui-command bodies (JSON objects) received, in order.
    pub fn ui_commands(&self) -> &[Value] {
        &self.seen.ui_commands
    }

    /// Every RTVI message received, in order.
    pub fn rtvi(&self) -> &[Rtvi] {
        &self.seen.rtvi
    }

    /// `Error` frames received.
    pub fn errors(&self) -> &[ErrorFrame] {
        &self.seen.errors
    }

    /// `TurnStep` frames received.
    pub fn turn_steps(&self) -> &[TurnStep] {
        &self.seen.steps
    }

    /// Speech ids of the `SpeechCancel` frames received.
    pub fn speech_cancels(&self) -> &[u64] {
        &self.seen.speech_cancels
    }

    /// `configure` requests received (each was answered with acceptance).
    pub fn requests(&self) -> &[(u64, Config)] {
        &self.seen.requests
    }

    /// True once the brain sent `End`.
    pub fn brain_ended(&self) -> bool {
        self.seen.end
    }

    /// Every frame the brain has sent, in arrival order.
    pub fn received(&self) -> &[Frame] {
        &self.seen.received
    }

    /// How many frames the brain has sent.
    pub fn frames_seen(&self) -> usize {
        self.seen.frames
    }

    /// Protocol violations seen so far (empty for a correct brain).
    pub fn violations(&self) -> &[String] {
        &self.seen.violations
    }

    /// Panics with the list of violations, if any.
    ///
    /// # Panics
    /// When [`violations`](Self::violations) is not empty.
    pub fn assert_clean(&self) {
        assert!(
            self.seen.violations.is_empty(),
            "protocol violations: {:#?}",
            self.seen.violations
        );
    }
}

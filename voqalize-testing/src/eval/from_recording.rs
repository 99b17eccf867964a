//! A recorded call turned into a scenario: the caller's turns, as a scripted caller says them
//! again against a new build.

use voqalize::record::{Direction, Recording};
use voqalize::wire::Frame;

use super::scenario::Scenario;

/// The most caller lines a scenario made from a recording keeps (a recording of a long call
/// gives its first this many).
pub const MAX_RECORDED_LINES: usize = 200;

impl Scenario {
    /// A scripted scenario called `name` from a recorded call: the caller's turns (each
    /// `UserMessage` Voqalize sent, in order, at most [`MAX_RECORDED_LINES`]) as its lines, and a
    /// turn limit of one more than there are. It has no checks: add those the call must keep
    /// passing. Idle prompts, app events and barge-ins are not played (a `Replay` plays a
    /// recording exactly); the lines are said whatever the agent answers.
    pub fn from_recording(name: impl Into<String>, recording: &Recording) -> Scenario {
        let lines: Vec<String> = recording
            .frames
            .iter()
            .filter(|f| f.direction == Direction::In)
            .filter_map(|f| match &f.frame {
                Frame::UserMessage(m) if !m.text.trim().is_empty() => Some(m.text.clone()),
                _ => None,
            })
            .take(MAX_RECORDED_LINES)
            .collect();
        let turns = lines.len() + 1;
        Scenario::new(name).lines(lines).max_turns(turns)
    }
}

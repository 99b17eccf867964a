//! What the driver saw of the brain's side of the call: every frame recorded, the units and turns it
//! spoke, and each protocol rule it broke (docs/protocol.md §4.16). Pure bookkeeping: the answers
//! the runtime owes are returned to the scenario API, which sends them.

use std::collections::BTreeMap;

use serde_json::Value;

use voqalize::wire::{Config, ErrorFrame, Frame, Rtvi, RtviType, TurnStep};

/// What the runtime owes the brain for a frame it sent.
pub(super) enum Owed {
    Nothing,
    /// A `Finalize` for a `SpeechCancel` (and the units of its turn around it).
    CancelAnswer(u64),
    /// A `Response` for a `configure` request.
    ConfigureAnswer(u64),
}

/// What the driver saw of one speech unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitRecord {
    /// The unit's speech id.
    pub speech_id: u64,
    /// The turn its SpeechStart named.
    pub turn_id: u64,
    /// Its chunks, in order.
    pub chunks: Vec<String>,
    /// A SpeechEnd arrived (or the brain cancelled it).
    pub ended: bool,
    /// The brain cancelled it with SpeechCancel.
    pub cancelled: bool,
    /// The heard text the driver finalized it with, once finalized.
    pub heard: Option<String>,
}

impl UnitRecord {
    /// The unit's text: its chunks joined with no separator.
    pub fn text(&self) -> String {
        self.chunks.concat()
    }
}

/// What the driver saw of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRecord {
    /// The turn id the driver minted.
    pub turn_id: u64,
    /// The turn's units, in opening order.
    pub units: Vec<UnitRecord>,
    /// The turn was barged in on.
    pub interrupted: bool,
    /// For a barge-in: the heard text the cut unit was finalized with (`None` if no unit was open).
    pub heard: Option<String>,
    /// The tool calls the model made in the turn that were answered so far, in the order they
    /// were answered: name, arguments, outcome (`ok`, or the error's kind: `cancelled`,
    /// `timed_out`...) and when (`in_turn`, `after_barge_in`, `background`). Seen of a brain the
    /// driver runs itself ([`in_process`](super::Voqalize::in_process),
    /// [`over_socket`](super::Voqalize::over_socket)); empty for one it dials.
    pub tools: Vec<ToolCalled>,
}

impl TurnRecord {
    /// What the turn said, as the caller heard it: each unit's text without the spaces around
    /// it, the non-empty ones joined with one space (`"Let me check."` and `" You have 12."` read
    /// `"Let me check. You have 12."`). [`unit_texts`](Self::unit_texts) keeps each as sent.
    pub fn text(&self) -> String {
        self.units
            .iter()
            .map(UnitRecord::text)
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Each unit's text, in order.
    pub fn unit_texts(&self) -> Vec<String> {
        self.units.iter().map(UnitRecord::text).collect()
    }

    /// At least one unit, and every unit ended.
    pub fn completed(&self) -> bool {
        !self.units.is_empty() && self.units.iter().all(|u| u.ended)
    }
}

#[derive(Default)]
pub(super) struct Observed {
    pub(super) units: BTreeMap<u64, UnitRecord>,
    pub(super) last_speech_id: u64,
    pub(super) opened_turns: Vec<u64>,
    pub(super) ui_commands: Vec<Value>,
    pub(super) rtvi: Vec<Rtvi>,
    pub(super) errors: Vec<ErrorFrame>,
    pub(super) steps: Vec<TurnStep>,
    pub(super) speech_cancels: Vec<u64>,
    pub(super) requests: Vec<(u64, Config)>,
    pub(super) end: bool,
    pub(super) closed: Option<(Option<u16>, String)>,
    pub(super) violations: Vec<String>,
    pub(super) frames: usize,
    pub(super) received: Vec<Frame>,
}

impl Observed {
    /// Records one frame the brain sent: what it said, and every rule it broke.
    pub(super) fn record(&mut self, frame: Frame) -> Owed {
        let seen = self;
        if seen.end {
            seen.violations
                .push(format!("{} sent after End", frame.name()));
        }
        match frame {
            unit @ (Frame::SpeechStart { .. }
            | Frame::SpeechChunk { .. }
            | Frame::SpeechEnd { .. }) => seen.record_unit(unit),
            Frame::SpeechCancel { speech_id } => {
                seen.speech_cancels.push(speech_id);
                return Owed::CancelAnswer(speech_id);
            }
            Frame::Request {
                request_id,
                configure,
            } => {
                seen.requests.push((request_id, configure));
                return Owed::ConfigureAnswer(request_id);
            }
            Frame::Rtvi(r) => {
                if r.kind == RtviType::UiCommand
                    && let Some(Value::Object(body)) = &r.data
                {
                    seen.ui_commands.push(Value::Object(body.clone()));
                }
                if !r.kind.brain_may_send() {
                    seen.violations
                        .push(format!("the brain sent app-only RTVI {}", r.kind));
                }
                seen.rtvi.push(r);
            }
            Frame::TurnStep(t) => seen.steps.push(t),
            Frame::Error(e) => seen.errors.push(e),
            Frame::End => seen.end = true,
            other => seen.violations.push(format!(
                "the brain sent {}, which only Voqalize sends",
                other.name()
            )),
        }
        Owed::Nothing
    }

    /// Records a speech unit's frame (`SpeechStart`, `SpeechChunk`, `SpeechEnd`): the unit it
    /// opens or adds to, and every rule it broke.
    fn record_unit(&mut self, frame: Frame) {
        let seen = self;
        match frame {
            Frame::SpeechStart { speech_id, turn_id } => {
                if speech_id <= seen.last_speech_id {
                    seen.violations.push(format!(
                        "speech id {speech_id} is not above the last one ({})",
                        seen.last_speech_id
                    ));
                }
                seen.last_speech_id = seen.last_speech_id.max(speech_id);
                if !seen.opened_turns.contains(&turn_id) {
                    seen.violations.push(format!(
                        "SpeechStart {speech_id} names turn {turn_id}, never opened"
                    ));
                }
                seen.units.insert(
                    speech_id,
                    UnitRecord {
                        speech_id,
                        turn_id,
                        chunks: Vec::new(),
                        ended: false,
                        cancelled: false,
                        heard: None,
                    },
                );
            }
            Frame::SpeechChunk { speech_id, text } => match seen.units.get_mut(&speech_id) {
                None => seen
                    .violations
                    .push(format!("SpeechChunk for unknown speech {speech_id}")),
                Some(u) if u.cancelled => seen.violations.push(format!(
                    "SpeechChunk for speech {speech_id} after its SpeechCancel"
                )),
                Some(u) if u.ended => seen.violations.push(format!(
                    "SpeechChunk for speech {speech_id} after its SpeechEnd"
                )),
                Some(u) => {
                    if text.is_empty() {
                        seen.violations
                            .push(format!("empty SpeechChunk for speech {speech_id}"));
                    }
                    u.chunks.push(text);
                }
            },
            Frame::SpeechEnd { speech_id } => match seen.units.get_mut(&speech_id) {
                None => seen
                    .violations
                    .push(format!("SpeechEnd for unknown speech {speech_id}")),
                Some(u) if u.cancelled => seen.violations.push(format!(
                    "SpeechEnd for speech {speech_id} after its SpeechCancel"
                )),
                Some(u) if u.ended => seen
                    .violations
                    .push(format!("second SpeechEnd for speech {speech_id}")),
                Some(u) => u.ended = true,
            },
            _ => {}
        }
    }

    /// Every unit of `turn_id`, by speech id.
    pub(super) fn units_of(&self, turn_id: u64) -> impl Iterator<Item = &UnitRecord> {
        self.units.values().filter(move |u| u.turn_id == turn_id)
    }

    /// A turn is complete once it opened a unit and every unit it opened has ended.
    pub(super) fn turn_completed(&self, turn_id: u64) -> bool {
        let mut units = self.units_of(turn_id).peekable();
        units.peek().is_some() && units.all(|u| u.ended)
    }
}

/// One tool call of a turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCalled {
    /// The name the model called.
    pub name: String,
    /// The arguments it wrote.
    pub arguments: Value,
    /// `ok`, or the error's kind.
    pub outcome: String,
    /// When it was answered against its turn: `in_turn`, `after_barge_in` or `background`.
    pub end: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(speech_id: u64, chunks: &[&str]) -> UnitRecord {
        UnitRecord {
            speech_id,
            turn_id: 1,
            chunks: chunks.iter().map(|c| (*c).to_owned()).collect(),
            ended: true,
            cancelled: false,
            heard: None,
        }
    }

    #[test]
    fn a_turns_text_reads_as_the_caller_heard_it() {
        let turn = TurnRecord {
            turn_id: 1,
            units: vec![
                unit(1, &["Let me ", "check. "]),
                unit(2, &[]),
                unit(3, &[" You have ", "12.50."]),
            ],
            interrupted: false,
            heard: None,
            tools: Vec::new(),
        };
        assert_eq!(turn.text(), "Let me check. You have 12.50.");
        assert_eq!(turn.unit_texts()[0], "Let me check. ", "each unit as sent");
    }
}

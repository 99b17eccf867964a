//! What Voqalize's side of a recorded call did, read from its frames in order (both
//! directions): the replay's script.

use std::collections::{HashMap, HashSet};

use crate::driver::Outcome;
use voqalize::record::{Direction, Recording};
use voqalize::wire::{Frame, RtviType};

/// One thing Voqalize's side does in the replay, as the recording did it. Each turn (the
/// greeting, a user's turn, an idle prompt) carries what the recorded brain did in it: the
/// replay plays it until the brain has done as much, or its turn timeout.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// The greeting (turn 1), always the first step: heard in full, or barged in on.
    Greet {
        barged: Option<Barge>,
        outcome: Outcome,
    },
    Say {
        text: String,
        /// Barged in on, and where.
        barged: Option<Barge>,
        outcome: Outcome,
    },
    Idle {
        level: u32,
        idle_ms: u32,
        outcome: Outcome,
    },
    /// An app event, client message or error frame, sent as it was.
    Send(Frame),
    End,
    Cancel(Option<String>),
}

/// Where a recorded barge-in cut its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Barge {
    /// The cut unit's place in its turn (from 0); `None`: the turn had said nothing yet.
    pub(super) unit: Option<usize>,
    /// How many characters of the cut unit the user heard.
    pub(super) heard: usize,
}

/// A barge-in read, waiting for the Finalizes that say which unit it cut.
struct Cut {
    step: usize,
    turn: u64,
    /// The first unit of the turn not finalized when the Interruption came.
    open: Option<usize>,
    /// The turn's units finalized after the Interruption: their place and heard characters.
    finalized: Vec<(usize, usize)>,
}

/// The script of `recording`, from its `SessionStart`, in one pass over its frames.
///
/// A turn (the greeting included) was barged in on when an `Interruption` covering it came while
/// one of its units had not been finalized (one after the turn was heard in full cuts nothing).
/// The cut unit is the last of its units finalized after the Interruption with words heard (else
/// the first finalized after it, else the first still open), heard for as many characters as its
/// `Finalize` said.
pub(super) fn steps(recording: &Recording) -> Vec<Step> {
    let mut script = Script::default();
    for f in &recording.frames {
        match f.direction {
            Direction::Out => script.brain(&f.frame),
            Direction::In => script.voqalize(&f.frame),
        }
    }
    script.finish()
}

/// The script as it is read.
#[derive(Default)]
struct Script {
    steps: Vec<Step>,
    /// Each turn's units in the order they opened, and the units finalized so far.
    units: HashMap<u64, Vec<u64>>,
    finalized: HashSet<u64>,
    /// What each turn did.
    outcomes: Outcomes,
    /// Each turn's step and turn id, and the turn in progress.
    turns: Vec<(usize, u64)>,
    current: Option<(usize, u64)>,
    cut: Option<Cut>,
    /// The `SessionStart` was read (a second one is not a turn).
    started: bool,
}

impl Script {
    /// A frame the brain sent.
    fn brain(&mut self, frame: &Frame) {
        if let Frame::SpeechStart { speech_id, turn_id } = frame {
            self.units.entry(*turn_id).or_default().push(*speech_id);
        }
        self.outcomes.count(frame);
    }

    /// A frame Voqalize sent.
    fn voqalize(&mut self, frame: &Frame) {
        if let Some((turn_id, step)) = self.turn_of(frame) {
            settle(&mut self.steps, self.cut.take());
            self.current = Some((self.steps.len(), turn_id));
            self.turns.push((self.steps.len(), turn_id));
            self.steps.push(step);
            return;
        }
        match frame {
            Frame::Interruption { through_turn } => self.interruption(*through_turn),
            Frame::Finalize {
                speech_id,
                heard_text,
            } => {
                self.finalized.insert(*speech_id);
                if let Some(cut) = &mut self.cut
                    && let Some(place) = self
                        .units
                        .get(&cut.turn)
                        .and_then(|ids| ids.iter().position(|id| id == speech_id))
                {
                    cut.finalized.push((place, heard_text.chars().count()));
                }
            }
            Frame::Rtvi(_) | Frame::Error(_) => self.steps.push(Step::Send(frame.clone())),
            Frame::End => {
                settle(&mut self.steps, self.cut.take());
                self.steps.push(Step::End);
            }
            Frame::Cancel { reason } => {
                settle(&mut self.steps, self.cut.take());
                self.steps.push(Step::Cancel(reason.clone()));
            }
            // The answers to the brain's requests: the driver plays them.
            _ => {}
        }
    }

    /// The turn `frame` starts, if it starts one: the greeting (the first `SessionStart`), a
    /// user's turn or an idle prompt, with its outcome still to count.
    fn turn_of(&mut self, frame: &Frame) -> Option<(u64, Step)> {
        let outcome = Outcome::default();
        match frame {
            Frame::SessionStart(s) if !self.started => {
                self.started = true;
                let barged = None;
                Some((s.turn_id, Step::Greet { barged, outcome }))
            }
            Frame::UserMessage(m) => Some((
                m.turn_id,
                Step::Say {
                    text: m.text.clone(),
                    barged: None,
                    outcome,
                },
            )),
            Frame::UserIdle(idle) => Some((
                idle.turn_id,
                Step::Idle {
                    level: idle.level,
                    idle_ms: idle.idle_ms,
                    outcome,
                },
            )),
            _ => None,
        }
    }

    /// An `Interruption`: it cuts the turn in progress, unless the turn was heard in full.
    fn interruption(&mut self, through_turn: u64) {
        let Some((step, turn)) = self.current else {
            return;
        };
        if turn > through_turn {
            return;
        }
        let opened = self.units.get(&turn).map(Vec::as_slice).unwrap_or_default();
        let open = opened.iter().position(|id| !self.finalized.contains(id));
        if !opened.is_empty() && open.is_none() {
            // Heard in full already: this Interruption cut nothing.
            return;
        }
        self.cut = Some(Cut {
            step,
            turn,
            open,
            finalized: Vec::new(),
        });
        self.current = None;
    }

    /// The steps, each turn with what the recorded brain did in it.
    fn finish(mut self) -> Vec<Step> {
        settle(&mut self.steps, self.cut.take());
        for (step, turn_id) in self.turns {
            if let Some(
                Step::Greet { outcome, .. }
                | Step::Say { outcome, .. }
                | Step::Idle { outcome, .. },
            ) = self.steps.get_mut(step)
            {
                *outcome = self.outcomes.of(turn_id);
            }
        }
        self.steps
    }
}

/// What each turn of the recording did, counted from the brain's frames.
#[derive(Default)]
struct Outcomes {
    turns: HashMap<u64, Outcome>,
    /// Each unit's turn, and the units that ended.
    unit_turn: HashMap<u64, u64>,
    ended: HashSet<u64>,
}

impl Outcomes {
    fn count(&mut self, frame: &Frame) {
        match frame {
            Frame::SpeechStart { speech_id, turn_id } => {
                self.unit_turn.insert(*speech_id, *turn_id);
                self.turns.entry(*turn_id).or_default().units += 1;
            }
            Frame::SpeechEnd { speech_id } | Frame::SpeechCancel { speech_id } => {
                if let Some(turn) = self.unit_turn.get(speech_id)
                    && self.ended.insert(*speech_id)
                {
                    self.turns.entry(*turn).or_default().ended += 1;
                }
            }
            Frame::TurnStep(s) => self.turns.entry(s.turn_id).or_default().steps += 1,
            Frame::Rtvi(r) if r.kind == RtviType::UiCommand => {
                if let Some(turn) = r.turn_id {
                    self.turns.entry(turn).or_default().ui_commands += 1;
                }
            }
            _ => {}
        }
    }

    fn of(&self, turn_id: u64) -> Outcome {
        self.turns.get(&turn_id).copied().unwrap_or_default()
    }
}

/// Marks the barged turn's step with where the barge-in cut it.
fn settle(steps: &mut [Step], cut: Option<Cut>) {
    let Some(cut) = cut else { return };
    let heard = cut.finalized.iter().rev().find(|(_, heard)| *heard > 0);
    let barge = match heard.or(cut.finalized.first()) {
        Some(&(unit, heard)) => Barge {
            unit: Some(unit),
            heard,
        },
        None => Barge {
            unit: cut.open,
            heard: 0,
        },
    };
    if let Some(Step::Say { barged, .. } | Step::Greet { barged, .. }) = steps.get_mut(cut.step) {
        *barged = Some(barge);
    }
}

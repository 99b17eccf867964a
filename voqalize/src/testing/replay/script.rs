//! What Voqalize's side of a recorded call did, read from its frames in order (both
//! directions): the replay's script.

use std::collections::{HashMap, HashSet};

use crate::record::{Direction, Recording};
use crate::wire::Frame;

/// One thing Voqalize's side does in the replay, as the recording did it.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Say {
        text: String,
        /// Barged in on, and where.
        barged: Option<Barge>,
    },
    Idle {
        level: u32,
        idle_ms: u32,
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

/// The script of `recording`, after its `SessionStart`, in one pass over its frames.
///
/// A turn was barged in on when an `Interruption` covering it came while one of its units had
/// not been finalized (one after the turn was heard in full cuts nothing). The cut unit is the
/// last of its units finalized after the Interruption with words heard (else the first finalized
/// after it, else the first still open), heard for as many characters as its `Finalize` said.
pub(super) fn steps(recording: &Recording) -> Vec<Step> {
    let mut steps = Vec::new();
    // Each turn's units in the order they opened, and the units finalized so far.
    let mut units: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut finalized: HashSet<u64> = HashSet::new();
    // The user's turn in progress: its step and its turn id.
    let mut current: Option<(usize, u64)> = None;
    let mut cut: Option<Cut> = None;
    for f in &recording.frames {
        if f.direction == Direction::Out {
            if let Frame::SpeechStart { speech_id, turn_id } = f.frame {
                units.entry(turn_id).or_default().push(speech_id);
            }
            continue;
        }
        match &f.frame {
            Frame::UserMessage(m) => {
                settle(&mut steps, cut.take());
                current = Some((steps.len(), m.turn_id));
                steps.push(Step::Say {
                    text: m.text.clone(),
                    barged: None,
                });
            }
            Frame::UserIdle(idle) => {
                settle(&mut steps, cut.take());
                current = None;
                steps.push(Step::Idle {
                    level: idle.level,
                    idle_ms: idle.idle_ms,
                });
            }
            Frame::Interruption { through_turn } => {
                let Some((step, turn)) = current else {
                    continue;
                };
                if turn > *through_turn {
                    continue;
                }
                let opened = units.get(&turn).map(Vec::as_slice).unwrap_or_default();
                let open = opened.iter().position(|id| !finalized.contains(id));
                if !opened.is_empty() && open.is_none() {
                    // Heard in full already: this Interruption cut nothing.
                    continue;
                }
                cut = Some(Cut {
                    step,
                    turn,
                    open,
                    finalized: Vec::new(),
                });
                current = None;
            }
            Frame::Finalize {
                speech_id,
                heard_text,
            } => {
                finalized.insert(*speech_id);
                if let Some(cut) = &mut cut
                    && let Some(place) = units
                        .get(&cut.turn)
                        .and_then(|ids| ids.iter().position(|id| id == speech_id))
                {
                    cut.finalized.push((place, heard_text.chars().count()));
                }
            }
            Frame::Rtvi(_) | Frame::Error(_) => steps.push(Step::Send(f.frame.clone())),
            Frame::End => {
                settle(&mut steps, cut.take());
                steps.push(Step::End);
            }
            Frame::Cancel { reason } => {
                settle(&mut steps, cut.take());
                steps.push(Step::Cancel(reason.clone()));
            }
            // The session start and the answers to the brain's requests: the driver plays them.
            _ => {}
        }
    }
    settle(&mut steps, cut);
    steps
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
    if let Some(Step::Say { barged, .. }) = steps.get_mut(cut.step) {
        *barged = Some(barge);
    }
}

//! A caller's answer played out the way an eval's caller hears it: in full, or cut where the
//! caller talks over it (after some words, or once a phrase is said), with the heard text of
//! every unit of the turn reported as the runtime owes it (docs/protocol.md §4.6, §4.7).

use std::time::Duration;

use super::observed::{Observed, TurnRecord};
use super::{DriverError, Voqalize};
use voqalize::wire::Frame;

/// Where the caller cuts in on an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CutAt {
    /// Once the answer has said more than this many words: the caller hears exactly them.
    Words(usize),
    /// Once the answer says this phrase (any ASCII case, within one speech unit): the caller
    /// hears through its end.
    Phrase(String),
}

/// Where a cut lands: the unit (its place in the turn) and how many bytes of it were heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Landing {
    unit: usize,
    heard_bytes: usize,
}

impl CutAt {
    /// Where the cut lands in `texts` (the turn's unit texts, in order), once it can be told:
    /// `None` while the answer has not (yet) reached it.
    fn landing(&self, texts: &[String]) -> Option<Landing> {
        match self {
            CutAt::Words(n) => {
                let mut seen = 0;
                for (unit, text) in texts.iter().enumerate() {
                    let mut words = word_ends(text);
                    let here = words.len();
                    if seen + here > *n {
                        // The n-th word is whole once a later one started.
                        let keep = n - seen;
                        let heard_bytes = if keep == 0 {
                            0
                        } else {
                            words.swap_remove(keep - 1)
                        };
                        return Some(Landing { unit, heard_bytes });
                    }
                    seen += here;
                }
                None
            }
            CutAt::Phrase(phrase) => {
                let phrase = phrase.to_ascii_lowercase();
                texts.iter().enumerate().find_map(|(unit, text)| {
                    text.to_ascii_lowercase().find(&phrase).map(|at| Landing {
                        unit,
                        heard_bytes: at + phrase.len(),
                    })
                })
            }
        }
    }
}

/// The byte offset just past each word of `text` (words split at whitespace).
fn word_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                ends.push(i);
            }
            in_word = false;
        } else {
            in_word = true;
        }
    }
    if in_word {
        ends.push(text.len());
    }
    ends
}

impl Observed {
    /// The texts of `turn_id`'s units, in opening order.
    fn texts_of(&self, turn_id: u64) -> Vec<String> {
        self.units_of(turn_id).map(|u| u.text()).collect()
    }
}

impl Voqalize {
    /// The caller says `text` and hears the answer as `cut` says: plays the turn out for at most
    /// `within` (until the turn is over, the brain ends the call, or the cut is reached: a turn
    /// of a brain this driver runs is over when its task ended and every frame it queued
    /// arrived, one it dialed when every unit it opened ended and the quiet window passed), then, when the cut was reached, sends `Interruption{turn}` and finalizes every
    /// unit of the turn: those before the cut with all their text, the cut one with what was
    /// heard of it, those after with `""`. Without a cut (or one the answer never reached), each
    /// ended unit is finalized with all its text, as [`user_says`](Self::user_says).
    ///
    /// A speech unit the brain opens for the turn after the Interruption is recorded as a
    /// violation.
    pub(crate) async fn answer_cut(
        &mut self,
        text: &str,
        cut: Option<&CutAt>,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        let ended = self.turns_ended.clone();
        let watched = self.watches_turns;
        // Over when the turn's task ended and every frame it queued arrived (a brain this driver
        // runs), else when every unit it opened ended and the quiet window passed.
        let over = |s: &Observed| {
            if watched {
                ended
                    .frames_by_end_of(turn_id)
                    .is_some_and(|n| u64::try_from(s.frames).is_ok_and(|got| got >= n))
            } else {
                s.turn_completed(turn_id)
            }
        };
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let seen = &self.seen;
            if seen.end
                || over(seen)
                || cut.is_some_and(|c| c.landing(&seen.texts_of(turn_id)).is_some())
            {
                break;
            }
            if !self.pump_waking(deadline, Some(&ended.wake)).await? {
                break;
            }
        }
        let landing = cut.and_then(|c| c.landing(&self.seen.texts_of(turn_id)));
        let Some(landing) = landing else {
            if !watched {
                self.quiesce(self.quiet, self.timeout).await?;
            }
            self.finalize_turn(turn_id).await?;
            return Ok(self.turn(turn_id));
        };
        self.send(Frame::Interruption {
            through_turn: turn_id,
        })
        .await?;
        let before: Vec<u64> = self.seen.units_of(turn_id).map(|u| u.speech_id).collect();
        self.quiesce(self.quiet, self.timeout).await?;
        let mut heard_cut = String::new();
        let units: Vec<(u64, String)> = self
            .seen
            .units_of(turn_id)
            .map(|u| (u.speech_id, u.text()))
            .collect();
        for (place, (id, all)) in units.iter().enumerate() {
            if !before.contains(id) {
                self.seen.violations.push(format!(
                    "speech {id} opened for turn {turn_id} after the barge-in"
                ));
            }
            let heard = match place.cmp(&landing.unit) {
                std::cmp::Ordering::Less => all.as_str(),
                std::cmp::Ordering::Equal => {
                    let cut = floor_char_boundary(all, landing.heard_bytes);
                    heard_cut = all[..cut].to_owned();
                    &all[..cut]
                }
                std::cmp::Ordering::Greater => "",
            };
            let heard = heard.to_owned();
            self.finalize(*id, &heard).await?;
        }
        let mut record = self.turn(turn_id);
        record.interrupted = true;
        record.heard = Some(heard_cut);
        Ok(record)
    }
}

/// The largest char boundary of `s` at or below `at`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_word_cut_waits_for_the_next_word_and_lands_across_units() {
        let cut = CutAt::Words(3);
        assert_eq!(
            cut.landing(&texts(&["Hello there, ", "my"])),
            None,
            "the third word may go on"
        );
        let l = cut
            .landing(&texts(&["Hello there, ", "my friend"]))
            .map(|l| (l.unit, l.heard_bytes));
        assert_eq!(l, Some((1, "my".len())));
        let l = CutAt::Words(2).landing(&texts(&["Hello there, ", "my"]));
        assert_eq!(
            l.map(|l| (l.unit, l.heard_bytes)),
            Some((1, 0)),
            "cut as unit 1 starts"
        );
    }

    #[test]
    fn a_phrase_cut_hears_through_the_phrase_in_any_case() {
        let cut = CutAt::Phrase("tuesday".into());
        let l = cut.landing(&texts(&["We have ", "TUESDAY at ten, or Friday."]));
        assert_eq!(
            l.map(|l| (l.unit, l.heard_bytes)),
            Some((1, "TUESDAY".len()))
        );
        assert_eq!(cut.landing(&texts(&["Friday only."])), None);
    }
}

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

/// Whether an answer has reached its cut yet, told as frames arrive: each unit's text grows by
/// its new chunks only, and only the new text is searched, so an answer of many small chunks
/// costs the driver time in proportion to its length (a full rescan per frame was quadratic: the
/// driver fell behind and the runtime shed the brain's speech).
struct Reach {
    /// Speech units of the turn are at or above this id (ids only grow).
    from: u64,
    /// The turn's units seen so far, in opening order.
    units: Vec<UnitScan>,
    /// The phrase of a [`CutAt::Phrase`], in ASCII lower case.
    phrase: String,
}

/// One unit's text as scanned so far.
#[derive(Default)]
struct UnitScan {
    speech_id: u64,
    /// Its chunks taken so far.
    chunks: usize,
    text: String,
    /// Where each word ends; the last is provisional while `in_word` (the word may go on).
    ends: Vec<usize>,
    in_word: bool,
    /// The phrase was found in it.
    has_phrase: bool,
}

impl Reach {
    fn new(from: u64, cut: &CutAt) -> Reach {
        let phrase = match cut {
            CutAt::Phrase(p) => p.to_ascii_lowercase(),
            CutAt::Words(_) => String::new(),
        };
        Reach {
            from,
            units: Vec::new(),
            phrase,
        }
    }

    /// Takes the new chunks of `turn_id`'s units from `seen`; whether `cut` is reached.
    fn reached(&mut self, seen: &Observed, turn_id: u64, cut: &CutAt) -> bool {
        let mut place = 0;
        for unit in seen.units.range(self.from..).map(|(_, u)| u) {
            if unit.turn_id != turn_id {
                continue;
            }
            while self
                .units
                .get(place)
                .is_some_and(|u| u.speech_id < unit.speech_id)
            {
                place += 1;
            }
            if self
                .units
                .get(place)
                .is_none_or(|u| u.speech_id != unit.speech_id)
            {
                let scan = UnitScan {
                    speech_id: unit.speech_id,
                    ..UnitScan::default()
                };
                self.units.insert(place, scan);
            }
            if let Some(scan) = self.units.get_mut(place) {
                scan.take(&unit.chunks, &self.phrase);
            }
            place += 1;
        }
        match cut {
            CutAt::Phrase(_) => self.units.iter().any(|u| u.has_phrase),
            CutAt::Words(n) => {
                let mut seen_words = 0usize;
                self.units.iter().any(|u| {
                    seen_words = seen_words.saturating_add(u.ends.len());
                    seen_words > *n
                })
            }
        }
    }
}

impl UnitScan {
    /// Adds the chunks past those taken: their words, and a search for `phrase` in the new text
    /// (from a phrase's length before it, for a phrase that spans chunks).
    fn take(&mut self, chunks: &[String], phrase: &str) {
        let Some(new) = chunks.get(self.chunks..).filter(|n| !n.is_empty()) else {
            return;
        };
        self.chunks = chunks.len();
        let old = self.text.len();
        for chunk in new {
            self.text.push_str(chunk);
        }
        if self.in_word {
            self.ends.pop();
        }
        let mut in_word = self.in_word;
        for (i, c) in self.text[old..].char_indices() {
            if c.is_whitespace() {
                if in_word {
                    self.ends.push(old + i);
                }
                in_word = false;
            } else {
                in_word = true;
            }
        }
        if in_word {
            self.ends.push(self.text.len());
        }
        self.in_word = in_word;
        if !phrase.is_empty() && !self.has_phrase {
            let start = self
                .text
                .floor_char_boundary(old.saturating_sub(phrase.len()));
            self.has_phrase = self.text[start..].to_ascii_lowercase().contains(phrase);
        }
    }
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
        let from = self.seen.last_speech_id.saturating_add(1);
        let turn_id = self.send_user_message(text).await?;
        let mut reach = cut.map(|c| Reach::new(from, c));
        let ended = self.turns_ended.clone();
        let watched = self.watches_turns;
        // Over when the turn's task ended and every frame it queued arrived (a brain this driver
        // runs), else when every unit it opened ended and the quiet window passed.
        let over = |s: &Observed| {
            if watched {
                ended.over(turn_id, s.frames)
            } else {
                s.turn_completed(turn_id)
            }
        };
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let seen = &self.seen;
            let reached = match (reach.as_mut(), cut) {
                (Some(reach), Some(cut)) => reach.reached(seen, turn_id, cut),
                _ => false,
            };
            if seen.end || over(seen) || reached {
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
    fn the_scan_as_chunks_arrive_agrees_with_a_full_landing() {
        // Two units of small chunks: words and a phrase split across chunks.
        let units: [&[&str]; 2] = [
            &["Hel", "lo th", "ere, ", "Tu"],
            &["es", "DAY at", " ten", " ok"],
        ];
        let cuts = [
            CutAt::Words(1),
            CutAt::Words(3),
            CutAt::Words(5),
            CutAt::Words(50),
            CutAt::Phrase("tuesday".into()),
            CutAt::Phrase("there, tu".into()),
            CutAt::Phrase("at ten".into()),
            CutAt::Phrase("never".into()),
        ];
        for cut in &cuts {
            let mut seen = Observed::default();
            seen.opened_turns.push(1);
            let mut reach = Reach::new(1, cut);
            for (i, chunks) in units.iter().enumerate() {
                let speech_id = u64::try_from(i).unwrap_or(0) + 1;
                seen.record(Frame::SpeechStart {
                    speech_id,
                    turn_id: 1,
                });
                for chunk in *chunks {
                    seen.record(Frame::SpeechChunk {
                        speech_id,
                        text: (*chunk).to_owned(),
                    });
                    let full = cut.landing(&seen.texts_of(1)).is_some();
                    assert_eq!(
                        reach.reached(&seen, 1, cut),
                        full,
                        "{cut:?} after {chunk:?}"
                    );
                }
            }
        }
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

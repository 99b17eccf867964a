//! One simulated call: the caller's moves sent over the real wire (the testing kit's driver,
//! the brain in this process), each answer played out and cut as the scenario's barge-in rule
//! says, until the caller hangs up, the brain ends the call, the turn limit or the deadline.

use std::sync::Arc;
use std::time::Duration;

use voqalize::brain::{BrainError, MakeBrain};

use super::caller::{Caller, Next};
use super::scenario::{BargeRule, Scenario};
use super::transcript::{
    Ending, Line, MAX_CALL_TEXT_BYTES, MAX_LINE_BYTES, Speaker, ToolUse, Transcript,
};
use crate::Voqalize;
use crate::driver::{CutAt, TurnRecord};

/// How one simulated call is run.
#[derive(Debug, Clone)]
pub(crate) struct RunSettings {
    /// The most the whole call may take; past it the call is cut ([`Ending::Deadline`]).
    pub(crate) deadline: Duration,
    /// The most one answer may take to play out (a turn that says nothing waits it out).
    pub(crate) turn_timeout: Duration,
    /// Wait for the brain's greeting (up to 3 s) before the caller's first line.
    pub(crate) greeting: bool,
}

/// A factory shared by every run of a suite.
pub(crate) struct Shared<M>(pub(crate) Arc<M>);

impl<M: MakeBrain> MakeBrain for Shared<M> {
    type Brain = M::Brain;
    fn make(&self) -> Result<M::Brain, BrainError> {
        self.0.make()
    }
}

/// Runs `scenario` once against a brain from `factory`, with `caller` playing the caller and
/// `seed` drawing its random barge-ins. Never fails and never outlives `settings.deadline` (and
/// a hang-up of at most 4 s after it: `End`, then closing): what went wrong is the transcript's [`Ending`].
pub(crate) async fn run_call<M: MakeBrain>(
    factory: Arc<M>,
    scenario: &Scenario,
    caller: &mut dyn Caller,
    seed: u64,
    settings: &RunSettings,
) -> Transcript {
    let mut driver = Voqalize::in_process(Shared(factory));
    driver.timeout = settings.turn_timeout;
    let mut call = Transcript::empty(Ending::TurnLimit);
    let mut draws = Draws(seed);
    let played = tokio::time::timeout(
        settings.deadline,
        converse(
            &mut driver,
            scenario,
            caller,
            &mut draws,
            settings,
            &mut call,
        ),
    )
    .await;
    call.ending = match played {
        Err(_) => Ending::Deadline,
        Ok(ending) => ending,
    };
    call.caller_counts = caller.counts();
    // The call ends as Voqalize ends one (`End`, then the brain closes), so the brain handles
    // every frame sent before it (the last answer's Finalizes: its heard truth); bounded, then
    // the pipe is closed all the same.
    driver.timeout = HANG_UP_WAIT;
    let _ = tokio::time::timeout(HANG_UP_WAIT, driver.end()).await;
    let _ = tokio::time::timeout(HANG_UP_WAIT, driver.hang_up()).await;
    fill(&driver, &mut call);
    if let Some(e) = driver.errors().iter().find(|e| e.fatal)
        && !matches!(call.ending, Ending::Failed(_))
    {
        // A fatal Error is the brain failing the call (a refused session, a failed greeting):
        // never a call that may pass.
        call.ending = Ending::Failed(format!(
            "the brain sent a fatal Error ({:?}): {}",
            e.code,
            super::report::clip(&e.message, MAX_ERROR_BYTES)
        ));
    }
    call
}

/// How long the end of a call waits for the brain to close, after `End`.
const HANG_UP_WAIT: Duration = Duration::from_secs(2);

/// The most bytes of a brain's fatal Error message an ending keeps.
const MAX_ERROR_BYTES: usize = 512;

/// The conversation, line by line, into `call.lines`; how it ended.
async fn converse(
    driver: &mut Voqalize,
    scenario: &Scenario,
    caller: &mut dyn Caller,
    draws: &mut Draws,
    settings: &RunSettings,
    call: &mut Transcript,
) -> Ending {
    if settings.greeting {
        match driver.start().await {
            Ok(greeting) => push_answer(call, &greeting),
            Err(e) => return failed(&e),
        }
    } else if let Err(e) = driver.start_silent().await {
        return failed(&e);
    }
    let mut said = 0;
    let mut text = TextCount::default();
    loop {
        if driver.brain_ended() {
            return Ending::AgentEnded;
        }
        if let Some(too_much) = text.past_bound(call) {
            return too_much;
        }
        let next = if said == 0 && scenario.opening.is_some() && !scenario.is_scripted() {
            Next::Say(scenario.opening.clone().unwrap_or_default())
        } else {
            match caller.next(call).await {
                Ok(next) => next,
                Err(e) => return Ending::Failed(e.to_string()),
            }
        };
        let (line, ending) = match next {
            Next::Say(line) => (line, None),
            Next::HangUp {
                last: Some(line),
                ending,
            } => (line, Some(ending)),
            Next::HangUp { last: None, ending } => return ending,
        };
        if said == scenario.max_turns {
            return Ending::TurnLimit;
        }
        said += 1;
        call.lines.push(Line {
            speaker: Speaker::Caller,
            turn_id: 0,
            heard: line.clone(),
            unheard: String::new(),
            cut: false,
        });
        let cut = match ending {
            Some(_) => None,
            None => draws.cut(&scenario.barge_in),
        };
        match driver
            .answer_cut(&line, cut.as_ref(), settings.turn_timeout)
            .await
        {
            Ok(answer) => {
                if let Some(l) = call.lines.last_mut() {
                    l.turn_id = answer.turn_id;
                }
                push_answer(call, &answer);
            }
            Err(e) => return failed(&e),
        }
        if let Some(ending) = ending {
            return ending;
        }
    }
}

/// The bytes of text (heard and unheard) of a call's lines counted so far.
#[derive(Default)]
struct TextCount {
    lines: usize,
    bytes: usize,
}

impl TextCount {
    /// [`Ending::Failed`] once the call's text (heard and unheard, every line) passes
    /// [`MAX_CALL_TEXT_BYTES`]; counts only the lines added since the last time.
    fn past_bound(&mut self, call: &Transcript) -> Option<Ending> {
        for l in call.lines.get(self.lines..).unwrap_or_default() {
            self.bytes = self.bytes.saturating_add(l.heard.len() + l.unheard.len());
        }
        self.lines = call.lines.len();
        (self.bytes > MAX_CALL_TEXT_BYTES).then(|| {
            Ending::Failed(format!(
                "the call passed {MAX_CALL_TEXT_BYTES} bytes of text ({}): a transcript is \
                 bounded",
                self.bytes
            ))
        })
    }
}

/// A driver failure as an ending.
fn failed(e: &crate::DriverError) -> Ending {
    Ending::Failed(voqalize::__kit::chain(e))
}

/// The agent's line for `answer`: what the caller heard of each unit, and the rest unheard; each
/// at most [`MAX_LINE_BYTES`].
fn push_answer(call: &mut Transcript, answer: &TurnRecord) {
    let (mut heard, mut unheard) = (Bounded::default(), Bounded::default());
    for unit in &answer.units {
        let all = unit.text();
        let got = unit.heard.as_deref().unwrap_or(&all);
        let rest = all.get(got.len()..).unwrap_or_default();
        heard.push(got);
        unheard.push(rest);
    }
    call.lines.push(Line {
        speaker: Speaker::Agent,
        turn_id: answer.turn_id,
        heard: heard.finish(),
        unheard: unheard.finish(),
        cut: answer.interrupted,
    });
}

/// Texts joined with one space (each without the spaces around it, the blank ones left out),
/// kept to [`MAX_LINE_BYTES`]; the bytes past it only counted.
#[derive(Default)]
struct Bounded {
    text: String,
    cut: usize,
}

impl Bounded {
    /// Adds `text`.
    fn push(&mut self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let gap = usize::from(!self.text.is_empty());
        let room = MAX_LINE_BYTES.saturating_sub(self.text.len() + gap);
        if self.cut > 0 || room == 0 {
            self.cut = self.cut.saturating_add(text.len() + gap);
            return;
        }
        if gap == 1 {
            self.text.push(' ');
        }
        let keep = text.floor_char_boundary(room);
        self.text.push_str(&text[..keep]);
        self.cut = text.len() - keep;
    }

    /// The text, marked when cut.
    fn finish(mut self) -> String {
        if self.cut > 0 {
            let _ = std::fmt::Write::write_fmt(
                &mut self.text,
                format_args!("… [{} more bytes cut]", self.cut),
            );
        }
        self.text
    }
}

/// What the driver saw beside the lines: tool calls, counts, UI commands, violations.
fn fill(driver: &Voqalize, call: &mut Transcript) {
    call.tools = driver
        .tool_calls()
        .into_iter()
        .map(|(turn_id, t)| ToolUse {
            turn_id,
            name: t.name,
            arguments: t.arguments,
            outcome: t.outcome,
            end: t.end,
        })
        .collect();
    // Token counts only: a TurnStep also counts other things (a transition's context).
    for step in driver.turn_steps() {
        for (name, n) in step.counts.iter().filter(|(k, _)| k.ends_with("tokens")) {
            let sum = call.counts.entry(name.clone()).or_default();
            *sum = sum.saturating_add(*n);
        }
    }
    call.ui_commands = driver.ui_commands().to_vec();
    call.violations = driver.violations().to_vec();
}

/// The random draws of one run (splitmix64 over its seed): the same seed, the same barge-ins.
pub(crate) struct Draws(pub(crate) u64);

impl Draws {
    /// The next draw.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw in [0, 1).
    fn unit(&mut self) -> f64 {
        // 53 bits: exactly representable.
        #[allow(clippy::cast_precision_loss)]
        let x = (self.next() >> 11) as f64;
        x / (1u64 << 53) as f64
    }

    /// Where the caller cuts in on the next answer, as `rule` says.
    fn cut(&mut self, rule: &BargeRule) -> Option<CutAt> {
        match rule {
            BargeRule::Never => None,
            BargeRule::AfterWords(n) => Some(CutAt::Words(*n)),
            BargeRule::WhenSaid(p) => Some(CutAt::Phrase(p.clone())),
            BargeRule::Random(chance) => {
                let barge = self.unit() < *chance;
                let words = 1 + usize::try_from(self.next() % 10).unwrap_or(0);
                barge.then_some(CutAt::Words(words))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_barge_ins() {
        let rule = BargeRule::Random(0.5);
        let draw = |seed| {
            let mut d = Draws(seed);
            (0..32).map(|_| d.cut(&rule)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let cuts = draw(7).iter().filter(|c| c.is_some()).count();
        assert!((6..=26).contains(&cuts), "about half of 32: {cuts}");
    }
}

//! TEMPORARY stand-ins for `eval/judge.rs` and `eval/simulated.rs` (written in parallel): the
//! exact items the suite codes against, so it builds and its tests run before they land. Deleted
//! when they merge.

use std::collections::BTreeMap;

use super::caller::{Caller, Scripted};
use super::scenario::Scenario;
use super::transcript::Transcript;

/// Stand-in: a judge reading a transcript against a scenario's rubric.
#[derive(Clone)]
pub struct Judge;

impl Judge {
    /// Stand-in: always unsure.
    pub async fn judge(&self, scenario: &Scenario, call: &Transcript) -> Judgement {
        let _ = (scenario, call);
        Judgement::unsure("stand-in judge")
    }
}

/// Stand-in: the judge's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every rubric item holds.
    Pass,
    /// Some item does not.
    Fail,
    /// The judge could not tell.
    Unsure,
}

impl Verdict {
    /// `pass`, `fail` or `unsure`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Unsure => "unsure",
        }
    }
}

/// Stand-in: what the judge found.
#[derive(Clone, Debug)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// Its reasons.
    pub reasons: Vec<Reason>,
    /// The judge's raw answer.
    pub raw: Option<String>,
    /// The judge's token counts.
    pub counts: BTreeMap<String, u64>,
}

/// Stand-in: one reason.
#[derive(Clone, Debug)]
pub struct Reason {
    /// The rubric item.
    pub item: String,
    /// The quote.
    pub quote: String,
    /// Why.
    pub why: String,
    /// The quote is in the transcript.
    pub quoted: bool,
}

impl Judgement {
    /// Stand-in: an unsure judgement.
    pub fn unsure(why: impl Into<String>) -> Judgement {
        Judgement {
            verdict: Verdict::Unsure,
            reasons: Vec::new(),
            raw: Some(why.into()),
            counts: BTreeMap::new(),
        }
    }
}

/// Stand-in: a caller played by a model.
#[derive(Clone)]
pub struct SimulatedCaller;

impl SimulatedCaller {
    /// Stand-in: says the scenario's opening, then hangs up.
    pub fn play(&self, scenario: &Scenario) -> Box<dyn Caller> {
        Box::new(Scripted::new(scenario.opening.clone()))
    }
}

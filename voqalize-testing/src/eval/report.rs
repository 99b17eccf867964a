//! What a [`Suite`](super::Suite) found: per run, per scenario, and for the suite; read as a
//! table ([`Display`](fmt::Display)), as transcripts, or as JUnit XML for CI, and written to a
//! folder.
//!
//! Text from the brain, the caller's model and the judge goes into reports as it was said, but
//! bounded in bytes (reports are not log lines); everything in the XML is escaped.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use super::check::CheckResult;
use super::transcript::Transcript;
#[cfg(feature = "model")]
use super::{Judgement, Verdict};

/// The most bytes of one text from outside (a check's reason, a judge's quote, reason or raw
/// answer, an ending's reason) the table ([`SuiteReport`]'s `Display`) prints: 4 KiB; the rest is
/// cut at a character boundary and marked.
pub const MAX_REPORT_TEXT_BYTES: usize = 4 * 1024;

/// The most bytes of one run's transcript [`SuiteReport::transcripts`] prints: 256 KiB; the rest
/// is cut and marked.
pub const MAX_TRANSCRIPT_BYTES: usize = 256 * 1024;

/// One run of a scenario: the call, what its checks found, the judge's judgement, and whether it
/// passed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunReport {
    /// Which run of its scenario, from 1.
    pub repetition: u32,
    /// The run's seed (its random barge-ins follow it): drawn from the suite's seed, the
    /// scenario's name and the repetition.
    pub seed: u64,
    /// The call.
    pub transcript: Transcript,
    /// What each of the scenario's checks found, in the scenario's order (none when the run
    /// panicked).
    pub checks: Vec<CheckResult>,
    /// The judge's judgement: `None` when the scenario has no rubric, the suite has no judge, or
    /// the call failed before it could be judged.
    #[cfg(feature = "model")]
    #[cfg_attr(docsrs, doc(cfg(feature = "model")))]
    pub judgement: Option<Judgement>,
    /// Why the run failed, one line each (a failed check, an ending that may not pass, the
    /// judge's verdict); empty when it passed.
    pub problems: Vec<String>,
    /// It passed: every check passed, the ending may pass, and the judge (if asked) said `Pass`.
    pub passed: bool,
    /// How long the run took, in ms (the call, the checks and the judging).
    pub wall_ms: u64,
}

/// One scenario's runs and whether it passed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The scenario's name.
    pub name: String,
    /// Its runs, by repetition.
    pub runs: Vec<RunReport>,
    /// The share of runs that had to pass (0.0 to 1.0).
    pub required_pass_rate: f64,
    /// The share of runs that passed (0.0 to 1.0; 0.0 with no run).
    pub pass_rate: f64,
    /// The pass rate is at least the required one.
    pub passed: bool,
}

impl ScenarioReport {
    /// The report of `runs`, passing at `required`.
    pub(crate) fn new(name: String, runs: Vec<RunReport>, required: f64) -> ScenarioReport {
        let total = runs.len();
        let passes = runs.iter().filter(|r| r.passed).count();
        let pass_rate = if total == 0 {
            0.0
        } else {
            ratio(passes, total)
        };
        // Whole numbers, so 2 of 4 meets 0.5 exactly: passes >= required * total, with a hair
        // of slack for the float (1 of 3 meets 0.333).
        let passed = total > 0 && ratio(passes, 1) + 1e-9 >= required * ratio(total, 1);
        ScenarioReport {
            name,
            runs,
            required_pass_rate: required,
            pass_rate,
            passed,
        }
    }

    /// How many of its runs passed.
    pub fn passed_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.passed).count()
    }
}

/// The token counts of every run, summed by name (`input_tokens`, `output_tokens`, ...): counts
/// only, no prices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenCounts {
    /// The brain's (its TurnSteps').
    pub brain: BTreeMap<String, u64>,
    /// The simulated caller's model requests'.
    pub caller: BTreeMap<String, u64>,
    /// The judge's model requests'.
    pub judge: BTreeMap<String, u64>,
}

/// What a suite found: every scenario's runs, in the order the scenarios were added.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SuiteReport {
    /// Each scenario's report.
    pub scenarios: Vec<ScenarioReport>,
    /// How long the whole suite took, in ms.
    pub wall_ms: u64,
}

impl SuiteReport {
    /// Every scenario passed (its pass rate is at least its required rate). A suite with no
    /// scenario passes.
    pub fn passed(&self) -> bool {
        self.scenarios.iter().all(|s| s.passed)
    }

    /// The scenarios below their required pass rate, in the suite's order.
    pub fn failed(&self) -> impl Iterator<Item = &ScenarioReport> {
        self.scenarios.iter().filter(|s| !s.passed)
    }

    /// The scenario named `name`, if the suite ran one.
    pub fn scenario(&self, name: &str) -> Option<&ScenarioReport> {
        self.scenarios.iter().find(|s| s.name == name)
    }

    /// What a test or CI binary should exit with: success when [`passed`](Self::passed),
    /// failure when any scenario's pass rate is below its required rate.
    pub fn exit_code(&self) -> ExitCode {
        if self.passed() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// Every run's token counts summed: the brain's, the simulated caller's, the judge's.
    pub fn token_counts(&self) -> TokenCounts {
        let mut counts = TokenCounts::default();
        for run in self.scenarios.iter().flat_map(|s| &s.runs) {
            add(&mut counts.brain, &run.transcript.counts);
            add(&mut counts.caller, &run.transcript.caller_counts);
            if let Some(judge) = run.judge_view() {
                add(&mut counts.judge, judge.counts);
            }
        }
        counts
    }

    /// Every run's call, per scenario: each line with what the caller did not hear in
    /// `[unheard: ...]` ([`Transcript::with_unheard`]), the tool calls (name, arguments,
    /// outcome, when), and how it ended; each run's at most [`MAX_TRANSCRIPT_BYTES`].
    pub fn transcripts(&self) -> String {
        let mut out = String::new();
        for scenario in &self.scenarios {
            let total = scenario.runs.len();
            for run in &scenario.runs {
                let _ = writeln!(
                    out,
                    "=== {} — run {} of {total} (seed {}, {}, {} ms) ===",
                    one_line(&scenario.name, 120),
                    run.repetition,
                    run.seed,
                    if run.passed { "passed" } else { "FAILED" },
                    run.wall_ms
                );
                out.push_str(&clip(&run.call_text(), MAX_TRANSCRIPT_BYTES));
                out.push('\n');
            }
        }
        out
    }
}

impl RunReport {
    /// The call as reports print it: the lines (heard and unheard), the tool calls, the ending.
    pub(crate) fn call_text(&self) -> String {
        let call = &self.transcript;
        let mut out = call.with_unheard();
        if !call.tools.is_empty() {
            out.push_str("tools:\n");
            for t in &call.tools {
                let _ = writeln!(
                    out,
                    "  turn {}: {} {} -> {} ({})",
                    t.turn_id, t.name, t.arguments, t.outcome, t.end
                );
            }
        }
        let _ = writeln!(out, "ended: {}", call.ending);
        out
    }

    /// The judge's part of the run, as reports print it (none without a judgement).
    pub(crate) fn judge_view(&self) -> Option<JudgeView<'_>> {
        #[cfg(feature = "model")]
        {
            let j = self.judgement.as_ref()?;
            Some(JudgeView {
                verdict: j.verdict.name(),
                passed: j.verdict == Verdict::Pass,
                reasons: j
                    .reasons
                    .iter()
                    .map(|r| ReasonView {
                        item: &r.item,
                        quote: &r.quote,
                        why: &r.why,
                        quoted: r.quoted,
                    })
                    .collect(),
                raw: j.raw.as_deref(),
                counts: &j.counts,
            })
        }
        #[cfg(not(feature = "model"))]
        None
    }

    /// Why the run failed, and the judge's view, for the table and the JUnit failure body.
    pub(crate) fn failure_text(&self) -> String {
        let mut out = String::new();
        for problem in &self.problems {
            let _ = writeln!(out, "  - {}", clip(problem, MAX_REPORT_TEXT_BYTES));
        }
        if let Some(judge) = self.judge_view() {
            let _ = writeln!(out, "  judge: {}", judge.verdict);
            for r in &judge.reasons {
                let unquoted = if r.quoted {
                    ""
                } else {
                    " (the quote is not in the call)"
                };
                let _ = writeln!(
                    out,
                    "    - {}: \"{}\"{unquoted} — {}",
                    clip(r.item, MAX_REPORT_TEXT_BYTES),
                    clip(r.quote, MAX_REPORT_TEXT_BYTES),
                    clip(r.why, MAX_REPORT_TEXT_BYTES)
                );
            }
            if let (Some(raw), true) = (judge.raw, judge.reasons.is_empty() || !judge.passed) {
                let _ = writeln!(out, "    answer: {}", clip(raw, MAX_REPORT_TEXT_BYTES));
            }
        }
        out
    }
}

/// The judge's part of a run, feature-free, for the reports.
pub(crate) struct JudgeView<'a> {
    pub(crate) verdict: &'static str,
    pub(crate) passed: bool,
    pub(crate) reasons: Vec<ReasonView<'a>>,
    pub(crate) raw: Option<&'a str>,
    pub(crate) counts: &'a BTreeMap<String, u64>,
}

/// One of the judge's reasons.
pub(crate) struct ReasonView<'a> {
    pub(crate) item: &'a str,
    pub(crate) quote: &'a str,
    pub(crate) why: &'a str,
    pub(crate) quoted: bool,
}

/// The table: scenario | runs | passed | pass rate | required | result; the totals; the token
/// counts; then each failed run: its problems and the judge's verdict with its reasons.
impl fmt::Display for SuiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAME_CHARS: usize = 60;
        let names: Vec<String> = self
            .scenarios
            .iter()
            .map(|s| one_line(&s.name, NAME_CHARS))
            .collect();
        let width = names
            .iter()
            .map(|n| n.chars().count())
            .chain([8])
            .max()
            .unwrap_or(8);
        writeln!(
            f,
            "{:<width$}  {:>5}  {:>6}  {:>9}  {:>8}  result",
            "scenario", "runs", "passed", "pass rate", "required"
        )?;
        for (s, name) in self.scenarios.iter().zip(&names) {
            writeln!(
                f,
                "{:<width$}  {:>5}  {:>6}  {:>9}  {:>8}  {}",
                name,
                s.runs.len(),
                s.passed_runs(),
                percent(s.pass_rate),
                percent(s.required_pass_rate),
                if s.passed { "pass" } else { "FAIL" }
            )?;
        }
        let runs: usize = self.scenarios.iter().map(|s| s.runs.len()).sum();
        let passes: usize = self.scenarios.iter().map(ScenarioReport::passed_runs).sum();
        let scenarios_passed = self.scenarios.iter().filter(|s| s.passed).count();
        writeln!(
            f,
            "total: {scenarios_passed} of {} scenarios passed, {passes} of {runs} runs passed, \
             in {:.1} s: {}",
            self.scenarios.len(),
            seconds(self.wall_ms),
            if self.passed() { "PASS" } else { "FAIL" }
        )?;
        let counts = self.token_counts();
        writeln!(
            f,
            "tokens (counts, every run summed): brain {}; caller {}; judge {}",
            counts_text(&counts.brain),
            counts_text(&counts.caller),
            counts_text(&counts.judge)
        )?;
        let mut header = false;
        for (s, name) in self.scenarios.iter().zip(&names) {
            for run in s.runs.iter().filter(|r| !r.passed) {
                if !std::mem::replace(&mut header, true) {
                    writeln!(f, "\nfailed runs:")?;
                }
                writeln!(
                    f,
                    "{name} — run {} of {} (seed {}, {} ms, ended {}):",
                    run.repetition,
                    s.runs.len(),
                    run.seed,
                    run.wall_ms,
                    run.transcript.ending.name()
                )?;
                f.write_str(&run.failure_text())?;
            }
        }
        Ok(())
    }
}

/// `counts` as `name=n` pairs, or `none`.
fn counts_text(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    counts
        .iter()
        .map(|(k, v)| format!("{}={v}", one_line(k, 40)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Adds `more` into `sum` by name (saturating).
fn add(sum: &mut BTreeMap<String, u64>, more: &BTreeMap<String, u64>) {
    for (name, n) in more {
        let total = sum.entry(name.clone()).or_default();
        *total = total.saturating_add(*n);
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with a mark saying how much was
/// cut.
pub(crate) fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    Cow::Owned(format!(
        "{}… [{} more bytes cut]",
        &text[..at],
        text.len() - at
    ))
}

/// `text` on one line (control characters as spaces), at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

/// A duration in whole ms (saturating).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// ms as seconds.
pub(crate) fn seconds(ms: u64) -> f64 {
    // Exact up to 2^53 ms (285,000 years).
    #[allow(clippy::cast_precision_loss)]
    let s = ms as f64 / 1000.0;
    s
}

/// `a / b` as a float (counts of runs: far below 2^53).
fn ratio(a: usize, b: usize) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let r = a as f64 / b as f64;
    r
}

/// A rate as a whole percent (`67%`).
fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_at_a_char_boundary_and_says_so() {
        assert_eq!(clip("short", 10), "short");
        let cut = clip("ééé", 3);
        assert!(cut.starts_with('é') && !cut.starts_with("éé"), "{cut}");
        assert!(cut.ends_with("[4 more bytes cut]"), "{cut}");
    }

    #[test]
    fn a_half_rate_is_met_by_half_the_runs() {
        let run = |passed| RunReport {
            repetition: 1,
            seed: 0,
            transcript: Transcript::empty(super::super::Ending::ScriptDone),
            checks: Vec::new(),
            #[cfg(feature = "model")]
            judgement: None,
            problems: Vec::new(),
            passed,
            wall_ms: 0,
        };
        let s = ScenarioReport::new("s".into(), vec![run(true), run(false)], 0.5);
        assert!(s.passed);
        let s = ScenarioReport::new("s".into(), vec![run(true), run(false), run(false)], 0.5);
        assert!(!s.passed);
        let s = ScenarioReport::new(
            "s".into(),
            vec![run(true), run(false), run(false)],
            1.0 / 3.0,
        );
        assert!(s.passed);
        assert!(
            !ScenarioReport::new("s".into(), Vec::new(), 0.0).passed,
            "no run: no pass"
        );
    }

    #[cfg(feature = "model")]
    #[test]
    fn an_unsure_judge_fails_the_run_and_the_table_says_unsure() {
        use super::super::{Judgement, Reason};
        let mut judgement = Judgement::unsure("the call was too short to tell");
        judgement.reasons.push(Reason {
            item: "the agent confirms the slot".into(),
            quote: "Friday at nine?".into(),
            why: "asked, never confirmed".into(),
            quoted: false,
        });
        judgement.counts.insert("input_tokens".into(), 120);
        let run = RunReport {
            repetition: 2,
            seed: 9,
            transcript: Transcript::empty(super::super::Ending::GoalMet),
            checks: Vec::new(),
            judgement: Some(judgement),
            problems: vec!["the judge said unsure".into()],
            passed: false,
            wall_ms: 1500,
        };
        let report = SuiteReport {
            scenarios: vec![ScenarioReport::new("booking".into(), vec![run], 1.0)],
            wall_ms: 1500,
        };
        let table = report.to_string();
        for want in [
            "booking — run 2 of 1 (seed 9, 1500 ms, ended goal_met):",
            "  - the judge said unsure",
            "  judge: unsure",
            "    - the agent confirms the slot: \"Friday at nine?\" (the quote is not in the call) \
             — asked, never confirmed",
            "judge input_tokens=120",
        ] {
            assert!(table.contains(want), "{want:?} in:\n{table}");
        }
        assert_eq!(report.token_counts().judge.get("input_tokens"), Some(&120));
    }
}

//! A scenario: who the simulated caller is and what it wants, how it talks over the agent, and
//! what the call must show. Plain data: a Rust value, or a TOML file (docs/evals.md in the
//! repository documents the format), so a team keeps dozens in a folder.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::check::{Check, CheckSpec};

/// The turn limit when a scenario sets none.
pub const DEFAULT_MAX_TURNS: usize = 12;

/// The most bytes a scenario file may hold (a file past it is refused before it is read).
pub const MAX_SCENARIO_FILE_BYTES: u64 = 256 * 1024;

/// The most runs of one scenario a suite plays (a scenario file asking for more is refused; a
/// suite or a scenario built in Rust asking for more gets this many): 10,000. Every run's report
/// is kept until the suite ends, so the count bounds its memory.
pub const MAX_REPETITIONS: u32 = 10_000;

/// When the caller cuts in on the agent's answers.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BargeRule {
    /// Never: every answer is heard in full.
    #[default]
    Never,
    /// On each answer once it has said this many words: the caller hears exactly those words.
    AfterWords(usize),
    /// On each answer once it says this phrase (any ASCII case, within one speech unit): the
    /// caller hears up to the phrase's end.
    WhenSaid(String),
    /// On each answer with this chance (0.0 to 1.0), after a number of words drawn from 1 to 10;
    /// the draws follow the run's seed, so a run repeats exactly.
    Random(f64),
}

/// A scenario: the caller's part and what the call must show.
///
/// A caller with [`lines`](Self::lines) is scripted (it says them in order, then hangs up); one
/// without plays [`persona`](Self::persona) towards [`goal`](Self::goal) through a model (the
/// suite's simulated caller), starting with [`opening`](Self::opening).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Scenario {
    /// Its name, in reports (a file's stem when the file sets none).
    pub name: String,
    /// Who the caller is, in plain words, for the simulated caller's model.
    pub persona: String,
    /// What the caller wants from the call; the simulated caller hangs up when it is met.
    pub goal: String,
    /// The caller's first line (the simulated caller's; a scripted caller's is its first line).
    pub opening: Option<String>,
    /// The lines of a scripted caller, in order; empty for a simulated one.
    pub lines: Vec<String>,
    /// Facts the caller knows and gives when asked (name, date of birth, order number...).
    pub facts: BTreeMap<String, String>,
    /// The most lines the caller says before the call is cut ([`DEFAULT_MAX_TURNS`]).
    pub max_turns: usize,
    /// When the caller cuts in on the agent's answers.
    pub barge_in: BargeRule,
    /// The deterministic checks the call must pass.
    pub checks: Vec<Check>,
    /// What the judge checks, one item each; none: no judge.
    pub rubric: Vec<String>,
    /// How many times the suite runs it (the suite's number when `None`; at most
    /// [`MAX_REPETITIONS`]).
    pub repetitions: Option<u32>,
    /// The share of its runs that must pass (the suite's when `None`), 0.0 to 1.0.
    pub required_pass_rate: Option<f64>,
}

impl Scenario {
    /// A scenario called `name`, with the defaults: no caller lines, no checks, no rubric, the
    /// default turn limit, no barge-in.
    pub fn new(name: impl Into<String>) -> Scenario {
        Scenario {
            name: name.into(),
            max_turns: DEFAULT_MAX_TURNS,
            ..Scenario::default()
        }
    }

    /// This scenario with a scripted caller saying `lines`.
    #[must_use]
    pub fn lines<I, S>(mut self, lines: I) -> Scenario
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.lines = lines.into_iter().map(Into::into).collect();
        self
    }

    /// This scenario with a simulated caller: who it is, and what it wants.
    #[must_use]
    pub fn persona(mut self, persona: impl Into<String>, goal: impl Into<String>) -> Scenario {
        self.persona = persona.into();
        self.goal = goal.into();
        self
    }

    /// This scenario with the simulated caller's first line.
    #[must_use]
    pub fn opening(mut self, line: impl Into<String>) -> Scenario {
        self.opening = Some(line.into());
        self
    }

    /// This scenario with a fact the caller knows.
    #[must_use]
    pub fn fact(mut self, key: impl Into<String>, value: impl Into<String>) -> Scenario {
        self.facts.insert(key.into(), value.into());
        self
    }

    /// This scenario with a turn limit.
    #[must_use]
    pub fn max_turns(mut self, turns: usize) -> Scenario {
        self.max_turns = turns;
        self
    }

    /// This scenario with a barge-in rule.
    #[must_use]
    pub fn barge_in(mut self, rule: BargeRule) -> Scenario {
        self.barge_in = rule;
        self
    }

    /// This scenario with one more check.
    #[must_use]
    pub fn check(mut self, check: Check) -> Scenario {
        self.checks.push(check);
        self
    }

    /// This scenario with one more item for the judge.
    #[must_use]
    pub fn rubric(mut self, item: impl Into<String>) -> Scenario {
        self.rubric.push(item.into());
        self
    }

    /// This scenario run `n` times (1 to [`MAX_REPETITIONS`]: the suite plays it at least
    /// once and at most that many times).
    #[must_use]
    pub fn repetitions(mut self, n: u32) -> Scenario {
        self.repetitions = Some(n);
        self
    }

    /// This scenario passing when at least `rate` (0.0 to 1.0) of its runs pass.
    #[must_use]
    pub fn required_pass_rate(mut self, rate: f64) -> Scenario {
        self.required_pass_rate = Some(rate);
        self
    }

    /// Whether its caller is scripted (it has lines).
    pub fn is_scripted(&self) -> bool {
        !self.lines.is_empty()
    }

    /// Reads a scenario from TOML text; `origin` names it in errors (a file's path, or any
    /// label) and is its name when the text sets none.
    ///
    /// # Errors
    /// [`ScenarioError`] naming `origin`, the key (its dotted path, `expect[2].tool_called`) and
    /// what is wrong: an unknown key, a bad type, a missing caller, a check with no kind or two.
    pub fn from_toml(origin: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let fail = |key: String, why: String| ScenarioError {
            origin: origin.to_owned(),
            key,
            why,
        };
        let de = toml::Deserializer::parse(text).map_err(|e| fail(String::new(), e.to_string()))?;
        let file: ScenarioFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let key = if key == "." { String::new() } else { key };
            fail(key, e.into_inner().message().trim().to_owned())
        })?;
        file.into_scenario().map_err(|(key, why)| fail(key, why))
    }

    /// Reads the scenario file at `path` (TOML, at most [`MAX_SCENARIO_FILE_BYTES`]).
    ///
    /// # Errors
    /// [`ScenarioError`] naming the file: it cannot be read, is too large, or as
    /// [`from_toml`](Self::from_toml).
    pub fn load(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let fail = |why: String| ScenarioError {
            origin: origin.clone(),
            key: String::new(),
            why,
        };
        let size = std::fs::metadata(path)
            .map_err(|e| fail(e.to_string()))?
            .len();
        if size > MAX_SCENARIO_FILE_BYTES {
            return Err(fail(format!(
                "the file has {size} bytes; a scenario file may have {MAX_SCENARIO_FILE_BYTES}"
            )));
        }
        // Read within the bound too: a file that grows as it is read (or a FIFO, which says it
        // has 0 bytes) is refused at the bound, never read whole.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_SCENARIO_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > MAX_SCENARIO_FILE_BYTES {
            return Err(fail(format!(
                "the file grew past {MAX_SCENARIO_FILE_BYTES} bytes as it was read; a scenario \
                 file may have {MAX_SCENARIO_FILE_BYTES}"
            )));
        }
        let text =
            String::from_utf8(bytes).map_err(|_| fail("the file is not UTF-8 text".to_owned()))?;
        let mut scenario = Scenario::from_toml(&origin, &text)?;
        if scenario.name.is_empty() {
            scenario.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        Ok(scenario)
    }

    /// Reads every `*.toml` file in `dir` (not its subfolders), in file-name order.
    ///
    /// # Errors
    /// The folder cannot be read, or the first file that fails, as [`load`](Self::load).
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<Vec<Scenario>, ScenarioError> {
        let dir = dir.as_ref();
        let entries = std::fs::read_dir(dir).map_err(|e| ScenarioError {
            origin: dir.display().to_string(),
            key: String::new(),
            why: e.to_string(),
        })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        paths.iter().map(Scenario::load).collect()
    }
}

/// A scenario that could not be read: which file (or label), which key, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {}{why}", if key.is_empty() { String::new() } else { format!("`{key}`: ") })]
pub struct ScenarioError {
    /// The file's path (or the label given to [`Scenario::from_toml`]).
    pub origin: String,
    /// The key at fault, as a dotted path (`barge_in.after_words`, `expect[1].args`); empty when
    /// the fault is the file's as a whole.
    pub key: String,
    /// What is wrong.
    pub why: String,
}

/// A scenario file as written: every key optional but the caller's part.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    name: String,
    #[serde(default)]
    persona: String,
    #[serde(default)]
    goal: String,
    opening: Option<String>,
    #[serde(default)]
    lines: Vec<String>,
    #[serde(default)]
    facts: BTreeMap<String, String>,
    max_turns: Option<usize>,
    #[serde(default)]
    barge_in: BargeRule,
    #[serde(default)]
    expect: Vec<CheckSpec>,
    #[serde(default)]
    rubric: Vec<String>,
    repetitions: Option<u32>,
    required_pass_rate: Option<f64>,
}

impl ScenarioFile {
    /// The scenario, or the key at fault and why.
    fn into_scenario(self) -> Result<Scenario, (String, String)> {
        self.check_caller()?;
        self.check_numbers()?;
        let checks = self
            .expect
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                spec.into_check()
                    .map_err(|(k, why)| (format!("expect[{i}]{k}"), why))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scenario {
            name: self.name,
            persona: self.persona,
            goal: self.goal,
            opening: self.opening,
            lines: self.lines,
            facts: self.facts,
            max_turns: self.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
            barge_in: self.barge_in,
            checks,
            rubric: self.rubric,
            repetitions: self.repetitions,
            required_pass_rate: self.required_pass_rate,
        })
    }

    /// The caller's part: scripted or simulated, not both, and not neither.
    fn check_caller(&self) -> Result<(), (String, String)> {
        let simulated = !self.persona.trim().is_empty() || !self.goal.trim().is_empty();
        if !self.lines.is_empty() && simulated {
            let key = if self.goal.trim().is_empty() {
                "persona"
            } else {
                "goal"
            };
            return Err((
                key.to_owned(),
                "a caller is scripted (`lines`) or simulated (`persona` and `goal`), not both"
                    .to_owned(),
            ));
        }
        if self.lines.is_empty() && self.goal.trim().is_empty() {
            let key = if simulated { "goal" } else { "lines" };
            return Err((
                key.to_owned(),
                "a scenario needs a caller: `lines = [..]` (scripted), or `persona` and `goal` \
                 (a simulated caller)"
                    .to_owned(),
            ));
        }
        if !self.lines.is_empty() && self.opening.is_some() {
            return Err((
                "opening".to_owned(),
                "a scripted caller's first line is `lines[0]`: drop `opening`, or `lines`"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// The numbers and the barge-in rule, each within its range.
    fn check_numbers(&self) -> Result<(), (String, String)> {
        if self.max_turns == Some(0) {
            return Err(("max_turns".to_owned(), "must be at least 1".to_owned()));
        }
        if let Some(rate) = self.required_pass_rate
            && !(0.0..=1.0).contains(&rate)
        {
            return Err((
                "required_pass_rate".to_owned(),
                format!("{rate} is not between 0.0 and 1.0"),
            ));
        }
        match self.repetitions {
            Some(0) => return Err(("repetitions".to_owned(), "must be at least 1".to_owned())),
            Some(n) if n > MAX_REPETITIONS => {
                return Err((
                    "repetitions".to_owned(),
                    format!("{n} is more than {MAX_REPETITIONS}, the most a suite plays"),
                ));
            }
            _ => {}
        }
        match &self.barge_in {
            BargeRule::Random(p) if !(0.0..=1.0).contains(p) => {
                return Err((
                    "barge_in.random".to_owned(),
                    format!("{p} is not a chance between 0.0 and 1.0"),
                ));
            }
            BargeRule::AfterWords(0) => {
                return Err((
                    "barge_in.after_words".to_owned(),
                    "must be at least 1 (for no barge-in, `barge_in = \"never\"`)".to_owned(),
                ));
            }
            BargeRule::WhenSaid(p) if p.trim().is_empty() => {
                return Err(("barge_in.when_said".to_owned(), "is empty".to_owned()));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "scenario_tests.rs"]
mod tests;

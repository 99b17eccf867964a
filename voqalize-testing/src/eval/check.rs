//! The deterministic checks of a simulated call: on its transcript (what was said, and heard),
//! its tool record (what was called, with which arguments), how it ended and how long it ran.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::transcript::{Ending, Transcript};

/// A test of a tool call's arguments.
pub type ArgsTest = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// A test of a whole transcript: `Err` says why it failed.
pub type TranscriptTest = Arc<dyn Fn(&Transcript) -> Result<(), String> + Send + Sync>;

/// One deterministic check of a simulated call.
///
/// Phrases match in any case. "Said" is what the agent generated, heard or not: a phrase the
/// agent must never say fails [`NeverSaid`](Check::NeverSaid) even when the caller cut it off
/// before hearing it; [`Heard`](Check::Heard) needs the caller to have heard it.
#[derive(Clone)]
#[non_exhaustive]
pub enum Check {
    /// The tool was called, and (when `args` is given) with arguments holding each of its keys
    /// at the same value (other keys may be present; strings compare in any case).
    ToolCalled {
        /// The tool's name.
        tool: String,
        /// The arguments it must have been called with, in part.
        args: Option<Value>,
    },
    /// The tool was called with arguments that pass `test` (described by `what` in reports).
    ToolCalledWhere {
        /// The tool's name.
        tool: String,
        /// What the test looks for, for the report.
        what: String,
        /// The test.
        test: ArgsTest,
    },
    /// The tool was never called (with `args`, in part, when given).
    ToolNotCalled {
        /// The tool's name.
        tool: String,
        /// When given: only a call with these arguments (in part) fails the check.
        args: Option<Value>,
    },
    /// The agent said the phrase (heard or not).
    Said(String),
    /// The caller heard the agent say the phrase.
    Heard(String),
    /// The agent never said the phrase, heard or not.
    NeverSaid(String),
    /// The call ended one of these ways ([`Ending::name`]s: `goal_met`, `agent_ended`, ...).
    Ended(Vec<String>),
    /// The caller said at most this many lines.
    TurnsAtMost(usize),
    /// The caller said at least this many lines.
    TurnsAtLeast(usize),
    /// The driver saw no protocol violation.
    NoViolations,
    /// A test of your own (described by `name` in reports).
    Custom {
        /// What it checks, for the report.
        name: String,
        /// The test.
        test: TranscriptTest,
    },
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The check, as the report names it (`tool_called booked {"slot":"Friday 09:00"}`).
    pub check: String,
    /// It passed.
    pub passed: bool,
    /// Why it failed (empty when it passed).
    pub why: String,
}

impl Check {
    /// [`Check::ToolCalledWhere`]: the tool was called with arguments that pass `test`.
    pub fn tool_called_where(
        tool: impl Into<String>,
        what: impl Into<String>,
        test: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> Check {
        Check::ToolCalledWhere {
            tool: tool.into(),
            what: what.into(),
            test: Arc::new(test),
        }
    }

    /// [`Check::Custom`]: a test of your own on the whole transcript.
    pub fn custom(
        name: impl Into<String>,
        test: impl Fn(&Transcript) -> Result<(), String> + Send + Sync + 'static,
    ) -> Check {
        Check::Custom {
            name: name.into(),
            test: Arc::new(test),
        }
    }

    /// The check in a few words, for reports.
    pub fn describe(&self) -> String {
        let args = |a: &Option<Value>| a.as_ref().map(|a| format!(" {a}")).unwrap_or_default();
        match self {
            Check::ToolCalled { tool, args: a } => format!("tool_called {tool}{}", args(a)),
            Check::ToolCalledWhere { tool, what, .. } => format!("tool_called {tool} where {what}"),
            Check::ToolNotCalled { tool, args: a } => format!("tool_not_called {tool}{}", args(a)),
            Check::Said(p) => format!("said {p:?}"),
            Check::Heard(p) => format!("heard {p:?}"),
            Check::NeverSaid(p) => format!("never_said {p:?}"),
            Check::Ended(ways) => format!("ended {}", ways.join(" or ")),
            Check::TurnsAtMost(n) => format!("turns_at_most {n}"),
            Check::TurnsAtLeast(n) => format!("turns_at_least {n}"),
            Check::NoViolations => "no_violations".to_owned(),
            Check::Custom { name, .. } => name.clone(),
        }
    }

    /// Runs the check on `call`.
    pub fn run(&self, call: &Transcript) -> CheckResult {
        let why = match self.fails(call) {
            Ok(()) => String::new(),
            Err(why) => why,
        };
        CheckResult {
            check: self.describe(),
            passed: why.is_empty(),
            why,
        }
    }

    /// `Err(why)` when the check fails on `call`.
    fn fails(&self, call: &Transcript) -> Result<(), String> {
        if let Check::Said(p) | Check::Heard(p) | Check::NeverSaid(p) = self
            && p.trim().is_empty()
        {
            return Err("its phrase is empty, so it would check nothing".to_owned());
        }
        match self {
            Check::ToolCalled { .. }
            | Check::ToolCalledWhere { .. }
            | Check::ToolNotCalled { .. } => self.fails_on_tools(call),
            Check::Said(p) => {
                if call.agent_lines().any(|l| contains(&l.generated(), p)) {
                    Ok(())
                } else {
                    Err("the agent never said it".to_owned())
                }
            }
            Check::Heard(p) => {
                if call.agent_lines().any(|l| contains(&l.heard, p)) {
                    Ok(())
                } else if call.agent_lines().any(|l| contains(&l.generated(), p)) {
                    Err("the agent said it, but the caller had cut in before hearing it".to_owned())
                } else {
                    Err("the agent never said it".to_owned())
                }
            }
            Check::NeverSaid(p) => match call.agent_lines().find(|l| contains(&l.generated(), p)) {
                None => Ok(()),
                Some(l) => {
                    let heard = if contains(&l.heard, p) {
                        "heard"
                    } else {
                        "not heard"
                    };
                    Err(format!("the agent said it in turn {} ({heard})", l.turn_id))
                }
            },
            Check::Ended(ways) => {
                if ways.iter().any(|w| w == call.ending.name()) {
                    Ok(())
                } else {
                    Err(format!("the call ended: {}", call.ending))
                }
            }
            Check::TurnsAtMost(n) => match call.caller_turns() {
                t if t <= *n => Ok(()),
                t => Err(format!("the caller said {t} lines")),
            },
            Check::TurnsAtLeast(n) => match call.caller_turns() {
                t if t >= *n => Ok(()),
                t => Err(format!("the caller said {t} lines")),
            },
            Check::NoViolations => match call.violations.first() {
                None => Ok(()),
                Some(v) => Err(format!(
                    "{} violations, the first: {v}",
                    call.violations.len()
                )),
            },
            Check::Custom { test, .. } => test(call),
        }
    }

    /// `Err(why)` when a check of the tool record fails on `call`.
    fn fails_on_tools(&self, call: &Transcript) -> Result<(), String> {
        let called = |tool: &str| {
            let seen: Vec<String> = calls_of(call, tool)
                .map(|t| t.arguments.to_string())
                .collect();
            if seen.is_empty() {
                let names: Vec<&str> = call.tools.iter().map(|t| t.name.as_str()).collect();
                format!("it was never called (calls made: [{}])", names.join(", "))
            } else {
                format!("it was called with {}", seen.join(", "))
            }
        };
        match self {
            Check::ToolCalled { tool, args } => {
                let ok = calls_of(call, tool)
                    .any(|t| args.as_ref().is_none_or(|a| holds(&t.arguments, a)));
                if ok { Ok(()) } else { Err(called(tool)) }
            }
            Check::ToolCalledWhere { tool, test, .. } => {
                if calls_of(call, tool).any(|t| test(&t.arguments)) {
                    Ok(())
                } else {
                    Err(called(tool))
                }
            }
            Check::ToolNotCalled { tool, args } => {
                match calls_of(call, tool)
                    .find(|t| args.as_ref().is_none_or(|a| holds(&t.arguments, a)))
                {
                    None => Ok(()),
                    Some(t) => Err(format!(
                        "it was called in turn {} with {}",
                        t.turn_id, t.arguments
                    )),
                }
            }
            _ => Ok(()),
        }
    }
}

/// The calls of `tool` in `call`.
fn calls_of<'a>(
    call: &'a Transcript,
    tool: &'a str,
) -> impl Iterator<Item = &'a super::transcript::ToolUse> {
    call.tools.iter().filter(move |t| t.name == tool)
}

/// `phrase` in `text`, in any case.
fn contains(text: &str, phrase: &str) -> bool {
    text.to_lowercase().contains(&phrase.to_lowercase())
}

/// Whether `actual` holds `wanted`: every key of an object at a value that holds (recursively),
/// strings equal in any case and spaces trimmed, anything else equal.
fn holds(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (Value::Object(a), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| a.get(k).is_some_and(|av| holds(av, wv))),
        (Value::String(a), Value::String(w)) => a.trim().eq_ignore_ascii_case(w.trim()),
        (Value::Number(a), Value::Number(w)) => a.as_f64() == w.as_f64(),
        _ => actual == wanted,
    }
}

/// One `[[expect]]` entry of a scenario file: exactly one kind key, and `args` with the tool
/// kinds.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckSpec {
    tool_called: Option<String>,
    tool_not_called: Option<String>,
    args: Option<toml::Table>,
    said: Option<String>,
    heard: Option<String>,
    never_said: Option<String>,
    ended: Option<OneOrMany>,
    turns_at_most: Option<usize>,
    turns_at_least: Option<usize>,
    no_violations: Option<bool>,
}

/// A string or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl CheckSpec {
    /// The check, or the key at fault (after the entry's own path: `.args`, or empty) and why.
    pub(super) fn into_check(self) -> Result<Check, (String, String)> {
        let args = match self.args {
            None => None,
            Some(table) => {
                Some(serde_json::to_value(table).map_err(|e| (".args".to_owned(), e.to_string()))?)
            }
        };
        let tool_kind = self.tool_called.is_some() || self.tool_not_called.is_some();
        if args.is_some() && !tool_kind {
            return Err((
                ".args".to_owned(),
                "`args` goes with `tool_called` or `tool_not_called`".to_owned(),
            ));
        }
        let mut found: Vec<Check> = Vec::new();
        if let Some(tool) = self.tool_called {
            found.push(Check::ToolCalled {
                tool,
                args: args.clone(),
            });
        }
        if let Some(tool) = self.tool_not_called {
            found.push(Check::ToolNotCalled { tool, args });
        }
        for (key, phrase) in [
            ("said", &self.said),
            ("heard", &self.heard),
            ("never_said", &self.never_said),
        ] {
            if phrase.as_ref().is_some_and(|p| p.trim().is_empty()) {
                return Err((
                    format!(".{key}"),
                    "is empty: it would check nothing".to_owned(),
                ));
            }
        }
        found.extend(self.said.map(Check::Said));
        found.extend(self.heard.map(Check::Heard));
        found.extend(self.never_said.map(Check::NeverSaid));
        if let Some(ended) = self.ended {
            let ways = match ended {
                OneOrMany::One(w) => vec![w],
                OneOrMany::Many(ws) => ws,
            };
            if let Some(bad) = ways.iter().find(|w| !Ending::NAMES.contains(&w.as_str())) {
                return Err((
                    ".ended".to_owned(),
                    format!(
                        "`{bad}` is not an ending; the endings are {}",
                        Ending::NAMES.join(", ")
                    ),
                ));
            }
            found.push(Check::Ended(ways));
        }
        found.extend(self.turns_at_most.map(Check::TurnsAtMost));
        found.extend(self.turns_at_least.map(Check::TurnsAtLeast));
        if self.no_violations == Some(true) {
            found.push(Check::NoViolations);
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err((
                String::new(),
                format!("a check needs one kind: {}", KINDS.join(", ")),
            )),
            _ => Err((
                String::new(),
                "a check has one kind; this entry has several: split it into one `[[expect]]` each"
                    .to_owned(),
            )),
        }
    }
}

/// The kinds of check a scenario file can write.
const KINDS: [&str; 10] = [
    "tool_called",
    "tool_not_called",
    "said",
    "heard",
    "never_said",
    "ended",
    "turns_at_most",
    "turns_at_least",
    "no_violations = true",
    "(with `args` for the tool kinds)",
];

//! What one simulated call said and did, as an eval reads it: each line with the caller's heard /
//! unheard split, the tool calls with their arguments, how the call ended, and the token counts
//! the brain reported.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde_json::Value;

/// The most bytes of an agent line's heard text, and again of its unheard text, a transcript
/// keeps: 64 KiB each (about an hour of speech). Past it the text is cut at a character
/// boundary and ends with `… [N more bytes cut]`, so a brain that streams without end leaves a
/// bounded transcript.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The most bytes of text (heard and unheard, every line) one call may say: 4 MiB. A call that
/// passes it ends [`Ending::Failed`] there, so a brain answering fast without end over many turns
/// leaves a bounded transcript too.
pub const MAX_CALL_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// Who spoke a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    /// The simulated (or scripted) caller.
    Caller,
    /// The brain under test.
    Agent,
}

impl Speaker {
    /// `caller` or `agent`, as transcripts print it.
    pub fn name(self) -> &'static str {
        match self {
            Speaker::Caller => "caller",
            Speaker::Agent => "agent",
        }
    }
}

/// One line of the call: a caller's line, or one agent turn (all its speech units joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Who spoke it.
    pub speaker: Speaker,
    /// The turn it belongs to (the driver's turn id; the greeting is turn 1).
    pub turn_id: u64,
    /// What the caller heard of it: all of a caller's line; of an agent line, the text of every
    /// unit heard in full plus the heard prefix of a cut unit (at most [`MAX_LINE_BYTES`]).
    pub heard: String,
    /// What the agent generated that the caller never heard (the rest of a cut unit and every
    /// unit after it); empty unless the caller cut in (at most [`MAX_LINE_BYTES`]).
    pub unheard: String,
    /// The caller cut in on this agent line (a barge-in).
    pub cut: bool,
}

impl Line {
    /// A line of `speaker` with its heard and unheard text, cut when some of it went unheard, in
    /// no particular turn (0): for a transcript built by hand (a test of a caller or a judge).
    pub fn new(speaker: Speaker, heard: impl Into<String>, unheard: impl Into<String>) -> Line {
        let unheard = unheard.into();
        Line {
            speaker,
            turn_id: 0,
            heard: heard.into(),
            cut: !unheard.is_empty(),
            unheard,
        }
    }

    /// Everything the line said, heard or not (`heard` then `unheard`, joined with a space when
    /// both are present).
    pub fn generated(&self) -> String {
        match (self.heard.is_empty(), self.unheard.is_empty()) {
            (_, true) => self.heard.clone(),
            (true, false) => self.unheard.clone(),
            (false, false) => format!("{} {}", self.heard, self.unheard),
        }
    }
}

/// One tool call the brain made, as the driver saw it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The turn it was made in.
    pub turn_id: u64,
    /// The tool's name, as the model called it.
    pub name: String,
    /// The arguments the model wrote.
    pub arguments: Value,
    /// `ok`, or the error's kind (`failed`, `cancelled`, `timed_out`, ...).
    pub outcome: String,
    /// When it was answered against its turn: `in_turn`, `after_barge_in` or `background`.
    pub end: String,
}

/// How a simulated call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// The simulated caller hung up with its goal met.
    GoalMet,
    /// The simulated caller hung up having given up.
    GaveUp,
    /// A scripted caller said its last line and the agent answered it.
    ScriptDone,
    /// The brain ended the call (`End`).
    AgentEnded,
    /// The scenario's turn limit was reached.
    TurnLimit,
    /// The run's deadline passed first; the call was cut there.
    Deadline,
    /// The run could not go on: the driver failed (the link dropped, a turn never completed),
    /// or the caller's model failed. The text says what failed.
    Failed(String),
}

impl Ending {
    /// The ending's name, as scenario files write it (`ended = "goal_met"`): `goal_met`,
    /// `gave_up`, `script_done`, `agent_ended`, `turn_limit`, `deadline` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Ending::GoalMet => "goal_met",
            Ending::GaveUp => "gave_up",
            Ending::ScriptDone => "script_done",
            Ending::AgentEnded => "agent_ended",
            Ending::TurnLimit => "turn_limit",
            Ending::Deadline => "deadline",
            Ending::Failed(_) => "failed",
        }
    }

    /// Every name [`name`](Self::name) gives, for error messages.
    pub const NAMES: [&'static str; 7] = [
        "goal_met",
        "gave_up",
        "script_done",
        "agent_ended",
        "turn_limit",
        "deadline",
        "failed",
    ];
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Failed(why) => write!(f, "failed: {why}"),
            other => f.write_str(other.name()),
        }
    }
}

/// One simulated call, as the checks and the judge read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// Every line, in order: the greeting (when the brain greets), then each caller line and the
    /// agent's answer to it.
    pub lines: Vec<Line>,
    /// Every tool call answered, in the order answered.
    pub tools: Vec<ToolUse>,
    /// How the call ended.
    pub ending: Ending,
    /// The token counts the brain reported in its TurnSteps, summed by name (`input_tokens`,
    /// `output_tokens`, `cached_input_tokens`, ...): counts only, no prices.
    pub counts: BTreeMap<String, u64>,
    /// The token counts of the simulated caller's own model requests, summed by name (empty for a
    /// scripted caller).
    pub caller_counts: BTreeMap<String, u64>,
    /// The UI commands the brain sent (each RTVI `ui-command` body), in order.
    pub ui_commands: Vec<Value>,
    /// The protocol violations the driver saw (see `Voqalize::violations`).
    pub violations: Vec<String>,
}

impl Transcript {
    /// An empty transcript that ended as `ending` (a run that never started).
    pub fn empty(ending: Ending) -> Transcript {
        Transcript {
            lines: Vec::new(),
            tools: Vec::new(),
            ending,
            counts: BTreeMap::new(),
            caller_counts: BTreeMap::new(),
            ui_commands: Vec::new(),
            violations: Vec::new(),
        }
    }

    /// How many lines the caller said.
    pub fn caller_turns(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| l.speaker == Speaker::Caller)
            .count()
    }

    /// The agent's lines, in order.
    pub fn agent_lines(&self) -> impl Iterator<Item = &Line> {
        self.lines.iter().filter(|l| l.speaker == Speaker::Agent)
    }

    /// The call as the caller heard it, one line each: `caller: ...` / `agent: ...` (an agent
    /// line cut short ends with ` —`). What a simulated caller and a judge read.
    pub fn heard(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            if line.speaker == Speaker::Agent && line.heard.is_empty() {
                continue;
            }
            let cut = if line.cut { " —" } else { "" };
            let _ = writeln!(out, "{}: {}{cut}", line.speaker.name(), line.heard);
        }
        out
    }

    /// The call with what was not heard shown: each agent line's unheard rest in
    /// `[unheard: ...]`, for reports.
    pub fn with_unheard(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            let _ = write!(out, "{}: {}", line.speaker.name(), line.heard);
            if !line.unheard.is_empty() {
                let gap = if line.heard.is_empty() { "" } else { " " };
                let _ = write!(out, "{gap}[unheard: {}]", line.unheard);
            }
            out.push('\n');
        }
        out
    }
}

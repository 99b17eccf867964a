//! Evals: play a caller against your brain over the real wire, many times, and check what
//! happened, before a prompt or tool change reaches a real caller.
//!
//! * [`Scenario`]: who the caller is and what it wants (or the fixed lines it says), when it
//!   talks over the agent ([`BargeRule`]), and what the call must show ([`Check`]s, and a rubric
//!   for a judge); a Rust value, or a TOML file ([`Scenario::load`], [`Scenario::load_dir`]).
//! * A caller: [`Scripted`] says fixed lines; any [`Caller`] of your own plays the part. It hears
//!   only what the caller would: an answer it cuts in on is heard up to the cut.
//! * [`SimulatedCaller`] (feature `model`): a model plays a scenario's persona; [`Judge`] (feature
//!   `model`): a model grades a call against the scenario's rubric.
//! * [`Transcript`]: what the call said (heard and unheard), the tool calls with their arguments,
//!   how it ended, the token counts.
//! * [`Suite`]: every scenario, N times each, a few at once, with a seed and a deadline per run;
//!   its [`SuiteReport`] is a table, transcripts, JUnit XML and an exit code.
//!
//! `docs/evals.md` in the repository (voqalize-rs) is the guide: the scenario file format, every
//! check, what the simulated caller and the judge are sent and must answer, the runner's settings.

mod caller;
mod check;
mod from_recording;
mod run;
mod scenario;
mod transcript;

pub use caller::{Caller, CallerError, CallerFuture, Next, Scripted};
pub use check::{ArgsTest, Check, CheckResult, TranscriptTest};
pub use from_recording::MAX_RECORDED_LINES;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub use from_recording::{MAX_PERSONA_SOURCE_BYTES, PersonaError};
pub use scenario::{
    BargeRule, DEFAULT_MAX_TURNS, MAX_REPETITIONS, MAX_SCENARIO_FILE_BYTES, Scenario, ScenarioError,
};
pub use transcript::{
    Ending, Line, MAX_CALL_TEXT_BYTES, MAX_LINE_BYTES, Speaker, ToolUse, Transcript,
};

// The simulated caller and the judge: models playing the caller and grading the call.
#[cfg(feature = "model")]
mod judge;
#[cfg(feature = "model")]
mod simulated;

#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub use judge::{
    DEFAULT_JUDGE_TIMEOUT, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MAX_JUDGED_CALL_BYTES, Judge,
    Judgement, MAX_RAW_BYTES, MAX_REASON_FIELD_BYTES, MAX_REASONS, Reason, Verdict,
};
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub use simulated::{
    DEFAULT_CALLER_TIMEOUT, DEFAULT_MAX_CALL_BYTES, DEFAULT_MAX_LINE_BYTES, SimulatedCaller,
};
// The suite runner: runs scenarios a number of times against a brain, and reports.
mod junit;
mod report;
mod suite;
mod write;

pub use junit::MAX_JUNIT_OUT_BYTES;
pub use report::{
    MAX_REPORT_TEXT_BYTES, MAX_TRANSCRIPT_BYTES, RunReport, ScenarioReport, SuiteReport,
    TokenCounts,
};
pub use suite::{DEFAULT_CONCURRENCY, DEFAULT_RUN_DEADLINE, DEFAULT_TURN_TIMEOUT, MAX_WAIT, Suite};
pub use write::ReportError;

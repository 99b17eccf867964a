//! What one model response and one turn may cost: the bounds a turn checks as the stream comes,
//! and what happens when one trips (docs/protocol.md §6.14).
//!
//! A provider, or the model through it, decides how much it sends; these numbers decide how much
//! of it the brain takes. A bound that trips **cuts the response there**: what was spoken stays
//! spoken, the call that tripped it is answered with an error result the model reads (so every
//! call in the history has exactly one answer) and nothing after it in the response is read, one
//! warning is logged for the turn, and the session goes on. A bound on what the response keeps
//! (its parts, its bytes as the history counts them) cuts it in front of the part that passed it:
//! that part is not kept, be it a call (never read, so never answered, as the calls after a cut). A follow-up the turn still owes (a
//! `#[needs_result_now]` tool ran) is sent as the last request, with tools off.

use std::time::Duration;

use crate::model::history::Kept;
use crate::model::layer::DecodeLimits;

/// The default of [`Bounds::response_bytes`]: 1 MiB.
pub(crate) const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The default of [`Bounds::calls_per_response`]: 16.
pub(crate) const MAX_CALLS_PER_RESPONSE: usize = 16;
/// The default of [`Bounds::parts_per_response`]: 128.
pub(crate) const MAX_PARTS_PER_RESPONSE: usize = 128;
/// The default of [`Bounds::argument_bytes`]: 64 KiB.
pub(crate) const MAX_ARGUMENT_BYTES: usize = 64 * 1024;
/// The default of [`Bounds::tool_runs`]: 16.
pub(crate) const MAX_TOOL_RUNS: usize = 16;
/// The default of [`Bounds::turn_deadline`]: 60 s.
pub(crate) const TURN_DEADLINE: Duration = Duration::from_secs(60);
/// The default byte bound of the history: 1 MiB.
pub(crate) const MAX_HISTORY_BYTES: usize = 1024 * 1024;
/// The longest name a declared tool can have, in bytes; a call's name past it is cut in the
/// history (no tool has such a name, so the call is answered as one to an unknown tool).
pub(crate) const MAX_NAME_BYTES: usize = 64;

/// The bounds of one session's turns (the `Model` settings of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Body bytes read per model response, and bytes it keeps in the history (as counted there).
    pub response_bytes: usize,
    /// Calls taken from one response.
    pub calls_per_response: usize,
    /// Parts one response keeps in the history (plain text joined into one).
    pub parts_per_response: usize,
    /// Bytes of one call's arguments.
    pub argument_bytes: usize,
    /// Tools run per turn, over all its requests.
    pub tool_runs: usize,
    /// From the start of the turn; past it the stream is dropped and the turn ends.
    pub turn_deadline: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            response_bytes: MAX_RESPONSE_BYTES,
            calls_per_response: MAX_CALLS_PER_RESPONSE,
            parts_per_response: MAX_PARTS_PER_RESPONSE,
            argument_bytes: MAX_ARGUMENT_BYTES,
            tool_runs: MAX_TOOL_RUNS,
            turn_deadline: TURN_DEADLINE,
        }
    }
}

impl Bounds {
    /// What a layer's decoder may hold of one response under these bounds.
    pub(crate) fn decode(&self) -> DecodeLimits {
        DecodeLimits {
            max_calls: self.calls_per_response,
            max_argument_bytes: self.argument_bytes,
            max_parts: self.parts_per_response,
            max_kept_bytes: self.response_bytes,
        }
    }

    /// Whether a response whose tally would be `kept` passes a bound on what one response keeps:
    /// its parts, or its bytes as the history counts them.
    pub(crate) fn over_kept(&self, kept: Kept) -> Option<Tripped> {
        if kept.parts > self.parts_per_response {
            Some(Tripped::Parts(self.parts_per_response))
        } else if kept.bytes > self.response_bytes {
            Some(Tripped::KeptBytes(self.response_bytes))
        } else {
            None
        }
    }
}

/// A bound that tripped in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tripped {
    /// The response's body passed `max_response_bytes`.
    ResponseBytes(usize),
    /// What the response keeps in the history passed `max_response_bytes`, as counted there.
    KeptBytes(usize),
    /// The response kept more parts than `max_parts_per_response`.
    Parts(usize),
    /// The response made more calls than `max_calls_per_response`.
    Calls(usize),
    /// A call's arguments passed `max_argument_bytes`.
    ArgumentBytes(usize),
    /// The turn had run `max_tool_runs` tools.
    ToolRuns(usize),
    /// The turn passed its `turn_deadline`.
    Deadline(Duration),
}

impl Tripped {
    /// The bound's label in the `voqalize_bounds_tripped_total` metric.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Tripped::ResponseBytes(_) => "response_bytes",
            Tripped::KeptBytes(_) => "kept_bytes",
            Tripped::Parts(_) => "parts",
            Tripped::Calls(_) => "calls",
            Tripped::ArgumentBytes(_) => "argument_bytes",
            Tripped::ToolRuns(_) => "tool_runs",
            Tripped::Deadline(_) => "turn_deadline",
        }
    }

    /// The error result the refused call `name` gets, for the model to read.
    pub(crate) fn answer(&self, name: &str) -> String {
        match self {
            Tripped::Calls(n) => format!(
                "'{name}' did not run: this reply made more than {n} function calls, the most one \
                 reply may make, and nothing after this call was read; make fewer calls"
            ),
            Tripped::ArgumentBytes(n) => format!(
                "'{name}' did not run: its arguments were over {n} bytes, the most one call may \
                 carry, and nothing after this call was read"
            ),
            Tripped::ToolRuns(n) => format!(
                "'{name}' did not run: this turn already ran {n} tools, the most one turn may run; \
                 answer in speech"
            ),
            // None refuses a call: the response is cut between items, or in front of the part
            // that passed the bound (which is not kept, a call no more than any other part).
            Tripped::ResponseBytes(_)
            | Tripped::KeptBytes(_)
            | Tripped::Parts(_)
            | Tripped::Deadline(_) => {
                format!("'{name}' did not run: the reply was cut")
            }
        }
    }

    /// What tripped and what came of it, for the turn's one warning.
    pub(crate) fn what(&self) -> String {
        match self {
            Tripped::ResponseBytes(n) => {
                format!(
                    "the response passed max_response_bytes ({n} bytes); the stream was dropped"
                )
            }
            Tripped::KeptBytes(n) => format!(
                "what the response keeps in the history passed max_response_bytes ({n} bytes, \
                 JSON counted at its size in memory); the part past it and the stream were dropped"
            ),
            Tripped::Parts(n) => format!(
                "the response sent more than max_parts_per_response ({n}) parts; the part past it \
                 and the stream were dropped"
            ),
            Tripped::Calls(n) => format!(
                "the response made more than max_calls_per_response ({n}) calls; the call past it \
                 was answered with an error"
            ),
            Tripped::ArgumentBytes(n) => format!(
                "a call's arguments passed max_argument_bytes ({n} bytes); the call was answered \
                 with an error"
            ),
            Tripped::ToolRuns(n) => format!(
                "the turn had run max_tool_runs ({n}) tools; the call past it was answered with \
                 an error"
            ),
            Tripped::Deadline(d) => {
                format!("the turn passed its turn_deadline ({d:?}); the stream was dropped")
            }
        }
    }
}

/// `name` as the history keeps it, and replays it to the provider: a name a tool can have
/// (`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`, what `#[tool]` accepts) whole; any other made into one, so a
/// name the model invented cannot make the provider refuse every later request of the call:
/// each character outside `[A-Za-z0-9_.-]` written `_`, a `_` in front when it does not begin
/// with a letter or `_`, and past 64 bytes its first 60 and `...`. It is never a declared tool's
/// name unless the model called that tool.
pub(crate) fn kept_name(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if starts_well && name.len() <= MAX_NAME_BYTES && name.chars().all(allowed) {
        return name.to_owned();
    }
    let mut kept = String::with_capacity(MAX_NAME_BYTES);
    if !starts_well {
        kept.push('_');
    }
    // Every character becomes one byte, so at most 64 of them are read.
    for c in name.chars().take(MAX_NAME_BYTES) {
        kept.push(if allowed(c) { c } else { '_' });
    }
    if kept.len() > MAX_NAME_BYTES {
        kept.truncate(MAX_NAME_BYTES - 3);
        kept.push_str("...");
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_no_tool_can_have_is_cut_and_marked() {
        assert_eq!(kept_name("show_help"), "show_help");
        let longest = "a".repeat(MAX_NAME_BYTES);
        assert_eq!(kept_name(&longest), longest);
        let kept = kept_name(&"é".repeat(1_000_000));
        assert!(
            kept.len() <= MAX_NAME_BYTES && kept.ends_with("..."),
            "{kept}"
        );
        assert_eq!(kept_name("get weather\n\u{1b}[2J"), "get_weather___2J");
        assert_eq!(kept_name("1st.tool-x"), "_1st.tool-x");
        assert_eq!(kept_name(""), "_");
        assert_eq!(kept_name("functions.get_weather"), "functions.get_weather");
    }
}

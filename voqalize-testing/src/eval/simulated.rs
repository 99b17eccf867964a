//! [`SimulatedCaller`]: a model plays the scenario's caller. Each move is one request: the
//! role-play instruction with the scenario's persona, goal and facts, and the call as the caller
//! heard it (the agent's heard text as the user's messages, the caller's own lines as the
//! model's). The reply is one spoken line, or a goodbye ending in an end-of-call marker.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use voqalize::model::layer::{Layer, Role};

use super::caller::{Caller, CallerError, CallerFuture, Next};
use super::scenario::Scenario;
use super::transcript::{Ending, Speaker, Transcript};

/// How many bytes a caller's line may have unless [`SimulatedCaller::max_line_bytes`] says: 1 KiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1024;

/// How long one move's request may take unless [`SimulatedCaller::timeout`] says: 30 s.
pub const DEFAULT_CALLER_TIMEOUT: Duration = Duration::from_secs(30);

/// How many bytes of the call the caller's model reads unless [`SimulatedCaller::max_call_bytes`]
/// says: 64 KiB.
pub const DEFAULT_MAX_CALL_BYTES: usize = 64 * 1024;

/// The user's message a call starts with when the caller speaks first.
const PICKS_UP: &str = "(the agent picks up the phone)";

/// The user's message after a caller's line the agent answered with nothing heard.
const SILENCE: &str = "(the agent says nothing)";

/// The built-in role-play instruction (the scenario's persona, goal and facts follow it).
const ROLE_PLAY: &str = "You are playing a caller who phones an agent (a voice assistant) in a \
test of that agent. Stay in the part for the whole call: you are the caller, never the agent.

Each time, say the caller's next line: one short line, as spoken on the phone, in plain words. \
No stage directions, no descriptions of actions or tone, no quotation marks around it, no name \
before it.

Give the facts you know only when the agent asks for them, or when the goal plainly needs them. \
Never make up a fact that is not listed; if asked for one you do not have, say you do not know.

What you hear of the agent may be cut short: a line of the agent's that ends with \" —\" is one \
you talked over, and you heard only that much of it.

When your goal is met, say a short goodbye and end your line with [hang up: goal met]. If the \
agent cannot help you and you give up, say so briefly and end your line with [hang up: gave up].";

/// A caller played by a model: the scenario's persona pursuing its goal, giving its facts when
/// asked. One request per move, on the layer given (any provider), bounded in bytes and time.
///
/// Its reply is read as:
/// * a line ending in `[hang up: goal met]` or `[hang up: gave up]` (any case, spaces anywhere
///   inside the brackets): [`Next::HangUp`] with the text before the marker as its last line
///   (none when empty) and [`Ending::GoalMet`] or [`Ending::GaveUp`];
/// * any other text: [`Next::Say`] that line;
/// * nothing (blank), a request that failed or took past the timeout: a [`CallerError`].
///
/// A line past [`max_line_bytes`](Self::max_line_bytes) is cut at a character boundary.
/// Cloning shares the layer.
#[derive(Clone)]
pub struct SimulatedCaller {
    layer: Arc<dyn Layer>,
    instruction: Arc<str>,
    max_line_bytes: usize,
    max_call_bytes: usize,
    timeout: Duration,
}

impl std::fmt::Debug for SimulatedCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedCaller")
            .field("provider", &self.layer.provider())
            .field("model", &self.layer.model())
            .field("max_line_bytes", &self.max_line_bytes)
            .field("max_call_bytes", &self.max_call_bytes)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SimulatedCaller {
    /// A simulated caller asking `layer`, with the built-in role-play instruction and the
    /// defaults ([`DEFAULT_MAX_LINE_BYTES`], [`DEFAULT_MAX_CALL_BYTES`],
    /// [`DEFAULT_CALLER_TIMEOUT`]).
    ///
    /// `layer` is any layer, as `Model::new` takes it: a built-in provider's, one of your own,
    /// or a [`ModelLayer`](voqalize::voice::ModelLayer) shared with the brain.
    pub fn new(layer: impl Into<voqalize::voice::ModelLayer>) -> SimulatedCaller {
        SimulatedCaller::shared(voqalize::__kit::layer_of(&layer.into()))
    }

    /// [`new`](Self::new) with a layer already shared (the judge's, or the brain's).
    pub fn shared(layer: Arc<dyn Layer>) -> SimulatedCaller {
        SimulatedCaller {
            layer,
            instruction: Arc::from(ROLE_PLAY),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_call_bytes: DEFAULT_MAX_CALL_BYTES,
            timeout: DEFAULT_CALLER_TIMEOUT,
        }
    }

    /// Replaces the built-in role-play instruction. The scenario's persona, goal and facts are
    /// still added after it; keep the end-of-call markers (`[hang up: goal met]`,
    /// `[hang up: gave up]`) in it, or the caller never hangs up (the turn limit ends the call).
    #[must_use]
    pub fn instruction(mut self, instruction: impl Into<String>) -> SimulatedCaller {
        self.instruction = Arc::from(instruction.into());
        self
    }

    /// The most bytes a caller's line may have (default [`DEFAULT_MAX_LINE_BYTES`], 1 KiB): a
    /// longer one is cut at a character boundary. At least 1.
    #[must_use]
    pub fn max_line_bytes(mut self, bytes: usize) -> SimulatedCaller {
        self.max_line_bytes = bytes.max(1);
        self
    }

    /// The most bytes of the call the model reads per move (default
    /// [`DEFAULT_MAX_CALL_BYTES`], 64 KiB): past it, the oldest messages are left out (each
    /// message is also cut to this bound).
    #[must_use]
    pub fn max_call_bytes(mut self, bytes: usize) -> SimulatedCaller {
        self.max_call_bytes = bytes.max(1);
        self
    }

    /// How long one move's request may take (default [`DEFAULT_CALLER_TIMEOUT`], 30 s): past
    /// it, the move fails with a [`CallerError`].
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> SimulatedCaller {
        self.timeout = timeout;
        self
    }

    /// A caller for one run of `scenario` (its own token counts; the layer shared).
    pub fn play(&self, scenario: &Scenario) -> Box<dyn Caller> {
        Box::new(Playing {
            settings: self.clone(),
            instruction: instruction_for(&self.instruction, scenario),
            counts: BTreeMap::new(),
        })
    }
}

/// The instruction of every move of a scenario: the role-play rules, then who the caller is.
fn instruction_for(rules: &str, scenario: &Scenario) -> String {
    let mut out = rules.trim_end().to_owned();
    out.push_str("\n\n");
    if !scenario.persona.trim().is_empty() {
        let _ = writeln!(out, "Who you are: {}", scenario.persona.trim());
    }
    let _ = writeln!(out, "Your goal in this call: {}", scenario.goal.trim());
    if scenario.facts.is_empty() {
        out.push_str("Facts you know: none beyond the above.\n");
    } else {
        out.push_str("Facts you know (give each only when asked):\n");
        for (key, value) in &scenario.facts {
            let _ = writeln!(out, "- {}: {}", key.trim(), value.trim());
        }
    }
    out
}

/// One run's simulated caller.
struct Playing {
    settings: SimulatedCaller,
    instruction: String,
    counts: BTreeMap<String, u64>,
}

impl Caller for Playing {
    fn next<'a>(&'a mut self, call: &'a Transcript) -> CallerFuture<'a> {
        Box::pin(async move {
            let s = &self.settings;
            let messages = messages_of(call, s.max_call_bytes);
            // Room for the marker after a full line.
            let read = s.max_line_bytes.saturating_add(64);
            let asked = voqalize::__kit::ask(&*s.layer, &self.instruction, &messages, read);
            let asked = match tokio::time::timeout(s.timeout, asked).await {
                Ok(Ok(asked)) => asked,
                Ok(Err(why)) => {
                    return Err(CallerError {
                        why: format!("its model request failed: {why}"),
                    });
                }
                Err(_) => {
                    return Err(CallerError {
                        why: format!("its model request took over {:?}", s.timeout),
                    });
                }
            };
            for (name, n) in asked.counts {
                let sum = self.counts.entry(name).or_default();
                *sum = sum.saturating_add(n);
            }
            parse_line(&asked.text, s.max_line_bytes)
        })
    }

    fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.clone()
    }
}

/// The call from the caller's side: the agent's heard text as the user's messages, the caller's
/// lines as the model's, consecutive ones of one side joined; starting with the user (the agent
/// picking up when the caller spoke first) and ending with the user (the agent's silence after
/// the caller's last line). The newest messages within `max_bytes`.
pub(super) fn messages_of(call: &Transcript, max_bytes: usize) -> Vec<(Role, String)> {
    let mut messages: Vec<(Role, String)> = Vec::new();
    for line in &call.lines {
        let (role, text) = match line.speaker {
            Speaker::Caller => (Role::Model, line.heard.trim().to_owned()),
            Speaker::Agent if line.heard.trim().is_empty() => continue,
            Speaker::Agent => {
                let cut = if line.cut { " —" } else { "" };
                (Role::User, format!("{}{cut}", line.heard.trim()))
            }
        };
        if text.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last, said)) if *last == role => {
                said.push('\n');
                said.push_str(&text);
            }
            _ => messages.push((role, text)),
        }
    }
    // The newest first within the bound; each message cut to it.
    let mut kept = Vec::new();
    let mut left = max_bytes;
    for (role, mut text) in messages.into_iter().rev() {
        if left == 0 {
            break;
        }
        if text.len() > left {
            let at = text.floor_char_boundary(left);
            text.truncate(at);
        }
        left -= text.len();
        kept.push((role, text));
    }
    kept.reverse();
    if kept.first().is_none_or(|(role, _)| *role != Role::User) {
        kept.insert(0, (Role::User, PICKS_UP.to_owned()));
    }
    if kept.last().is_some_and(|(role, _)| *role == Role::Model) {
        kept.push((Role::User, SILENCE.to_owned()));
    }
    kept
}

/// The caller's move in `reply`: a line (cut to `max_bytes`), or a hang-up after the text before
/// its marker.
pub(super) fn parse_line(reply: &str, max_bytes: usize) -> Result<Next, CallerError> {
    let reply = reply.trim();
    if reply.is_empty() {
        return Err(CallerError {
            why: "its model answered nothing".to_owned(),
        });
    }
    let (line, ending) = match find_marker(reply) {
        Some((at, ending)) => (&reply[..at], Some(ending)),
        None => (reply, None),
    };
    let line = clip(line.trim(), max_bytes);
    Ok(match ending {
        None => Next::Say(line),
        Some(ending) => Next::HangUp {
            last: (!line.is_empty()).then_some(line),
            ending,
        },
    })
}

/// The first end-of-call marker in `text`: where it starts, and the ending it says. A marker is
/// `[hang up: goal met]` or `[hang up: gave up]` in any case, with any spaces (or `-`, `_`)
/// inside the brackets.
fn find_marker(text: &str) -> Option<(usize, Ending)> {
    // A marker is short: a bracket further than this from its opening one is not its end.
    const MAX_MARKER_BYTES: usize = 64;
    for (at, _) in text.match_indices('[') {
        let rest = &text[at + 1..];
        let window = &rest[..rest.floor_char_boundary(MAX_MARKER_BYTES)];
        let Some(close) = window.find(']') else {
            continue;
        };
        let inner: String = window[..close]
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        match inner.as_str() {
            "hangup:goalmet" => return Some((at, Ending::GoalMet)),
            "hangup:gaveup" => return Some((at, Ending::GaveUp)),
            _ => {}
        }
    }
    None
}

/// `text` cut to `max` bytes at a character boundary.
pub(super) fn clip(text: &str, max: usize) -> String {
    text[..text.floor_char_boundary(max)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Line;

    fn line(speaker: Speaker, heard: &str, unheard: &str) -> Line {
        Line::new(speaker, heard, unheard)
    }

    #[test]
    fn markers_are_read_in_any_case_and_spacing() {
        let hang = |t: &str| match parse_line(t, 1024) {
            Ok(Next::HangUp { last, ending }) => Some((last, ending)),
            _ => None,
        };
        assert_eq!(
            hang("Thanks, bye! [Hang Up: Goal Met]"),
            Some((Some("Thanks, bye!".to_owned()), Ending::GoalMet))
        );
        assert_eq!(hang("[ hang  up :gave up ]"), Some((None, Ending::GaveUp)));
        assert_eq!(
            hang("Forget it. [hang-up: gave-up] extra"),
            Some((Some("Forget it.".to_owned()), Ending::GaveUp))
        );
        assert_eq!(
            parse_line("I'd [like] a table [hang up", 1024).ok(),
            Some(Next::Say("I'd [like] a table [hang up".to_owned()))
        );
        assert!(parse_line(" \n ", 1024).is_err());
    }

    #[test]
    fn a_line_is_cut_at_a_character_boundary() {
        let Ok(Next::Say(said)) = parse_line(&"é".repeat(100), 7) else {
            panic!("a line");
        };
        assert_eq!(said, "ééé");
    }

    #[test]
    fn the_call_starts_and_ends_with_the_agent_and_hears_only_the_heard() {
        let mut call = Transcript::empty(Ending::TurnLimit);
        call.lines = vec![
            line(Speaker::Caller, "Hi", ""),
            line(Speaker::Agent, "Hello, we have Friday", "or Monday"),
            line(Speaker::Agent, "", "never heard"),
            line(Speaker::Caller, "Friday.", ""),
            line(Speaker::Caller, "At nine.", ""),
        ];
        let m = messages_of(&call, 1024);
        assert_eq!(
            m,
            vec![
                (Role::User, PICKS_UP.to_owned()),
                (Role::Model, "Hi".to_owned()),
                (Role::User, "Hello, we have Friday —".to_owned()),
                (Role::Model, "Friday.\nAt nine.".to_owned()),
                (Role::User, SILENCE.to_owned()),
            ]
        );
        assert_eq!(
            messages_of(&Transcript::empty(Ending::TurnLimit), 1024),
            vec![(Role::User, PICKS_UP.to_owned())]
        );
        // Within the bound: the newest kept.
        let m = messages_of(&call, 20);
        assert_eq!(m[1], (Role::Model, "Friday.\nAt nine.".to_owned()));
    }
}

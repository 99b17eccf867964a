//! [`ReplayReport`]: what a replayed call did beside what the recorded one did, turn by turn.

use std::fmt;

use serde_json::Value;

use crate::driver::ToolCalled;
use voqalize::__kit::outside;
use voqalize::record::{Direction, Recording};
use voqalize::wire::{Frame, RtviType, UserIdle, UserMessage};

/// What one turn did: what the brain said, which tools the model called, which UI commands the
/// brain sent and which steps it reported. Timings are left out: they differ on every run.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TurnOutput {
    /// The text of each speech unit the turn opened, in order.
    pub units: Vec<String>,
    /// Each tool call answered, in order.
    pub tools: Vec<ToolCalled>,
    /// The body of each UI command (RTVI `ui-command`).
    pub ui_commands: Vec<Value>,
    /// Each TurnStep as `kind name` (`model gemini-2.5-flash`, `tool lookup`).
    pub steps: Vec<String>,
}

impl TurnOutput {
    /// Each part of the output by its name in the report, as JSON.
    fn parts(&self) -> [(&'static str, Value); 4] {
        let tools = self
            .tools
            .iter()
            .map(|t| match t.end.as_str() {
                "in_turn" => serde_json::json!([t.name, t.arguments, t.outcome]),
                end => serde_json::json!([t.name, t.arguments, t.outcome, end]),
            })
            .collect::<Vec<_>>();
        [
            ("spoken", Value::from(self.units.clone())),
            ("tools", Value::from(tools)),
            ("ui commands", Value::from(self.ui_commands.clone())),
            ("steps", Value::from(self.steps.clone())),
        ]
    }
}

/// One turn of the call in both runs: the greeting (index 0), then one per thing the user said
/// or idle prompt, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TurnDiff {
    /// From 0 (the greeting).
    pub index: usize,
    /// What started it: the user's words, `(greeting)` or `(idle)`.
    pub stimulus: String,
    /// What the recorded call did.
    pub recorded: TurnOutput,
    /// What the replay did; `None` when the replay stopped before this turn.
    pub replayed: Option<TurnOutput>,
}

impl TurnDiff {
    /// Whether the replay did what the recording did.
    pub fn is_same(&self) -> bool {
        self.replayed.as_ref() == Some(&self.recorded)
    }
}

/// How the replay's stand-in answered one model request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answered {
    /// With the recorded response of exchange `index` (from 0, in the recording's order);
    /// `again` when that exchange had already answered (a retry, or the same request twice).
    Recorded {
        /// The recorded exchange.
        index: usize,
        /// It had answered before in this replay.
        again: bool,
    },
    /// No recorded request matched: refused with a `400`, or forwarded when the replay was told
    /// to.
    Unmatched {
        /// It went to the replay's forward URL.
        forwarded: bool,
    },
}

/// One model request the replayed brain made.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RequestMatch {
    /// The request's path.
    pub path: String,
    /// Its body (JSON, or a string holding its text).
    pub request: Value,
    /// How it was answered.
    pub answered: Answered,
}

/// What a replay found: each turn of the recorded call beside the replay's, and how each model
/// request was answered. `Display` writes the differences for a person (every string from the
/// call clipped and escaped); [`is_same`](Self::is_same) is the check a test asserts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReplayReport {
    /// Every turn, the greeting first.
    pub turns: Vec<TurnDiff>,
    /// Turns the replay had that the recording did not (it went on after the recorded call's
    /// last turn; should not happen).
    pub extra_turns: Vec<TurnOutput>,
    /// Every model request of the replay, in order.
    pub requests: Vec<RequestMatch>,
    /// The recorded model requests (path and body), for a request that matched none: the
    /// report shows the nearest one beside it.
    pub recorded_requests: Vec<(String, Value)>,
    /// The recorded model requests (by index, from 0) the replay never asked: the brain asked
    /// fewer questions, or its layer is not pointed at [`Replay::base_url`](super::Replay::base_url).
    pub unused: Vec<usize>,
    /// The recording was cut at its byte bound: its last turns are missing.
    pub truncated: bool,
    /// The replay's own recording was cut at its bound (1 GiB): the brain under test said far
    /// more than the recorded one, and its last turns are missing.
    pub replay_truncated: bool,
    /// The replay reached its [`deadline`](super::Replay::deadline) (this long) before the
    /// recorded call's end and hung up there: the turn it was playing is as far as it got, and
    /// the turns after it are missing.
    pub stopped_at_deadline: Option<std::time::Duration>,
}

impl ReplayReport {
    pub(super) fn new(
        recorded: &Recording,
        replayed: &Recording,
        requests: Vec<RequestMatch>,
        stopped_at_deadline: Option<std::time::Duration>,
    ) -> Self {
        let before = turns(recorded);
        let mut after = turns(replayed).into_iter();
        let turns = before
            .into_iter()
            .enumerate()
            .map(|(index, (stimulus, recorded))| TurnDiff {
                index,
                stimulus,
                recorded,
                replayed: after.next().map(|(_, output)| output),
            })
            .collect();
        let mut used = vec![false; recorded.exchanges.len()];
        for r in &requests {
            if let Answered::Recorded { index, .. } = r.answered
                && let Some(u) = used.get_mut(index)
            {
                *u = true;
            }
        }
        ReplayReport {
            turns,
            extra_turns: after.map(|(_, output)| output).collect(),
            requests,
            recorded_requests: recorded
                .exchanges
                .iter()
                .map(|e| (e.path.clone(), e.request.clone()))
                .collect(),
            unused: (0..used.len()).filter(|i| !used[*i]).collect(),
            truncated: recorded.truncated,
            replay_truncated: replayed.truncated,
            stopped_at_deadline,
        }
    }

    /// Whether the replay played the whole call within its deadline and did what the recording
    /// did in every turn, every model request it made was answered from the recording, and every
    /// recorded request was asked.
    pub fn is_same(&self) -> bool {
        self.turns.iter().all(TurnDiff::is_same)
            && self.extra_turns.is_empty()
            && self.unmatched() == 0
            && self.unused.is_empty()
            && !self.replay_truncated
            && self.stopped_at_deadline.is_none()
    }

    /// The recorded request most like `request`: the same path, and the longest stretch of
    /// JSON text in common from the start.
    fn nearest(&self, request: &RequestMatch) -> Option<usize> {
        let text = request.request.to_string();
        self.recorded_requests
            .iter()
            .enumerate()
            .filter(|(_, (path, _))| super::path::same_path(&request.path, path))
            .max_by_key(|(_, (_, body))| {
                let body = body.to_string();
                body.bytes()
                    .zip(text.bytes())
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .map(|(i, _)| i)
    }

    /// The turns that differ.
    pub fn differing(&self) -> impl Iterator<Item = &TurnDiff> {
        self.turns.iter().filter(|t| !t.is_same())
    }

    /// How many model requests matched no recorded one.
    pub fn unmatched(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| matches!(r.answered, Answered::Unmatched { .. }))
            .count()
    }
}

/// Each turn of a recording, in order: what started it and what the brain did in it.
fn turns(recording: &Recording) -> Vec<(String, TurnOutput)> {
    let mut order: Vec<(u64, String)> = Vec::new();
    for f in recording
        .frames
        .iter()
        .filter(|f| f.direction == Direction::In)
    {
        match &f.frame {
            Frame::SessionStart(s) if order.is_empty() => {
                order.push((s.turn_id, "(greeting)".to_owned()));
            }
            Frame::UserMessage(m) => order.push((m.turn_id, m.text.clone())),
            Frame::UserIdle(i) => order.push((i.turn_id, "(idle)".to_owned())),
            _ => {}
        }
    }
    let mut unit_turn = std::collections::HashMap::new();
    let mut outputs: Vec<TurnOutput> = vec![TurnOutput::default(); order.len()];
    // Each turn's place, read once (a turn id seen twice keeps its first place).
    let mut places = std::collections::HashMap::new();
    for (i, (turn, _)) in order.iter().enumerate() {
        places.entry(*turn).or_insert(i);
    }
    let slot = |turn: u64| places.get(&turn).copied();
    // A UI command sent outside a turn (from `on_rtvi`) belongs to the turn the user was in.
    let mut current = None;
    for f in &recording.frames {
        if f.direction == Direction::In {
            match &f.frame {
                Frame::SessionStart(s) => current = current.or(slot(s.turn_id)),
                Frame::UserMessage(UserMessage { turn_id, .. })
                | Frame::UserIdle(UserIdle { turn_id, .. }) => current = slot(*turn_id),
                _ => {}
            }
            continue;
        }
        match &f.frame {
            Frame::SpeechStart { speech_id, turn_id } => {
                if let Some(i) = slot(*turn_id) {
                    unit_turn.insert(*speech_id, (i, outputs[i].units.len()));
                    outputs[i].units.push(String::new());
                }
            }
            Frame::SpeechChunk { speech_id, text } => {
                if let Some((i, u)) = unit_turn.get(speech_id) {
                    outputs[*i].units[*u].push_str(text);
                }
            }
            Frame::Rtvi(r) if r.kind == RtviType::UiCommand => {
                if let Some(i) = r.turn_id.and_then(slot).or(current) {
                    outputs[i]
                        .ui_commands
                        .push(r.data.clone().unwrap_or(Value::Null));
                }
            }
            Frame::TurnStep(s) => {
                if let Some(i) = slot(s.turn_id) {
                    outputs[i].steps.push(format!("{} {}", s.kind, s.name));
                }
            }
            _ => {}
        }
    }
    for run in &recording.tool_runs {
        if let Some(i) = slot(run.turn_id) {
            outputs[i].tools.push(ToolCalled {
                name: run.name.clone(),
                arguments: run.arguments.clone(),
                outcome: run.outcome.clone(),
                end: run.end.clone(),
            });
        }
    }
    order
        .into_iter()
        .map(|(_, stimulus)| stimulus)
        .zip(outputs)
        .collect()
}

/// Where two JSON values first differ, as a JSON pointer and the two values there.
fn first_difference(a: &Value, b: &Value, at: &mut String) -> Option<(Value, Value)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (key, va) in x {
                let len = at.len();
                at.push('/');
                at.push_str(key);
                match y.get(key) {
                    Some(vb) => {
                        if let Some(d) = first_difference(va, vb, at) {
                            return Some(d);
                        }
                    }
                    None => return Some((va.clone(), Value::Null)),
                }
                at.truncate(len);
            }
            y.iter()
                .find(|(key, _)| !x.contains_key(*key))
                .map(|(key, vb)| {
                    at.push('/');
                    at.push_str(key);
                    (Value::Null, vb.clone())
                })
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                if let Some(d) = first_difference(va, vb, at) {
                    return Some(d);
                }
                at.truncate(len);
            }
            (x.len() != y.len()).then(|| {
                let i = x.len().min(y.len());
                at.push_str(&format!("/{i}"));
                (
                    x.get(i).cloned().unwrap_or(Value::Null),
                    y.get(i).cloned().unwrap_or(Value::Null),
                )
            })
        }
        _ => (a != b).then(|| (a.clone(), b.clone())),
    }
}

/// A value from the call, for the report: compact JSON, clipped and escaped.
fn shown(v: &Value) -> String {
    outside(&v.to_string()).to_string()
}

impl ReplayReport {
    /// The lines saying the call was not played whole: the deadline, a cut recording.
    fn notes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(deadline) = self.stopped_at_deadline {
            let played = self.turns.iter().filter(|t| t.replayed.is_some()).count();
            writeln!(
                f,
                "  (the replay reached its deadline, {:.1} s, at turn {} of the recording's 0 \
                 to {}: the turns after it were not played; Replay::deadline sets it)",
                deadline.as_secs_f64(),
                played.saturating_sub(1),
                self.turns.len().saturating_sub(1)
            )?;
        }
        if self.truncated {
            writeln!(
                f,
                "  (the recording was cut at its byte bound: its last turns are not replayed)"
            )?;
        }
        if self.replay_truncated {
            writeln!(
                f,
                "  (the replay's own recording was cut at 1 GiB: its last turns are missing)"
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let differing = self.differing().count();
        let recorded = self
            .requests
            .iter()
            .filter(|r| matches!(r.answered, Answered::Recorded { .. }))
            .count();
        writeln!(
            f,
            "replayed {} turns: {} differ; model requests: {recorded} answered from the recording, {} unmatched",
            self.turns.len(),
            differing,
            self.unmatched()
        )?;
        self.notes(f)?;
        if !self.unused.is_empty() {
            let hint = if self.requests.is_empty() {
                " (no request reached the replay: is the brain's layer pointed at Replay::base_url?)"
            } else {
                ""
            };
            writeln!(
                f,
                "recorded model requests never asked: {:?}{hint}",
                self.unused
            )?;
        }
        for turn in self.differing() {
            writeln!(f, "turn {} ({}):", turn.index, outside(&turn.stimulus))?;
            let Some(replayed) = &turn.replayed else {
                writeln!(f, "  the replay ended before this turn")?;
                continue;
            };
            for ((name, a), (_, b)) in turn.recorded.parts().into_iter().zip(replayed.parts()) {
                if a != b {
                    writeln!(f, "  {name}:")?;
                    writeln!(f, "    recorded: {}", shown(&a))?;
                    writeln!(f, "    replayed: {}", shown(&b))?;
                }
            }
        }
        for extra in &self.extra_turns {
            writeln!(
                f,
                "an extra turn in the replay: {}",
                shown(&Value::from(extra.units.clone()))
            )?;
        }
        for (n, request) in self.requests.iter().enumerate() {
            let Answered::Unmatched { forwarded } = request.answered else {
                continue;
            };
            let how = if forwarded { "forwarded" } else { "refused" };
            writeln!(
                f,
                "model request {n} ({}) matched no recorded request ({how})",
                outside(&request.path)
            )?;
            if let Some(i) = self.nearest(request)
                && let Some((_, nearest)) = self.recorded_requests.get(i)
            {
                let mut at = String::new();
                if let Some((was, is)) = first_difference(nearest, &request.request, &mut at) {
                    writeln!(
                        f,
                        "  the nearest, recorded request {i}, differs at {}:",
                        outside(&at)
                    )?;
                    writeln!(f, "    recorded: {}", shown(&was))?;
                    writeln!(f, "    replayed: {}", shown(&is))?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::first_difference;

    #[test]
    fn the_first_difference_is_named_by_its_pointer() {
        let a = json!({"system": "be brief", "contents": [{"text": "hi"}, {"text": "a"}]});
        let b = json!({"system": "be brief", "contents": [{"text": "hi"}, {"text": "b"}]});
        let mut at = String::new();
        assert_eq!(
            first_difference(&a, &b, &mut at),
            Some((json!("a"), json!("b")))
        );
        assert_eq!(at, "/contents/1/text");
        let mut at = String::new();
        assert_eq!(first_difference(&a, &a, &mut at), None);
        let mut at = String::new();
        let c = json!({"system": "be brief", "contents": [{"text": "hi"}]});
        assert_eq!(
            first_difference(&a, &c, &mut at),
            Some((json!({"text": "a"}), json!(null)))
        );
        assert_eq!(at, "/contents/1");
    }
}

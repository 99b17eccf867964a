//! A recorded call turned into a scenario: the caller's turns, as a scripted caller says them
//! again against a new build.

use voqalize::record::{Direction, Recording};
use voqalize::wire::Frame;

use super::scenario::Scenario;

/// The most caller lines a scenario made from a recording keeps (a recording of a long call
/// gives its first this many).
pub const MAX_RECORDED_LINES: usize = 200;

impl Scenario {
    /// A scripted scenario called `name` from a recorded call: the caller's turns (each
    /// `UserMessage` Voqalize sent, in order, at most [`MAX_RECORDED_LINES`]) as its lines, and a
    /// turn limit of one more than there are. It has no checks: add those the call must keep
    /// passing. Idle prompts, app events and barge-ins are not played (a `Replay` plays a
    /// recording exactly); the lines are said whatever the agent answers.
    pub fn from_recording(name: impl Into<String>, recording: &Recording) -> Scenario {
        let lines: Vec<String> = recording
            .frames
            .iter()
            .filter(|f| f.direction == Direction::In)
            .filter_map(|f| match &f.frame {
                Frame::UserMessage(m) if !m.text.trim().is_empty() => Some(m.text.clone()),
                _ => None,
            })
            .take(MAX_RECORDED_LINES)
            .collect();
        let turns = lines.len() + 1;
        Scenario::new(name).lines(lines).max_turns(turns)
    }
}

/// The most bytes of a recorded caller's lines a persona summary reads (the newest are kept).
#[cfg(feature = "model")]
pub const MAX_PERSONA_SOURCE_BYTES: usize = 32 * 1024;

/// The most bytes each field of a summarised persona keeps (persona, goal, each fact).
#[cfg(feature = "model")]
const MAX_PERSONA_FIELD_BYTES: usize = 1024;

/// The most facts a summarised persona keeps.
#[cfg(feature = "model")]
const MAX_PERSONA_FACTS: usize = 16;

/// What a persona summary is asked for.
#[cfg(feature = "model")]
const SUMMARISE: &str = "You read the lines a caller said in a phone call to an agent (only \
the caller's side). Describe the caller so that someone else can play them in a new call: who \
they are and how they speak, what they wanted from the call, and the facts they gave (name, \
dates, numbers). Answer only one JSON object: {\"persona\": \"...\", \"goal\": \"...\", \
\"facts\": {\"name\": \"...\"}}.";

/// Why a recorded call could not be summarised into a persona.
#[cfg(feature = "model")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not summarise the recorded caller: {why}")]
pub struct PersonaError {
    /// What failed (the model's request, or its answer, clipped).
    pub why: String,
}

#[cfg(feature = "model")]
impl Scenario {
    /// A simulated scenario called `name` from a recorded call: `layer`'s model summarises the
    /// caller's turns (their newest [`MAX_PERSONA_SOURCE_BYTES`]) into a persona, a goal and the
    /// facts they gave (each field at most 1 KiB, at most 16 facts); the opening is the
    /// recorded first line, and the turn limit twice the recorded turns (at least 4). Where
    /// [`from_recording`](Self::from_recording) says the same lines again, this caller reacts to
    /// what the new build says.
    ///
    /// # Errors
    /// [`PersonaError`]: the call has no caller line, the request failed or took over
    /// `timeout`, or the answer holds no JSON object with a goal.
    pub async fn persona_from_recording(
        name: impl Into<String>,
        recording: &Recording,
        layer: impl Into<voqalize::voice::ModelLayer>,
        timeout: std::time::Duration,
    ) -> Result<Scenario, PersonaError> {
        use super::simulated::clip;
        use voqalize::model::layer::Role;
        let fail = |why: String| PersonaError { why };
        let lines = Scenario::from_recording("", recording).lines;
        let Some(opening) = lines.first().cloned() else {
            return Err(fail("the recording has no caller line".to_owned()));
        };
        let mut said = String::new();
        for line in lines.iter().rev() {
            if said.len() + line.len() + 10 > MAX_PERSONA_SOURCE_BYTES {
                break;
            }
            said.insert_str(0, &format!("caller: {line}\n"));
        }
        let layer = voqalize::__kit::layer_of(&layer.into());
        let messages = [(Role::User, said)];
        let asked = voqalize::__kit::ask(&*layer, SUMMARISE, &messages, 8 * 1024);
        let asked = match tokio::time::timeout(timeout, asked).await {
            Ok(Ok(asked)) => asked,
            Ok(Err(why)) => return Err(fail(format!("its model request failed: {why}"))),
            Err(_) => return Err(fail(format!("its model request took over {timeout:?}"))),
        };
        let raw = || voqalize::__kit::outside_n(&asked.text, 500).to_string();
        let Some(object) = super::judge::find_object(&asked.text) else {
            return Err(fail(format!("the answer holds no JSON object: {}", raw())));
        };
        let field = |v: Option<&serde_json::Value>| {
            let text = v
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .trim();
            clip(text, MAX_PERSONA_FIELD_BYTES)
        };
        let goal = field(object.get("goal"));
        if goal.is_empty() {
            return Err(fail(format!("the answer gives no goal: {}", raw())));
        }
        let mut scenario = Scenario::new(name)
            .persona(field(object.get("persona")), goal)
            .opening(opening)
            .max_turns((lines.len() * 2).max(4));
        if let Some(facts) = object.get("facts").and_then(serde_json::Value::as_object) {
            for (key, value) in facts.iter().take(MAX_PERSONA_FACTS) {
                let value = match value {
                    serde_json::Value::String(s) => clip(s.trim(), MAX_PERSONA_FIELD_BYTES),
                    other => clip(&other.to_string(), MAX_PERSONA_FIELD_BYTES),
                };
                scenario = scenario.fact(clip(key, 64), value);
            }
        }
        Ok(scenario)
    }
}

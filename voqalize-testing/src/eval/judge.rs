//! [`Judge`]: a model grades a call against the scenario's rubric, and must quote the call to be
//! believed. Its answer is hostile text: read within bounds, and any verdict it cannot back with
//! words from the transcript is [`Verdict::Unsure`].

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use voqalize::model::layer::{Layer, Role};

use super::scenario::Scenario;
use super::simulated::clip;
use super::transcript::Transcript;

/// How many bytes of the judge's answer are read unless [`Judge::max_answer_bytes`] says: 8 KiB.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 8 * 1024;

/// How long the judge's request may take unless [`Judge::timeout`] says: 60 s.
pub const DEFAULT_JUDGE_TIMEOUT: Duration = Duration::from_secs(60);

/// How many bytes of the call the judge reads unless [`Judge::max_call_bytes`] says: 64 KiB.
pub const DEFAULT_MAX_JUDGED_CALL_BYTES: usize = 64 * 1024;

/// The most reasons a judgement keeps (the rest are dropped).
pub const MAX_REASONS: usize = 32;

/// The most bytes each field of a reason keeps (cut at a character boundary).
pub const MAX_REASON_FIELD_BYTES: usize = 1024;

/// The most bytes of an unreadable answer (or an error) [`Judgement::raw`] keeps.
pub const MAX_RAW_BYTES: usize = 2048;

/// How many `{` of an answer are tried as the start of its JSON object.
const MAX_OBJECT_STARTS: usize = 64;

/// The built-in judge instruction.
const GRADE: &str = "You grade a phone call between a caller and an agent (a voice assistant) \
against a rubric. You get the caller's goal, the rubric as a numbered list, and the call, one \
line each, `caller: ...` or `agent: ...`. The call shows what the caller heard; what the agent \
generated but the caller did not hear (the caller talked over it) is shown in [unheard: ...].

Grade every rubric item. The call passes only when every item holds. Say \"unsure\" when the \
call does not show whether an item holds.

Back each finding with a quote: the exact words from the call that show it, copied as written, \
without the `caller:` or `agent:` prefix.

Answer ONLY with one JSON object, no other text:
{\"verdict\": \"pass\" | \"fail\" | \"unsure\", \"reasons\": [{\"item\": \"<rubric item>\", \
\"quote\": \"<exact words from the transcript>\", \"why\": \"<one sentence>\"}]}";

/// A judge's verdict on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Every rubric item holds, backed by a quote from the call.
    Pass,
    /// Some item does not hold, backed by a quote from the call.
    Fail,
    /// The judge could not tell, its answer could not be read or quoted nothing from the call, or
    /// its request failed ([`Judgement::raw`] says which).
    Unsure,
}

impl Verdict {
    /// `pass`, `fail` or `unsure`, as the judge writes it and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Unsure => "unsure",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One finding of the judge, on one rubric item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// The rubric item, as the judge wrote it (at most [`MAX_REASON_FIELD_BYTES`]).
    pub item: String,
    /// The words of the call the judge quoted (at most [`MAX_REASON_FIELD_BYTES`]).
    pub quote: String,
    /// Why, in the judge's words (at most [`MAX_REASON_FIELD_BYTES`]).
    pub why: String,
    /// The quote is words of the call (heard or unheard; not the transcript's labels such as
    /// `agent:` or `[unheard: ...]`), compared in any case with runs of whitespace as one space:
    /// a quote the call does not hold backs nothing.
    pub quoted: bool,
}

/// What the judge made of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// The verdict, after the rules: an unreadable answer, a failed request, or a pass or fail
    /// that quotes nothing from the call is [`Verdict::Unsure`].
    pub verdict: Verdict,
    /// The judge's findings, at most [`MAX_REASONS`], each field bounded.
    pub reasons: Vec<Reason>,
    /// Why the verdict is `Unsure` when the judge did not say so itself: the answer that could
    /// not be read, the error of a failed request, or why a verdict was not believed; its first
    /// [`MAX_RAW_BYTES`], control characters escaped. `None` when the answer was read as given.
    pub raw: Option<String>,
    /// The tokens the judge's request used, by TurnStep count name (`input_tokens`,
    /// `output_tokens`, ...); empty when none were reported.
    pub counts: BTreeMap<String, u64>,
}

impl Judgement {
    /// An `Unsure` judgement with `why` as its [`raw`](Self::raw) (clipped and escaped), no
    /// reasons and no counts.
    pub fn unsure(why: impl AsRef<str>) -> Judgement {
        Judgement {
            verdict: Verdict::Unsure,
            reasons: Vec::new(),
            raw: Some(shown(why.as_ref())),
            counts: BTreeMap::new(),
        }
    }
}

/// A judge played by a model: grades a call against its scenario's rubric in one request, on the
/// layer given (any provider), bounded in bytes and time. Cloning shares the layer.
///
/// The model must answer one JSON object (a ```` ```json ```` fence or prose around it is read
/// past): `{"verdict": "pass"|"fail"|"unsure", "reasons": [{"item", "quote", "why"}]}`. The
/// verdict is [`Verdict::Unsure`] when the answer holds no such object or no known verdict, when
/// the request fails or times out, and when a `pass` or `fail` quotes nothing the call holds
/// (no reason's [`quoted`](Reason::quoted) is true, or no reasons).
#[derive(Clone)]
pub struct Judge {
    layer: Arc<dyn Layer>,
    instruction: Arc<str>,
    max_answer_bytes: usize,
    max_call_bytes: usize,
    timeout: Duration,
}

impl fmt::Debug for Judge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Judge")
            .field("provider", &self.layer.provider())
            .field("model", &self.layer.model())
            .field("max_answer_bytes", &self.max_answer_bytes)
            .field("max_call_bytes", &self.max_call_bytes)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Judge {
    /// A judge asking `layer`, with the built-in instruction and the defaults
    /// ([`DEFAULT_MAX_ANSWER_BYTES`], [`DEFAULT_MAX_JUDGED_CALL_BYTES`],
    /// [`DEFAULT_JUDGE_TIMEOUT`]).
    ///
    /// `layer` is any layer, as `Model::new` takes it: a built-in provider's, one of your own,
    /// or a [`ModelLayer`](voqalize::voice::ModelLayer).
    pub fn new(layer: impl Into<voqalize::voice::ModelLayer>) -> Judge {
        Judge::shared(voqalize::__kit::layer_of(&layer.into()))
    }

    /// [`new`](Self::new) with a layer already shared.
    pub fn shared(layer: Arc<dyn Layer>) -> Judge {
        Judge {
            layer,
            instruction: Arc::from(GRADE),
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            max_call_bytes: DEFAULT_MAX_JUDGED_CALL_BYTES,
            timeout: DEFAULT_JUDGE_TIMEOUT,
        }
    }

    /// Replaces the built-in judge instruction. Keep the answer format in it (the JSON object
    /// above, with exact quotes): an answer in any other shape is `Unsure`.
    #[must_use]
    pub fn instruction(mut self, instruction: impl Into<String>) -> Judge {
        self.instruction = Arc::from(instruction.into());
        self
    }

    /// The most bytes of the answer read (default [`DEFAULT_MAX_ANSWER_BYTES`], 8 KiB): the rest
    /// is not read, so an answer past it is usually `Unsure` (its JSON cut short). At least 1.
    #[must_use]
    pub fn max_answer_bytes(mut self, bytes: usize) -> Judge {
        self.max_answer_bytes = bytes.max(1);
        self
    }

    /// The most bytes of the call sent to the judge (default
    /// [`DEFAULT_MAX_JUDGED_CALL_BYTES`], 64 KiB): past it, its start and its end are sent with
    /// the middle left out (and said so).
    #[must_use]
    pub fn max_call_bytes(mut self, bytes: usize) -> Judge {
        self.max_call_bytes = bytes.max(1);
        self
    }

    /// How long the request may take (default [`DEFAULT_JUDGE_TIMEOUT`], 60 s): past it, the
    /// verdict is `Unsure`, naming the timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Judge {
        self.timeout = timeout;
        self
    }

    /// Grades `call` against `scenario`'s rubric, in one request: the instruction, and as the
    /// user's message the caller's goal, the rubric as a numbered list and the call
    /// ([`Transcript::with_unheard`]). Never fails: a failed or timed-out request, or an
    /// answer that cannot be believed, is [`Verdict::Unsure`] with [`Judgement::raw`] saying
    /// why.
    ///
    /// A scenario with an empty rubric has nothing to judge: `Pass` with no reasons and no
    /// request (a runner skips the judge for it).
    pub async fn judge(&self, scenario: &Scenario, call: &Transcript) -> Judgement {
        if scenario.rubric.is_empty() {
            return Judgement {
                verdict: Verdict::Pass,
                reasons: Vec::new(),
                raw: None,
                counts: BTreeMap::new(),
            };
        }
        let text = call.with_unheard();
        let message = question(scenario, &text, self.max_call_bytes);
        let messages = [(Role::User, message)];
        let asked = voqalize::__kit::ask(
            &*self.layer,
            &self.instruction,
            &messages,
            self.max_answer_bytes,
        );
        let asked = match tokio::time::timeout(self.timeout, asked).await {
            Ok(Ok(asked)) => asked,
            Ok(Err(why)) => return Judgement::unsure(format!("the judge's request failed: {why}")),
            Err(_) => {
                return Judgement::unsure(format!(
                    "the judge's request took over its timeout ({:?})",
                    self.timeout
                ));
            }
        };
        let answer = clip(&asked.text, self.max_answer_bytes);
        let mut judgement = read_answer(&answer, &quotable(call));
        judgement.counts = asked.counts;
        judgement
    }
}

/// The user's message: the goal, the rubric numbered, the call (its middle left out past
/// `max_call_bytes`).
fn question(scenario: &Scenario, call: &str, max_call_bytes: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "The caller's goal: {}\n", scenario.goal.trim());
    out.push_str("The rubric:\n");
    for (n, item) in scenario.rubric.iter().enumerate() {
        let _ = writeln!(out, "{}. {}", n + 1, item.trim());
    }
    out.push_str("\nThe call:\n");
    if call.len() <= max_call_bytes {
        out.push_str(call);
    } else {
        let half = max_call_bytes / 2;
        let head = &call[..call.floor_char_boundary(half)];
        let tail = &call[call.ceil_char_boundary(call.len() - half)..];
        let gap = call.len() - head.len() - tail.len();
        let _ = write!(
            out,
            "{head}\n[... {gap} bytes of the call left out ...]\n{tail}"
        );
    }
    out
}

/// What a quote may come from: every line's words, heard and unheard, one line each; not the
/// transcript's labels (`caller:`, `agent:`, `[unheard: ...]`), which would back any verdict.
fn quotable(call: &Transcript) -> String {
    let mut out = String::new();
    for line in &call.lines {
        out.push_str(&line.generated());
        out.push('\n');
    }
    out
}

/// The judgement `answer` gives on the call whose words (every line, heard and unheard) are
/// `transcript`.
pub(super) fn read_answer(answer: &str, transcript: &str) -> Judgement {
    let Some(object) = find_object(answer) else {
        return Judgement::unsure(format!("the answer holds no JSON object: {answer}"));
    };
    let verdict = match object.get("verdict").and_then(Value::as_str).map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("pass") => Verdict::Pass,
        Some(v) if v.eq_ignore_ascii_case("fail") => Verdict::Fail,
        Some(v) if v.eq_ignore_ascii_case("unsure") => Verdict::Unsure,
        _ => return Judgement::unsure(format!("the answer gives no known verdict: {answer}")),
    };
    let said = normalized(transcript);
    let reasons: Vec<Reason> = object
        .get("reasons")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_object)
                .take(MAX_REASONS)
                .map(|r| {
                    let field = |k: &str| match r.get(k) {
                        Some(Value::String(s)) => clip(s.trim(), MAX_REASON_FIELD_BYTES),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => clip(&other.to_string(), MAX_REASON_FIELD_BYTES),
                    };
                    let quote = field("quote");
                    let wanted = normalized(&quote);
                    Reason {
                        item: field("item"),
                        quoted: !wanted.is_empty() && said.contains(&wanted),
                        quote,
                        why: field("why"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let backed = reasons.iter().any(|r| r.quoted);
    if verdict != Verdict::Unsure && !backed {
        return Judgement {
            verdict: Verdict::Unsure,
            reasons,
            raw: Some(shown(&format!(
                "the verdict ({}) quotes nothing from the transcript: {answer}",
                verdict.name()
            ))),
            counts: BTreeMap::new(),
        };
    }
    Judgement {
        verdict,
        reasons,
        raw: None,
        counts: BTreeMap::new(),
    }
}

/// The first JSON object in `text` that has a `verdict` key (else the first object at all): each
/// `{` tried as its start (at most [`MAX_OBJECT_STARTS`]), whatever comes after it.
pub(super) fn find_object(text: &str) -> Option<serde_json::Map<String, Value>> {
    let mut first = None;
    for (at, _) in text.match_indices('{').take(MAX_OBJECT_STARTS) {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(object))) = values.next() {
            if object.contains_key("verdict") {
                return Some(object);
            }
            first.get_or_insert(object);
        }
    }
    first
}

/// `text` in lower case, typographic quotes as plain ones, every run of whitespace one space.
fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for c in word.chars().flat_map(char::to_lowercase) {
            out.push(match c {
                '\u{2018}' | '\u{2019}' => '\'',
                '\u{201c}' | '\u{201d}' => '"',
                c => c,
            });
        }
    }
    out
}

/// `text` as a report shows text from outside: its first [`MAX_RAW_BYTES`], control characters
/// escaped, its length noted when cut.
fn shown(text: &str) -> String {
    let escaped = voqalize::__kit::outside_n(text, MAX_RAW_BYTES).to_string();
    if escaped.len() <= MAX_RAW_BYTES {
        return escaped;
    }
    let kept = &escaped[..escaped.floor_char_boundary(MAX_RAW_BYTES)];
    format!("{kept}… ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &str =
        "caller: I need a table\nagent: We have  Friday at nine. [unheard: or Monday]\n";

    #[test]
    fn a_verdict_is_believed_only_with_a_quote_from_the_call() {
        let j = read_answer(
            r#"Sure! ```json
{"verdict": "PASS", "reasons": [{"item": "offers a slot", "quote": "we have friday AT nine", "why": "it did"}]}
```"#,
            CALL,
        );
        assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
        assert!(j.reasons[0].quoted);
        assert_eq!(j.raw, None);
        let j = read_answer(
            r#"{"verdict": "pass", "reasons": [{"item": "x", "quote": "Tuesday", "why": "y"}]}"#,
            CALL,
        );
        assert_eq!(j.verdict, Verdict::Unsure);
        assert!(
            j.raw
                .as_deref()
                .unwrap_or_default()
                .contains("quotes nothing")
        );
        let j = read_answer(r#"{"verdict": "fail"}"#, CALL);
        assert_eq!(j.verdict, Verdict::Unsure);
        let j = read_answer(r#"{"verdict": "unsure", "reasons": []}"#, CALL);
        assert_eq!((j.verdict, j.raw), (Verdict::Unsure, None));
    }

    #[test]
    fn garbage_is_unsure_with_the_answer_escaped() {
        let j = read_answer("I think it went {well}\n\u{1b}[31m", CALL);
        assert_eq!(j.verdict, Verdict::Unsure);
        let raw = j.raw.unwrap_or_default();
        assert!(raw.contains("\\n\\u{1b}"), "{raw}");
        let j = read_answer(r#"{"verdict": "great"}"#, CALL);
        assert_eq!(j.verdict, Verdict::Unsure);
        let j = Judgement::unsure("x".repeat(10_000));
        assert!(j.raw.unwrap_or_default().len() < MAX_RAW_BYTES + 32);
    }

    #[test]
    fn reasons_are_bounded_in_count_and_bytes() {
        let reason = serde_json::json!({"item": "é".repeat(2000), "quote": "Friday", "why": 7});
        let answer = serde_json::json!({"verdict": "fail", "reasons": vec![reason; 100]});
        let j = read_answer(&answer.to_string(), CALL);
        assert_eq!(j.verdict, Verdict::Fail);
        assert_eq!(j.reasons.len(), MAX_REASONS);
        assert_eq!(j.reasons[0].item.len(), MAX_REASON_FIELD_BYTES);
        assert_eq!(j.reasons[0].why, "7");
    }

    #[test]
    fn a_long_call_keeps_its_start_and_end() {
        let scenario = Scenario::new("s").persona("p", "g").rubric("r");
        let call = format!("start{}end", "x".repeat(1000));
        let q = question(&scenario, &call, 100);
        assert!(q.contains("\nstart"), "{q}");
        assert!(q.contains("bytes of the call left out"), "{q}");
        assert!(q.ends_with("end"), "{q}");
        assert!(q.len() < 400, "{}", q.len());
    }
}

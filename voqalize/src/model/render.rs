//! What the three layers share: the construction error, checks on what a user configures
//! (keys, URLs, model names, options), environment reading, and small JSON helpers for request
//! bodies and stream events.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::StreamError;
pub(crate) use super::error::{
    build_error, error_message, malformed, malformed_shape, provider_error,
};
use crate::tools::{Arguments, ToolSet};

/// Why a layer could not be built. Every check runs once, when the builder's `build` is called,
/// so a misconfigured layer fails at start-up instead of on the first call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayerError {
    /// No API key was given and none was found in the environment.
    #[error("no API key for {provider}: pass one, or set {vars}")]
    MissingKey {
        /// `google`, `openai`, or the chat route's company.
        provider: &'static str,
        /// The environment variables that were read.
        vars: &'static str,
    },
    /// A value that goes into an HTTP header (API key, organisation, project) is empty or holds
    /// characters a header cannot carry (control characters, line breaks, non-ASCII).
    #[error("the {what} for {provider} cannot be sent in an HTTP header: {why}")]
    BadHeader {
        /// The provider.
        provider: &'static str,
        /// Which value (`API key`, `organization`, `project`).
        what: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The base URL is not an absolute `http(s)://host[/path]` URL.
    #[error("bad base URL {url:?}: {why}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The model name is empty or holds characters that cannot go where the provider puts it.
    #[error("bad model name {model:?}: {why}")]
    BadModel {
        /// The model as given.
        model: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A setting (API version, thinking level, reasoning effort) is empty or malformed.
    #[error("bad {setting} {value:?}: {why}")]
    BadSetting {
        /// Which setting.
        setting: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An option names a body key the SDK builds itself (the context, the tools, streaming):
    /// letting it through would break the conversation or the stream.
    #[error("the option {key:?} cannot be set on {provider}: the SDK builds it")]
    ReservedOption {
        /// The provider.
        provider: &'static str,
        /// The option's key.
        key: String,
    },
    /// An option clashes with a builder setting (e.g. a `reasoning` option and `.reasoning(..)`).
    #[error("the option {key:?} clashes with {setting}: set one of them")]
    OptionClash {
        /// The option's key.
        key: String,
        /// The builder method it clashes with.
        setting: &'static str,
    },
    /// An option's value has the wrong JSON type.
    #[error("the option {key:?} must be {expected}")]
    BadOption {
        /// The option's key.
        key: String,
        /// What it must be.
        expected: &'static str,
    },
    /// An [`HttpOptions`](super::HttpOptions) setting (proxy, root certificates, header) is
    /// malformed.
    #[error("bad HTTP option ({what}): {why}")]
    BadHttpOption {
        /// `proxy`, `root certificates` or `header`.
        what: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// An environment variable is set but is not valid Unicode.
    #[error("the environment variable {var} cannot be read")]
    Env {
        /// The variable.
        var: &'static str,
        /// Why.
        #[source]
        source: std::env::VarError,
    },
}

/// Reads an environment variable: unset or empty is `None`, non-Unicode is an error.
pub(crate) fn env_var(var: &'static str) -> Result<Option<String>, LayerError> {
    match std::env::var(var) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(source) => Err(LayerError::Env { var, source }),
    }
}

/// Checks a value that goes into a header: non-empty, visible ASCII (spaces inside allowed).
pub(crate) fn check_header(
    provider: &'static str,
    what: &'static str,
    value: &str,
) -> Result<(), LayerError> {
    let bad = |why| LayerError::BadHeader {
        provider,
        what,
        why,
    };
    if value.trim().is_empty() {
        return Err(bad("it is empty"));
    }
    if value != value.trim() {
        return Err(bad("it starts or ends with whitespace"));
    }
    if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(bad("it holds control or non-ASCII characters"));
    }
    Ok(())
}

/// Checks a base URL and returns it without trailing slashes (paths are appended to it).
pub(crate) fn check_base_url(url: &str) -> Result<String, LayerError> {
    let bad = |why| LayerError::BadUrl {
        url: url.to_owned(),
        why,
    };
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| bad("it must start with https:// or http://"))?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it holds whitespace"));
    }
    if url.contains(['?', '#']) {
        return Err(bad("it must not carry a query or a fragment"));
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') || host.contains('@') {
        return Err(bad("it has no host, or carries credentials"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// Checks a model name that goes into a JSON body: non-empty, no surrounding whitespace.
pub(crate) fn check_model(model: &str) -> Result<(), LayerError> {
    if model.trim().is_empty() {
        return Err(LayerError::BadModel {
            model: model.to_owned(),
            why: "it is empty",
        });
    }
    if model != model.trim() || model.chars().any(char::is_control) {
        return Err(LayerError::BadModel {
            model: model.to_owned(),
            why: "it holds surrounding whitespace or control characters",
        });
    }
    Ok(())
}

/// Checks a short word setting (`MINIMAL`, `low`, `v1beta`): letters, digits, `-`, `_`, `.`.
pub(crate) fn check_word(setting: &'static str, value: &str) -> Result<(), LayerError> {
    let ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(LayerError::BadSetting {
            setting,
            value: value.to_owned(),
            why: "it must be a non-empty word of letters, digits, '-', '_' or '.'",
        })
    }
}

/// Refuses the first option whose key is in `reserved`.
pub(crate) fn check_options(
    provider: &'static str,
    options: &Map<String, Value>,
    reserved: &[&str],
) -> Result<(), LayerError> {
    match options.keys().find(|k| reserved.contains(&k.as_str())) {
        Some(key) => Err(LayerError::ReservedOption {
            provider,
            key: key.clone(),
        }),
        None => Ok(()),
    }
}

/// The text of an instruction worth sending (`None` when absent or blank).
pub(crate) fn instruction(instruction: Option<&str>) -> Option<&str> {
    instruction.filter(|s| !s.trim().is_empty())
}

/// The text of a user entry: its text parts, one per line (borrowed when there is one). Other
/// part kinds in a user entry are a history the core never builds.
pub(crate) fn user_text<'a>(
    provider: &str,
    parts: &'a [super::history::Part],
) -> Result<Cow<'a, str>, StreamError> {
    let mut texts = user_texts(provider, parts)?;
    let Some(first) = texts.next() else {
        return Ok(Cow::Borrowed(""));
    };
    match texts.next() {
        None => Ok(Cow::Borrowed(first)),
        Some(second) => {
            let mut joined = format!("{first}\n{second}");
            for text in texts {
                joined.push('\n');
                joined.push_str(text);
            }
            Ok(Cow::Owned(joined))
        }
    }
}

/// The texts of a user entry's parts, in order, once every part is checked to be text (see
/// [`user_text`]).
pub(crate) fn user_texts<'a>(
    provider: &str,
    parts: &'a [super::history::Part],
) -> Result<impl Iterator<Item = &'a str>, StreamError> {
    if let Some(other) = parts
        .iter()
        .find(|p| !matches!(p, super::history::Part::Text { .. }))
    {
        return Err(build_error(
            provider,
            format!("a user turn holds {other:?}"),
        ));
    }
    Ok(parts.iter().filter_map(|p| match p {
        super::history::Part::Text { text, .. } => Some(text.as_str()),
        _ => None,
    }))
}

/// A call's arguments as JSON text (empty text reads as `{}`).
pub(crate) fn arguments_text(arguments: &Arguments) -> Cow<'_, str> {
    match arguments {
        Arguments::Raw(s) if s.trim().is_empty() => Cow::Borrowed("{}"),
        Arguments::Raw(s) => Cow::Borrowed(s),
        Arguments::Json(v) => Cow::Owned(v.to_string()),
    }
}

/// Checks that `ToolChoice::Only(name)` names a tool of the request: the providers refuse a
/// forced call to an undeclared function with an unhelpful 400.
pub(crate) fn check_only(provider: &str, tools: &ToolSet, name: &str) -> Result<(), StreamError> {
    if tools.contains(name) {
        Ok(())
    } else {
        Err(build_error(
            provider,
            format!("the tool choice names {name:?}, which is not among this request's tools"),
        ))
    }
}

/// The call ids of one response, as the providers accept them back: each call keeps the id the
/// provider sent unless it is missing, already used by an earlier call of the response, longer
/// than 64 bytes, or holds characters other than ASCII letters, digits, `_` and `-` (what
/// Anthropic's `tool_use` ids allow); then it gets one made up, unique in the process. Without
/// this, one such call would make every later request of the call unbuildable or refused.
#[derive(Debug, Default)]
pub(crate) struct CallIds {
    seen: Vec<String>,
}

impl CallIds {
    /// The id the call with the provider's `id` goes by.
    pub(crate) fn assign(&mut self, id: String) -> String {
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let fits = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let id = if fits && !self.seen.contains(&id) {
            id
        } else {
            let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            format!("call_voq{n}")
        };
        // A decoder assembles at most `max_calls + 1` calls, so this stays that short.
        self.seen.push(id.clone());
        id
    }
}

/// A call assembled from a stream's fragments, as a part: `{}` for arguments that never came, its
/// id from `ids`. Everything the provider sent of it is in the call (no raw to keep).
pub(crate) fn assembled_call(
    ids: &mut CallIds,
    id: String,
    name: String,
    arguments: String,
) -> super::history::Part {
    let arguments = if arguments.trim().is_empty() {
        "{}".to_owned()
    } else {
        arguments
    };
    super::history::Part::Call {
        call: super::history::Call::new(Some(ids.assign(id)), name, Arguments::Raw(arguments)),
        raw: Value::Null,
    }
}

/// Whether an event naming `index` (its `"index"` field, if any) belongs to the block that is
/// open under `open` (`None`: nothing is open; `Some(None)`: one opened without an index). An
/// event without an index belongs to whatever block is open. For streams that bracket their
/// blocks by index (Anthropic's content blocks, Interactions' steps).
pub(crate) fn belongs_to_open(open: Option<Option<u64>>, event: &Value) -> bool {
    let index = event.get("index").and_then(Value::as_u64);
    match (open, index) {
        (Some(open), Some(i)) => open.is_none_or(|open| open == i),
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// A bare JSON body where events belong: a provider's error (`{"error": ..}`), read within
/// `budget` bytes; anything else is malformed. Every layer but Gemini's (whose bare bodies are
/// its chunks) reads one this way.
pub(crate) fn bare_error(provider: &str, body: &str, budget: usize) -> StreamError {
    let value = match super::within::parse_within(provider, body, budget) {
        Ok(Some(value)) => value,
        Ok(None) => return provider_error(provider, "an error body too large to read".to_owned()),
        Err(e) => return e,
    };
    match value.get("error") {
        Some(e) => provider_error(provider, error_message(e)),
        None => malformed_shape(provider, "a bare body that is not an error"),
    }
}

/// A token count at `path` (`None` when absent or not a non-negative integer).
pub(crate) fn count(value: &Value, path: &[&str]) -> Option<u64> {
    path.iter()
        .try_fold(value, |v, k| v.get(k))
        .and_then(Value::as_u64)
}

/// The output tokens a TurnStep reports: the reply's own, reasoning excluded (docs/protocol.md
/// §6.15). `includes_reasoning`: the provider's output count holds the reasoning tokens too, so
/// they are taken off. A count smaller than the reasoning it would hold cannot hold it (the
/// provider counted reasoning apart after all): it is reported as sent, never hidden as 0.
pub(crate) fn visible_output(
    output: Option<u64>,
    reasoning: Option<u64>,
    includes_reasoning: bool,
) -> Option<u64> {
    let output = output?;
    match reasoning {
        Some(r) if includes_reasoning && r <= output => Some(output - r),
        _ => Some(output),
    }
}

/// `value` with every `null` member removed, at any depth.
pub(crate) fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

//! History that moves between providers: which layer wrote each model turn ([`Origin`]), and the
//! history as another layer may be sent it.
//!
//! A model turn carries its provider's own JSON (`raw`: Gemini thought signatures and thought
//! parts, Responses reasoning items with `encrypted_content`, Anthropic `thinking` blocks,
//! Interactions `thought` steps). That JSON goes back only to the layer that wrote it: the same
//! request format ([`Layer::format`]) and the same model. Every provider documents its signatures
//! as bound to the model that made them, or leaves it unsaid, so another model of the same
//! provider is sent the turn neutrally too:
//!
//! * Gemini: a signature is the model's own encrypted reasoning; history from another model has
//!   none and takes the documented placeholder instead
//!   (<https://ai.google.dev/gemini-api/docs/thought-signatures#faqs>, see the Gemini request);
//! * OpenAI Responses: encrypted reasoning is decrypted only by the model that wrote it (another
//!   model answers `invalid_encrypted_content`: <https://github.com/openai/codex/issues/17541>;
//!   <https://cookbook.openai.com/examples/responses_api/reasoning_items> replays it to the same
//!   model only);
//! * Anthropic: `thinking` blocks are signed by the model and replayed unmodified to it
//!   (<https://docs.claude.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks>);
//!   across models the docs say nothing, so they are left out;
//! * Interactions: `thought` steps carry a signature like Gemini's; left out likewise.
//!
//! Neutrally means: the words, the calls (id, name, arguments) and their results, nothing else.
//! The common case (every turn written by the layer asked) is the history as it is, borrowed:
//! only a history that holds a foreign turn is copied, once per request.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::history::{Entry, Part, Role};
use super::layer::Layer;

/// Which layer wrote a model turn: its request format ([`Layer::format`]) and its model
/// ([`Layer::model`]). Set by the voice core on the model turn of each response; `None` on turns
/// the core writes itself (lines said with `say_line`, words remembered as heard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    format: Arc<str>,
    model: Arc<str>,
}

impl Origin {
    /// A turn written in `format` by `model`.
    pub fn new(format: &str, model: &str) -> Origin {
        Origin {
            format: format.into(),
            model: model.into(),
        }
    }

    /// The origin of what `layer` writes.
    pub fn of(layer: &dyn Layer) -> Origin {
        Origin::new(layer.format(), layer.model())
    }

    /// The request format (`google.generateContent`, `openai.responses`, ...).
    pub fn format(&self) -> &str {
        &self.format
    }

    /// The model that wrote the turn.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Whether `layer` writes this format with this model: what it wrote may go back to it.
    pub fn is(&self, layer: &dyn Layer) -> bool {
        *self.format == *layer.format() && *self.model == *layer.model()
    }
}

impl Entry {
    /// The entry, marked as written by `origin`.
    #[must_use]
    pub fn with_origin(mut self, origin: Origin) -> Entry {
        self.origin = Some(origin);
        self
    }

    /// Whether this is a model turn another layer (another format, or another model) wrote: it
    /// goes to `layer` without its provider's JSON. A turn with no origin is never foreign.
    pub fn foreign_to(&self, layer: &dyn Layer) -> bool {
        self.origin.as_ref().is_some_and(|o| !o.is(layer))
    }
}

/// `history` as `layer` may be sent it: borrowed when no turn in it is foreign to `layer`, else a
/// copy in which each foreign turn keeps only its words and calls ([`neutral`]), and each of its
/// calls an id every provider takes (its results renamed with it).
pub(crate) fn for_layer<'a>(history: &'a [Entry], layer: &dyn Layer) -> Cow<'a, [Entry]> {
    if !history.iter().any(|e| e.foreign_to(layer)) {
        return Cow::Borrowed(history);
    }
    let mut out = Vec::with_capacity(history.len());
    // The ids given to the last foreign turn's calls: (the id it had, the id it goes by).
    let mut renamed: Vec<(Option<String>, String)> = Vec::new();
    for entry in history {
        if entry.foreign_to(layer) {
            renamed.clear();
            out.push(neutral(entry, &mut renamed));
        } else if entry.role == Role::Results && !renamed.is_empty() {
            out.push(rename_results(entry, &mut renamed));
        } else {
            renamed.clear();
            out.push(entry.clone());
        }
    }
    Cow::Owned(out)
}

/// A model turn's words and calls, without its provider's JSON: text without `raw`, calls
/// without `raw`, thoughts and other parts left out. A call whose id another provider would
/// refuse (none, longer than 64 bytes, other than ASCII letters, digits, `_`, `-`: what
/// Anthropic's `tool_use` ids allow) gets one made from the entry's id and its place; each
/// change is noted in `renamed` for its result.
pub(crate) fn neutral(entry: &Entry, renamed: &mut Vec<(Option<String>, String)>) -> Entry {
    let mut parts = Vec::with_capacity(entry.parts.len());
    for part in &entry.parts {
        match part {
            Part::Text { text, trimmed, .. } => parts.push(Part::Text {
                text: text.clone(),
                raw: Value::Null,
                trimmed: *trimmed,
            }),
            Part::Call { call, .. } => {
                let mut call = call.clone();
                if !call.id.as_deref().is_some_and(fits) {
                    let made = format!("call_h{}_{}", entry.id, renamed.len());
                    renamed.push((call.id.take(), made.clone()));
                    call.id = Some(made);
                }
                parts.push(Part::Call {
                    call,
                    raw: Value::Null,
                });
            }
            Part::Result(r) => parts.push(Part::Result(r.clone())),
            Part::Thought { .. } | Part::Other { .. } => {}
        }
    }
    let mut out = Entry::new(entry.id, entry.role, parts);
    out.origin.clone_from(&entry.origin);
    out
}

/// A results turn with each result of a renamed call under the call's new id: by its old id, or
/// (a call that had none) in call order.
fn rename_results(entry: &Entry, renamed: &mut Vec<(Option<String>, String)>) -> Entry {
    let mut out = entry.clone();
    for part in &mut out.parts {
        let Part::Result(r) = part else { continue };
        if let Some(at) = renamed.iter().position(|(old, _)| *old == r.call_id) {
            r.call_id = Some(renamed.remove(at).1);
        }
    }
    out
}

/// Whether a call id is one every built-in provider takes back.
fn fits(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Where the current turn of `history` starts, as Gemini and Anthropic count turns: the index
/// after the last user entry with words that opens a turn of its own (a note filed right after
/// call results joins them: the model is still answering). Past the end when there is none
/// after it.
pub(crate) fn current_turn(history: &[Entry]) -> usize {
    let mut start = 0;
    // The last entry seen is call results, or a user entry that joined them.
    let mut after_results = false;
    for (i, entry) in history.iter().enumerate() {
        match entry.role {
            Role::Results => after_results = true,
            Role::User if after_results => {}
            Role::User => {
                if entry
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::Text { text, .. } if !text.is_empty()))
                {
                    start = i + 1;
                }
            }
            Role::Model => after_results = false,
        }
    }
    start
}

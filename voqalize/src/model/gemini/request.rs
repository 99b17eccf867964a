//! The Gemini request: the body written from the neutral conversation and the tool
//! declarations. Each history entry before the current turn is written once and kept
//! (`model::rendered`): a later request copies its bytes instead of serialising it again.

use bytes::Bytes;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use crate::model::body::Json;
use crate::model::history::{Call, Entry, Part, RequestSpec, Role, ToolChoice};
use crate::model::layer::{Layer, StreamError};
use crate::model::origin::current_turn;
use crate::model::render::{build_error, check_only, instruction, user_texts};
use crate::model::rendered::Reuse;
use crate::tools::{Arguments, ToolDecl};

use super::{Gemini, PROVIDER};

impl Gemini {
    /// The request body for `spec`, serialised: `contents` first, written entry by entry (from
    /// the kept bytes where `spec` carries them), then the rest of the body.
    pub(super) fn body(&self, spec: &RequestSpec<'_>) -> Result<Bytes, StreamError> {
        let mut reuse = spec
            .rendered
            .map(|r| r.open(self.format(), &self.inner.model));
        let mut out = Vec::with_capacity(reuse.as_ref().map_or(1024, |r| r.last_body() + 256));
        out.extend_from_slice(b"{\"contents\":");
        write_contents(self, spec, reuse.as_mut(), &mut out)?;
        // The rest as an object, its opening brace made the comma after `contents`.
        let at = out.len();
        write_json(&mut out, &self.rest(spec)?)?;
        if out[at..] == *b"{}" {
            out.truncate(at + 1);
            out[at] = b'}';
        } else {
            out[at] = b',';
        }
        if let Some(reuse) = reuse {
            reuse.done(out.len());
        }
        Ok(Bytes::from(out))
    }

    /// The body's keys after `contents`, checked, to be serialised as they are read (no tree
    /// of them is built).
    fn rest<'a>(&'a self, spec: &'a RequestSpec<'a>) -> Result<Rest<'a>, StreamError> {
        if let ToolChoice::Only(name) = spec.choice {
            check_only(PROVIDER, spec.tools, name)?;
        }
        Ok(Rest { layer: self, spec })
    }
}

/// The body's keys after `contents`: the instruction, the tools and the tool choice, the
/// generation config (with the thinking level), then the layer's options.
struct Rest<'a> {
    layer: &'a Gemini,
    spec: &'a RequestSpec<'a>,
}

impl Serialize for Rest<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (cfg, spec) = (&self.layer.inner, self.spec);
        let mut map = serializer.serialize_map(None)?;
        if let Some(text) = instruction(spec.instruction) {
            map.serialize_entry("systemInstruction", &UserContent(text))?;
        }
        if !spec.tools.is_empty() {
            map.serialize_entry("tools", &[Declarations(spec.tools)])?;
            match spec.choice {
                ToolChoice::Auto => {}
                ToolChoice::None => map.serialize_entry(
                    "toolConfig",
                    &json!({"functionCallingConfig": {"mode": "NONE"}}),
                )?,
                ToolChoice::Only(name) => map.serialize_entry(
                    "toolConfig",
                    &json!({"functionCallingConfig": {
                        "mode": "ANY", "allowedFunctionNames": [name]}}),
                )?,
            }
        }
        let thinking = cfg.thinking_level.as_deref();
        if thinking.is_some() || !cfg.generation_config.is_empty() {
            map.serialize_entry(
                "generationConfig",
                &Generation {
                    config: &cfg.generation_config,
                    thinking,
                },
            )?;
        }
        for (key, value) in &cfg.options {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// `{"role": "user", "parts": [{"text": ..}]}`: the system instruction.
struct UserContent<'a>(&'a str);

impl Serialize for UserContent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry("parts", &[KeyText("text", self.0)])?;
        map.end()
    }
}

/// `{"functionDeclarations": [..]}`: every tool of the set.
struct Declarations<'a>(&'a crate::tools::ToolSet);

impl Serialize for Declarations<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("functionDeclarations", &Declared(self.0))?;
        map.end()
    }
}

/// The declarations' list.
struct Declared<'a>(&'a crate::tools::ToolSet);

impl Serialize for Declared<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Declaration))
    }
}

/// A tool's `FunctionDeclaration`, its schema borrowed (as [`ToolDecl::gemini`] makes it).
struct Declaration<'a>(&'a ToolDecl);

impl Serialize for Declaration<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tool = self.0;
        let parameters = tool.gemini_parameters();
        let mut map = serializer.serialize_map(Some(2 + usize::from(parameters.is_some())))?;
        map.serialize_entry("name", tool.name())?;
        map.serialize_entry("description", tool.description())?;
        if let Some(parameters) = parameters {
            map.serialize_entry("parameters", parameters)?;
        }
        map.end()
    }
}

/// `generationConfig`: the user's keys, with `thinkingConfig` set from the thinking level in
/// place of the user's own, or after them (as `Map::insert` would).
struct Generation<'a> {
    config: &'a Map<String, Value>,
    thinking: Option<&'a str>,
}

impl Serialize for Generation<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let thinking = self.thinking.map(|level| KeyText("thinkingLevel", level));
        let mut map = serializer.serialize_map(None)?;
        let mut set = false;
        for (key, value) in self.config {
            match &thinking {
                Some(thinking) if key == "thinkingConfig" => {
                    map.serialize_entry(key, thinking)?;
                    set = true;
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        if let Some(thinking) = thinking.filter(|_| !set) {
            map.serialize_entry("thinkingConfig", &thinking)?;
        }
        map.end()
    }
}

/// `{key: text}`: a one-entry object of a text (a text part, the thinking level).
struct KeyText<'a>(&'a str, &'a str);

impl Serialize for KeyText<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, self.1)?;
        map.end()
    }
}

/// Serialises `value` onto `out`.
fn write_json(
    out: &mut Vec<u8>,
    value: &(impl serde::Serialize + ?Sized),
) -> Result<(), StreamError> {
    serde_json::to_writer(out, value)
        .map_err(|e| build_error(PROVIDER, format!("the body did not serialise: {e}")))
}

/// The signature Gemini documents for a function call it did not write (history from another
/// model or provider): with it, Gemini 3 skips the check that every call of the current turn
/// carries its signature, which otherwise answers HTTP 400.
/// <https://ai.google.dev/gemini-api/docs/thought-signatures#faqs>
pub(crate) const FOREIGN_SIGNATURE: &str = "skip_thought_signature_validator";

/// Writes the `contents` of a request: one content per entry, adjacent user entries (and the
/// note) merged into one content since Gemini wants turns to alternate; empty turns left out. A
/// model turn another layer wrote (already without its JSON) that falls in the current turn gets
/// [`FOREIGN_SIGNATURE`] on its first call, where Gemini puts a step's signature. An entry before
/// the current turn is copied from `reuse` when kept there, else written and kept.
fn write_contents(
    layer: &dyn Layer,
    spec: &RequestSpec<'_>,
    mut reuse: Option<&mut Reuse<'_>>,
    out: &mut Vec<u8>,
) -> Result<(), StreamError> {
    let current = current_turn(spec.history);
    let mut contents = Contents::new(out);
    // An entry's parts, written when not kept (without `reuse`, or in the current turn).
    let mut scratch = Vec::new();
    for (i, entry) in spec.history.iter().enumerate() {
        let placeholder = i >= current && entry.foreign_to(layer);
        let render = |buf: &mut Vec<u8>| entry_parts(entry, placeholder, buf);
        let parts = match reuse.as_deref_mut() {
            Some(reuse) if i < current => reuse.parts(entry.id, render)?,
            _ => {
                scratch.clear();
                render(&mut scratch)?;
                &scratch[..]
            }
        };
        match entry.role {
            Role::User => contents.user(parts),
            Role::Model => contents.other("model", parts),
            Role::Results => contents.other("user", parts),
        }
    }
    if let Some(note) = spec.note.filter(|n| !n.is_empty()) {
        scratch.clear();
        write_text_part(&mut scratch, note)?;
        contents.user(&scratch);
    }
    contents.finish();
    Ok(())
}

/// An entry's parts as Gemini takes them, comma-separated (nothing for an entry with none).
fn entry_parts(entry: &Entry, placeholder: bool, buf: &mut Vec<u8>) -> Result<(), StreamError> {
    match entry.role {
        Role::User => {
            for text in user_texts(PROVIDER, &entry.parts)?.filter(|t| !t.is_empty()) {
                if !buf.is_empty() {
                    buf.push(b',');
                }
                write_text_part(buf, text)?;
            }
            Ok(())
        }
        Role::Model => write_parts(buf, model_parts(entry, placeholder)?),
        Role::Results => write_parts(buf, result_parts(entry)?),
    }
}

/// Writes `parts`, comma-separated.
fn write_parts(buf: &mut Vec<u8>, parts: Vec<Json<'_>>) -> Result<(), StreamError> {
    for (n, part) in parts.iter().enumerate() {
        if n > 0 {
            buf.push(b',');
        }
        write_json(buf, part)?;
    }
    Ok(())
}

/// Writes a `{"text": ..}` part.
fn write_text_part(buf: &mut Vec<u8>, text: &str) -> Result<(), StreamError> {
    write_json(buf, &KeyText("text", text))
}

/// The `contents` array being written: which content is open, and whether a user content is
/// open for merging.
struct Contents<'o> {
    out: &'o mut Vec<u8>,
    /// A content is open (its parts array not closed yet).
    open: bool,
    /// The open content is a user text content: user entries join it.
    open_user: bool,
}

impl<'o> Contents<'o> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'[');
        Contents {
            out,
            open: false,
            open_user: false,
        }
    }

    /// A user entry's (or the note's) text parts: joined to the open user content, else a new one.
    fn user(&mut self, parts: &[u8]) {
        if parts.is_empty() {
            return;
        }
        if self.open_user {
            self.out.push(b',');
        } else {
            self.start("user");
        }
        self.out.extend_from_slice(parts);
        self.open_user = true;
    }

    /// A content of its own (a model turn, a results turn sent as `user`).
    fn other(&mut self, role: &str, parts: &[u8]) {
        if parts.is_empty() {
            return;
        }
        self.start(role);
        self.out.extend_from_slice(parts);
        self.open_user = false;
    }

    /// Closes the open content, if any, and opens one of `role`.
    fn start(&mut self, role: &str) {
        if self.open {
            self.out.extend_from_slice(b"]},");
        }
        self.out.extend_from_slice(b"{\"role\":\"");
        self.out.extend_from_slice(role.as_bytes());
        self.out.extend_from_slice(b"\",\"parts\":[");
        self.open = true;
    }

    fn finish(self) {
        if self.open {
            self.out.extend_from_slice(b"]}");
        }
        self.out.push(b']');
    }
}

/// A model turn's parts as Gemini sent them: text from `text` over the rest of `raw` (so a
/// signature stays on its part), everything else verbatim. A part that would be nothing but
/// empty text is left out: Gemini refuses it. `placeholder`: the first call gets
/// [`FOREIGN_SIGNATURE`].
fn model_parts(entry: &Entry, placeholder: bool) -> Result<Vec<Json<'_>>, StreamError> {
    let mut out = Vec::with_capacity(entry.parts.len());
    let mut placeholder = placeholder;
    for part in &entry.parts {
        let value = match part {
            Part::Text { text, raw, .. } => {
                if is_empty_text_part(text, raw) {
                    continue;
                }
                Json::Object(Json::over(raw, vec![("text", Json::Str(text))]))
            }
            Part::Thought { raw } | Part::Other { raw } => {
                if is_empty_part(raw) {
                    continue;
                }
                Json::Value(raw)
            }
            Part::Call { call, raw } => {
                let mut part = call_part(call, raw);
                if std::mem::take(&mut placeholder)
                    && let Json::Object(entries) = &mut part
                    && !entries.iter().any(|(k, _)| *k == "thoughtSignature")
                {
                    entries.push(("thoughtSignature", Json::Str(FOREIGN_SIGNATURE)));
                }
                part
            }
            Part::Result(_) => {
                return Err(build_error(PROVIDER, "a model turn holds a call's result"));
            }
        };
        out.push(value);
    }
    Ok(out)
}

/// A part with nothing to replay: not an object, empty, or only an empty `text`.
pub(super) fn is_empty_part(part: &Value) -> bool {
    match part {
        Value::Object(m) => m.iter().all(|(k, v)| k == "text" && v.as_str() == Some("")),
        _ => true,
    }
}

/// Whether a text part is nothing but an empty `text` once `text` is set over `raw`: the
/// [`is_empty_part`] rule, for a part whose text is the history's, not `raw`'s.
fn is_empty_text_part(text: &str, raw: &Value) -> bool {
    text.is_empty()
        && raw
            .as_object()
            .is_none_or(|m| m.keys().all(|k| k == "text"))
}

/// A `functionCall` part: the id, name and arguments from the call, over the rest of the part as
/// Gemini sent it (`raw`: its `thoughtSignature`, any other key), so a signature stays on its part
/// and a call the core refused is replayed with the arguments it was given instead.
fn call_part<'a>(call: &'a Call, raw: &'a Value) -> Json<'a> {
    let args = match &call.arguments {
        Arguments::Json(v) => Json::Value(v),
        Arguments::Raw(s) if s.trim().is_empty() => Json::Owned(json!({})),
        Arguments::Raw(s) => Json::Owned(serde_json::from_str(s).unwrap_or_else(|_| json!({}))),
    };
    let mut set = Vec::with_capacity(3);
    if let Some(id) = &call.id {
        set.push(("id", Json::Str(id)));
    }
    set.push(("name", Json::Str(&call.name)));
    set.push(("args", args));
    let raw = match raw {
        Value::Object(m) => Some(m),
        _ => None,
    };
    let fc = raw
        .and_then(|m| m.get("functionCall"))
        .and_then(Value::as_object);
    let mut part = vec![("functionCall", Json::Object(Json::over_map(fc, set)))];
    part.extend(
        raw.into_iter()
            .flatten()
            .filter(|(k, _)| *k != "functionCall")
            .map(|(k, v)| (k.as_str(), Json::Value(v))),
    );
    Json::Object(part)
}

/// The `functionResponse` parts of a results turn, in call order; `id` only when the call had one.
fn result_parts(entry: &Entry) -> Result<Vec<Json<'_>>, StreamError> {
    entry
        .parts
        .iter()
        .map(|p| match p {
            Part::Result(r) => {
                let mut fr = Vec::with_capacity(3);
                if let Some(id) = &r.call_id {
                    fr.push(("id", Json::Str(id)));
                }
                fr.push(("name", Json::Str(&r.name)));
                fr.push(("response", Json::Value(&r.response)));
                Ok(Json::Object(vec![("functionResponse", Json::Object(fr))]))
            }
            other => Err(build_error(
                PROVIDER,
                format!("a results turn holds {other:?}"),
            )),
        })
        .collect()
}

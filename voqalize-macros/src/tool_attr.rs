//! The grammar of `#[tool(...)]`: its options read and checked one by one, every mistake
//! collected, and the contradictions between options (and with `#[needs_result_now]`) checked once
//! all are read.
//!
//! ```text
//! #[tool]
//! #[tool(name = "book_table", on_barge_in = finish, timeout = "20s", filler = "One moment.")]
//! #[tool(on_barge_in = cancel)]
//! #[tool(background)]
//! ```

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::{Attribute, Ident, LitStr, Meta};

use crate::ctxt::Ctxt;

/// The options of `#[tool(...)]`, in the order the docs list them.
pub(crate) const OPTIONS: [&str; 5] = ["name", "on_barge_in", "background", "timeout", "filler"];

/// The options of `#[transition(...)]`: its own, then `#[tool]`'s but `background`.
pub(crate) const TRANSITION_OPTIONS: [&str; 6] =
    ["to", "context", "name", "on_barge_in", "timeout", "filler"];

/// The values of `#[transition(context = ...)]`, as written and as `voqalize::stages::Context`
/// variants.
const CONTEXTS: [(&str, &str); 3] = [("keep", "Keep"), ("fresh", "Fresh"), ("summary", "Summary")];

/// The longest timeout a tool may declare: an hour (a tool's run is the caller's wait, or in the
/// background a task the call holds).
const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// The longest filler line, in bytes: a short phrase, spoken while the caller waits.
const MAX_FILLER_BYTES: usize = 200;

/// What happens to a started tool when the user barges in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// It runs on to its end and its result is filed (the default).
    Finish,
    /// It is stopped; the model reads that it was cancelled.
    Cancel,
    /// It never holds the turn: the model reads at once that it started.
    Background,
}

impl Policy {
    /// The variant's name in `voqalize::tools::ToolPolicy`.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            Policy::Finish => "Finish",
            Policy::Cancel => "Cancel",
            Policy::Background => "Background",
        }
    }
}

/// What `#[transition(to = ..., context = ...)]` adds to a tool.
#[derive(Clone)]
pub(crate) struct TransitionAttr {
    /// The stage it moves the call to, as written (a variant of the brain's stages).
    pub(crate) to: Ident,
    /// `keep`, `fresh` or `summary`: the `voqalize::stages::Context` variant.
    pub(crate) context: &'static str,
    /// The attribute as written (errors about it span all of it).
    pub(crate) at: TokenStream,
}

/// `#[tool]` or `#[tool(...)]`, read.
pub(crate) struct ToolAttr {
    pub(crate) name: Option<LitStr>,
    pub(crate) policy: Policy,
    /// `timeout = "..."`, in ms: `None` takes the `Model`'s default.
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) filler: Option<String>,
    /// Where `background` is written (for the contradiction errors).
    background_at: Option<Span>,
    /// `#[transition(...)]`: the tool moves the call.
    pub(crate) transition: Option<TransitionAttr>,
    /// The attribute is `#[transition(...)]` but names no stage it could move the call to, or
    /// `#[tool]` with a transition's option (an error already reported): nothing is generated
    /// for the method.
    pub(crate) broken_transition: bool,
}

impl ToolAttr {
    /// `background`, if the options say so, and where.
    pub(crate) fn background_at(&self) -> Option<Span> {
        self.background_at
    }
}

/// What the options said, as written: checked against each other once all are read.
#[derive(Default)]
struct Written {
    name: Option<LitStr>,
    on_barge_in: Option<(Ident, Policy)>,
    background: Option<Span>,
    timeout: Option<(LitStr, u64)>,
    filler: Option<LitStr>,
    /// `to = Stage` (a transition's only).
    to: Option<Ident>,
    /// `context = ...` (a transition's only).
    context: Option<&'static str>,
    /// A parse error ended the reading early (the options after it were not read).
    stopped: bool,
    /// `to` or `context` in `#[tool]`: a transition's options.
    misplaced: bool,
}

/// Reads `#[tool]`'s options. Every mistake is pushed into `ctxt`: an unknown option (with the
/// nearest known one suggested), a repeated one, a value of the wrong shape, and the options that
/// contradict each other.
pub(crate) fn parse_tool(ctxt: &Ctxt, attr: &Attribute, transition: bool) -> ToolAttr {
    let mut written = Written::default();
    match &attr.meta {
        Meta::Path(_) if transition => ctxt.error_spanned_by(
            attr,
            "a transition names the stage it moves the call to: write \
             `#[transition(to = Stage)]`, where `Stage` is a variant of the brain's stages",
        ),
        Meta::Path(_) => {}
        Meta::List(_) => {
            let parsed =
                attr.parse_nested_meta(|meta| read_option(ctxt, &meta, &mut written, transition));
            if let Err(e) = parsed {
                written.stopped = true;
                ctxt.syn_error(e);
            }
        }
        Meta::NameValue(nv) => ctxt.error_spanned_by(
            nv,
            "write `#[tool]`, or `#[tool(name = \"...\")]` to name the tool (options go in \
             parentheses)",
        ),
    }
    if let (true, Some(background)) = (transition, written.background) {
        ctxt.syn_error(syn::Error::new(
            background,
            "a transition cannot be `background`: the call moves when it ends, and the model \
             goes on in the new stage at once. Remove `background`",
        ));
    }
    if let (Some(background), Some((_, Policy::Cancel))) =
        (written.background, &written.on_barge_in)
    {
        ctxt.syn_error(syn::Error::new(
            background,
            "a `background` tool never holds its turn, so a barge-in has nothing of it to \
             cancel: remove `on_barge_in = cancel`, or remove `background` to stop the tool \
             when the user barges in",
        ));
    }
    if let (true, None, Meta::List(_)) = (transition, &written.to, &attr.meta) {
        // Unless a parse error stopped the reading: it is reported already, and `to` may follow.
        if !written.stopped {
            ctxt.error_spanned_by(
                attr,
                "a transition names the stage it moves the call to: add `to = Stage`, where \
                 `Stage` is a variant of the brain's stages: `#[transition(to = Stage, ...)]`",
            );
        }
    }
    let policy = match (written.background, &written.on_barge_in) {
        (Some(_), _) => Policy::Background,
        (None, Some((_, policy))) => *policy,
        (None, None) => Policy::Finish,
    };
    ToolAttr {
        name: written.name,
        policy,
        timeout_ms: written.timeout.map(|(_, ms)| ms),
        filler: written.filler.map(|f| f.value()),
        background_at: written.background,
        broken_transition: (transition && written.to.is_none()) || written.misplaced,
        transition: match (transition, written.to) {
            (true, Some(to)) => Some(TransitionAttr {
                to,
                context: written.context.unwrap_or("Keep"),
                at: attr.to_token_stream(),
            }),
            _ => None,
        },
    }
}

/// One option of `#[tool(...)]`.
fn read_option(
    ctxt: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    written: &mut Written,
    transition: bool,
) -> syn::Result<()> {
    let Some(ident) = meta.path.get_ident() else {
        return Err(meta.error(unknown_option(&path_text(&meta.path), transition)));
    };
    let key = ident.to_string();
    let twice = || meta.error(format!("`{key}` is given twice: remove one"));
    match key.as_str() {
        "to" if transition => {
            let to = read_stage(meta)?;
            if written.to.replace(to).is_some() {
                return Err(twice());
            }
        }
        "context" if transition => {
            let Some(context) = read_context(ctxt, meta)? else {
                return Ok(());
            };
            if written.context.replace(context).is_some() {
                return Err(twice());
            }
        }
        "name" => {
            let lit: LitStr = meta.value()?.parse()?;
            if written.name.replace(lit).is_some() {
                return Err(twice());
            }
        }
        "on_barge_in" => {
            let Some(read) = read_policy(ctxt, meta)? else {
                return Ok(());
            };
            if written.on_barge_in.replace(read).is_some() {
                return Err(twice());
            }
        }
        "background" => {
            if meta.input.peek(syn::Token![=]) {
                return Err(meta.error("`background` takes no value: write `#[tool(background)]`"));
            }
            if written.background.replace(ident.span()).is_some() {
                return Err(twice());
            }
        }
        "timeout" => {
            let lit: LitStr = meta.value()?.parse()?;
            match duration_ms(&lit.value()) {
                Ok(ms) => {
                    if written.timeout.replace((lit, ms)).is_some() {
                        return Err(twice());
                    }
                }
                Err(why) => ctxt.error_spanned_by(&lit, why),
            }
        }
        "filler" => {
            let lit: LitStr = meta.value()?.parse()?;
            check_filler(ctxt, &lit);
            if written.filler.replace(lit).is_some() {
                return Err(twice());
            }
        }
        "to" | "context" => {
            // Meant as a transition: nothing is generated for it, as for a broken one.
            written.misplaced = true;
            return Err(meta.error(misplaced_option(&key)));
        }
        other => return Err(meta.error(unknown_option(other, transition))),
    }
    Ok(())
}

/// `context = keep | fresh | summary`, as the `Context` variant; `None` when the value is not one
/// (reported on `ctxt`).
fn read_context(ctxt: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<Option<&'static str>> {
    let value: Ident = meta.value()?.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "`context` is `keep`, `fresh` or `summary`, written bare: \
             `#[transition(to = Booking, context = fresh)]`",
        )
    })?;
    let written = value.to_string();
    let context = CONTEXTS
        .iter()
        .find(|(bare, _)| *bare == written)
        .map(|(_, variant)| *variant);
    if context.is_none() {
        ctxt.error_spanned_by(&value, unknown_context(&written));
    }
    Ok(context)
}

/// The error for `context = <value>` that is not a context, with the nearest one suggested.
fn unknown_context(written: &str) -> String {
    let meanings = "`keep` (the conversation goes on, the default), `fresh` (it starts again \
                    from the transition's note) or `summary` (from a summary of what the caller \
                    heard, then the note)";
    let bare = CONTEXTS.map(|(bare, _)| bare);
    match nearest_in(written, &bare) {
        Some(near) => format!(
            "`context = {written}` is not a context: did you mean `context = {near}`? The \
             contexts are {meanings}"
        ),
        None => format!("`context = {written}` is not a context: write {meanings}"),
    }
}

/// The error for `to` or `context` in `#[tool]`: they are a transition's.
fn misplaced_option(key: &str) -> String {
    format!(
        "`{key}` is an option of `#[transition(...)]`, not of `#[tool]`: to make this tool move \
         the call to another stage, write `#[transition(to = Stage)]` in place of `#[tool]`"
    )
}

/// `to = Stage`: a variant's name alone, not a string or a path.
fn read_stage(meta: &ParseNestedMeta<'_>) -> syn::Result<Ident> {
    let path: syn::Path = meta.value()?.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "`to` names a stage by its variant, written bare: `#[transition(to = Booking)]`",
        )
    })?;
    match (path.get_ident(), path.segments.last()) {
        (Some(ident), _) => Ok(ident.clone()),
        (None, Some(last)) => Err(syn::Error::new_spanned(
            &path,
            format!(
                "`to` names a stage by its variant alone (the enum is the brain's `stages = \
                 ...`): write `to = {}`",
                last.ident
            ),
        )),
        (None, None) => Err(syn::Error::new_spanned(
            &path,
            "`to` names a stage by its variant, written bare: `#[transition(to = Booking)]`",
        )),
    }
}

/// `on_barge_in = finish | cancel`; `None` when the policy is not one (reported on `ctxt`).
fn read_policy(ctxt: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<Option<(Ident, Policy)>> {
    let value: Ident = meta.value()?.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "`on_barge_in` takes `finish` (the default: the tool runs on and its result \
             is filed) or `cancel` (the tool is stopped), written bare: \
             `on_barge_in = cancel`",
        )
    })?;
    let policy = match value.to_string().as_str() {
        "finish" => Policy::Finish,
        "cancel" => Policy::Cancel,
        other => {
            ctxt.error_spanned_by(
                &value,
                format!(
                    "`on_barge_in = {other}` is not a policy: write `on_barge_in = \
                     finish` (the default) or `on_barge_in = cancel`{}",
                    if other == "background" {
                        "; for a tool that never holds its turn, write `background` \
                         on its own"
                    } else {
                        ""
                    }
                ),
            );
            return Ok(None);
        }
    };
    Ok(Some((value, policy)))
}

/// A filler is a short line, not empty (reported on `ctxt`).
fn check_filler(ctxt: &Ctxt, lit: &LitStr) {
    let text = lit.value();
    if text.trim().is_empty() {
        ctxt.error_spanned_by(
            lit,
            "a filler is a line the caller hears while the tool runs: write one, such \
             as `filler = \"One moment...\"`, or remove `filler`",
        );
    } else if text.len() > MAX_FILLER_BYTES {
        ctxt.error_spanned_by(
            lit,
            format!(
                "a filler is a short line the caller hears while the tool runs: this one \
                 has {} bytes, over {MAX_FILLER_BYTES}",
                text.len()
            ),
        );
    }
}

/// The error for an option `#[tool]` (or `#[transition]`) does not know, with the nearest known
/// one suggested.
fn unknown_option(written: &str, transition: bool) -> String {
    let (attr, options): (&str, &[&'static str]) = if transition {
        ("#[transition]", &TRANSITION_OPTIONS)
    } else {
        ("#[tool]", &OPTIONS)
    };
    let known = options
        .iter()
        .map(|o| format!("`{o}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match nearest_in(written, options) {
        Some(near) => format!(
            "unknown `{attr}` option `{written}`: did you mean `{near}`? (the options are \
             {known})"
        ),
        None => format!("unknown `{attr}` option `{written}`: the options are {known}"),
    }
}

/// The `#[tool]` option nearest to `written`, when it is near enough to be a typo.
#[cfg(test)]
fn nearest(written: &str) -> Option<&'static str> {
    nearest_in(written, &OPTIONS)
}

/// The word of `known` nearest to `written`, when it is near enough to be a typo.
fn nearest_in(written: &str, known: &[&'static str]) -> Option<&'static str> {
    crate::near::nearest(written, known.iter().copied())
}

fn path_text(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// A timeout as written (`"500ms"`, `"5s"`, `"2m"`), in ms.
///
/// # Errors
/// What is wrong with it, as the compile error says it.
fn duration_ms(text: &str) -> Result<u64, String> {
    let shape = "write a whole number and a unit: `timeout = \"500ms\"`, `\"5s\"` or `\"2m\"`";
    let trimmed = text.trim();
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    let (number, unit) = trimmed.split_at(digits);
    let Ok(number) = number.parse::<u64>() else {
        return Err(format!("`timeout = \"{text}\"` is not a duration: {shape}"));
    };
    let scale = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        _ => return Err(format!("`timeout = \"{text}\"` is not a duration: {shape}")),
    };
    let ms = number.saturating_mul(scale);
    if ms == 0 {
        return Err(format!(
            "`timeout = \"{text}\"` would time the tool out before it starts: give it a \
             duration above zero, or remove `timeout` for the model's default"
        ));
    }
    if ms > MAX_TIMEOUT_MS {
        return Err(format!(
            "`timeout = \"{text}\"` is over an hour: a tool's run is bounded so a call cannot \
             hold it forever; give it at most `\"60m\"`"
        ));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_their_units() {
        assert_eq!(duration_ms("500ms"), Ok(500));
        assert_eq!(duration_ms("5s"), Ok(5_000));
        assert_eq!(duration_ms(" 2m "), Ok(120_000));
        assert_eq!(duration_ms("60m"), Ok(3_600_000));
        for bad in [
            "",
            "5",
            "s",
            "5 sec",
            "1.5s",
            "-1s",
            "0s",
            "0ms",
            "61m",
            "99999999999999999999s",
        ] {
            assert!(duration_ms(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_typo_finds_its_option() {
        assert_eq!(nearest("on_bargein"), Some("on_barge_in"));
        assert_eq!(nearest("backgrond"), Some("background"));
        assert_eq!(nearest("time_out"), Some("timeout"));
        assert_eq!(nearest("Filler"), Some("filler"));
        assert_eq!(nearest("parallel"), None);
    }
}

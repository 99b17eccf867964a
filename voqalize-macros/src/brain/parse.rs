//! Reads an impl block: which methods are tools and what their attributes say. Only the
//! attribute grammar is checked here; signatures are checked in `check`.

use syn::{Attribute, ImplItem, ImplItemFn, ItemImpl, LitStr, Signature};

use crate::attr::{self, ToolMarks};
use crate::ctxt::Ctxt;
use crate::tool_attr::{Policy, TransitionAttr};

/// A method marked `#[tool]`, its markers removed, before its signature is checked.
pub(super) struct ToolFn {
    pub(super) sig: Signature,
    /// The attributes left on the method (doc comment, `#[cfg]`...).
    pub(super) attrs: Vec<Attribute>,
    /// `#[tool(name = "...")]`.
    pub(super) name: Option<LitStr>,
    pub(super) needs_result_now: bool,
    /// What a barge-in does to it, `#[tool(on_barge_in = ...)]` or `#[tool(background)]`.
    pub(super) policy: Policy,
    /// `#[tool(timeout = "...")]`, in ms.
    pub(super) timeout_ms: Option<u64>,
    /// `#[tool(filler = "...")]`.
    pub(super) filler: Option<String>,
    /// `#[transition(...)]`.
    pub(super) transition: Option<TransitionAttr>,
    /// A `#[transition]` naming no stage (its error is reported): the method is checked as a
    /// tool, so its other mistakes show too, but nothing is generated for it.
    pub(super) broken_transition: bool,
}

/// Reads and strips one impl item: the tool it is, if any (every other item passes through).
/// Markers on something that is not a method are errors.
pub(super) fn read_item(ctxt: &Ctxt, item: &mut ImplItem) -> Option<ToolFn> {
    let attrs = match item {
        ImplItem::Fn(f) => return read_method(ctxt, f),
        ImplItem::Const(c) => &mut c.attrs,
        ImplItem::Type(t) => &mut t.attrs,
        ImplItem::Macro(m) => &mut m.attrs,
        _ => return None,
    };
    attr::strip_tool_marks(Some(ctxt), attrs);
    None
}

fn read_method(ctxt: &Ctxt, f: &mut ImplItemFn) -> Option<ToolFn> {
    let ToolMarks {
        tool,
        needs_result_now,
    } = attr::take_tool_marks(ctxt, &mut f.attrs);
    let Some(tool) = tool else {
        if let Some(attr) = needs_result_now {
            let ident = &f.sig.ident;
            ctxt.error_spanned_by(
                attr,
                format!(
                    "`#[needs_result_now]` marks a tool, and `{ident}` is not one: add `#[tool]` \
                     (and a doc comment) to make it a tool, or remove `#[needs_result_now]`"
                ),
            );
        }
        return None;
    };
    if let (Some(background), Some(attr)) = (tool.background_at(), &needs_result_now) {
        ctxt.syn_error(syn::Error::new(
            background,
            format!(
                "tool `{}` cannot be both `background` and `#[needs_result_now]`: a background \
                 tool's result comes later, as a note, so the model cannot read it now. Remove \
                 `background` to make the model wait for the result, or remove \
                 `#[needs_result_now]`",
                f.sig.ident
            ),
        ));
        ctxt.error_spanned_by(attr, "`#[needs_result_now]` is here");
    }
    Some(ToolFn {
        sig: f.sig.clone(),
        attrs: f.attrs.clone(),
        name: tool.name,
        // The model reads a transition's result at once, and goes on in the new stage.
        needs_result_now: needs_result_now.is_some() || tool.transition.is_some(),
        policy: tool.policy,
        timeout_ms: tool.timeout_ms,
        filler: tool.filler,
        broken_transition: tool.broken_transition,
        transition: tool.transition,
    })
}

/// Whether the block defines a method `session` (then `#[brain]` does not generate one).
pub(super) fn defines_session(imp: &ItemImpl) -> bool {
    imp.items
        .iter()
        .any(|item| matches!(item, ImplItem::Fn(f) if f.sig.ident == attr::SESSION_METHOD))
}

/// Removes the markers everywhere without a word: used on a trait impl, where `#[brain]` itself
/// is the error and nothing is generated.
pub(super) fn strip_all(imp: &mut ItemImpl) {
    for item in &mut imp.items {
        let attrs = match item {
            ImplItem::Fn(f) => &mut f.attrs,
            ImplItem::Const(c) => &mut c.attrs,
            ImplItem::Type(t) => &mut t.attrs,
            ImplItem::Macro(m) => &mut m.attrs,
            _ => continue,
        };
        attr::strip_tool_marks(None, attrs);
    }
}

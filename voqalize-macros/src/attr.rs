//! The attribute grammar of these macros: one place that knows the attribute and key names, and
//! one parser for `name = "..."`, shared by `#[tool]`, `#[action]` and `#[app_event]`.

use proc_macro2::TokenStream;
use syn::{Attribute, LitStr, Meta, Path};

use crate::ctxt::Ctxt;

/// `#[tool]`: marks a tool inside `#[brain]`.
pub(crate) const TOOL: &str = "tool";
/// `#[transition(...)]`: marks a tool that moves the call to another stage, inside `#[brain]`.
pub(crate) const TRANSITION: &str = "transition";
/// `#[needs_result_now]`: marks a tool whose result the model reads before it goes on.
pub(crate) const NEEDS_RESULT_NOW: &str = "needs_result_now";
/// `#[action(...)]`: the helper attribute of `#[derive(Action)]`.
pub(crate) const ACTION: &str = "action";
/// `#[app_event(...)]`: the helper attribute of `#[derive(AppEvent)]`.
pub(crate) const APP_EVENT: &str = "app_event";
/// The one key of `#[tool]`, `#[action]` and `#[app_event]`.
pub(crate) const NAME: &str = "name";
/// An option of `#[brain]`: which tools the model sees.
pub(crate) const VISIBLE: &str = "visible";
/// An option of `#[brain]`: the brain's workflow stages.
pub(crate) const STAGES: &str = "stages";
/// A doc comment (`///` is `#[doc = "..."]`): a tool's description, kept on payload structs.
pub(crate) const DOC: &str = "doc";
/// `#[cfg(...)]` on a tool: copied onto everything generated for it.
pub(crate) const CFG: &str = "cfg";
/// The method `#[brain]` generates (`self.session()`), which a tool must not hide.
pub(crate) const SESSION_METHOD: &str = "session";

/// Whether `attr` is `#[name]` or `#[some::path::name]`.
pub(crate) fn is_attr(attr: &Attribute, name: &str) -> bool {
    attr.path().segments.last().is_some_and(|s| s.ident == name)
}

/// Reads `#[helper(name = "...")]` into `name`; any other key, or a second name (in this attribute
/// or an earlier one), is an error. `helper` is the attribute's name as the user knows it.
pub(crate) fn parse_name(ctxt: &Ctxt, attr: &Attribute, helper: &str, name: &mut Option<LitStr>) {
    let parsed = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident(NAME) {
            let lit: LitStr = meta.value()?.parse()?;
            if name.is_some() {
                return Err(meta.error("the name is given twice"));
            }
            *name = Some(lit);
            Ok(())
        } else {
            Err(meta.error(format!(
                "unknown `#[{helper}]` option: the only one is `name = \"...\"`"
            )))
        }
    });
    if let Err(e) = parsed {
        ctxt.syn_error(e);
    }
}

/// The options of `#[brain(...)]`.
pub(crate) struct BrainOptions {
    /// `visible = method`: decides which tools the model sees each turn.
    pub(crate) visible: Option<Path>,
    /// `stages = Type`: the `#[derive(Stages)]` enum of the brain's workflow.
    pub(crate) stages: Option<Path>,
}

pub(crate) fn parse_brain_options(ctxt: &Ctxt, attr: TokenStream) -> BrainOptions {
    let mut options = BrainOptions {
        visible: None,
        stages: None,
    };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident(VISIBLE) {
            options.visible = Some(meta.value()?.parse()?);
            Ok(())
        } else if meta.path.is_ident(STAGES) {
            let shape = "`stages` names the brain's `#[derive(Stages)]` enum, written as a type \
                         path: `#[brain(stages = Clinic)]`";
            let value = meta
                .value()
                .map_err(|_| syn::Error::new_spanned(&meta.path, shape))?;
            let stages: Path = value
                .parse()
                .map_err(|e| syn::Error::new(e.span(), shape))?;
            if options.stages.replace(stages).is_some() {
                return Err(meta.error("`stages` is given twice: a brain has one set of stages"));
            }
            Ok(())
        } else {
            Err(meta.error(
                "unknown `#[brain]` option: the options are `visible = method`, naming a \
                 `fn(&self, &ToolDecl) -> bool` that decides which tools the model sees each \
                 turn, and `stages = Type`, naming the brain's `#[derive(Stages)]` enum",
            ))
        }
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, attr) {
        ctxt.syn_error(e);
    }
    options
}

/// What `#[tool]` and `#[needs_result_now]` say about one method.
pub(crate) struct ToolMarks {
    /// `Some` when the method is a tool.
    pub(crate) tool: Option<crate::tool_attr::ToolAttr>,
    pub(crate) needs_result_now: Option<Attribute>,
}

/// Removes `#[tool]` and `#[needs_result_now]` from `attrs` and reads them.
pub(crate) fn take_tool_marks(ctxt: &Ctxt, attrs: &mut Vec<Attribute>) -> ToolMarks {
    let mut marks = ToolMarks {
        tool: None,
        needs_result_now: None,
    };
    // Whether the first mark was `#[transition]` (for the error on a second one).
    let mut first_is_transition = false;
    attrs.retain(|attr| {
        if is_attr(attr, TOOL) || is_attr(attr, TRANSITION) {
            if marks.tool.is_some() {
                ctxt.error_spanned_by(
                    attr,
                    second_mark(first_is_transition, is_attr(attr, TRANSITION)),
                );
            } else {
                first_is_transition = is_attr(attr, TRANSITION);
                marks.tool = Some(crate::tool_attr::parse_tool(
                    ctxt,
                    attr,
                    is_attr(attr, TRANSITION),
                ));
            }
            false
        } else if is_attr(attr, NEEDS_RESULT_NOW) {
            if marks.needs_result_now.is_some() {
                ctxt.error_spanned_by(attr, "`#[needs_result_now]` is given twice: remove one");
                return false;
            }
            if !matches!(attr.meta, Meta::Path(_)) {
                ctxt.error_spanned_by(attr, "`#[needs_result_now]` takes no arguments");
            }
            marks.needs_result_now = Some(attr.clone());
            false
        } else {
            true
        }
    });
    marks
}

/// The error on a second `#[tool]` or `#[transition]` on one method.
fn second_mark(first_is_transition: bool, transition: bool) -> &'static str {
    match (first_is_transition, transition) {
        (false, false) => "`#[tool]` is given twice: remove one",
        (true, true) => {
            "a method is one transition, to one stage: remove this second `#[transition(...)]` \
             (to let the model move the call to either stage, write a method for each)"
        }
        (true, false) | (false, true) => {
            "a method is either a `#[tool]` or a `#[transition(...)]` (a tool that moves the \
             call to another stage), not both: remove `#[tool]` to keep the transition, or \
             `#[transition(...)]` to keep a plain tool"
        }
    }
}

/// Removes `#[tool]` and `#[needs_result_now]` from an impl item that is not a method: with an
/// error for each when `ctxt` is given, silently where nothing is generated anyway.
pub(crate) fn strip_tool_marks(ctxt: Option<&Ctxt>, attrs: &mut Vec<Attribute>) {
    attrs.retain(|a| {
        if !(is_attr(a, TOOL) || is_attr(a, TRANSITION) || is_attr(a, NEEDS_RESULT_NOW)) {
            return true;
        }
        if let Some(ctxt) = ctxt {
            ctxt.error_spanned_by(
                a,
                "this attribute marks a method: `#[tool] async fn name(&self) ...`",
            );
        }
        false
    });
}

/// The predicates of `#[cfg(...)]` attributes (what `all(..)` of them is made of).
pub(crate) fn cfg_predicates(cfgs: &[Attribute]) -> Vec<TokenStream> {
    cfgs.iter()
        .filter_map(|a| match &a.meta {
            Meta::List(l) => Some(l.tokens.clone()),
            _ => None,
        })
        .collect()
}

//! What `#[brain(stages = ...)]` adds: the brain's stage table, and the compile-time checks that
//! tie its tools and transitions to the stages (each a constant whose evaluation fails with the
//! mistake's message, at the mistake's span).

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use super::check::Tool;
use crate::ctxt::Ctxt;
use crate::text::type_text;

/// `fn stage_table` of the `Toolbox` impl.
///
/// It names `<Type as Stages>` before `StageTable::of::<Type>`: when the type is no `Stages`,
/// rustc then reports the first only, the same error as the checks' (which it shows once).
pub(super) fn stage_table(stages: &Path) -> TokenStream {
    quote! {
        fn stage_table(&self) -> ::std::option::Option<::voqalize::__private::StageTable> {
            let _ = <#stages as ::voqalize::stages::Stages>::STAGES;
            ::std::option::Option::Some(::voqalize::__private::StageTable::of::<#stages>())
        }
    }
}

/// The checks: every tool a stage names is declared, every `#[tool]` is in a stage, every
/// transition goes to a stage that exists and that some stage may hand the call to.
///
/// Each check is a constant of its own, spanned on the mistake's token, so each mistake is one
/// error there. Each panics in the constant itself (not in a function it calls): the error is
/// then the message alone, without notes pointing into voqalize's sources.
pub(super) fn checks(stages: &Path, brain: &str, tools: &[Tool]) -> TokenStream {
    let enum_name = type_text(stages);
    let plain: Vec<&Tool> = tools.iter().filter(|t| t.transition.is_none()).collect();
    let (declared_names, names) = declared_names(&plain);
    let stage_tools = quote! { <#stages as ::voqalize::stages::Stages>::__TOOLS };
    let declared = quote_spanned! {stages.span()=>
        const _: () = {
            let named = #stage_tools;
            let mut i = 0;
            while i < named.len() {
                if !__voqalize_holds(__VOQALIZE_DECLARED, named[i].0) {
                    ::core::panic!("{}", named[i].1);
                }
                i += 1;
            }
        };
    };
    let in_a_stage = plain.iter().map(|tool| {
        let name = &tool.name;
        let cfgs = &tool.cfgs;
        let message = format!(
            "tool `{name}` of `{brain}` is in no stage of `{enum_name}`, so the model could never \
             call it: name it in the `tools(..)` of the stages where it may be called, e.g. \
             `#[stage(tools({name}))]`, or in `#[stages(every({name}))]` on the enum"
        );
        quote_spanned! {tool.ident.span()=>
            #(#cfgs)*
            const _: () = if !__voqalize_named(#stage_tools, #name) {
                ::core::panic!("{}", #message);
            };
        }
    });
    let enterable = tools.iter().filter_map(|tool| {
        let transition = tool.transition.as_ref()?;
        let to = &transition.to;
        let cfgs = &tool.cfgs;
        let message = format!(
            "transition `{}` moves the call to `{to}`, but no stage of `{enum_name}` may hand the \
             call to `{to}`, so no stage offers it: add `{to}` to the `to(..)` of the stages it \
             leaves from",
            tool.name
        );
        // All on `to`: an unknown stage is then one error (rustc's, with its "similar name"),
        // on the stage as the transition writes it.
        let variant = respan(quote!(#stages::#to), to.span());
        Some(quote_spanned! {to.span()=>
            #(#cfgs)*
            const _: () = if !::voqalize::__private::stage_checks::enters(
                <#stages as ::voqalize::stages::Stages>::STAGES,
                #variant.__voqalize_stage_index(),
            ) {
                ::core::panic!("{}", #message);
            };
        })
    });
    let helpers = const_helpers();
    quote! {
        const _: () = {
            #helpers
            #(#declared_names)*
            const __VOQALIZE_DECLARED: &[&str] = &[#(#names),*];
            #declared
            #(#in_a_stage)*
            #(#enterable)*
        };
    }
}

/// The names of the declared tools, for `__VOQALIZE_DECLARED`: a tool under `#[cfg]`s is a
/// constant that is its name where the cfgs hold and `""` (no stage's tool) where they do not, so
/// a compiled-out tool a stage names is reported. Returns those constants and the list's items.
fn declared_names(plain: &[&Tool]) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let mut constants = Vec::new();
    let items = plain
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let name = &tool.name;
            if tool.cfgs.is_empty() {
                return quote!(#name);
            }
            let constant = format_ident!("__VOQALIZE_DECLARED_{i}");
            let cfgs = crate::attr::cfg_predicates(&tool.cfgs);
            constants.push(quote! {
                #[cfg(all(#(#cfgs),*))]
                const #constant: &str = #name;
                #[cfg(not(all(#(#cfgs),*)))]
                const #constant: &str = "";
            });
            quote!(#constant)
        })
        .collect();
    (constants, items)
}

/// The string tests of the checks, as `const fn`s local to the checks' block.
fn const_helpers() -> TokenStream {
    quote! {
            const fn __voqalize_same(a: &str, b: &str) -> bool {
                let (a, b) = (a.as_bytes(), b.as_bytes());
                if a.len() != b.len() {
                    return false;
                }
                let mut i = 0;
                while i < a.len() {
                    if a[i] != b[i] {
                        return false;
                    }
                    i += 1;
                }
                true
            }
            #[allow(dead_code)]
            const fn __voqalize_holds(names: &[&str], name: &str) -> bool {
                let mut i = 0;
                while i < names.len() {
                    if __voqalize_same(names[i], name) {
                        return true;
                    }
                    i += 1;
                }
                false
            }
            #[allow(dead_code)]
            const fn __voqalize_named(named: &[(&str, &str)], name: &str) -> bool {
                let mut i = 0;
                while i < named.len() {
                    if __voqalize_same(named[i].0, name) {
                        return true;
                    }
                    i += 1;
                }
                false
            }
    }
}

/// `tokens`, every one of them at `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}

/// A `#[transition]` in a brain without `stages = ...`: an error on each, naming both fixes.
pub(super) fn transitions_without_stages(ctxt: &Ctxt, tools: &[Tool]) {
    for tool in tools {
        if let Some(transition) = &tool.transition {
            ctxt.error_spanned_by(
                &transition.at,
                format!(
                    "`{}` is a transition, but this `#[brain]` declares no stages to move the \
                     call between: name them with `#[brain(stages = YourStages)]` on the impl \
                     block, where `YourStages` is a `#[derive(Stages)]` enum with a stage \
                     `{}`; or make `{}` a plain `#[tool]`",
                    tool.ident, transition.to, tool.ident
                ),
            );
        }
    }
}

/// The `transition` field of a tool's `ToolInfo`.
pub(super) fn transition_info(tool: &Tool) -> TokenStream {
    match &tool.transition {
        Some(t) => {
            let to = t.to.to_string();
            let context = syn::Ident::new(t.context, t.to.span());
            quote! {
                ::std::option::Option::Some(::voqalize::__private::Transition {
                    to: #to,
                    context: ::voqalize::__private::Context::#context,
                })
            }
        }
        None => quote!(::std::option::Option::None),
    }
}

//! What `#[brain(stages = ...)]` adds: the brain's stage table, and the compile-time checks that
//! tie its tools and transitions to the stages (each a constant whose evaluation fails with the
//! mistake's message, at the mistake's span).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use super::check::Tool;
use crate::text::type_text;

/// `fn stage_table` of the `Toolbox` impl.
pub(super) fn stage_table(stages: &Path) -> TokenStream {
    quote! {
        fn stage_table(&self) -> ::std::option::Option<::voqalize::__private::StageTable> {
            ::std::option::Option::Some(::voqalize::__private::StageTable::of::<#stages>())
        }
    }
}

/// The checks: every tool a stage names is declared, every `#[tool]` is in a stage, every
/// transition goes to a stage that exists and that some stage may hand the call to.
pub(super) fn checks(stages: &Path, brain: &str, tools: &[Tool]) -> TokenStream {
    let enum_name = type_text(stages);
    let plain: Vec<&Tool> = tools.iter().filter(|t| t.transition.is_none()).collect();
    let names = plain.iter().map(|t| &t.name);
    let declared = quote_spanned! {stages.span()=>
        const _: () = ::voqalize::__private::stage_checks::stage_tools(
            <#stages as ::voqalize::stages::Stages>::__TOOLS,
            &[#(#names),*],
        );
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
            const _: () = ::voqalize::__private::stage_checks::in_a_stage(
                <#stages as ::voqalize::stages::Stages>::STAGES,
                #name,
                #message,
            );
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
        let variant = quote_spanned!(to.span()=> #stages::#to);
        Some(quote_spanned! {to.span()=>
            #(#cfgs)*
            const _: () = ::voqalize::__private::stage_checks::enterable(
                <#stages as ::voqalize::stages::Stages>::STAGES,
                #variant.__voqalize_stage_index(),
                #message,
            );
        })
    });
    quote! {
        #declared
        #(#in_a_stage)*
        #(#enterable)*
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

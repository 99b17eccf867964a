//! The `Stages` impl of an enum read (and checked) by the other phases, and the hidden
//! `__voqalize_stage_index` the brain's checks read in constants.

use proc_macro2::TokenStream;
use quote::quote;

use super::{Named, Stage, StagesEnum};

/// `to` is each stage's `to(..)` as places among the stages (what `check` resolved).
pub(super) fn stages_impl(stages: &StagesEnum<'_>, to: &[Vec<usize>]) -> TokenStream {
    let ident = stages.ident;
    let decls = stages
        .stages
        .iter()
        .zip(to)
        .map(|(stage, to)| decl(stage, to, &stages.every));
    let tool_checks = tool_checks(stages);
    let variants: Vec<_> = stages.stages.iter().map(|s| s.variant).collect();
    let indices: Vec<usize> = (0..variants.len()).collect();
    quote! {
        impl ::voqalize::stages::Stages for #ident {
            const STAGES: &'static [::voqalize::stages::StageDecl] = &[#(#decls),*];
            #[doc(hidden)]
            const __TOOLS: &'static [(&'static str, &'static str)] = &[#(#tool_checks),*];
            fn index(self) -> usize {
                match self {
                    #(#ident::#variants => #indices,)*
                }
            }
            fn from_index(index: usize) -> ::core::option::Option<Self> {
                match index {
                    #(#indices => ::core::option::Option::Some(#ident::#variants),)*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl #ident {
            /// The stage's place among the stages, in a constant (what
            /// `#[brain(stages = ...)]`'s checks read).
            #[doc(hidden)]
            #[allow(dead_code)]
            pub const fn __voqalize_stage_index(self) -> usize {
                match self {
                    #(#ident::#variants => #indices,)*
                }
            }
        }
    }
}

/// `StageDecl::__new(name, instruction, tools, to, mcp, end)` of one stage: its tools are its own
/// `tools(..)` then the enum's `every(..)`, each once.
fn decl(stage: &Stage<'_>, to: &[usize], every: &[Named]) -> TokenStream {
    let Stage {
        name,
        instruction,
        end,
        ..
    } = stage;
    let mut tools: Vec<&str> = stage.tools.iter().map(|t| t.text.as_str()).collect();
    for tool in every {
        if !tools.contains(&tool.text.as_str()) {
            tools.push(&tool.text);
        }
    }
    let mcp = stage.mcp.iter().map(|m| &m.text);
    let end = end.is_some();
    quote! {
        ::voqalize::stages::StageDecl::__new(
            #name,
            #instruction,
            &[#(#tools),*],
            &[#(#to),*],
            &[#(#mcp),*],
            #end,
        )
    }
}

/// `__TOOLS`: each tool a stage or `every(..)` names, with the error a brain that does not
/// declare it gets.
fn tool_checks(stages: &StagesEnum<'_>) -> Vec<TokenStream> {
    let enum_name = &stages.name;
    let transitions = "(a `#[transition]` is not listed there: a stage offers the transitions \
                       into the stages its `to(..)` names)";
    let own = stages.stages.iter().flat_map(|stage| {
        stage.tools.iter().map(move |tool| {
            let message = format!(
                "stage `{}` of `{enum_name}` names the tool `{}`, which the brain does not \
                 declare as a `#[tool]`: declare it in the `#[brain(stages = {enum_name})]` \
                 block, or remove it from the stage's `tools(..)` {transitions}",
                stage.name, tool.text
            );
            (tool.text.as_str(), message)
        })
    });
    let every = stages.every.iter().map(|tool| {
        let message = format!(
            "`#[stages(every(..))]` of `{enum_name}` names the tool `{}`, which the brain does \
             not declare as a `#[tool]`: declare it in the `#[brain(stages = {enum_name})]` \
             block, or remove it from `every(..)` {transitions}",
            tool.text
        );
        (tool.text.as_str(), message)
    });
    own.chain(every)
        .map(|(tool, message)| quote!((#tool, #message)))
        .collect()
}

//! Generates the `Toolbox` impl, the `session` accessor and the compile-time checks from tools
//! that passed every check.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Ident, ItemImpl, Path, Type};

use super::check::Tool;
use crate::attr::BrainOptions;
use crate::text::type_text;

/// What `#[brain]` adds after the impl block: the `session` accessor (unless the block has one),
/// the `Toolbox` impl and the argument checks.
pub(super) fn brain(
    imp: &ItemImpl,
    options: &BrainOptions,
    tools: &[Tool],
    has_session: bool,
) -> TokenStream {
    let session = (!has_session).then(|| session_accessor(imp));
    let toolbox = toolbox(imp, options, tools);
    let checks = arg_kind_checks(imp, tools);
    let stage_checks = options
        .stages
        .as_ref()
        .map(|s| super::stages::checks(s, &type_name(&imp.self_ty), tools));
    quote! {
        #session

        #toolbox

        #(#checks)*

        #stage_checks
    }
}

/// `impl Toolbox`: the declarations in source order, and the dispatcher.
fn toolbox(imp: &ItemImpl, options: &BrainOptions, tools: &[Tool]) -> TokenStream {
    let (impl_generics, _, where_clause) = imp.generics.split_for_impl();
    let self_ty = &imp.self_ty;
    let type_name = type_name(self_ty);
    let decls = tools
        .iter()
        .enumerate()
        .map(|(index, tool)| declaration(tool, index, &type_name, is_checked(imp, tool)));
    let arms = tools
        .iter()
        .enumerate()
        .map(|(index, tool)| dispatch_arm(tool, index, is_checked(imp, tool)));
    let visible = options.visible.as_ref().map(visible_method);
    let stage_table = options.stages.as_ref().map(super::stages::stage_table);
    quote! {
        impl #impl_generics ::voqalize::tools::Toolbox for #self_ty #where_clause {
            fn tools(&self) -> &'static [::voqalize::tools::ToolDecl] {
                ::voqalize::__private::tool_table::<Self>(|| {
                    #[allow(unused_imports)]
                    use ::voqalize::__private::ArgFallback as _;
                    #[allow(unused_mut)]
                    let mut __voqalize_table = ::std::vec::Vec::new();
                    #(#decls)*
                    __voqalize_table
                })
            }

            #visible

            #stage_table

            fn __run_tool(
                &self,
                index: usize,
                __voqalize_arguments: ::voqalize::__private::serde_json::Value,
            ) -> ::voqalize::__private::ToolRun<'_> {
                match index {
                    #(#arms)*
                    _ => ::voqalize::__private::unknown_index(index),
                }
            }

            fn __shared(
                &self,
                __voqalize_brain: ::voqalize::__private::SharedBrain,
            ) -> ::std::option::Option<::std::sync::Arc<dyn ::voqalize::tools::Toolbox>> {
                ::voqalize::__private::shared_toolbox(self, __voqalize_brain)
            }
        }
    }
}

/// The brain type's name as `ToolInfo::method` shows it (`Coach` of `Coach<T>`).
fn type_name(self_ty: &Type) -> String {
    match self_ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| type_text(&p.path), |s| s.ident.unraw().to_string()),
        other => type_text(other),
    }
}

/// One entry of the tool table. A `checked` argument is declared through `Arg::<T>`, which
/// compiles whatever `T` is: its compile-time check alone reports a mistake.
fn declaration(tool: &Tool, index: usize, type_name: &str, checked: bool) -> TokenStream {
    let Tool {
        ident,
        name,
        description,
        needs_result_now,
        policy,
        timeout_ms,
        filler,
        cfgs,
        ..
    } = tool;
    let method = format!("{type_name}::{}", ident.unraw());
    let policy = Ident::new(policy.variant(), Span::call_site());
    let timeout_ms = match timeout_ms {
        Some(ms) => quote!(::std::option::Option::Some(#ms)),
        None => quote!(::std::option::Option::None),
    };
    let filler = match filler {
        Some(line) => quote!(::std::option::Option::Some(#line)),
        None => quote!(::std::option::Option::None),
    };
    let transition = super::stages::transition_info(tool);
    let info = quote! {
        ::voqalize::__private::ToolInfo {
            name: #name,
            description: #description,
            needs_result_now: #needs_result_now,
            policy: ::voqalize::tools::ToolPolicy::#policy,
            timeout_ms: #timeout_ms,
            filler: #filler,
            method: #method,
            index: #index,
            transition: #transition,
        }
    };
    match &tool.arg {
        Some(ty) if checked => {
            let declare = quote_spanned!(ty.span()=> ::voqalize::__private::Arg::<#ty>::declare);
            quote!(#(#cfgs)* __voqalize_table.push(#declare(#info));)
        }
        Some(ty) => {
            let declare = quote_spanned!(ty.span()=> ::voqalize::__private::declare::<#ty>);
            quote!(#(#cfgs)* __voqalize_table.push(#declare(#info));)
        }
        None => quote!(
            #(#cfgs)*
            __voqalize_table.push(::voqalize::__private::declare_without_args(#info));
        ),
    }
}

/// One arm of `__run_tool`: parse the argument, call the method, turn its result into JSON.
fn dispatch_arm(tool: &Tool, index: usize, checked: bool) -> TokenStream {
    let Tool {
        ident, arg, cfgs, ..
    } = tool;
    let call = match arg {
        Some(ty) => {
            let parse = if checked {
                quote_spanned!(ty.span()=> ::voqalize::__private::Arg::<#ty>::parse)
            } else {
                quote_spanned!(ty.span()=> ::voqalize::__private::parse_args::<#ty>)
            };
            quote! {
                let __voqalize_args = #parse(__voqalize_arguments)?;
                let __voqalize_out = Self::#ident(self, __voqalize_args).await;
            }
        }
        None => quote! {
            let _ = __voqalize_arguments;
            let __voqalize_out = Self::#ident(self).await;
        },
    };
    let ret_span = tool
        .ret
        .as_ref()
        .map_or_else(|| ident.span(), Spanned::span);
    // `(&probe).kind()` picks the `Result` or the plain conversion by type (autoref
    // specialisation: the borrow is what makes the choice).
    let finish = quote_spanned! {ret_span=>
        #[allow(clippy::needless_borrow)]
        let __voqalize_kind = (&::voqalize::__private::Probe::of(&__voqalize_out)).kind();
        __voqalize_kind.finish(__voqalize_out)
    };
    // Spanned on the tool's name: a future that is not `Send` is reported there.
    let future = quote_spanned! {ident.span()=>
        ::std::boxed::Box::pin(async move {
            #[allow(unused_imports)]
            use ::voqalize::__private::{ArgFallback as _, ViaPlain as _, ViaResult as _};
            #call
            #finish
        })
    };
    quote!(#(#cfgs)* #index => #future,)
}

/// `fn tool_visible`, calling the method `#[brain(visible = ...)]` names.
fn visible_method(path: &Path) -> TokenStream {
    let target = if path.get_ident().is_some() {
        quote_spanned!(path.span()=> Self::#path)
    } else {
        path.to_token_stream()
    };
    quote! {
        fn tool_visible(&self, tool: &::voqalize::tools::ToolDecl) -> bool {
            #target(self, tool)
        }
    }
}

/// `self.session()` on the brain type.
fn session_accessor(imp: &ItemImpl) -> TokenStream {
    let (impl_generics, _, where_clause) = imp.generics.split_for_impl();
    let self_ty = &imp.self_ty;
    quote! {
        impl #impl_generics #self_ty #where_clause {
            /// The session serving the running tool or brain callback (generated by
            /// `#[brain]`).
            ///
            /// # Panics
            /// When called outside a session's tasks, e.g. in a task the brain spawned itself:
            /// clone the session into such tasks instead.
            #[allow(dead_code)]
            #[track_caller]
            pub(crate) fn session(&self) -> ::voqalize::Session {
                ::voqalize::__private::current_session()
            }
        }
    }
}

/// The compile-time argument check of each tool whose argument type can be named outside the
/// impl. The check is a free constant: it cannot name the impl's generics, and `Self` is spelled
/// out as the self type.
fn arg_kind_checks(imp: &ItemImpl, tools: &[Tool]) -> Vec<TokenStream> {
    tools
        .iter()
        .filter_map(|tool| {
            let concrete = checked_arg(imp, tool)?;
            let check = arg_kind_check(&concrete);
            let cfgs = &tool.cfgs;
            Some(quote!(#(#cfgs)* #check))
        })
        .collect()
}

/// Whether the tool's argument has a compile-time check (see [`checked_arg`]).
fn is_checked(imp: &ItemImpl, tool: &Tool) -> bool {
    checked_arg(imp, tool).is_some()
}

/// The tool's argument type with `Self` spelled out, when it can be named outside the impl (it
/// names none of the impl's generics): such an argument gets a compile-time check.
fn checked_arg(imp: &ItemImpl, tool: &Tool) -> Option<Type> {
    let generic_names: Vec<String> = imp
        .generics
        .params
        .iter()
        .map(|p| match p {
            syn::GenericParam::Type(t) => t.ident.to_string(),
            syn::GenericParam::Const(c) => c.ident.to_string(),
            syn::GenericParam::Lifetime(l) => l.lifetime.ident.to_string(),
        })
        .collect();
    let concrete = substitute_self(tool.arg.as_ref()?, &imp.self_ty);
    (!mentions_any(&concrete, &generic_names)).then_some(concrete)
}

/// Whether `ty` names any of `names` (the impl's generics; `Self` always counts).
fn mentions_any<T: ToTokens>(ty: &T, names: &[String]) -> bool {
    fn walk(tokens: TokenStream, names: &[String]) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "Self" || names.iter().any(|n| i == n),
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), names),
            _ => false,
        })
    }
    walk(ty.to_token_stream(), names)
}

/// `ty` with `Self` spelled out as the impl's self type.
fn substitute_self(ty: &Type, self_ty: &Type) -> Type {
    fn walk(tokens: TokenStream, self_ty: &TokenStream) -> TokenStream {
        tokens
            .into_iter()
            .map(|t| match t {
                proc_macro2::TokenTree::Ident(i) if i == "Self" => {
                    let mut group =
                        proc_macro2::Group::new(proc_macro2::Delimiter::None, self_ty.clone());
                    group.set_span(i.span());
                    TokenStream::from(proc_macro2::TokenTree::Group(group))
                }
                proc_macro2::TokenTree::Group(g) => {
                    let mut out = proc_macro2::Group::new(g.delimiter(), walk(g.stream(), self_ty));
                    out.set_span(g.span());
                    TokenStream::from(proc_macro2::TokenTree::Group(out))
                }
                other => TokenStream::from(other),
            })
            .collect()
    }
    let tokens = walk(ty.to_token_stream(), &self_ty.to_token_stream());
    syn::parse2(tokens).unwrap_or_else(|_| ty.clone())
}

/// A compile-time check, on the argument's type (aliases included), that it is a struct (not a
/// scalar, a collection, an `Option`, a JSON value or the session) implementing `Deserialize` and
/// `JsonSchema`. `verdict` finds the one mistake; each check trait fails on its own verdict only,
/// with its `#[diagnostic::on_unimplemented]` message on the user's type.
fn arg_kind_check(ty: &Type) -> TokenStream {
    let checks = [
        ("NotAScalar", "Scalar"),
        ("NotACollection", "Collection"),
        ("NotAnOption", "Optional"),
        ("NotAnyJson", "AnyJson"),
        ("NotTheSession", "Session"),
        ("NotAnEnum", "Enum"),
        ("NotAUnitStruct", "UnitStruct"),
        ("NotATupleStruct", "TupleStruct"),
        ("NotANewtype", "Newtype"),
        ("JsonType", "NotJsonType"),
        ("Deserializable", "NoDeserialize"),
        ("WithJsonSchema", "NoJsonSchema"),
    ]
    .map(|(check, verdict)| {
        let check = Ident::new(check, Span::call_site());
        let verdict = Ident::new(verdict, Span::call_site());
        let bound = quote_spanned! {ty.span()=>
            ::voqalize::#check<{ __VOQALIZE_VERDICT != ::voqalize::__private::ArgVerdict::#verdict as u8 }>
        };
        quote!(let _: () = <#ty as #bound>::OK;)
    });
    quote_spanned! {ty.span()=>
        const _: () = {
            #[allow(unused_imports)]
            use ::voqalize::__private::{
                ArgFallback as _, ArgProbeFallback as _, ArgShapeFallback as _,
            };
            const __VOQALIZE_VERDICT: u8 = ::voqalize::__private::verdict(
                ::voqalize::__private::ArgKind::either(
                    ::voqalize::__private::ArgProbe::<#ty>::KIND,
                    <#ty>::__VOQALIZE_ARG_KIND,
                ),
                ::voqalize::__private::Arg::<#ty>::SCHEMA,
                ::voqalize::__private::Arg::<#ty>::DESERIALIZE,
            );
            #(#checks)*
        };
    }
}

/// Two tools of one name under different `#[cfg]`s: an error only in a build where both cfgs
/// hold, which the compiler decides.
pub(super) fn cfg_clash(first: &Tool, tool: &Tool) -> TokenStream {
    let mut both = crate::attr::cfg_predicates(&first.cfgs);
    both.extend(crate::attr::cfg_predicates(&tool.cfgs));
    let message = format!(
        "two tools are named `{}` (`{}` and `{}`) and their `#[cfg]`s are both true in this \
         build: the model could not tell them apart. Make the cfgs exclusive, or give one \
         another name with `#[tool(name = \"...\")]`",
        tool.name, first.ident, tool.ident
    );
    let at = tool
        .name_at
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span());
    quote_spanned! {at=>
        #[cfg(all(#(#both),*))]
        ::core::compile_error! { #message }
    }
}

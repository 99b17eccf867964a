//! `#[brain]`: the tool table of an impl block.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, Ident, ImplItem, ImplItemFn, ItemImpl, LitStr, Meta, Pat, PatType, Path,
    ReturnType, Type,
};

use crate::util::{Errors, doc_text, is_attr, pascal_case, type_text, valid_function_name};

struct Options {
    visible: Option<Path>,
}

struct Tool {
    ident: Ident,
    name: String,
    /// Where the name is written (the `name = "..."` literal, or the method's name).
    name_at: TokenStream,
    description: String,
    needs_result_now: bool,
    arg: Option<Type>,
    ret: Option<Type>,
    /// The method's `#[cfg(...)]` attributes, copied onto everything generated for it.
    cfgs: Vec<Attribute>,
}

/// The predicates of `#[cfg(...)]` attributes.
fn cfg_predicates(cfgs: &[Attribute]) -> Vec<TokenStream> {
    cfgs.iter()
        .filter_map(|a| match &a.meta {
            Meta::List(l) => Some(l.tokens.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let options = parse_options(attr, &mut errors);
    let mut imp: ItemImpl = match syn::parse2(item.clone()) {
        Ok(imp) => imp,
        Err(_) => {
            errors.push(syn::Error::new(
                Span::call_site(),
                "`#[brain]` goes on the impl block that holds the tools: \
                 `#[brain] impl MyBrain { /* #[tool] async fn ... */ }`",
            ));
            let errors = errors.into_tokens();
            return quote!(#item #errors);
        }
    };

    if let Some((_, path, _)) = &imp.trait_ {
        errors.spanned(
            path,
            format!(
                "`#[brain]` goes on the brain type's own impl block, not on an impl of `{}`: \
                 tools are methods of the type. Move them to `#[brain] impl {} {{ ... }}`",
                type_text(path),
                type_text(&imp.self_ty),
            ),
        );
    }
    if let Some(unsafety) = &imp.unsafety {
        errors.spanned(
            unsafety,
            "`#[brain]` goes on a safe impl block: remove `unsafe`",
        );
    }
    if imp.trait_.is_some() {
        // Nothing is generated for a trait impl: it holds no tools, and a `Toolbox` impl here would
        // clash with the one from the type's real `#[brain]` block.
        strip_all(&mut imp);
        let errors = errors.into_tokens();
        return quote!(#imp #errors);
    }

    let type_name = match &*imp.self_ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| type_text(&p.path), |s| s.ident.unraw().to_string()),
        other => type_text(other),
    };

    let mut tools: Vec<Tool> = Vec::new();
    let mut cfg_clashes: Vec<TokenStream> = Vec::new();
    let mut has_session = false;
    for item in &mut imp.items {
        match item {
            ImplItem::Fn(f) => {
                if f.sig.ident == "session" {
                    has_session = true;
                }
                if let Some(tool) = read_fn(f, &mut errors) {
                    let clash = tools.iter().find(|t| t.name == tool.name);
                    let cfg_text = |t: &Tool| {
                        t.cfgs
                            .iter()
                            .map(|a| a.to_token_stream().to_string())
                            .collect::<Vec<_>>()
                    };
                    if let Some(first) = clash
                        && (!first.cfgs.is_empty() || !tool.cfgs.is_empty())
                        && cfg_text(first) != cfg_text(&tool)
                    {
                        // Two tools of one name under different `#[cfg]`s: allowed, unless
                        // both are compiled in at once.
                        let mut both = cfg_predicates(&first.cfgs);
                        both.extend(cfg_predicates(&tool.cfgs));
                        let message = format!(
                            "two tools are named `{}` (`{}` and `{}`) and their `#[cfg]`s are \
                             both true in this build: the model could not tell them apart. Make \
                             the cfgs exclusive, or give one another name with \
                             `#[tool(name = \"...\")]`",
                            tool.name, first.ident, tool.ident
                        );
                        let at = tool
                            .name_at
                            .clone()
                            .into_iter()
                            .next()
                            .map_or_else(Span::call_site, |t| t.span());
                        cfg_clashes.push(quote_spanned! {at=>
                            #[cfg(all(#(#both),*))]
                            ::core::compile_error! { #message }
                        });
                        tools.push(tool);
                    } else if let Some(first) = clash {
                        errors.spanned(
                            &tool.name_at,
                            format!(
                                "two tools are named `{}` (`{}` and `{}`): the model could not \
                                 tell them apart. Give one another name with \
                                 `#[tool(name = \"...\")]`",
                                tool.name, first.ident, tool.ident
                            ),
                        );
                    } else {
                        tools.push(tool);
                    }
                }
            }
            ImplItem::Const(c) => misplaced(&mut c.attrs, &mut errors),
            ImplItem::Type(t) => misplaced(&mut t.attrs, &mut errors),
            ImplItem::Macro(m) => misplaced(&mut m.attrs, &mut errors),
            _ => {}
        }
    }

    let (impl_generics, _, where_clause) = imp.generics.split_for_impl();
    let self_ty = &imp.self_ty;
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

    let mut decls = Vec::new();
    let mut arms = Vec::new();
    let mut checks = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        let Tool {
            ident,
            name,
            name_at: _,
            description,
            needs_result_now,
            arg,
            ret,
            cfgs,
        } = tool;
        let method = format!("{type_name}::{}", ident.unraw());
        let info = quote! {
            ::voqalize::__private::ToolInfo {
                name: #name,
                description: #description,
                needs_result_now: #needs_result_now,
                method: #method,
                index: #index,
            }
        };
        let call = match arg {
            Some(ty) => {
                let declare = quote_spanned!(ty.span()=> ::voqalize::__private::declare::<#ty>);
                decls.push(quote!(#(#cfgs)* __voqalize_table.push(#declare(#info));));
                let parse = quote_spanned!(ty.span()=> ::voqalize::__private::parse_args::<#ty>);
                // The check is a free constant: it cannot name the impl's generics, and `Self`
                // is spelled out as the self type.
                let concrete = substitute_self(ty, self_ty);
                if !mentions_any(&concrete, &generic_names) {
                    let check = arg_kind_check(ident, &concrete);
                    checks.push(quote!(#(#cfgs)* #check));
                }
                quote! {
                    let __voqalize_args = #parse(__voqalize_arguments)?;
                    let __voqalize_out = Self::#ident(self, __voqalize_args).await;
                }
            }
            None => {
                decls.push(quote!(
                    #(#cfgs)*
                    __voqalize_table.push(::voqalize::__private::declare_without_args(#info));
                ));
                quote! {
                    let _ = __voqalize_arguments;
                    let __voqalize_out = Self::#ident(self).await;
                }
            }
        };
        let ret_span = ret.as_ref().map_or_else(|| ident.span(), Spanned::span);
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
                use ::voqalize::__private::{ViaPlain as _, ViaResult as _};
                #call
                #finish
            })
        };
        arms.push(quote!(#(#cfgs)* #index => #future,));
    }

    let visible = options.visible.map(|path| {
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
    });

    let session = (!has_session).then(|| {
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
    });

    let errors = errors.into_tokens();
    let output = quote! {
        #imp

        #session

        impl #impl_generics ::voqalize::tools::Toolbox for #self_ty #where_clause {
            fn tools(&self) -> &'static [::voqalize::tools::ToolDecl] {
                ::voqalize::__private::tool_table::<Self>(|| {
                    #[allow(unused_mut)]
                    let mut __voqalize_table = ::std::vec::Vec::new();
                    #(#decls)*
                    __voqalize_table
                })
            }

            #visible

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
        }

        #(#checks)*

        #(#cfg_clashes)*

        #errors
    };
    if std::env::var_os("VOQALIZE_MACROS_DEBUG").is_some() {
        eprintln!("{output}");
    }
    output
}

fn parse_options(attr: TokenStream, errors: &mut Errors) -> Options {
    let mut options = Options { visible: None };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("visible") {
            options.visible = Some(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error(
                "unknown `#[brain]` option: the only one is `visible = method`, naming a \
                 `fn(&self, &ToolDecl) -> bool` that decides which tools the model sees each turn",
            ))
        }
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, attr) {
        errors.push(e);
    }
    options
}

/// Removes this macro's attributes everywhere (the block generates nothing).
fn strip_all(imp: &mut ItemImpl) {
    for item in &mut imp.items {
        let attrs = match item {
            ImplItem::Fn(f) => &mut f.attrs,
            ImplItem::Const(c) => &mut c.attrs,
            ImplItem::Type(t) => &mut t.attrs,
            ImplItem::Macro(m) => &mut m.attrs,
            _ => continue,
        };
        attrs.retain(|a| !is_attr(a, "tool") && !is_attr(a, "needs_result_now"));
    }
}

/// `#[tool]` or `#[needs_result_now]` on an impl item that is not a method.
fn misplaced(attrs: &mut Vec<Attribute>, errors: &mut Errors) {
    attrs.retain(|a| {
        if is_attr(a, "tool") || is_attr(a, "needs_result_now") {
            errors.spanned(
                a,
                "this attribute marks a method: `#[tool] async fn name(&self) ...`",
            );
            false
        } else {
            true
        }
    });
}

/// Strips this macro's attributes from a method and, when it is a valid tool, describes it.
fn read_fn(f: &mut ImplItemFn, errors: &mut Errors) -> Option<Tool> {
    let mut tool_attr: Option<(Attribute, Option<LitStr>)> = None;
    let mut needs_result_now: Option<Attribute> = None;
    let mut kept = Vec::with_capacity(f.attrs.len());
    for attr in std::mem::take(&mut f.attrs) {
        if is_attr(&attr, "tool") {
            if tool_attr.is_some() {
                errors.spanned(&attr, "`#[tool]` is given twice: remove one");
                continue;
            }
            let name = match &attr.meta {
                Meta::Path(_) => None,
                Meta::List(_) => {
                    let mut name = None;
                    let parsed = attr.parse_nested_meta(|meta| {
                        if meta.path.is_ident("name") {
                            name = Some(meta.value()?.parse::<LitStr>()?);
                            Ok(())
                        } else {
                            Err(meta.error(
                                "unknown `#[tool]` option: the only one is `name = \"...\"`",
                            ))
                        }
                    });
                    if let Err(e) = parsed {
                        errors.push(e);
                    }
                    name
                }
                Meta::NameValue(nv) => {
                    errors.spanned(
                        nv,
                        "write `#[tool]`, or `#[tool(name = \"...\")]` to name the tool",
                    );
                    None
                }
            };
            tool_attr = Some((attr, name));
        } else if is_attr(&attr, "needs_result_now") {
            if needs_result_now.is_some() {
                errors.spanned(&attr, "`#[needs_result_now]` is given twice: remove one");
                continue;
            }
            if !matches!(attr.meta, Meta::Path(_)) {
                errors.spanned(&attr, "`#[needs_result_now]` takes no arguments");
            }
            needs_result_now = Some(attr);
        } else {
            kept.push(attr);
        }
    }
    f.attrs = kept;

    let ident = f.sig.ident.clone();
    let Some((_, name_lit)) = tool_attr else {
        if let Some(attr) = needs_result_now {
            errors.spanned(
                attr,
                format!(
                    "`#[needs_result_now]` marks a tool, and `{ident}` is not one: add `#[tool]` \
                     (and a doc comment) to make it a tool, or remove `#[needs_result_now]`"
                ),
            );
        }
        return None;
    };
    let before = errors.len();
    let sig = &f.sig;

    if sig.asyncness.is_none() {
        errors.spanned(
            sig.fn_token,
            format!(
                "tool `{ident}` must be `async fn`: a tool runs on the turn's task, so a \
                 blocking one would stall every call on this thread while it ran. Write \
                 `async fn {ident}` (the body needs no other change)"
            ),
        );
    }
    if let Some(c) = &sig.constness {
        errors.spanned(
            c,
            format!("tool `{ident}` cannot be `const fn`: write `async fn`"),
        );
    }
    if let Some(u) = &sig.unsafety {
        errors.spanned(
            u,
            format!("tool `{ident}` cannot be `unsafe`: the model calls it with any arguments"),
        );
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(
            abi,
            format!(
                "tool `{ident}` cannot have an ABI: remove `{}`",
                type_text(abi)
            ),
        );
    }
    if let Some(v) = &sig.variadic {
        errors.spanned(v, format!("tool `{ident}` cannot be variadic"));
    }
    let generic_message = format!(
        "tool `{ident}` cannot be generic: the model calls it with one JSON shape, fixed when the \
         tool is declared. Use concrete types"
    );
    let lifetimes_only = sig
        .generics
        .params
        .iter()
        .all(|p| matches!(p, syn::GenericParam::Lifetime(_)));
    if !sig.generics.params.is_empty() && lifetimes_only {
        errors.spanned(
            &sig.generics,
            format!(
                "tool `{ident}` declares lifetime parameters, but a tool needs none: it takes \
                 `&self` and an owned argument (the model's JSON is parsed into it). Remove `{}` \
                 and write `&self`",
                type_text(&sig.generics)
            ),
        );
    } else if !sig.generics.params.is_empty() {
        errors.spanned(&sig.generics, &generic_message);
    } else if let Some(w) = &sig.generics.where_clause {
        errors.spanned(w, &generic_message);
    }

    let mut inputs = sig.inputs.iter().peekable();
    match inputs.peek() {
        Some(FnArg::Receiver(r)) => {
            let plain_ref =
                r.colon_token.is_none() && r.reference.is_some() && r.mutability.is_none();
            let explicit_ref = r.colon_token.is_some()
                && matches!(&*r.ty, Type::Reference(t) if t.mutability.is_none() && is_self_type(&t.elem));
            if !(plain_ref || explicit_ref) {
                let how = if r.reference.as_ref().is_some() && r.mutability.is_some()
                    || matches!(&*r.ty, Type::Reference(t) if t.mutability.is_some())
                {
                    "`&mut self`: a brain's tools run concurrently with its other callbacks, so \
                     they take `&self` and keep state behind interior mutability (a `Mutex`, \
                     atomics)"
                } else if r.colon_token.is_none() {
                    "`self` by value, but the brain lives for the whole call"
                } else {
                    "a receiver other than `&self`"
                };
                errors.spanned(r, format!("tool `{ident}` takes {how}. Write `&self`"));
            }
            inputs.next();
        }
        Some(FnArg::Typed(first)) => {
            errors.spanned(
                first,
                format!(
                    "tool `{ident}` has no `self`: a tool is a method of the brain. Add `&self` \
                     as its first parameter"
                ),
            );
        }
        None => {
            errors.spanned(
                &sig.ident,
                format!(
                    "tool `{ident}` has no `self`: a tool is a method of the brain. Write \
                     `async fn {ident}(&self)`"
                ),
            );
        }
    }

    let params: Vec<&PatType> = inputs
        .filter_map(|a| match a {
            FnArg::Typed(p) => Some(p),
            FnArg::Receiver(_) => None,
        })
        .collect();
    for p in &params {
        if let Some(t) = impl_trait(&p.ty) {
            errors.spanned(t, &generic_message);
        }
    }
    let arg = match &params[..] {
        [] => None,
        [only] => Some((*only.ty).clone()),
        [..] => {
            let sessions: Vec<&&PatType> = params
                .iter()
                .filter(|p| looks_like_session(&p.ty))
                .collect();
            if let [session] = sessions[..] {
                errors.spanned(
                    session,
                    format!(
                        "tool `{ident}` takes the session as a parameter, but tools never do: \
                         remove `{}: {}` and call `self.session()` inside the tool",
                        type_text(&session.pat),
                        type_text(&session.ty)
                    ),
                );
                if params.len() == 2 {
                    params
                        .iter()
                        .find(|p| !looks_like_session(&p.ty))
                        .map(|p| (*p.ty).clone())
                } else {
                    None
                }
            } else {
                let extra: TokenStream = params[1..].iter().map(|p| p.to_token_stream()).collect();
                let fields: Vec<String> = params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let name = match &*p.pat {
                            Pat::Ident(pi) => pi.ident.unraw().to_string(),
                            _ => format!("arg{i}"),
                        };
                        format!("{name}: {}", type_text(&p.ty))
                    })
                    .collect();
                errors.spanned(
                    extra,
                    format!(
                        "tool `{ident}` takes {} arguments, but a tool takes at most one: a \
                         struct whose fields the model fills by name. Put them in one struct: \
                         `#[json_type] struct {}Args {{ {} }}`",
                        params.len(),
                        pascal_case(&ident.unraw().to_string()),
                        fields.join(", ")
                    ),
                );
                None
            }
        }
    };

    let description = match doc_text(&f.attrs) {
        Ok(Some(d)) => d,
        Ok(None) => {
            errors.spanned(
                &ident,
                format!(
                    "tool `{ident}` has no doc comment: the model reads it to decide when and \
                     how to call the tool. Write one above it: `/// What {ident} does, and when \
                     to use it.`"
                ),
            );
            String::new()
        }
        Err(e) => {
            errors.push(e);
            String::new()
        }
    };

    let name = match &name_lit {
        Some(lit) => {
            let name = lit.value();
            if !valid_function_name(&name) {
                errors.spanned(
                    lit,
                    format!(
                        "`{name}` is not a function name the providers accept: use letters, \
                         digits, `_`, `.` and `-`, at most 64, starting with a letter or `_` \
                         (`^[A-Za-z_][A-Za-z0-9_.-]{{0,63}}$`)"
                    ),
                );
            }
            name
        }
        None => {
            let name = ident.unraw().to_string();
            if !valid_function_name(&name) {
                errors.spanned(
                    &ident,
                    format!(
                        "`{name}` is not a function name the providers accept \
                         (`^[A-Za-z_][A-Za-z0-9_.-]{{0,63}}$`): name the tool with \
                         `#[tool(name = \"...\")]`"
                    ),
                );
            }
            name
        }
    };

    if ident.unraw() == "session" {
        errors.spanned(
            &ident,
            "a tool cannot be the method `session`: `#[brain]` gives the type \
             `self.session()` (the session serving a tool), and this method would hide it. \
             Rename the method and keep the tool's name with `#[tool(name = \"session\")]`",
        );
    }
    if errors.len() > before {
        return None;
    }
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => Some((**ty).clone()),
    };
    let name_at = name_lit.map_or_else(|| ident.to_token_stream(), |l| l.to_token_stream());
    let cfgs = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .cloned()
        .collect();
    Some(Tool {
        cfgs,
        ident,
        name,
        name_at,
        description,
        needs_result_now: needs_result_now.is_some(),
        arg,
        ret,
    })
}

fn is_self_type(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
}

/// `impl Trait` anywhere in a parameter type (an anonymous generic).
fn impl_trait(ty: &Type) -> Option<&Type> {
    match ty {
        Type::ImplTrait(_) => Some(ty),
        Type::Reference(r) => impl_trait(&r.elem),
        Type::Paren(p) => impl_trait(&p.elem),
        Type::Group(g) => impl_trait(&g.elem),
        Type::Slice(s) => impl_trait(&s.elem),
        Type::Array(a) => impl_trait(&a.elem),
        Type::Tuple(t) => t.elems.iter().find_map(impl_trait),
        Type::Path(p) => p.path.segments.iter().find_map(|s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
                syn::GenericArgument::Type(t) => impl_trait(t),
                _ => None,
            }),
            _ => None,
        }),
        _ => None,
    }
}

/// Wording only: among several parameters, the one spelled like a session handle.
fn looks_like_session(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => looks_like_session(&r.elem),
        Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Session"),
        _ => false,
    }
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

/// A compile-time check, on the argument's type (aliases included), that it is not a scalar, a
/// collection, an `Option`, a JSON value or the session.
fn arg_kind_check(tool: &Ident, ty: &Type) -> TokenStream {
    let shown = type_text(ty);
    let args_struct = format!("{}Args", pascal_case(&tool.unraw().to_string()));
    let scalar = format!(
        "tool `{tool}` takes `{shown}`, a scalar, but a tool's argument is one struct whose \
         fields the model fills by name. Put the value in a struct: `#[json_type] struct \
         {args_struct} {{ value: {shown} }}`"
    );
    let collection = format!(
        "tool `{tool}` takes `{shown}`, a collection, but a tool's argument is one struct whose \
         fields the model fills by name. Put it in a struct: `#[json_type] struct {args_struct} \
         {{ items: {shown} }}`"
    );
    let optional = format!(
        "tool `{tool}` takes `{shown}`, an `Option`, but a tool's argument is one struct: take \
         the struct itself and make its fields `Option`s (the model may leave those out)"
    );
    let any_json = format!(
        "tool `{tool}` takes `{shown}`, any JSON value, but a tool's argument is one struct with \
         a schema the model can follow: declare the fields in a `#[json_type]` struct"
    );
    let session = format!(
        "tool `{tool}` takes the session as a parameter, but tools never do: remove the \
         parameter and call `self.session()` inside the tool"
    );
    let not_struct = |what: &str| {
        format!(
            "tool `{tool}` takes `{shown}`, {what}, but a tool's argument is one struct whose \
             fields the model fills by name (a schema that is not an object would be left out \
             of every turn). Give it named fields, or wrap it: `#[json_type] struct \
             {args_struct} {{ value: {shown} }}`"
        )
    };
    let enumeration = not_struct("an enum (serde reads it as a string or a choice of shapes)");
    let unit = not_struct("a unit struct (serde reads it as `null`)");
    let tuple = not_struct("a tuple struct (serde reads it as an array)");
    let newtype = not_struct(
        "a struct around one value that is not a struct (serde reads a newtype or \
         `#[serde(transparent)]` struct as its field)",
    );
    quote_spanned! {ty.span()=>
        const _: () = {
            #[allow(unused_imports)]
            use ::voqalize::__private::{ArgProbeFallback as _, ArgShapeFallback as _};
            match ::voqalize::__private::ArgKind::either(
                ::voqalize::__private::ArgProbe::<#ty>::KIND,
                <#ty>::__VOQALIZE_ARG_KIND,
            ) {
                ::voqalize::__private::ArgKind::Scalar => ::core::panic!("{}", #scalar),
                ::voqalize::__private::ArgKind::Collection => ::core::panic!("{}", #collection),
                ::voqalize::__private::ArgKind::Optional => ::core::panic!("{}", #optional),
                ::voqalize::__private::ArgKind::AnyJson => ::core::panic!("{}", #any_json),
                ::voqalize::__private::ArgKind::Session => ::core::panic!("{}", #session),
                ::voqalize::__private::ArgKind::Enum => ::core::panic!("{}", #enumeration),
                ::voqalize::__private::ArgKind::UnitStruct => ::core::panic!("{}", #unit),
                ::voqalize::__private::ArgKind::TupleStruct => ::core::panic!("{}", #tuple),
                ::voqalize::__private::ArgKind::Newtype => ::core::panic!("{}", #newtype),
                ::voqalize::__private::ArgKind::Struct => {}
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(attr: &str, item: &str) -> String {
        expand(attr.parse().unwrap(), item.parse().unwrap()).to_string()
    }

    fn errors(out: &str) -> usize {
        out.matches("compile_error").count()
    }

    #[test]
    fn a_valid_block_expands_without_errors() {
        let out = expand_str(
            "",
            r#"impl<T: Send + Sync + 'static> Coach<T> where T: Clone {
                /// Show.
                #[tool]
                async fn show(&self, Section { name }: Section) -> String { name }
                /// Raw name.
                #[voqalize::tool]
                #[voqalize::needs_result_now]
                async fn r#type(self: &Self) {}
                /// With a lifetime on self.
                #[tool(name = "a.b-c")]
                async fn life(&self) -> u8 { 1 }
                fn helper(&self) {}
                const X: u8 = 1;
            }"#,
        );
        assert_eq!(errors(&out), 0, "{out}");
        assert!(out.contains("\"type\""), "{out}");
        assert!(out.contains("\"Coach::type\""), "{out}");
        assert!(out.contains("\"a.b-c\""), "{out}");
        assert!(!out.contains("# [tool"), "{out}");
        assert!(!out.contains("needs_result_now ]"), "{out}");
        // Generic impl: the argument `Section` names no generic, so it is still checked (this
        // assertion used to say the opposite: generic impls skipped the check entirely).
        assert!(out.contains("ArgProbe :: < Section >"), "{out}");
    }

    #[test]
    fn a_tool_method_named_session_and_lifetime_generics_get_accurate_errors() {
        let out = expand_str("", "impl S { /// d\n #[tool] async fn session(&self) {} }");
        assert_eq!(errors(&out), 1, "{out}");
        assert!(out.contains("would hide it"), "{out}");
        let out = expand_str(
            "",
            "impl S { /// d\n #[tool(name = \"session\")] async fn s(&self) {} }",
        );
        assert_eq!(errors(&out), 0, "{out}");
        let out = expand_str("", "impl S { /// d\n #[tool] async fn f<'a>(&'a self) {} }");
        assert!(out.contains("lifetime parameters"), "{out}");
        assert!(!out.contains("cannot be generic"), "{out}");
    }

    #[test]
    fn cfg_on_a_tool_goes_onto_its_entry_arm_and_check() {
        let out = expand_str(
            "",
            "impl S { /// d\n #[tool] #[cfg(feature = \"x\")] async fn f(&self, a: A) {} \
             /// e\n #[cfg(not(feature = \"x\"))] #[tool(name = \"f\")] async fn g(&self) {} }",
        );
        // No plain duplicate-name error: a cfg'd one, true only when both cfgs are.
        assert_eq!(errors(&out), 1, "{out}");
        assert!(
            out.contains("# [cfg (all (feature = \"x\" , not (feature = \"x\")))]"),
            "{out}"
        );
        assert_eq!(out.matches("# [cfg (feature = \"x\")]").count(), 4, "{out}");
    }

    #[test]
    fn arguments_naming_the_impl_generics_are_checked_at_run_time_only() {
        let out = expand_str(
            "",
            r#"impl<T: Send + Sync + 'static> Coach<T> {
                /// Generic argument.
                #[tool]
                async fn a(&self, args: Wrap<T>) {}
                /// Self is generic here.
                #[tool]
                async fn b(&self, args: Vec<Self>) {}
            }"#,
        );
        assert_eq!(errors(&out), 0, "{out}");
        assert!(!out.contains("ArgProbe"), "{out}");
        // In a plain impl, `Self` is spelled out so the check can run.
        let out = expand_str(
            "",
            "impl Coach { /// d\n #[tool] async fn a(&self, args: Vec<Self>) {} }",
        );
        assert!(out.contains("ArgProbe :: < Vec < Coach > >"), "{out}");
    }

    #[test]
    fn odd_inputs_give_errors_never_panics() {
        let cases: &[(&str, &str, usize)] = &[
            ("", "", 1),
            ("", "struct S;", 1),
            ("", "fn f() {}", 1),
            ("nonsense", "impl S {}", 1),
            ("visible", "impl S {}", 1),
            ("visible = ", "impl S {}", 1),
            ("visible = a, other = b", "impl S {}", 1),
            ("", "unsafe impl S {}", 1),
            ("", "impl Trait for S { #[tool] fn f() {} }", 1),
            (
                "",
                "impl S { /// d\n #[tool = \"x\"] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(name)] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(name = 5)] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(label = \"x\")] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] #[tool] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] #[needs_result_now(now)] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] #[needs_result_now] #[needs_result_now] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { #[doc = include_str!(\"x\")] #[tool] async fn f(&self) {} }",
                1,
            ),
            ("", "impl S { /// d\n #[tool] const fn f(&self) {} }", 2),
            (
                "",
                "impl S { /// d\n #[tool] async unsafe fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async extern \"C\" fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f<const N: usize>(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f<'a>(&'a self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self) where Self: Sized {} }",
                1,
            ),
            ("", "impl S { /// d\n #[tool] async fn f(x: A) {} }", 1),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: A, b: B, c: C) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: Vec<impl Send>) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, s: &voqalize::Session, a: A) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, s: &Session, t: Session, a: A) {} }",
                1,
            ),
            ("", "impl S { #[tool] const X: u8 = 1; }", 1),
            ("", "impl S { #[needs_result_now] type T = u8; }", 1),
            (
                "",
                "impl S { /// d\n #[tool(name = \"\")] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// a\n #[tool] async fn f(&self) {} /// b\n #[tool(name = \"f\")] async fn g(&self) {} }",
                1,
            ),
        ];
        for (attr, item, expected) in cases {
            let out = expand_str(attr, item);
            assert_eq!(errors(&out), *expected, "{attr:?} {item:?}\n{out}");
        }
    }
}

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
    let mut has_session = false;
    for item in &mut imp.items {
        match item {
            ImplItem::Fn(f) => {
                if f.sig.ident == "session" {
                    has_session = true;
                }
                if let Some(tool) = read_fn(f, &mut errors) {
                    let clash = tools.iter().find(|t| t.name == tool.name);
                    if let Some(first) = clash {
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
    let generic_impl = !imp.generics.params.is_empty();

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
                decls.push(quote!(#declare(#info)));
                let parse = quote_spanned!(ty.span()=> ::voqalize::__private::parse_args::<#ty>);
                if !generic_impl && !mentions_self(ty) {
                    checks.push(arg_kind_check(ident, ty));
                }
                quote! {
                    let __voqalize_args = #parse(__voqalize_arguments)?;
                    let __voqalize_out = Self::#ident(self, __voqalize_args).await;
                }
            }
            None => {
                decls.push(quote!(::voqalize::__private::declare_without_args(#info)));
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
        arms.push(quote!(#index => #future,));
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
                ::voqalize::__private::tool_table::<Self>(|| ::std::vec![#(#decls),*])
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
    if !sig.generics.params.is_empty() {
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

    if errors.len() > before {
        return None;
    }
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => Some((**ty).clone()),
    };
    let name_at = name_lit.map_or_else(|| ident.to_token_stream(), |l| l.to_token_stream());
    Some(Tool {
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

fn mentions_self(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "Self",
            proc_macro2::TokenTree::Group(g) => walk(g.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
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
    quote_spanned! {ty.span()=>
        const _: () = {
            #[allow(unused_imports)]
            use ::voqalize::__private::ArgProbeFallback as _;
            match ::voqalize::__private::ArgProbe::<#ty>::KIND {
                ::voqalize::__private::ArgKind::Scalar => ::core::panic!("{}", #scalar),
                ::voqalize::__private::ArgKind::Collection => ::core::panic!("{}", #collection),
                ::voqalize::__private::ArgKind::Optional => ::core::panic!("{}", #optional),
                ::voqalize::__private::ArgKind::AnyJson => ::core::panic!("{}", #any_json),
                ::voqalize::__private::ArgKind::Session => ::core::panic!("{}", #session),
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
        // Generic impl: no const argument check (it could not name `T`).
        assert!(!out.contains("ArgProbe"), "{out}");
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

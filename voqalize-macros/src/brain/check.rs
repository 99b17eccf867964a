//! Checks a tool's signature, doc comment and name. Each check is one small function that pushes
//! its errors into the collector and goes on, so a method's mistakes are reported together; one
//! `check()` at the end decides whether the tool is generated.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Attribute, FnArg, Ident, ItemImpl, Pat, PatType, Receiver, ReturnType, Signature, Type};

use super::parse::ToolFn;
use crate::attr::{CFG, SESSION_METHOD};
use crate::ctxt::Ctxt;
use crate::text::{doc_text, pascal_case, type_text, valid_function_name};
use crate::tool_attr::Policy;

/// A tool whose every check passed: what generation needs.
pub(super) struct Tool {
    pub(super) ident: Ident,
    /// The function name the model sees.
    pub(super) name: String,
    /// Where the name is written (the `name = "..."` literal, or the method's name).
    pub(super) name_at: TokenStream,
    pub(super) description: String,
    pub(super) needs_result_now: bool,
    pub(super) policy: Policy,
    pub(super) timeout_ms: Option<u64>,
    pub(super) filler: Option<String>,
    pub(super) arg: Option<Type>,
    pub(super) ret: Option<Type>,
    /// The method's `#[cfg(...)]` attributes, copied onto everything generated for it.
    pub(super) cfgs: Vec<Attribute>,
    /// `#[transition(...)]`: where the tool moves the call.
    pub(super) transition: Option<crate::tool_attr::TransitionAttr>,
}

/// `#[brain]` on a trait impl or an `unsafe impl`.
pub(super) fn check_impl_block(ctxt: &Ctxt, imp: &ItemImpl) {
    if let Some((_, path, _)) = &imp.trait_ {
        ctxt.error_spanned_by(
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
        ctxt.error_spanned_by(
            unsafety,
            "`#[brain]` goes on a safe impl block: remove `unsafe`",
        );
    }
}

/// Every check of one tool, in source order of what they look at.
pub(super) fn check_tool(tool: ToolFn) -> syn::Result<Tool> {
    let ctxt = Ctxt::new();
    let ToolFn {
        sig,
        attrs,
        name,
        needs_result_now,
        policy,
        timeout_ms,
        filler,
        transition,
        broken_transition: _,
    } = tool;
    let ident = sig.ident.clone();
    check_async(&ctxt, &sig);
    check_qualifiers(&ctxt, &sig);
    check_not_generic(&ctxt, &sig);
    let params = check_receiver(&ctxt, &sig);
    check_no_impl_trait(&ctxt, &ident, &params);
    let arg = check_one_argument(&ctxt, &ident, &params);
    let description = check_doc_comment(&ctxt, &ident, &attrs);
    let name_at = name
        .as_ref()
        .map_or_else(|| ident.to_token_stream(), ToTokens::to_token_stream);
    let name = check_tool_name(&ctxt, &ident, name.as_ref());
    check_not_named_session(&ctxt, &ident);
    ctxt.check()?;
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => Some((**ty).clone()),
    };
    let cfgs = attrs
        .into_iter()
        .filter(|a| a.path().is_ident(CFG))
        .collect();
    Ok(Tool {
        ident,
        name,
        name_at,
        description,
        needs_result_now,
        policy,
        timeout_ms,
        filler,
        arg,
        ret,
        cfgs,
        transition,
    })
}

fn check_async(ctxt: &Ctxt, sig: &Signature) {
    if sig.asyncness.is_none() {
        let ident = &sig.ident;
        ctxt.error_spanned_by(
            sig.fn_token,
            format!(
                "tool `{ident}` must be `async fn`: a tool runs on the turn's task, so a \
                 blocking one would stall every call on this thread while it ran. Write \
                 `async fn {ident}` (the body needs no other change)"
            ),
        );
    }
}

/// No `const`, `unsafe`, ABI or variadic parameter.
fn check_qualifiers(ctxt: &Ctxt, sig: &Signature) {
    let ident = &sig.ident;
    if let Some(c) = &sig.constness {
        ctxt.error_spanned_by(
            c,
            format!("tool `{ident}` cannot be `const fn`: write `async fn`"),
        );
    }
    if let Some(u) = &sig.unsafety {
        ctxt.error_spanned_by(
            u,
            format!("tool `{ident}` cannot be `unsafe`: the model calls it with any arguments"),
        );
    }
    if let Some(abi) = &sig.abi {
        ctxt.error_spanned_by(
            abi,
            format!(
                "tool `{ident}` cannot have an ABI: remove `{}`",
                type_text(abi)
            ),
        );
    }
    if let Some(v) = &sig.variadic {
        ctxt.error_spanned_by(v, format!("tool `{ident}` cannot be variadic"));
    }
}

fn generic_message(ident: &Ident) -> String {
    format!(
        "tool `{ident}` cannot be generic: the model calls it with one JSON shape, fixed when the \
         tool is declared. Use concrete types"
    )
}

/// No generic parameters or where clause (lifetimes get their own wording).
fn check_not_generic(ctxt: &Ctxt, sig: &Signature) {
    let ident = &sig.ident;
    let params = &sig.generics.params;
    let lifetimes_only = params
        .iter()
        .all(|p| matches!(p, syn::GenericParam::Lifetime(_)));
    if !params.is_empty() && lifetimes_only {
        ctxt.error_spanned_by(
            &sig.generics,
            format!(
                "tool `{ident}` declares lifetime parameters, but a tool needs none: it takes \
                 `&self` and an owned argument (the model's JSON is parsed into it). Remove `{}` \
                 and write `&self`",
                type_text(&sig.generics)
            ),
        );
    } else if !params.is_empty() {
        ctxt.error_spanned_by(&sig.generics, generic_message(ident));
    } else if let Some(w) = &sig.generics.where_clause {
        ctxt.error_spanned_by(w, generic_message(ident));
    }
}

/// The first parameter is `&self` (or `self: &Self`). Returns the parameters after it.
fn check_receiver<'a>(ctxt: &Ctxt, sig: &'a Signature) -> Vec<&'a PatType> {
    let ident = &sig.ident;
    let mut inputs = sig.inputs.iter().peekable();
    match inputs.peek() {
        Some(FnArg::Receiver(r)) => {
            if let Some(how) = receiver_mistake(r) {
                ctxt.error_spanned_by(r, format!("tool `{ident}` takes {how}. Write `&self`"));
            }
            inputs.next();
        }
        Some(FnArg::Typed(first)) => ctxt.error_spanned_by(
            first,
            format!(
                "tool `{ident}` has no `self`: a tool is a method of the brain. Add `&self` \
                 as its first parameter"
            ),
        ),
        None => ctxt.error_spanned_by(
            ident,
            format!(
                "tool `{ident}` has no `self`: a tool is a method of the brain. Write \
                 `async fn {ident}(&self)`"
            ),
        ),
    }
    inputs
        .filter_map(|a| match a {
            FnArg::Typed(p) => Some(p),
            FnArg::Receiver(_) => None,
        })
        .collect()
}

/// What is wrong with a receiver that is not `&self`, in words.
fn receiver_mistake(r: &Receiver) -> Option<&'static str> {
    let plain_ref = r.colon_token.is_none() && r.reference.is_some() && r.mutability.is_none();
    let explicit_ref = r.colon_token.is_some()
        && matches!(&*r.ty, Type::Reference(t) if t.mutability.is_none() && is_self_type(&t.elem));
    if plain_ref || explicit_ref {
        None
    } else if r.reference.is_some() && r.mutability.is_some()
        || matches!(&*r.ty, Type::Reference(t) if t.mutability.is_some())
    {
        Some(
            "`&mut self`: a brain's tools run concurrently with its other callbacks, so they \
             take `&self` and keep state behind interior mutability (a `Mutex`, atomics)",
        )
    } else if r.colon_token.is_none() {
        Some("`self` by value, but the brain lives for the whole call")
    } else {
        Some("a receiver other than `&self`")
    }
}

fn is_self_type(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
}

/// No `impl Trait` in a parameter type (an anonymous generic).
fn check_no_impl_trait(ctxt: &Ctxt, ident: &Ident, params: &[&PatType]) {
    for p in params {
        if let Some(t) = impl_trait(&p.ty) {
            ctxt.error_spanned_by(t, generic_message(ident));
        }
    }
}

/// `impl Trait` anywhere in a type.
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

/// At most one parameter after `self`, never the session. Returns the argument's type: the one
/// parameter, or the one left beside a session parameter (so its own checks still run).
fn check_one_argument(ctxt: &Ctxt, ident: &Ident, params: &[&PatType]) -> Option<Type> {
    match params {
        [] => None,
        [only] => owned_argument(ctxt, ident, &only.ty),
        [..] => {
            let sessions: Vec<&&PatType> = params
                .iter()
                .filter(|p| looks_like_session(&p.ty))
                .collect();
            if let [session] = sessions[..] {
                ctxt.error_spanned_by(
                    session,
                    format!(
                        "tool `{ident}` takes the session as a parameter, but tools never do: \
                         remove `{}: {}` and call `self.session()` inside the tool",
                        type_text(&session.pat),
                        type_text(&session.ty)
                    ),
                );
                let rest = params.iter().find(|p| !looks_like_session(&p.ty));
                rest.filter(|_| params.len() == 2)
                    .and_then(|p| owned_argument(ctxt, ident, &p.ty))
            } else {
                too_many_arguments(ctxt, ident, params);
                None
            }
        }
    }
}

/// The argument's type, unless it is a reference: the model's JSON is deserialised into an owned
/// value, which nothing would borrow from. A reference to the session is left to the type check,
/// which says what to do instead.
fn owned_argument(ctxt: &Ctxt, ident: &Ident, ty: &Type) -> Option<Type> {
    let Type::Reference(r) = ty else {
        return Some(ty.clone());
    };
    if looks_like_session(&r.elem) {
        return Some(ty.clone());
    }
    let owned = match &*r.elem {
        Type::Path(p) if p.qself.is_none() && p.path.is_ident("str") => "String".to_owned(),
        elem => type_text(elem),
    };
    ctxt.error_spanned_by(
        ty,
        format!(
            "tool `{ident}` takes `{}`, a reference, but a tool's argument is owned: it is \
             deserialised from the model's JSON into a value of its own. Take `{owned}`, not `{}`",
            type_text(ty),
            type_text(ty)
        ),
    );
    None
}

fn too_many_arguments(ctxt: &Ctxt, ident: &Ident, params: &[&PatType]) {
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
    ctxt.error_spanned_by(
        extra,
        format!(
            "tool `{ident}` takes {} arguments, but a tool takes at most one: a struct whose \
             fields the model fills by name. Put them in one struct: `#[json_type] struct {}Args \
             {{ {} }}`",
            params.len(),
            pascal_case(&ident.unraw().to_string()),
            fields.join(", ")
        ),
    );
}

/// Wording only: among several parameters, the one spelled like a session handle.
fn looks_like_session(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => looks_like_session(&r.elem),
        Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Session"),
        _ => false,
    }
}

/// A doc comment, written as text: the model reads it. Returns the description.
fn check_doc_comment(ctxt: &Ctxt, ident: &Ident, attrs: &[Attribute]) -> String {
    match doc_text(attrs) {
        Ok(Some(d)) => d,
        Ok(None) => {
            ctxt.error_spanned_by(
                ident,
                format!(
                    "tool `{ident}` has no doc comment: the model reads it to decide when and \
                     how to call the tool. Write one above it: `/// What {ident} does, and when \
                     to use it.`"
                ),
            );
            String::new()
        }
        Err(e) => {
            ctxt.syn_error(e);
            String::new()
        }
    }
}

/// A function name every provider accepts. Returns the name.
fn check_tool_name(ctxt: &Ctxt, ident: &Ident, lit: Option<&syn::LitStr>) -> String {
    match lit {
        Some(lit) => {
            let name = lit.value();
            if !valid_function_name(&name) {
                ctxt.error_spanned_by(
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
                ctxt.error_spanned_by(
                    ident,
                    format!(
                        "`{name}` is not a function name the providers accept \
                         (`^[A-Za-z_][A-Za-z0-9_.-]{{0,63}}$`): name the tool with \
                         `#[tool(name = \"...\")]`"
                    ),
                );
            }
            name
        }
    }
}

/// The method is not `session`: it would hide the generated `self.session()`.
fn check_not_named_session(ctxt: &Ctxt, ident: &Ident) {
    if ident.unraw() == SESSION_METHOD {
        ctxt.error_spanned_by(
            ident,
            "a tool cannot be the method `session`: `#[brain]` gives the type \
             `self.session()` (the session serving a tool), and this method would hide it. \
             Rename the method and keep the tool's name with `#[tool(name = \"session\")]`",
        );
    }
}

/// Whether `tool` may join `accepted`: `Ok(None)` when its name is new, `Ok(Some(first))` when
/// `first` has the same name under different `#[cfg]`s (allowed unless both are compiled in,
/// which only the compiler knows: see `generate::cfg_clash`), `Err` for a plain duplicate.
pub(super) fn check_duplicate_name<'a>(
    accepted: &'a [Tool],
    tool: &Tool,
) -> syn::Result<Option<&'a Tool>> {
    let Some(first) = accepted.iter().find(|t| t.name == tool.name) else {
        return Ok(None);
    };
    let cfg_text = |t: &Tool| -> Vec<String> {
        t.cfgs
            .iter()
            .map(|a| a.to_token_stream().to_string())
            .collect()
    };
    if (!first.cfgs.is_empty() || !tool.cfgs.is_empty()) && cfg_text(first) != cfg_text(tool) {
        return Ok(Some(first));
    }
    Err(syn::Error::new_spanned(
        &tool.name_at,
        format!(
            "two tools are named `{}` (`{}` and `{}`): the model could not tell them apart. \
             Give one another name with `#[tool(name = \"...\")]`",
            tool.name, first.ident, tool.ident
        ),
    ))
}

//! `#[derive(Action)]`: the wire name of a UI command, and its payload for `voqalize types`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Ident, LitStr};

use crate::attr::{self, ACTION};
use crate::ctxt::Ctxt;
use crate::text::snake_case;

pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let ctxt = Ctxt::new();
    let name = read(&ctxt, &input);
    match ctxt.check() {
        Ok(()) => generate(&input.ident, &name),
        Err(e) => {
            let errors = e.to_compile_error();
            let fallback = fallback(&input, &name);
            quote!(#errors #fallback)
        }
    }
}

/// Checks the type and reads its wire name.
fn read(ctxt: &Ctxt, input: &DeriveInput) -> String {
    super::check_not_generic(ctxt, input, "an action");
    if let Data::Union(u) = &input.data {
        ctxt.error_spanned_by(
            u.union_token,
            "an action is a struct or an enum that serde serialises",
        );
    }
    let mut name = None;
    for a in input.attrs.iter().filter(|a| a.path().is_ident(ACTION)) {
        attr::parse_name(ctxt, a, ACTION, &mut name);
    }
    check_wire_name(ctxt, name.as_ref());
    name.map_or_else(
        || snake_case(&input.ident.unraw().to_string()),
        |l| l.value(),
    )
}

/// A `name = "..."` the app can match on.
pub(super) fn check_wire_name(ctxt: &Ctxt, name: Option<&LitStr>) {
    if let Some(lit) = name
        && lit.value().is_empty()
    {
        ctxt.error_spanned_by(lit, "a wire name cannot be empty");
    }
}

fn generate(ident: &Ident, name: &str) -> TokenStream {
    let add = quote_spanned!(ident.span()=> ::voqalize::__private::action_payload::<#ident>);
    quote! {
        impl ::voqalize::actions::Action for #ident {
            const NAME: &'static str = #name;
        }

        impl ::voqalize::typescript::Payloads for #ident {
            fn payloads(out: &mut ::voqalize::typescript::PayloadCollector<'_>) {
                #add(out, #name);
            }
        }

        ::voqalize::__private::inventory::submit! {
            ::voqalize::__private::Discovered::action(
                &[#name],
                <#ident as ::voqalize::typescript::Payloads>::payloads,
            )
        }
    }
}

/// The impls emitted next to the errors. A generic type's `Action` impl requires `Serialize`
/// of itself, as the real impl would; a union gets none, as serde cannot serialise one.
fn fallback(input: &DeriveInput, name: &str) -> TokenStream {
    let payloads = super::payloads_stub(input);
    if matches!(input.data, Data::Union(_)) {
        return payloads;
    }
    let ident = &input.ident;
    let mut generics = input.generics.clone();
    if !generics.params.is_empty() {
        generics
            .make_where_clause()
            .predicates
            .push(syn::parse_quote!(Self: ::voqalize::__private::serde::Serialize));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        impl #impl_generics ::voqalize::actions::Action for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
        }

        #payloads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    fn name_of(file: &syn::File) -> Vec<String> {
        strings(const_value(trait_impl(file, "Action"), "NAME"))
    }

    #[test]
    fn action_names() {
        let file = parse_file(expand(quote!(
            struct OpenURL {
                url: String,
            }
        )));
        assert_eq!(compile_errors(&file), Vec::<String>::new());
        assert_eq!(name_of(&file), ["open_url"]);
        let payloads = &method(trait_impl(&file, "Payloads"), "payloads").block;
        let body: syn::Expr = syn::parse_quote!(#payloads);
        assert_eq!(strings(&body), ["open_url"]);
        let ty: syn::Type = syn::parse_quote!(OpenURL);
        assert_eq!(turbofish_types(&file, "action_payload"), [ty]);

        let file = parse_file(expand(quote!(
            #[action(name = "go")]
            enum Nav {
                Home,
            }
        )));
        assert_eq!(name_of(&file), ["go"]);
    }

    #[test]
    fn a_mistake_is_one_error_beside_a_fallback_impl() {
        for (bad, fallback_name) in [
            (
                quote!(
                    struct S<T>(T);
                ),
                Some("s"),
            ),
            (quote!(union U { a: u8 }), None),
            (
                quote!(
                    #[action(name = "")]
                    struct S;
                ),
                Some(""),
            ),
            (
                quote!(
                    #[action(title = "x")]
                    struct S;
                ),
                Some("s"),
            ),
            (
                quote!(
                    #[action(name = "a", name = "b")]
                    struct S;
                ),
                Some("a"),
            ),
        ] {
            let file = parse_file(expand(bad.clone()));
            assert_eq!(compile_errors(&file).len(), 1, "{bad}");
            // The fallback names no payload type: it cannot add an error of its own.
            assert_eq!(turbofish_types(&file, "action_payload"), [], "{bad}");
            trait_impl(&file, "Payloads");
            match fallback_name {
                Some(name) => assert_eq!(name_of(&file), [name], "{bad}"),
                None => assert!(
                    impls(&file)
                        .iter()
                        .all(|i| i.trait_.as_ref().is_none_or(|(_, p, _)| p
                            .segments
                            .last()
                            .is_some_and(|s| s.ident != "Action"))),
                    "{bad}"
                ),
            }
        }
    }
}

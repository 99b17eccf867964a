//! `#[derive(Action)]`, `#[derive(AppEvent)]`, `#[derive(Stages)]` and `#[json_type]`.
//!
//! A derive that finds a mistake emits its errors and a fallback impl: the trait is still
//! implemented (with the names it read and stub bodies), so each mistake is reported once, at
//! the derive, and not again at every use of the type.

pub(crate) mod action;
pub(crate) mod app_event;
pub(crate) mod json_type;
pub(crate) mod stages;

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use crate::ctxt::Ctxt;

/// The type has no generic parameters: its payload has one shape on the wire.
fn check_not_generic(ctxt: &Ctxt, input: &DeriveInput, what: &str) {
    if !input.generics.params.is_empty() {
        ctxt.error_spanned_by(
            &input.generics,
            format!(
                "{what} cannot be generic: its payload has one shape on the wire, and `voqalize \
                 types` writes that shape for the app"
            ),
        );
    }
}

/// `impl Payloads` with an empty body: the fallback of both derives. It names no payload type,
/// so it adds no error of its own.
fn payloads_stub(input: &DeriveInput) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        impl #impl_generics ::voqalize::typescript::Payloads for #ident #ty_generics #where_clause {
            fn payloads(_: &mut ::voqalize::typescript::PayloadCollector<'_>) {}
        }
    }
}

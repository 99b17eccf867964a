//! The payload structs and the `AppEvent` impl of checked events.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::{DeriveInput, Ident};

use super::Event;
use crate::serde_attr;

pub(super) fn app_event(ident: &Ident, events: &[Event<'_>]) -> TokenStream {
    let type_name = ident.unraw().to_string();
    let payloads = events.iter().map(payload_struct);
    let names = events.iter().map(|e| &e.name);
    let arms = events.iter().map(from_payload_arm);
    let schemas = events.iter().map(|e| {
        let Event { name, payload, .. } = e;
        quote!(::voqalize::__private::event_payload_schema::<#payload>(out, #name);)
    });
    quote! {
        const _: () = {
            #(#payloads)*

            impl ::voqalize::actions::AppEvent for #ident {
                const NAMES: &'static [&'static str] = &[#(#names),*];

                fn from_payload(
                    name: &str,
                    payload: ::voqalize::__private::serde_json::Value,
                ) -> ::std::result::Result<Self, ::voqalize::__private::serde_json::Error> {
                    match name {
                        #(#arms)*
                        _ => ::std::result::Result::Err(
                            ::voqalize::__private::unknown_event(#type_name, name),
                        ),
                    }
                }
            }

            impl ::voqalize::typescript::Payloads for #ident {
                fn payloads(out: &mut ::voqalize::typescript::PayloadCollector<'_>) {
                    #(#schemas)*
                }
            }

            ::voqalize::__private::inventory::submit! {
                ::voqalize::__private::Discovered::event(
                    <#ident as ::voqalize::actions::AppEvent>::NAMES,
                    <#ident as ::voqalize::typescript::Payloads>::payloads,
                )
            }
        };
    }
}

/// The struct serde reads the event's payload into: the event's fields with their serde,
/// schemars and doc attributes, refusing unknown fields.
fn payload_struct(event: &Event<'_>) -> TokenStream {
    let Event {
        payload,
        schema_name,
        rename_all,
        docs,
        fields,
        ..
    } = event;
    let fields = fields.iter().flatten().map(|f| {
        let attrs = f
            .attrs
            .iter()
            .filter(|a| serde_attr::kept_on_payload_field(a));
        let name = &f.ident;
        let ty = &f.ty;
        quote!(#(#attrs)* #name: #ty)
    });
    let rename_all = rename_all.as_ref().map(|r| quote!(, rename_all = #r));
    quote! {
        #[derive(
            ::voqalize::__private::serde::Deserialize,
            ::voqalize::__private::schemars::JsonSchema
        )]
        #[serde(
            crate = "::voqalize::__private::serde",
            deny_unknown_fields,
            rename = #schema_name
            #rename_all
        )]
        #[schemars(crate = "::voqalize::__private::schemars")]
        #[allow(dead_code, non_camel_case_types)]
        #(#docs)*
        struct #payload { #(#fields),* }
    }
}

/// `"name" => { read the payload; build the value }`.
fn from_payload_arm(event: &Event<'_>) -> TokenStream {
    let Event {
        name,
        payload,
        fields,
        variant,
        ..
    } = event;
    let path = match variant {
        Some(v) => quote!(Self::#v),
        None => quote!(Self),
    };
    let (bind, construct) = match fields {
        None => (
            quote!(let _: #payload = ::voqalize::__private::event_payload(payload)?;),
            path,
        ),
        Some(fields) => {
            let names: Vec<&Option<Ident>> = fields.iter().map(|f| &f.ident).collect();
            (
                quote!(let __voqalize_payload: #payload = ::voqalize::__private::event_payload(payload)?;),
                quote!(#path { #(#names: __voqalize_payload.#names),* }),
            )
        }
    };
    quote! {
        #name => {
            #bind
            ::std::result::Result::Ok(#construct)
        }
    }
}

/// The impls emitted next to the errors: no event names, and every payload refused as unknown.
pub(super) fn fallback(input: &DeriveInput) -> TokenStream {
    let ident = &input.ident;
    let type_name = ident.unraw().to_string();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let payloads = super::super::payloads_stub(input);
    quote! {
        impl #impl_generics ::voqalize::actions::AppEvent for #ident #ty_generics #where_clause {
            const NAMES: &'static [&'static str] = &[];

            fn from_payload(
                name: &str,
                _: ::voqalize::__private::serde_json::Value,
            ) -> ::std::result::Result<Self, ::voqalize::__private::serde_json::Error> {
                ::std::result::Result::Err(::voqalize::__private::unknown_event(#type_name, name))
            }
        }

        #payloads
    }
}

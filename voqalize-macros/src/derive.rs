//! `#[derive(Action)]`, `#[derive(AppEvent)]` and `#[json_type]`.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{Attribute, Data, DeriveInput, Fields, Ident, LitStr, Token};

use crate::util::{Errors, is_attr, snake_case};

/// Reads `#[helper(name = "...")]` attributes; errors for anything else.
fn name_override(attrs: &[Attribute], helper: &str, errors: &mut Errors) -> Option<LitStr> {
    let mut name = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident(helper)) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                let lit: LitStr = meta.value()?.parse()?;
                if name.is_some() {
                    return Err(meta.error("the name is given twice"));
                }
                if lit.value().is_empty() {
                    return Err(syn::Error::new_spanned(&lit, "a wire name cannot be empty"));
                }
                name = Some(lit);
                Ok(())
            } else {
                Err(meta.error(format!(
                    "unknown `#[{helper}]` option: the only one is `name = \"...\"`"
                )))
            }
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    name
}

fn check_plain_type(input: &DeriveInput, what: &str, errors: &mut Errors) {
    if !input.generics.params.is_empty() {
        errors.spanned(
            &input.generics,
            format!(
                "{what} cannot be generic: its payload has one shape on the wire, and `voqalize \
                 types` writes that shape for the app"
            ),
        );
    }
}

pub(crate) fn action(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Errors::default();
    check_plain_type(&input, "an action", &mut errors);
    if let Data::Union(u) = &input.data {
        errors.spanned(
            u.union_token,
            "an action is a struct or an enum that serde serialises",
        );
    }
    let ident = &input.ident;
    let name = name_override(&input.attrs, "action", &mut errors)
        .map_or_else(|| snake_case(&ident.unraw().to_string()), |l| l.value());
    if !errors.is_empty() {
        return errors.into_tokens();
    }
    let add = quote_spanned!(ident.span()=> ::voqalize::__private::action_payload::<#ident>);
    quote! {
        impl ::voqalize::actions::Action for #ident {
            const NAME: &'static str = #name;
        }

        impl ::voqalize::typescript::Payloads for #ident {
            fn __payloads(out: &mut ::voqalize::typescript::PayloadCollector<'_>) {
                #add(out, #name);
            }
        }
    }
}

/// A `rename_all` to copy from serde attributes: `key = "..."` or `key(deserialize = "...")`.
fn serde_rename_all(attrs: &[Attribute], key: &str) -> Option<LitStr> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(key) {
                if meta.input.peek(Token![=]) {
                    found = Some(meta.value()?.parse::<LitStr>()?);
                } else {
                    meta.parse_nested_meta(|inner| {
                        let lit: LitStr = inner.value()?.parse()?;
                        if inner.path.is_ident("deserialize") {
                            found = Some(lit);
                        }
                        Ok(())
                    })?;
                }
            } else {
                skip_meta_value(meta.input)?;
            }
            Ok(())
        });
    }
    found
}

fn skip_meta_value(input: ParseStream<'_>) -> syn::Result<()> {
    if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        input.parse::<syn::Expr>()?;
    } else if input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in input);
        content.parse::<TokenStream>()?;
    }
    Ok(())
}

/// Field attributes the payload struct keeps.
fn kept_attrs(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|a| {
        a.path().is_ident("serde") || a.path().is_ident("schemars") || a.path().is_ident("doc")
    })
}

struct Event {
    name: String,
    payload: Ident,
    construct: TokenStream,
    unit: bool,
}

pub(crate) fn app_event(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Errors::default();
    check_plain_type(&input, "an app event", &mut errors);
    let ident = &input.ident;
    let docs: Vec<&Attribute> = input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let mut payloads = Vec::new();
    let mut events: Vec<Event> = Vec::new();

    let mut payload_struct = |shadow: &Ident,
                              schema_name: String,
                              rename_all: Option<LitStr>,
                              docs: &[&Attribute],
                              fields: &Fields,
                              errors: &mut Errors|
     -> Option<TokenStream> {
        let named = match fields {
            Fields::Named(n) => Some(&n.named),
            Fields::Unit => None,
            Fields::Unnamed(u) => {
                errors.spanned(
                    u,
                    "an app event's payload is a JSON object: give its fields names \
                     (`Tapped { row: u32 }`)",
                );
                return None;
            }
        };
        let fields: Vec<TokenStream> = named
            .into_iter()
            .flatten()
            .map(|f| {
                let attrs = kept_attrs(&f.attrs);
                let name = &f.ident;
                let ty = &f.ty;
                quote!(#(#attrs)* #name: #ty)
            })
            .collect();
        let rename_all = rename_all.map(|r| quote!(, rename_all = #r));
        payloads.push(quote! {
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
            struct #shadow { #(#fields),* }
        });
        let names: Vec<&Option<Ident>> = named.into_iter().flatten().map(|f| &f.ident).collect();
        Some(quote!({ #(#names: __voqalize_payload.#names),* }))
    };

    match &input.data {
        Data::Struct(s) => {
            let lit = name_override(&input.attrs, "app_event", &mut errors);
            let name = lit
                .as_ref()
                .map_or_else(|| snake_case(&ident.unraw().to_string()), LitStr::value);
            let shadow = format_ident!("__VoqalizePayload_{}", ident.unraw());
            let rename_all = serde_rename_all(&input.attrs, "rename_all");
            if let Some(fields) = payload_struct(
                &shadow,
                ident.unraw().to_string(),
                rename_all,
                &docs,
                &s.fields,
                &mut errors,
            ) {
                let unit = matches!(s.fields, Fields::Unit);
                let construct = if unit {
                    quote!(Self)
                } else {
                    quote!(Self #fields)
                };
                events.push(Event {
                    name,
                    payload: shadow,
                    construct,
                    unit,
                });
            }
        }
        Data::Enum(e) => {
            if let Some(attr) = input.attrs.iter().find(|a| is_attr(a, "app_event")) {
                errors.spanned(
                    attr,
                    "on an enum, each variant is one event: name a variant with \
                     `#[app_event(name = \"...\")]` on the variant",
                );
            }
            if e.variants.is_empty() {
                errors.push(syn::Error::new(
                    e.brace_token.span.join(),
                    "an app event enum needs a variant per event",
                ));
            }
            let fields_rename = serde_rename_all(&input.attrs, "rename_all_fields");
            for v in &e.variants {
                let lit = name_override(&v.attrs, "app_event", &mut errors);
                let name = lit
                    .as_ref()
                    .map_or_else(|| snake_case(&v.ident.unraw().to_string()), LitStr::value);
                let name_at = lit
                    .as_ref()
                    .map_or_else(|| v.ident.to_token_stream(), ToTokens::to_token_stream);
                if events.iter().any(|ev| ev.name == name) {
                    errors.spanned(
                        &name_at,
                        format!(
                            "two events are named `{name}`: the brain could not tell them apart. \
                             Name one with `#[app_event(name = \"...\")]`"
                        ),
                    );
                    continue;
                }
                let shadow =
                    format_ident!("__VoqalizePayload_{}_{}", ident.unraw(), v.ident.unraw());
                let rename_all =
                    serde_rename_all(&v.attrs, "rename_all").or_else(|| fields_rename.clone());
                let variant_docs: Vec<&Attribute> = v
                    .attrs
                    .iter()
                    .filter(|a| a.path().is_ident("doc"))
                    .collect();
                let schema_name = format!("{}{}", ident.unraw(), v.ident.unraw());
                if let Some(fields) = payload_struct(
                    &shadow,
                    schema_name,
                    rename_all,
                    &variant_docs,
                    &v.fields,
                    &mut errors,
                ) {
                    let vi = &v.ident;
                    let unit = matches!(v.fields, Fields::Unit);
                    let construct = if unit {
                        quote!(Self::#vi)
                    } else {
                        quote!(Self::#vi #fields)
                    };
                    events.push(Event {
                        name,
                        payload: shadow,
                        construct,
                        unit,
                    });
                }
            }
        }
        Data::Union(u) => {
            errors.spanned(
                u.union_token,
                "an app event is a struct (one event) or an enum (one event per variant)",
            );
        }
    }
    if !errors.is_empty() {
        return errors.into_tokens();
    }

    let type_name = ident.unraw().to_string();
    let names: Vec<&String> = events.iter().map(|e| &e.name).collect();
    let arms = events.iter().map(|e| {
        let Event {
            name,
            payload,
            construct,
            unit,
            ..
        } = e;
        let bind = if *unit {
            quote!(let _: #payload = ::voqalize::__private::event_payload(payload)?;)
        } else {
            quote!(let __voqalize_payload: #payload = ::voqalize::__private::event_payload(payload)?;)
        };
        quote! {
            #name => {
                #bind
                ::std::result::Result::Ok(#construct)
            }
        }
    });
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
                fn __payloads(out: &mut ::voqalize::typescript::PayloadCollector<'_>) {
                    #(#schemas)*
                }
            }
        };
    }
}

pub(crate) fn json_type(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut serialize = false;
    let mut deserialize = false;
    let mut schema = false;
    if attr.is_empty() {
        (serialize, deserialize, schema) = (true, true, true);
    } else {
        let parser = syn::punctuated::Punctuated::<Ident, Token![,]>::parse_terminated;
        match syn::parse::Parser::parse2(parser, attr) {
            Ok(list) => {
                for i in list {
                    match i.to_string().as_str() {
                        "Serialize" => serialize = true,
                        "Deserialize" => deserialize = true,
                        "JsonSchema" => schema = true,
                        _ => errors.spanned(
                            &i,
                            "`#[json_type]` derives `Serialize`, `Deserialize` and `JsonSchema`; \
                             list a subset of those, or none for all three",
                        ),
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    let shape = match syn::parse2::<DeriveInput>(item.clone()) {
        Ok(input) => arg_shape(&input),
        Err(e) => {
            errors.push(syn::Error::new(
                e.span(),
                "`#[json_type]` goes on a struct or an enum",
            ));
            None
        }
    };
    let mut derives = Vec::new();
    if serialize {
        derives.push(quote!(::voqalize::__private::serde::Serialize));
    }
    if deserialize {
        derives.push(quote!(::voqalize::__private::serde::Deserialize));
    }
    if schema {
        derives.push(quote!(::voqalize::__private::schemars::JsonSchema));
    }
    let serde_crate = (serialize || deserialize)
        .then(|| quote!(#[serde(crate = "::voqalize::__private::serde")]));
    let schemars_crate =
        schema.then(|| quote!(#[schemars(crate = "::voqalize::__private::schemars")]));
    let errors = errors.into_tokens();
    quote! {
        #[derive(#(#derives),*)]
        #serde_crate
        #schemars_crate
        #item
        #shape
        #errors
    }
}

/// What serde reads a type as, for `#[brain]`'s compile-time argument check: an inherent
/// `__VOQALIZE_ARG_KIND` constant (it shadows the `ArgShapeFallback` one). Nothing for a generic
/// type or one whose serde or schemars shape comes from elsewhere (`from`, `into`, `with`,
/// `remote`...): those are checked at run time.
fn arg_shape(input: &DeriveInput) -> Option<TokenStream> {
    if !input.generics.params.is_empty() {
        return None;
    }
    let mut transparent = false;
    for attr in &input.attrs {
        if !(is_attr(attr, "serde") || is_attr(attr, "schemars")) {
            continue;
        }
        let mut elsewhere = false;
        let _ = attr.parse_nested_meta(|meta| {
            let key = meta.path.get_ident().map(ToString::to_string);
            match key.as_deref() {
                Some("transparent") => transparent = true,
                Some("from" | "try_from" | "into" | "remote" | "with" | "schema_with") => {
                    elsewhere = true;
                }
                _ => {}
            }
            if meta.input.peek(Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|inner| {
                    if inner.input.peek(Token![=]) {
                        let _: syn::Expr = inner.value()?.parse()?;
                    }
                    Ok(())
                });
            }
            Ok(())
        });
        if elsewhere {
            return None;
        }
    }
    let kind_of = |ty: &syn::Type| {
        quote! {{
            #[allow(unused_imports)]
            use ::voqalize::__private::{ArgProbeFallback as _, ArgShapeFallback as _};
            ::voqalize::__private::ArgKind::wrapping(::voqalize::__private::ArgKind::either(
                ::voqalize::__private::ArgProbe::<#ty>::KIND,
                <#ty>::__VOQALIZE_ARG_KIND,
            ))
        }}
    };
    let kind = match &input.data {
        Data::Enum(_) => quote!(::voqalize::__private::ArgKind::Enum),
        Data::Union(_) => return None,
        Data::Struct(s) => {
            let kept: Vec<&syn::Field> = s
                .fields
                .iter()
                .filter(|f| !f.attrs.iter().any(skipped))
                .collect();
            match (&s.fields, &kept[..]) {
                (Fields::Unit, _) => quote!(::voqalize::__private::ArgKind::UnitStruct),
                (Fields::Named(_), [only]) if transparent => kind_of(&only.ty),
                (Fields::Named(_), _) => return None,
                (Fields::Unnamed(u), [only]) if u.unnamed.len() == 1 || transparent => {
                    kind_of(&only.ty)
                }
                (Fields::Unnamed(_), _) => quote!(::voqalize::__private::ArgKind::TupleStruct),
            }
        }
    };
    let ident = &input.ident;
    Some(quote! {
        impl #ident {
            #[doc(hidden)]
            #[allow(dead_code, non_upper_case_globals)]
            pub const __VOQALIZE_ARG_KIND: ::voqalize::__private::ArgKind = #kind;
        }
    })
}

/// `#[serde(skip)]` or `#[serde(skip_deserializing)]` on a field.
fn skipped(attr: &Attribute) -> bool {
    if !is_attr(attr, "serde") {
        return false;
    }
    let mut skip = false;
    let _ = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("skip") || meta.path.is_ident("skip_deserializing") {
            skip = true;
        }
        if meta.input.peek(Token![=]) {
            let _: syn::Expr = meta.value()?.parse()?;
        }
        Ok(())
    });
    skip
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(out: &TokenStream) -> usize {
        out.to_string().matches("compile_error").count()
    }

    #[test]
    fn action_names_and_errors() {
        let out = action(quote!(
            struct OpenURL {
                url: String,
            }
        ));
        assert!(out.to_string().contains("\"open_url\""), "{out}");
        let out = action(quote!(
            #[action(name = "go")]
            enum Nav {
                Home,
            }
        ));
        assert!(out.to_string().contains("\"go\""), "{out}");
        for bad in [
            quote!(
                struct S<T>(T);
            ),
            quote!(union U { a: u8 }),
            quote!(
                #[action(name = "")]
                struct S;
            ),
            quote!(
                #[action(title = "x")]
                struct S;
            ),
            quote!(
                #[action(name = "a", name = "b")]
                struct S;
            ),
        ] {
            assert!(errors(&action(bad.clone())) >= 1, "{bad}");
        }
    }

    #[test]
    fn app_events() {
        let out = app_event(quote! {
            /// Events.
            #[serde(rename_all_fields = "camelCase")]
            enum Ui {
                /// Tapped.
                RowTapped { #[serde(default)] row_id: u32 },
                #[app_event(name = "gone")]
                #[serde(rename_all = "UPPERCASE")]
                Closed,
            }
        })
        .to_string();
        assert_eq!(out.matches("compile_error").count(), 0, "{out}");
        assert!(out.contains("\"row_tapped\" , \"gone\""), "{out}");
        assert!(out.contains("rename_all = \"camelCase\""), "{out}");
        assert!(out.contains("rename_all = \"UPPERCASE\""), "{out}");
        assert!(out.contains("deny_unknown_fields"), "{out}");
        assert!(out.contains("rename = \"UiRowTapped\""), "{out}");

        let out = app_event(quote!(
            #[serde(rename_all(deserialize = "kebab-case"))]
            struct Ping {
                a_b: u8,
            }
        ));
        assert!(
            out.to_string().contains("rename_all = \"kebab-case\""),
            "{out}"
        );
        assert!(out.to_string().contains("\"ping\""), "{out}");

        for (bad, n) in [
            (
                quote!(
                    enum E {}
                ),
                1,
            ),
            (
                quote!(
                    enum E {
                        A(u8),
                        B(u8, u8),
                    }
                ),
                2,
            ),
            (
                quote!(
                    struct S(u8);
                ),
                1,
            ),
            (
                quote!(
                    struct S<T> {
                        t: T,
                    }
                ),
                1,
            ),
            (quote!(union U { a: u8 }), 1),
            (
                quote!(
                    #[app_event(name = "x")]
                    enum E {
                        A,
                    }
                ),
                1,
            ),
            (
                quote!(
                    enum E {
                        A,
                        #[app_event(name = "a")]
                        B,
                        C {
                            x: u8,
                        },
                    }
                ),
                1,
            ),
        ] {
            assert_eq!(errors(&app_event(bad.clone())), n, "{bad}");
        }
    }

    #[test]
    fn json_type_picks_derives() {
        let all = json_type(
            TokenStream::new(),
            quote!(
                struct S;
            ),
        )
        .to_string();
        assert!(
            all.contains("Serialize") && all.contains("Deserialize") && all.contains("JsonSchema")
        );
        assert!(
            all.contains("serde (crate") && all.contains("schemars (crate"),
            "{all}"
        );
        let schema = json_type(
            quote!(JsonSchema),
            quote!(
                struct S;
            ),
        )
        .to_string();
        assert!(!schema.contains("serde (crate"), "{schema}");
        assert!(
            errors(&json_type(
                quote!(Debug),
                quote!(
                    struct S;
                )
            )) == 1
        );
        assert!(
            errors(&json_type(
                TokenStream::new(),
                quote!(
                    fn f() {}
                )
            )) == 1
        );
    }
}

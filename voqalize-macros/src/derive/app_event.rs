//! `#[derive(AppEvent)]`: reads and checks the events of a struct (one event) or an enum (one per
//! variant); `generate` writes a payload struct per event and the `AppEvent` impl.

mod generate;

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote};
use syn::ext::IdentExt;
use syn::{Attribute, Data, DataEnum, DeriveInput, Field, Fields, Ident, LitStr, Variant};

use crate::attr::{self, APP_EVENT, DOC, is_attr};
use crate::ctxt::Ctxt;
use crate::serde_attr;
use crate::text::snake_case;

/// One event, checked.
struct Event<'a> {
    /// The wire name.
    name: String,
    /// The generated payload struct.
    payload: Ident,
    /// The payload's schema title.
    schema_name: String,
    /// `rename_all` for the payload's fields, from serde's attributes.
    rename_all: Option<LitStr>,
    docs: Vec<&'a Attribute>,
    /// The named fields; `None` for a unit struct or variant.
    fields: Option<Vec<&'a Field>>,
    /// The variant, for an enum.
    variant: Option<&'a Ident>,
}

pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let ctxt = Ctxt::new();
    let events = read_events(&ctxt, &input);
    match ctxt.check() {
        Ok(()) => generate::app_event(&input.ident, &events),
        Err(e) => {
            let errors = e.to_compile_error();
            let fallback = generate::fallback(&input);
            quote!(#errors #fallback)
        }
    }
}

fn read_events<'a>(ctxt: &Ctxt, input: &'a DeriveInput) -> Vec<Event<'a>> {
    super::check_not_generic(ctxt, input, "an app event");
    match &input.data {
        Data::Struct(s) => read_struct(ctxt, input, &s.fields).into_iter().collect(),
        Data::Enum(e) => read_enum(ctxt, input, e),
        Data::Union(u) => {
            ctxt.error_spanned_by(
                u.union_token,
                "an app event is a struct (one event) or an enum (one event per variant)",
            );
            Vec::new()
        }
    }
}

fn read_struct<'a>(ctxt: &Ctxt, input: &'a DeriveInput, fields: &'a Fields) -> Option<Event<'a>> {
    let ident = &input.ident;
    let lit = event_name(ctxt, &input.attrs);
    let fields = check_named_fields(fields)
        .map_err(|e| ctxt.syn_error(e))
        .ok()?;
    Some(Event {
        name: lit.map_or_else(|| snake_case(&ident.unraw().to_string()), |l| l.value()),
        payload: format_ident!("__VoqalizePayload_{}", ident.unraw()),
        schema_name: ident.unraw().to_string(),
        rename_all: serde_attr::rename_all(&input.attrs, "rename_all"),
        docs: docs(&input.attrs),
        fields,
        variant: None,
    })
}

fn read_enum<'a>(ctxt: &Ctxt, input: &'a DeriveInput, data: &'a DataEnum) -> Vec<Event<'a>> {
    if let Some(attr) = input.attrs.iter().find(|a| is_attr(a, APP_EVENT)) {
        ctxt.error_spanned_by(
            attr,
            "on an enum, each variant is one event: name a variant with \
             `#[app_event(name = \"...\")]` on the variant",
        );
    }
    if data.variants.is_empty() {
        ctxt.syn_error(syn::Error::new(
            data.brace_token.span.join(),
            "an app event enum needs a variant per event",
        ));
    }
    let fields_rename = serde_attr::rename_all(&input.attrs, "rename_all_fields");
    let mut events: Vec<Event<'a>> = Vec::new();
    for v in &data.variants {
        let lit = event_name(ctxt, &v.attrs);
        let name = lit
            .as_ref()
            .map_or_else(|| snake_case(&v.ident.unraw().to_string()), LitStr::value);
        if let Err(e) = check_duplicate_event(&events, &name, lit.as_ref(), v) {
            ctxt.syn_error(e);
            continue;
        }
        let fields = match check_named_fields(&v.fields) {
            Ok(fields) => fields,
            Err(e) => {
                ctxt.syn_error(e);
                continue;
            }
        };
        events.push(Event {
            name,
            payload: format_ident!(
                "__VoqalizePayload_{}_{}",
                input.ident.unraw(),
                v.ident.unraw()
            ),
            schema_name: format!("{}{}", input.ident.unraw(), v.ident.unraw()),
            rename_all: serde_attr::rename_all(&v.attrs, "rename_all")
                .or_else(|| fields_rename.clone()),
            docs: docs(&v.attrs),
            fields,
            variant: Some(&v.ident),
        });
    }
    events
}

/// `#[app_event(name = "...")]` on a struct or a variant.
fn event_name(ctxt: &Ctxt, attrs: &[Attribute]) -> Option<LitStr> {
    let mut name = None;
    for a in attrs.iter().filter(|a| a.path().is_ident(APP_EVENT)) {
        attr::parse_name(ctxt, a, APP_EVENT, &mut name);
    }
    super::action::check_wire_name(ctxt, name.as_ref());
    name
}

/// No two variants answer to one name.
fn check_duplicate_event(
    events: &[Event<'_>],
    name: &str,
    lit: Option<&LitStr>,
    variant: &Variant,
) -> syn::Result<()> {
    if events.iter().all(|ev| ev.name != name) {
        return Ok(());
    }
    let at = lit.map_or_else(
        || variant.ident.to_token_stream(),
        ToTokens::to_token_stream,
    );
    Err(syn::Error::new_spanned(
        at,
        format!(
            "two events are named `{name}`: the brain could not tell them apart. Name one with \
             `#[app_event(name = \"...\")]`"
        ),
    ))
}

/// A payload is a JSON object: named fields (returned), or none (`Ok(None)`).
fn check_named_fields(fields: &Fields) -> syn::Result<Option<Vec<&Field>>> {
    match fields {
        Fields::Named(n) => Ok(Some(n.named.iter().collect())),
        Fields::Unit => Ok(None),
        Fields::Unnamed(u) => Err(syn::Error::new_spanned(
            u,
            "an app event's payload is a JSON object: give its fields names \
             (`Tapped { row: u32 }`)",
        )),
    }
}

fn docs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| a.path().is_ident(DOC)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    fn payload<'a>(file: &'a syn::File, name: &str) -> &'a syn::ItemStruct {
        structs(file)
            .into_iter()
            .find(|s| s.ident == name)
            .unwrap_or_else(|| panic!("no payload struct {name}"))
    }

    fn serde_value(s: &syn::ItemStruct, key: &str) -> Option<String> {
        attr_keys(&s.attrs, "serde")
            .into_iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v)
    }

    #[test]
    fn app_events() {
        let file = parse_file(expand(quote! {
            /// Events.
            #[serde(rename_all_fields = "camelCase")]
            enum Ui {
                /// Tapped.
                RowTapped { #[serde(default)] row_id: u32 },
                #[app_event(name = "gone")]
                #[serde(rename_all = "UPPERCASE")]
                Closed,
            }
        }));
        assert_eq!(compile_errors(&file), Vec::<String>::new());
        let app_event = trait_impl(&file, "AppEvent");
        assert_eq!(
            strings(const_value(app_event, "NAMES")),
            ["row_tapped", "gone"]
        );
        let arms = string_arms(first_match(method(app_event, "from_payload")));
        assert_eq!(arms, ["row_tapped", "gone"]);

        let tapped = payload(&file, "__VoqalizePayload_Ui_RowTapped");
        assert_eq!(
            serde_value(tapped, "rename_all").as_deref(),
            Some("camelCase")
        );
        assert_eq!(
            serde_value(tapped, "rename").as_deref(),
            Some("UiRowTapped")
        );
        assert!(
            attr_keys(&tapped.attrs, "serde").contains(&("deny_unknown_fields".to_owned(), None))
        );
        let field = tapped.fields.iter().next().map(|f| attr_paths(&f.attrs));
        assert_eq!(field, Some(vec!["serde".to_owned()]));
        let closed = payload(&file, "__VoqalizePayload_Ui_Closed");
        assert_eq!(
            serde_value(closed, "rename_all").as_deref(),
            Some("UPPERCASE")
        );

        let file = parse_file(expand(quote!(
            #[serde(rename_all(deserialize = "kebab-case"))]
            struct Ping {
                a_b: u8,
            }
        )));
        let ping = payload(&file, "__VoqalizePayload_Ping");
        assert_eq!(
            serde_value(ping, "rename_all").as_deref(),
            Some("kebab-case")
        );
        let names = const_value(trait_impl(&file, "AppEvent"), "NAMES");
        assert_eq!(strings(names), ["ping"]);
    }

    #[test]
    fn mistakes_are_reported_beside_a_fallback_impl() {
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
            let file = parse_file(expand(bad.clone()));
            assert_eq!(compile_errors(&file).len(), n, "{bad}");
            let fallback = trait_impl(&file, "AppEvent");
            assert_eq!(strings(const_value(fallback, "NAMES")), [""; 0], "{bad}");
            assert_eq!(structs(&file).len(), 0, "{bad}");
            trait_impl(&file, "Payloads");
        }
    }
}

//! `#[json_type]`: serde's and schemars' derives through voqalize's re-exports, plus what serde
//! reads the type as, for `#[brain]`'s compile-time argument check.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Ident, Token};

use crate::ctxt::Ctxt;
use crate::serde_attr::{self, Shape};

/// The derives `#[json_type(...)]` may list.
const SERIALIZE: &str = "Serialize";
const DESERIALIZE: &str = "Deserialize";
const JSON_SCHEMA: &str = "JsonSchema";

/// Which derives `#[json_type(...)]` asks for.
struct Derives {
    serialize: bool,
    deserialize: bool,
    schema: bool,
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let ctxt = Ctxt::new();
    let derives = parse_derives(&ctxt, attr);
    let (shape, integers) = match syn::parse2::<DeriveInput>(item.clone()) {
        Ok(input) => (arg_shape(&input), integer_enum(&ctxt, &input)),
        Err(e) => {
            ctxt.syn_error(syn::Error::new(
                e.span(),
                "`#[json_type]` goes on a struct or an enum",
            ));
            (None, None)
        }
    };
    if let Some(integers) = integers {
        let impls = integer_impls(&integers, &derives);
        let errors = ctxt.check().err().map(|e| e.to_compile_error());
        return quote! {
            #item
            #impls
            #shape
            #errors
        };
    }
    let Derives {
        serialize,
        deserialize,
        schema,
    } = derives;
    let mut paths = Vec::new();
    if serialize {
        paths.push(quote!(::voqalize::__private::serde::Serialize));
    }
    if deserialize {
        paths.push(quote!(::voqalize::__private::serde::Deserialize));
    }
    if schema {
        paths.push(quote!(::voqalize::__private::schemars::JsonSchema));
    }
    let serde_crate = (serialize || deserialize)
        .then(|| quote!(#[serde(crate = "::voqalize::__private::serde")]));
    let schemars_crate =
        schema.then(|| quote!(#[schemars(crate = "::voqalize::__private::schemars")]));
    // The item is emitted whatever the errors, so the rest of the crate still sees it.
    let errors = ctxt.check().err().map(|e| e.to_compile_error());
    quote! {
        #[derive(#(#paths),*)]
        #serde_crate
        #schemars_crate
        #item
        #shape
        #errors
    }
}

/// An enum of unit variants that each have an integer value (`Low = 1`): its name and its
/// variants with their values. `None` for any other type (serde's derives serve it).
struct IntegerEnum {
    ident: Ident,
    variants: Vec<(Ident, i64)>,
}

/// Whether `input` is an integer enum: every variant a unit with a literal integer value. An
/// enum where some variants have a value and others do not, or a value that is not a literal,
/// is an error naming the fix.
fn integer_enum(ctxt: &Ctxt, input: &DeriveInput) -> Option<IntegerEnum> {
    let Data::Enum(e) = &input.data else {
        return None;
    };
    if !e.variants.iter().any(|v| v.discriminant.is_some()) {
        return None;
    }
    let mut variants = Vec::new();
    for v in &e.variants {
        let value = match (&v.fields, &v.discriminant) {
            (Fields::Unit, Some((_, expr))) => literal_integer(expr),
            _ => None,
        };
        match value {
            Some(n) => variants.push((v.ident.clone(), n)),
            None => {
                ctxt.error_spanned_by(
                    v,
                    "an integer enum in `#[json_type]` gives every variant an integer literal \
                     value (`Low = 1`), and has only unit variants: the JSON is the number",
                );
                return None;
            }
        }
    }
    Some(IntegerEnum {
        ident: input.ident.clone(),
        variants,
    })
}

/// `1`, `-2`: the value of an integer literal, possibly negated.
fn literal_integer(expr: &syn::Expr) -> Option<i64> {
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse().ok(),
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => literal_integer(expr).map(|n: i64| -n),
        syn::Expr::Group(g) => literal_integer(&g.expr),
        syn::Expr::Paren(p) => literal_integer(&p.expr),
        _ => None,
    }
}

/// An integer enum's JSON: the number of each variant, serialised, read back (any other number
/// is an error naming the ones allowed) and declared as `{"type": "integer", "enum": [..]}`.
fn integer_impls(e: &IntegerEnum, derives: &Derives) -> TokenStream {
    let ident = &e.ident;
    let name = ident.to_string();
    let (names, values): (Vec<&Ident>, Vec<i64>) = e.variants.iter().map(|(v, n)| (v, *n)).unzip();
    let allowed = values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let serde = quote!(::voqalize::__private::serde);
    let serialize = derives.serialize.then(|| {
        quote! {
            impl #serde::Serialize for #ident {
                fn serialize<S: #serde::Serializer>(&self, s: S) -> ::core::result::Result<S::Ok, S::Error> {
                    s.serialize_i64(match self { #(Self::#names => #values,)* })
                }
            }
        }
    });
    let deserialize = derives.deserialize.then(|| {
        quote! {
            impl<'de> #serde::Deserialize<'de> for #ident {
                fn deserialize<D: #serde::Deserializer<'de>>(d: D) -> ::core::result::Result<Self, D::Error> {
                    let n = <i64 as #serde::Deserialize>::deserialize(d)?;
                    match n {
                        #(#values => ::core::result::Result::Ok(Self::#names),)*
                        other => ::core::result::Result::Err(<D::Error as #serde::de::Error>::custom(
                            ::std::format!("{other} is not one of {}", #allowed),
                        )),
                    }
                }
            }
        }
    });
    let schema = derives.schema.then(|| {
        let schemars = quote!(::voqalize::__private::schemars);
        quote! {
            impl #schemars::JsonSchema for #ident {
                fn schema_name() -> ::std::borrow::Cow<'static, str> {
                    ::std::borrow::Cow::Borrowed(#name)
                }
                fn inline_schema() -> bool {
                    true
                }
                fn json_schema(_: &mut #schemars::SchemaGenerator) -> #schemars::Schema {
                    #schemars::json_schema!({"type": "integer", "enum": [#(#values),*]})
                }
            }
        }
    });
    quote! { #serialize #deserialize #schema }
}

/// `Serialize, Deserialize, JsonSchema` or a subset; none means all three.
fn parse_derives(ctxt: &Ctxt, attr: TokenStream) -> Derives {
    let all = attr.is_empty();
    let mut derives = Derives {
        serialize: all,
        deserialize: all,
        schema: all,
    };
    if all {
        return derives;
    }
    let parser = syn::punctuated::Punctuated::<Ident, Token![,]>::parse_terminated;
    match syn::parse::Parser::parse2(parser, attr) {
        Ok(list) => {
            for i in list {
                match i.to_string().as_str() {
                    SERIALIZE => derives.serialize = true,
                    DESERIALIZE => derives.deserialize = true,
                    JSON_SCHEMA => derives.schema = true,
                    _ => ctxt.error_spanned_by(
                        &i,
                        "`#[json_type]` derives `Serialize`, `Deserialize` and `JsonSchema`; \
                         list a subset of those, or none for all three",
                    ),
                }
            }
        }
        Err(e) => ctxt.syn_error(e),
    }
    derives
}

/// What serde reads a type as, for `#[brain]`'s compile-time argument check: an inherent
/// `__VOQALIZE_ARG_KIND` constant (it shadows the `ArgShapeFallback` one). Nothing for a generic
/// type or one whose serde or schemars shape comes from elsewhere (`from`, `into`, `with`,
/// `remote`...): those are checked at run time.
fn arg_shape(input: &DeriveInput) -> Option<TokenStream> {
    if !input.generics.params.is_empty() {
        return None;
    }
    let transparent = match serde_attr::shape(&input.attrs) {
        Shape::Elsewhere => return None,
        Shape::Transparent => true,
        Shape::Own => false,
    };
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
                .filter(|f| !f.attrs.iter().any(serde_attr::skipped))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    /// The paths in the `#[derive(...)]` on the item.
    fn derives(file: &syn::File) -> Vec<String> {
        let Some(syn::Item::Struct(s)) = file.items.first() else {
            panic!("the item is not first");
        };
        let mut paths = Vec::new();
        for attr in s.attrs.iter().filter(|a| a.path().is_ident("derive")) {
            let parsed = attr.parse_nested_meta(|meta| {
                paths.push(crate::text::type_text(&meta.path));
                Ok(())
            });
            assert!(parsed.is_ok());
        }
        paths
    }

    fn crate_paths(file: &syn::File, helper: &str) -> Vec<(String, Option<String>)> {
        let Some(syn::Item::Struct(s)) = file.items.first() else {
            panic!("the item is not first");
        };
        attr_keys(&s.attrs, helper)
    }

    #[test]
    fn json_type_picks_derives() {
        let all = parse_file(expand(
            TokenStream::new(),
            quote!(
                struct S;
            ),
        ));
        assert_eq!(
            derives(&all),
            [
                "voqalize::__private::serde::Serialize",
                "voqalize::__private::serde::Deserialize",
                "voqalize::__private::schemars::JsonSchema"
            ]
        );
        let serde_crate = (
            "crate".to_owned(),
            Some("::voqalize::__private::serde".to_owned()),
        );
        assert_eq!(crate_paths(&all, "serde"), [serde_crate]);
        let schemars_crate = (
            "crate".to_owned(),
            Some("::voqalize::__private::schemars".to_owned()),
        );
        assert_eq!(crate_paths(&all, "schemars"), [schemars_crate]);

        let schema = parse_file(expand(
            quote!(JsonSchema),
            quote!(
                struct S;
            ),
        ));
        assert_eq!(
            derives(&schema),
            ["voqalize::__private::schemars::JsonSchema"]
        );
        assert_eq!(crate_paths(&schema, "serde"), []);

        let unknown = parse_file(expand(
            quote!(Debug),
            quote!(
                struct S;
            ),
        ));
        assert_eq!(compile_errors(&unknown).len(), 1);
        assert!(matches!(unknown.items.first(), Some(syn::Item::Struct(_))));
        let not_a_type = parse_file(expand(
            TokenStream::new(),
            quote!(
                fn f() {}
            ),
        ));
        assert_eq!(compile_errors(&not_a_type).len(), 1);
    }

    #[test]
    fn the_argument_kind_follows_serde() {
        let kind = |item: TokenStream| {
            let file = parse_file(expand(TokenStream::new(), item));
            let consts: Vec<String> = impls(&file)
                .iter()
                .filter(|i| i.trait_.is_none())
                .map(|i| crate::text::type_text(const_value(i, "__VOQALIZE_ARG_KIND")))
                .collect();
            consts
        };
        assert_eq!(
            kind(quote!(
                struct U;
            )),
            ["voqalize::__private::ArgKind::UnitStruct"]
        );
        assert_eq!(
            kind(quote!(
                enum E {
                    A,
                }
            )),
            ["voqalize::__private::ArgKind::Enum"]
        );
        assert_eq!(
            kind(quote!(
                struct T(u8, u8);
            )),
            ["voqalize::__private::ArgKind::TupleStruct"]
        );
        assert_eq!(
            kind(quote!(
                struct Named {
                    a: u8,
                }
            )),
            [""; 0]
        );
        assert_eq!(
            kind(quote!(
                #[serde(from = "u8")]
                struct F(u8, u8);
            )),
            [""; 0]
        );
    }
}

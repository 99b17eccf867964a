//! The few keys the derives read from serde's and schemars' own attributes. Anything else in
//! those attributes is skipped: serde itself reports mistakes there.

use proc_macro2::TokenStream;
use syn::parse::ParseStream;
use syn::{Attribute, LitStr, Token};

use crate::attr::{DOC, is_attr};

pub(crate) const SERDE: &str = "serde";
pub(crate) const SCHEMARS: &str = "schemars";

/// A `rename_all` to copy from serde attributes: `key = "..."` or `key(deserialize = "...")`.
pub(crate) fn rename_all(attrs: &[Attribute], key: &str) -> Option<LitStr> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident(SERDE)) {
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

/// How a type's serde attributes shape what serde reads it as.
pub(crate) enum Shape {
    /// Nothing unusual.
    Own,
    /// `#[serde(transparent)]`: read as its one field.
    Transparent,
    /// The shape comes from elsewhere (`from`, `into`, `with`, `remote`...).
    Elsewhere,
}

/// The [`Shape`] a type's `#[serde]` and `#[schemars]` attributes give it.
pub(crate) fn shape(attrs: &[Attribute]) -> Shape {
    let mut transparent = false;
    for attr in attrs {
        if !(is_attr(attr, SERDE) || is_attr(attr, SCHEMARS)) {
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
            return Shape::Elsewhere;
        }
    }
    if transparent {
        Shape::Transparent
    } else {
        Shape::Own
    }
}

/// `#[serde(skip)]` or `#[serde(skip_deserializing)]` on a field.
pub(crate) fn skipped(attr: &Attribute) -> bool {
    if !is_attr(attr, SERDE) {
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

/// Field attributes an app event's payload struct keeps.
pub(crate) fn kept_on_payload_field(attr: &Attribute) -> bool {
    attr.path().is_ident(SERDE) || attr.path().is_ident(SCHEMARS) || attr.path().is_ident(DOC)
}

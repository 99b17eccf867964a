//! Text the macros read or write: doc comments, names, types as the user wrote them.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Attribute, Expr, ExprLit, Lit, Meta};

/// The doc comment of an item, cleaned like Python's `inspect.cleandoc`: common indentation
/// removed, blank lines at both ends dropped. `Ok(None)` when there is none (or it is blank).
pub(crate) fn doc_text(attrs: &[Attribute]) -> syn::Result<Option<String>> {
    let mut lines: Vec<String> = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident(crate::attr::DOC) {
            continue;
        }
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => lines.extend(without_gutter(&s.value())),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "write this doc comment as text (`/// ...`): the macro reads it at compile time",
                ));
            }
        }
    }
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let cleaned: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                ""
            } else {
                l[indent..].trim_end()
            }
        })
        .collect();
    let text = cleaned.join("\n").trim_matches('\n').to_owned();
    Ok(if text.trim().is_empty() {
        None
    } else {
        Some(text)
    })
}

/// The lines of one doc attribute. A block comment (`/** ... */`, the only kind whose text spans
/// lines) loses its `*` gutter when every non-blank line after the first has one, as rustdoc
/// does.
fn without_gutter(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let gutter = text.contains('\n')
        && lines.iter().skip(1).any(|l| !l.trim().is_empty())
        && lines
            .iter()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .all(|l| l.trim_start().starts_with('*'));
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let stripped = l.trim_start();
            if gutter
                && i > 0
                && let Some(rest) = stripped.strip_prefix('*')
            {
                rest.strip_prefix(' ').unwrap_or(rest).to_owned()
            } else {
                (*l).to_owned()
            }
        })
        .collect()
}

/// snake_case of a Rust type or variant name: a word starts at each capital that follows a
/// lowercase letter or digit, and at the last capital of a run followed by a lowercase letter.
/// `OpenItinerary` → `open_itinerary`, `OpenURL` → `open_url`, `HTTPServer` → `http_server`,
/// `Row2Added` → `row2_added`.
pub(crate) fn snake_case(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary =
                prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower);
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// `weekly_average` → `WeeklyAverage`.
pub(crate) fn pascal_case(name: &str) -> String {
    name.split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// A function name every provider accepts: `^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`.
pub(crate) fn valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= 64
        && (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A type as the user would write it (`Vec<String>`, not `Vec < String >`).
pub(crate) fn type_text<T: ToTokens>(ty: &T) -> String {
    fn word_end(out: &str) -> bool {
        out.chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '"')
    }
    fn walk(tokens: TokenStream, out: &mut String) {
        for tt in tokens {
            match tt {
                TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::Brace => ("{", "}"),
                        Delimiter::None => ("", ""),
                    };
                    out.push_str(open);
                    walk(g.stream(), out);
                    while out.ends_with(' ') {
                        out.pop();
                    }
                    out.push_str(close);
                }
                TokenTree::Ident(i) => {
                    if word_end(out) {
                        out.push(' ');
                    }
                    out.push_str(&i.to_string());
                }
                TokenTree::Literal(l) => {
                    if word_end(out) {
                        out.push(' ');
                    }
                    out.push_str(&l.to_string());
                }
                TokenTree::Punct(p) => match p.as_char() {
                    ',' | ';' => {
                        out.push(p.as_char());
                        out.push(' ');
                    }
                    '+' | '=' => {
                        if !out.ends_with(' ') {
                            out.push(' ');
                        }
                        out.push(p.as_char());
                        out.push(' ');
                    }
                    '\'' if word_end(out) => {
                        out.push(' ');
                        out.push('\'');
                    }
                    ':' if p.spacing() == Spacing::Joint && ends_with_keyword(out) => {
                        out.push_str(" :");
                    }
                    c => out.push(c),
                },
            }
        }
    }
    fn ends_with_keyword(out: &str) -> bool {
        let word = out
            .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        matches!(word, "mut" | "dyn" | "impl" | "as" | "for" | "const")
    }
    let mut out = String::new();
    walk(ty.to_token_stream(), &mut out);
    let out = out.trim();
    out.strip_prefix("::").unwrap_or(out).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_follows_the_wire_rule() {
        for (rust, wire) in [
            ("OpenItinerary", "open_itinerary"),
            ("OpenURL", "open_url"),
            ("HTTPServer", "http_server"),
            ("Row2Added", "row2_added"),
            ("Closed", "closed"),
            ("A", "a"),
            ("ABC", "abc"),
            ("ShowSection", "show_section"),
            ("IOError2", "io_error2"),
            ("Already_Snake", "already_snake"),
            ("r#Type", "type"),
        ] {
            assert_eq!(snake_case(rust), wire, "{rust}");
        }
    }

    #[test]
    fn pascal_case_of_a_method() {
        assert_eq!(pascal_case("weekly_average"), "WeeklyAverage");
        assert_eq!(pascal_case("show"), "Show");
    }

    #[test]
    fn function_names_providers_accept() {
        for ok in ["show", "_x", "a.b-c_9", &"a".repeat(64)] {
            assert!(valid_function_name(ok), "{ok}");
        }
        for bad in ["", "9lives", "café", "a b", "a/b", &"a".repeat(65), "-x"] {
            assert!(!valid_function_name(bad), "{bad}");
        }
    }

    #[test]
    fn doc_comments_are_cleaned() {
        let item: syn::ItemFn = syn::parse_quote! {
            /// Put a section
            ///   in front of the user.
            ///
            fn f() {}
        };
        assert_eq!(
            doc_text(&item.attrs).unwrap().as_deref(),
            Some("Put a section\n  in front of the user.")
        );
        let blank: syn::ItemFn = syn::parse_quote! {
            ///
            fn f() {}
        };
        assert_eq!(doc_text(&blank.attrs).unwrap(), None);
        let block: syn::ItemFn = syn::parse_quote! {
            /**
             * Put a section
             *   in front of the user.
             */
            fn f() {}
        };
        assert_eq!(
            doc_text(&block.attrs).unwrap().as_deref(),
            Some("Put a section\n  in front of the user.")
        );
        let bullet: syn::ItemFn = syn::parse_quote! {
            /// * a bullet
            fn f() {}
        };
        assert_eq!(
            doc_text(&bullet.attrs).unwrap().as_deref(),
            Some("* a bullet")
        );
        let computed: syn::ItemFn = syn::parse_quote! {
            #[doc = concat!("a", "b")]
            fn f() {}
        };
        assert!(doc_text(&computed.attrs).is_err());
    }

    #[test]
    fn type_text_reads_like_source() {
        let ty: syn::Type = syn::parse_quote!(std::collections::HashMap<String, Vec<u8>>);
        assert_eq!(type_text(&ty), "std::collections::HashMap<String, Vec<u8>>");
        let ty: syn::Type = syn::parse_quote!(&'a mut ::voqalize::Session);
        assert_eq!(type_text(&ty), "&'a mut ::voqalize::Session");
        let ty: syn::Type = syn::parse_quote!((u8, [String; 2], Option<&'static str>));
        assert_eq!(type_text(&ty), "(u8, [String; 2], Option<&'static str>)");
    }
}

//! Unit-test helpers: read a macro's output as a syntax tree, so tests check its structure (the
//! impls, the match arms, the `ToolInfo` fields) and not how its tokens happen to print.

use proc_macro2::TokenStream;
use syn::visit::Visit;
use syn::{
    Arm, Expr, ExprLit, ExprMatch, ExprStruct, File, ImplItem, ImplItemFn, Item, ItemImpl, Lit,
    LitStr, Type,
};

/// The output as a file of items; a test fails if it does not parse.
pub(crate) fn parse_file(tokens: TokenStream) -> File {
    match syn::parse2::<File>(tokens.clone()) {
        Ok(file) => file,
        Err(e) => panic!("the output does not parse ({e}):\n{tokens}"),
    }
}

/// The messages of the top-level `compile_error!`s, in order (`#[cfg]`'d ones included).
pub(crate) fn compile_errors(file: &File) -> Vec<String> {
    file.items
        .iter()
        .filter_map(|item| match item {
            Item::Macro(m) if m.mac.path.segments.last()?.ident == "compile_error" => {
                Some(m.mac.parse_body::<LitStr>().ok()?.value())
            }
            _ => None,
        })
        .collect()
}

/// The `#[cfg]`s on the top-level `compile_error!`s, as predicate text.
pub(crate) fn cfg_errors(file: &File) -> Vec<Vec<syn::Meta>> {
    file.items
        .iter()
        .filter_map(|item| match item {
            Item::Macro(m) if !m.attrs.is_empty() => {
                Some(m.attrs.iter().map(|a| a.meta.clone()).collect())
            }
            _ => None,
        })
        .collect()
}

/// Every impl in the output, `const _: () = { ... }` blocks included.
pub(crate) fn impls(file: &File) -> Vec<&ItemImpl> {
    #[derive(Default)]
    struct Impls<'a>(Vec<&'a ItemImpl>);
    impl<'a> Visit<'a> for Impls<'a> {
        fn visit_item_impl(&mut self, i: &'a ItemImpl) {
            self.0.push(i);
        }
    }
    let mut found = Impls::default();
    found.visit_file(file);
    found.0
}

/// The impl of the trait whose path ends in `name`.
pub(crate) fn trait_impl<'a>(file: &'a File, name: &str) -> &'a ItemImpl {
    impls(file)
        .into_iter()
        .find(|i| {
            i.trait_
                .as_ref()
                .and_then(|(_, path, _)| path.segments.last())
                .is_some_and(|s| s.ident == name)
        })
        .unwrap_or_else(|| panic!("no impl of {name}"))
}

/// The method `name` of an impl.
pub(crate) fn method<'a>(imp: &'a ItemImpl, name: &str) -> &'a ImplItemFn {
    imp.items
        .iter()
        .find_map(|item| match item {
            ImplItem::Fn(f) if f.sig.ident == name => Some(f),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no method {name}"))
}

/// The value of `const NAME: ... = value;` in an impl.
pub(crate) fn const_value<'a>(imp: &'a ItemImpl, name: &str) -> &'a Expr {
    imp.items
        .iter()
        .find_map(|item| match item {
            ImplItem::Const(c) if c.ident == name => Some(&c.expr),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no const {name}"))
}

/// The string literals of an expression such as `&["a", "b"]`, in order.
pub(crate) fn strings(expr: &Expr) -> Vec<String> {
    #[derive(Default)]
    struct Strings(Vec<String>);
    impl Visit<'_> for Strings {
        fn visit_lit_str(&mut self, s: &LitStr) {
            self.0.push(s.value());
        }
    }
    let mut found = Strings::default();
    found.visit_expr(expr);
    found.0
}

/// The first `match` in a function body.
pub(crate) fn first_match(f: &ImplItemFn) -> &ExprMatch {
    struct First<'a>(Option<&'a ExprMatch>);
    impl<'a> Visit<'a> for First<'a> {
        fn visit_expr_match(&mut self, m: &'a ExprMatch) {
            if self.0.is_none() {
                self.0 = Some(m);
            }
        }
    }
    let mut found = First(None);
    found.visit_impl_item_fn(f);
    found.0.expect("no match")
}

/// Every struct literal of type `name` (`ToolInfo { .. }`) under a node.
pub(crate) fn struct_literals<'a>(f: &'a ImplItemFn, name: &str) -> Vec<&'a ExprStruct> {
    struct Literals<'a, 'n>(&'n str, Vec<&'a ExprStruct>);
    impl<'a> Visit<'a> for Literals<'a, '_> {
        fn visit_expr_struct(&mut self, s: &'a ExprStruct) {
            if s.path.segments.last().is_some_and(|l| l.ident == self.0) {
                self.1.push(s);
            }
            syn::visit::visit_expr_struct(self, s);
        }
    }
    let mut found = Literals(name, Vec::new());
    found.visit_impl_item_fn(f);
    found.1
}

/// A field of a struct literal.
pub(crate) fn field<'a>(s: &'a ExprStruct, name: &str) -> &'a Expr {
    s.fields
        .iter()
        .find(|f| matches!(&f.member, syn::Member::Named(i) if i == name))
        .map(|f| &f.expr)
        .unwrap_or_else(|| panic!("no field {name}"))
}

/// A string-literal field of a struct literal.
pub(crate) fn str_field(s: &ExprStruct, name: &str) -> String {
    match field(s, name) {
        Expr::Lit(ExprLit {
            lit: Lit::Str(l), ..
        }) => l.value(),
        other => panic!("{name} is not a string: {other:?}"),
    }
}

/// A boolean-literal field of a struct literal.
pub(crate) fn bool_field(s: &ExprStruct, name: &str) -> bool {
    match field(s, name) {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => b.value,
        other => panic!("{name} is not a bool: {other:?}"),
    }
}

/// The integer patterns of a match, in order (`0 => ..., 1 => ...`), and the `#[cfg]`s on each.
pub(crate) fn index_arms(m: &ExprMatch) -> Vec<(usize, &Arm)> {
    m.arms
        .iter()
        .filter_map(|arm| match &arm.pat {
            syn::Pat::Lit(syn::PatLit {
                lit: Lit::Int(i), ..
            }) => Some((i.base10_parse().ok()?, arm)),
            _ => None,
        })
        .collect()
}

/// The string patterns of a match, in order.
pub(crate) fn string_arms(m: &ExprMatch) -> Vec<String> {
    m.arms
        .iter()
        .filter_map(|arm| match &arm.pat {
            syn::Pat::Lit(syn::PatLit {
                lit: Lit::Str(s), ..
            }) => Some(s.value()),
            _ => None,
        })
        .collect()
}

/// The type arguments of every `Name::<T>` path (`ArgProbe::<Section>`, `declare::<A>`).
pub(crate) fn turbofish_types(file: &File, name: &str) -> Vec<Type> {
    struct Turbofish<'n>(&'n str, Vec<Type>);
    impl Visit<'_> for Turbofish<'_> {
        fn visit_path_segment(&mut self, s: &syn::PathSegment) {
            if s.ident == self.0
                && let syn::PathArguments::AngleBracketed(a) = &s.arguments
            {
                for arg in &a.args {
                    if let syn::GenericArgument::Type(t) = arg {
                        self.1.push(strip_groups(t));
                    }
                }
            }
            syn::visit::visit_path_segment(self, s);
        }
    }
    let mut found = Turbofish(name, Vec::new());
    found.visit_file(file);
    found.1
}

/// A type without the invisible groups `Self` substitution leaves, to compare with a written one.
fn strip_groups(ty: &Type) -> Type {
    let text = crate::text::type_text(ty);
    syn::parse_str(&text).unwrap_or_else(|_| ty.clone())
}

/// Attribute paths on an item, as text (`tool`, `voqalize::needs_result_now`, `doc`...).
pub(crate) fn attr_paths(attrs: &[syn::Attribute]) -> Vec<String> {
    attrs
        .iter()
        .map(|a| crate::text::type_text(a.path()))
        .collect()
}

/// Every struct in the output, `const _: () = { ... }` blocks included.
pub(crate) fn structs(file: &File) -> Vec<&syn::ItemStruct> {
    #[derive(Default)]
    struct Structs<'a>(Vec<&'a syn::ItemStruct>);
    impl<'a> Visit<'a> for Structs<'a> {
        fn visit_item_struct(&mut self, s: &'a syn::ItemStruct) {
            self.0.push(s);
        }
    }
    let mut found = Structs::default();
    found.visit_file(file);
    found.0
}

/// How many attributes in the output equal `attr`.
pub(crate) fn count_attrs(file: &File, attr: &syn::Attribute) -> usize {
    struct Count<'a>(&'a syn::Attribute, usize);
    impl Visit<'_> for Count<'_> {
        fn visit_attribute(&mut self, a: &syn::Attribute) {
            if a == self.0 {
                self.1 += 1;
            }
        }
    }
    let mut count = Count(attr, 0);
    count.visit_file(file);
    count.1
}

/// The keys of `#[helper(...)]` attributes, with the string value of `key = "..."` ones:
/// `#[serde(crate = "x", deny_unknown_fields)]` → `[("crate", Some("x")), ("deny_unknown_fields",
/// None)]`.
pub(crate) fn attr_keys(attrs: &[syn::Attribute], helper: &str) -> Vec<(String, Option<String>)> {
    let mut keys = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident(helper)) {
        let parsed = attr.parse_nested_meta(|meta| {
            let key = crate::text::type_text(&meta.path);
            let value = if meta.input.peek(syn::Token![=]) {
                Some(meta.value()?.parse::<LitStr>()?.value())
            } else {
                None
            };
            keys.push((key, value));
            Ok(())
        });
        if let Err(e) = parsed {
            panic!("#[{helper}] does not parse: {e}");
        }
    }
    keys
}

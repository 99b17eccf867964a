//! `#[brain]`: the tool table of an impl block, in three phases. `parse` reads the block and its
//! markers, `check` checks each tool, `generate` generates from the tools that passed. Errors are
//! collected across the block and emitted next to the block and its `Toolbox` impl, so one bad
//! tool leaves the others (and the editor's completions) working.

mod check;
mod generate;
mod parse;
mod stages;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::ItemImpl;

use self::check::Tool;
use crate::attr::{self, BrainOptions};
use crate::ctxt::Ctxt;

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let ctxt = Ctxt::new();
    let options = attr::parse_brain_options(&ctxt, attr);
    let output = match syn::parse2::<ItemImpl>(item.clone()) {
        Ok(imp) => expand_impl(&ctxt, &options, imp),
        Err(_) => {
            ctxt.syn_error(syn::Error::new(
                Span::call_site(),
                "`#[brain]` goes on the impl block that holds the tools: \
                 `#[brain] impl MyBrain { /* #[tool] async fn ... */ }`",
            ));
            item
        }
    };
    let errors = ctxt.check().err().map(|e| e.to_compile_error());
    let output = quote!(#output #errors);
    if std::env::var_os("VOQALIZE_MACROS_DEBUG").is_some() {
        eprintln!("{output}");
    }
    output
}

/// The block (markers removed) and what is generated for it.
fn expand_impl(ctxt: &Ctxt, options: &BrainOptions, mut imp: ItemImpl) -> TokenStream {
    check::check_impl_block(ctxt, &imp);
    if imp.trait_.is_some() {
        // Nothing is generated for a trait impl: it holds no tools, and a `Toolbox` impl here would
        // clash with the one from the type's real `#[brain]` block.
        parse::strip_all(&mut imp);
        return imp.into_token_stream();
    }
    let has_session = parse::defines_session(&imp);
    let mut tools: Vec<Tool> = Vec::new();
    let mut cfg_clashes = Vec::new();
    // Item by item, so errors come in source order.
    for item in &mut imp.items {
        let Some(tool) = parse::read_item(ctxt, item) else {
            continue;
        };
        let broken_transition = tool.broken_transition;
        let tool = match check::check_tool(tool) {
            Ok(tool) if !broken_transition => tool,
            Ok(_) => continue,
            Err(e) => {
                ctxt.syn_error(e);
                continue;
            }
        };
        match check::check_duplicate_name(&tools, &tool) {
            Ok(None) => tools.push(tool),
            Ok(Some(first)) => {
                cfg_clashes.push(generate::cfg_clash(first, &tool));
                tools.push(tool);
            }
            Err(e) => ctxt.syn_error(e),
        }
    }
    if options.stages.is_none() {
        stages::transitions_without_stages(ctxt, &tools);
    }
    let generated = generate::brain(&imp, options, &tools, has_session);
    quote! {
        #imp

        #generated

        #(#cfg_clashes)*
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    fn expand_str(attr: &str, item: &str) -> syn::File {
        let (Ok(attr), Ok(item)) = (attr.parse(), item.parse()) else {
            panic!("test input does not tokenize: {attr:?} {item:?}");
        };
        parse_file(expand(attr, item))
    }

    fn tool_infos(file: &syn::File) -> Vec<&syn::ExprStruct> {
        let toolbox = trait_impl(file, "Toolbox");
        struct_literals(method(toolbox, "tools"), "ToolInfo")
    }

    #[test]
    fn a_valid_block_expands_without_errors() {
        let file = expand_str(
            "",
            r#"impl<T: Send + Sync + 'static> Coach<T> where T: Clone {
                /// Show.
                #[tool]
                async fn show(&self, Section { name }: Section) -> String { name }
                /// Raw name.
                #[voqalize::tool]
                #[voqalize::needs_result_now]
                async fn r#type(self: &Self) {}
                /// With a lifetime on self.
                #[tool(name = "a.b-c")]
                async fn life(&self) -> u8 { 1 }
                fn helper(&self) {}
                const X: u8 = 1;
            }"#,
        );
        assert_eq!(compile_errors(&file), Vec::<String>::new());
        let infos = tool_infos(&file);
        let names: Vec<String> = infos.iter().map(|i| str_field(i, "name")).collect();
        assert_eq!(names, ["show", "type", "a.b-c"]);
        let methods: Vec<String> = infos.iter().map(|i| str_field(i, "method")).collect();
        assert_eq!(methods, ["Coach::show", "Coach::type", "Coach::life"]);
        let now: Vec<bool> = infos
            .iter()
            .map(|i| bool_field(i, "needs_result_now"))
            .collect();
        assert_eq!(now, [false, true, false]);
        assert_eq!(str_field(infos[0], "description"), "Show.");

        let toolbox = trait_impl(&file, "Toolbox");
        let arms = index_arms(first_match(method(toolbox, "__run_tool")));
        let indices: Vec<usize> = arms.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, [0, 1, 2]);

        // The user's block comes first, without the markers.
        let syn::Item::Impl(block) = &file.items[0] else {
            panic!("the block is not the first item");
        };
        assert!(block.trait_.is_none());
        for item in &block.items {
            if let syn::ImplItem::Fn(f) = item {
                for path in attr_paths(&f.attrs) {
                    assert!(!path.ends_with("tool") && !path.ends_with("needs_result_now"));
                }
            }
        }
        // Generic impl: the argument `Section` names no generic, so it is still checked.
        let section: syn::Type = syn::parse_quote!(Section);
        assert_eq!(turbofish_types(&file, "ArgProbe"), [section]);
    }

    #[test]
    fn a_failing_block_is_still_emitted_with_its_good_tools() {
        let file = expand_str(
            "",
            "impl S { #[tool] fn bad(&self) {} /// Good.\n #[tool] async fn good(&self) {} }",
        );
        assert_eq!(compile_errors(&file).len(), 2);
        let syn::Item::Impl(block) = &file.items[0] else {
            panic!("the block is not the first item");
        };
        assert_eq!(method(block, "bad").attrs.len(), 0);
        let names: Vec<String> = tool_infos(&file)
            .iter()
            .map(|i| str_field(i, "name"))
            .collect();
        assert_eq!(names, ["good"]);
    }

    #[test]
    fn a_tool_method_named_session_and_lifetime_generics_get_accurate_errors() {
        let errors = compile_errors(&expand_str(
            "",
            "impl S { /// d\n #[tool] async fn session(&self) {} }",
        ));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("would hide it"), "{errors:?}");
        let file = expand_str(
            "",
            "impl S { /// d\n #[tool(name = \"session\")] async fn s(&self) {} }",
        );
        assert_eq!(compile_errors(&file), Vec::<String>::new());
        let errors = compile_errors(&expand_str(
            "",
            "impl S { /// d\n #[tool] async fn f<'a>(&'a self) {} }",
        ));
        assert!(errors.iter().any(|e| e.contains("lifetime parameters")));
        assert!(!errors.iter().any(|e| e.contains("cannot be generic")));
    }

    #[test]
    fn cfg_on_a_tool_goes_onto_its_entry_arm_and_check() {
        let file = expand_str(
            "",
            "impl S { /// d\n #[tool] #[cfg(feature = \"x\")] async fn f(&self, a: A) {} \
             /// e\n #[cfg(not(feature = \"x\"))] #[tool(name = \"f\")] async fn g(&self) {} }",
        );
        // No plain duplicate-name error: a cfg'd one, true only when both cfgs are.
        assert_eq!(compile_errors(&file).len(), 1);
        let both: syn::Meta = syn::parse_quote!(cfg(all(feature = "x", not(feature = "x"))));
        assert_eq!(cfg_errors(&file), [vec![both]]);
        let cfg_x: syn::Attribute = syn::parse_quote!(#[cfg(feature = "x")]);
        let toolbox = trait_impl(&file, "Toolbox");
        let arms = index_arms(first_match(method(toolbox, "__run_tool")));
        assert_eq!(arms[0].1.attrs, std::slice::from_ref(&cfg_x));
        // The method, its table entry, its arm and its argument check.
        assert_eq!(count_attrs(&file, &cfg_x), 4);
        let check = file.items.iter().find_map(|item| match item {
            syn::Item::Const(c) if c.ident == "_" => Some(c),
            _ => None,
        });
        assert_eq!(check.map(|c| c.attrs.clone()), Some(vec![cfg_x]));
    }

    #[test]
    fn arguments_naming_the_impl_generics_are_checked_at_run_time_only() {
        let file = expand_str(
            "",
            r#"impl<T: Send + Sync + 'static> Coach<T> {
                /// Generic argument.
                #[tool]
                async fn a(&self, args: Wrap<T>) {}
                /// Self is generic here.
                #[tool]
                async fn b(&self, args: Vec<Self>) {}
            }"#,
        );
        assert_eq!(compile_errors(&file), Vec::<String>::new());
        assert_eq!(turbofish_types(&file, "ArgProbe"), []);
        // In a plain impl, `Self` is spelled out so the check can run.
        let file = expand_str(
            "",
            "impl Coach { /// d\n #[tool] async fn a(&self, args: Vec<Self>) {} }",
        );
        let spelled: syn::Type = syn::parse_quote!(Vec<Coach>);
        assert_eq!(turbofish_types(&file, "ArgProbe"), [spelled]);
    }

    /// The last segment of a path expression (`Context::Fresh` gives `Fresh`).
    fn path_end(expr: &syn::Expr) -> String {
        match expr {
            syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        }
        .unwrap_or_else(|| panic!("not a path: {}", quote!(#expr)))
    }

    #[test]
    fn a_transition_is_a_tool_that_moves_the_call_and_is_read_at_once() {
        let file = expand_str(
            "stages = Clinic",
            r#"impl Desk {
                /// Look up.
                #[tool]
                async fn find(&self) {}
                /// Verified.
                #[transition(to = Booking, context = fresh)]
                async fn verified(&self, who: Who) -> String { who.0 }
                /// Booked.
                #[voqalize::transition(to = Confirm, name = "done", timeout = "5s")]
                async fn booked(&self) {}
            }"#,
        );
        assert_eq!(compile_errors(&file), Vec::<String>::new());
        let infos = tool_infos(&file);
        let names: Vec<String> = infos.iter().map(|i| str_field(i, "name")).collect();
        assert_eq!(names, ["find", "verified", "done"]);
        let now: Vec<bool> = infos
            .iter()
            .map(|i| bool_field(i, "needs_result_now"))
            .collect();
        assert_eq!(now, [false, true, true]);
        // A plain tool has no transition.
        assert_eq!(path_end(field(infos[0], "transition")), "None");
        let toolbox = trait_impl(&file, "Toolbox");
        let transitions = struct_literals(method(toolbox, "tools"), "Transition");
        let read: Vec<(String, String)> = transitions
            .iter()
            .map(|t| (str_field(t, "to"), path_end(field(t, "context"))))
            .collect();
        assert_eq!(
            read,
            [
                ("Booking".to_owned(), "Fresh".to_owned()),
                ("Confirm".to_owned(), "Keep".to_owned()),
            ]
        );
        // The brain hands the voice core its stages.
        let table = method(toolbox, "stage_table");
        assert!(
            quote!(#table)
                .to_string()
                .contains("StageTable :: of :: < Clinic >")
        );
    }

    #[test]
    fn a_broken_transition_is_not_generated_and_its_mistakes_all_show() {
        let file = expand_str(
            "stages = Clinic",
            "impl Desk { /// d\n #[tool] async fn good(&self) {} \
             #[transition] fn no_to(&self) {} \
             /// e\n #[transition(context = fresh)] async fn options_only(&self) {} \
             /// f\n #[tool(to = Booking)] async fn tool_to(&self) {} }",
        );
        let errors = compile_errors(&file);
        // `no_to`: no stage, not async, no doc comment; then one for each of the others.
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(errors[0].contains("names the stage"), "{errors:#?}");
        assert!(errors[3].contains("add `to = Stage`"), "{errors:#?}");
        assert!(
            errors[4].contains("option of `#[transition(...)]`"),
            "{errors:#?}"
        );
        let names: Vec<String> = tool_infos(&file)
            .iter()
            .map(|i| str_field(i, "name"))
            .collect();
        assert_eq!(names, ["good"]);
    }

    #[test]
    fn a_context_typo_finds_its_context() {
        let errors = compile_errors(&expand_str(
            "stages = Clinic",
            "impl Desk { /// d\n #[transition(to = Booking, context = sumary)] async fn f(&self) {} }",
        ));
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].contains("did you mean `context = summary`?"),
            "{errors:#?}"
        );
    }

    // Long on purpose: a table of inputs and their error counts, one row per mistake, which
    // reads best in one place.
    #[test]
    fn odd_inputs_give_errors_never_panics() {
        let cases: &[(&str, &str, usize)] = &[
            ("", "", 1),
            ("", "struct S;", 1),
            ("", "fn f() {}", 1),
            ("nonsense", "impl S {}", 1),
            ("visible", "impl S {}", 1),
            ("visible = ", "impl S {}", 1),
            ("visible = a, other = b", "impl S {}", 1),
            ("", "unsafe impl S {}", 1),
            ("", "impl Trait for S { #[tool] fn f() {} }", 1),
            (
                "",
                "impl S { /// d\n #[tool = \"x\"] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(name)] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(name = 5)] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(label = \"x\")] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool(name = \"a\", name = \"b\")] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] #[tool] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] #[needs_result_now(now)] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] #[needs_result_now] #[needs_result_now] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { #[doc = include_str!(\"x\")] #[tool] async fn f(&self) {} }",
                1,
            ),
            ("", "impl S { /// d\n #[tool] const fn f(&self) {} }", 2),
            (
                "",
                "impl S { /// d\n #[tool] async unsafe fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async extern \"C\" fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f<const N: usize>(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f<'a>(&'a self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self) where Self: Sized {} }",
                1,
            ),
            ("", "impl S { /// d\n #[tool] async fn f(x: A) {} }", 1),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: A, b: B, c: C) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: Vec<impl Send>) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, s: &voqalize::Session, a: A) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, s: &Session, t: Session, a: A) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: &A) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: &mut A) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, a: &str) {} }",
                1,
            ),
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, s: &Session, a: &A) {} }",
                2,
            ),
            // A reference to the session is the type check's (it says what to do instead).
            (
                "",
                "impl S { /// d\n #[tool] async fn f(&self, s: &Session) {} }",
                0,
            ),
            ("", "impl S { #[tool] const X: u8 = 1; }", 1),
            ("", "impl S { #[needs_result_now] type T = u8; }", 1),
            (
                "",
                "impl S { /// d\n #[tool(name = \"\")] async fn f(&self) {} }",
                1,
            ),
            (
                "",
                "impl S { /// a\n #[tool] async fn f(&self) {} /// b\n #[tool(name = \"f\")] async fn g(&self) {} }",
                1,
            ),
            // Transitions.
            ("stages", "impl S {}", 1),
            ("stages = ", "impl S {}", 1),
            (
                "",
                "impl S { /// d\n #[transition(to = A)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition = \"A\"] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition()] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = )] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = \"A\")] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = St::A)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A, to = B)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A, context = fresh, context = keep)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A, context = other)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A, context = \"fresh\")] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A, background)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A, contxt = fresh)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[tool(to = A)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[tool(context = fresh)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A)] #[tool] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[tool] #[transition(to = A)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A)] #[transition(to = B)] async fn f(&self) {} }",
                1,
            ),
            (
                "stages = St",
                "impl S { #[transition(to = A)] const X: u8 = 1; }",
                1,
            ),
            // `#[needs_result_now]` is implied, and allowed.
            (
                "stages = St",
                "impl S { /// d\n #[transition(to = A)] #[needs_result_now] async fn f(&self) {} }",
                0,
            ),
            (
                "stages = St",
                "impl S { /// d\n #[transition] #[needs_result_now] async fn f(&self) {} }",
                1,
            ),
        ];
        for (attr, item, expected) in cases {
            let errors = compile_errors(&expand_str(attr, item));
            assert_eq!(errors.len(), *expected, "{attr:?} {item:?}\n{errors:#?}");
        }
    }
}

use quote::quote;
use syn::{Expr, ExprArray, ExprCall, ExprLit, ExprReference, File, Lit};

use super::expand;
use crate::test_support::*;

/// One `StageDecl::__new(..)` of `STAGES`, read back.
#[derive(Debug, PartialEq)]
struct Decl {
    name: String,
    instruction: String,
    tools: Vec<String>,
    to: Vec<usize>,
    mcp: Vec<String>,
    end: bool,
}

fn elements(expr: &Expr) -> Vec<&Expr> {
    match expr {
        Expr::Reference(ExprReference { expr, .. }) => match &**expr {
            Expr::Array(ExprArray { elems, .. }) => elems.iter().collect(),
            other => panic!("not an array: {other:?}"),
        },
        other => panic!("not a reference to an array: {other:?}"),
    }
}

fn usizes(expr: &Expr) -> Vec<usize> {
    elements(expr)
        .into_iter()
        .map(|e| match e {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => {
                assert_eq!(i.suffix(), "usize");
                i.base10_parse().unwrap()
            }
            other => panic!("not an integer: {other:?}"),
        })
        .collect()
}

fn decls(file: &File) -> Vec<Decl> {
    let stages = const_value(trait_impl(file, "Stages"), "STAGES");
    elements(stages)
        .into_iter()
        .map(|e| {
            let Expr::Call(ExprCall { func, args, .. }) = e else {
                panic!("not a call: {e:?}");
            };
            assert_eq!(
                crate::text::type_text(func),
                "voqalize::stages::StageDecl::__new"
            );
            let args: Vec<&Expr> = args.iter().collect();
            assert_eq!(args.len(), 6);
            let one = |e: &Expr| {
                let s = strings(e);
                assert_eq!(s.len(), 1);
                s[0].clone()
            };
            Decl {
                name: one(args[0]),
                instruction: one(args[1]),
                tools: strings(args[2]),
                to: usizes(args[3]),
                mcp: strings(args[4]),
                end: matches!(args[5], Expr::Lit(ExprLit { lit: Lit::Bool(b), .. }) if b.value),
            }
        })
        .collect()
}

fn decl(name: &str, instruction: &str, tools: &[&str], to: &[usize], mcp: &[&str]) -> Decl {
    Decl {
        name: name.to_owned(),
        instruction: instruction.to_owned(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        to: to.to_vec(),
        mcp: mcp.iter().map(|m| (*m).to_owned()).collect(),
        end: false,
    }
}

/// The variants of a `match` on `self`, in arm order, with the index each maps to.
fn index_arms_of(file: &File, imp_method: &str) -> Vec<(String, usize)> {
    let imp = impls(file)
        .into_iter()
        .find(|i| i.trait_.is_none())
        .expect("no inherent impl");
    let found = if imp_method == "index" {
        method(trait_impl(file, "Stages"), "index")
    } else {
        method(imp, imp_method)
    };
    first_match(found)
        .arms
        .iter()
        .map(|arm| {
            let syn::Pat::Path(p) = &arm.pat else {
                panic!("not a path pattern");
            };
            let Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) = &*arm.body
            else {
                panic!("not an index");
            };
            (crate::text::type_text(&p.path), i.base10_parse().unwrap())
        })
        .collect()
}

#[test]
fn a_valid_enum_expands_to_its_stages() {
    let file = parse_file(expand(quote! {
        /// The clinic line.
        #[stages(every(hang_up, "human.handover"))]
        enum Clinic {
            /// Ask for the caller's name.
            ///
            ///   Check it with `find_patient`.
            #[stage(mcp(crm, "crm-eu"), to(Booking, r#Confirm), tools(find_patient, hang_up))]
            Verify = 3,
            /** Offer the slots.
                Book one. */
            #[stage(tools(open_slots, book), to(r#Confirm))]
            Booking,
            /// Read the booking back.
            #[stage(end, tools())]
            r#Confirm,
        }
    }));
    assert_eq!(compile_errors(&file), Vec::<String>::new());
    let mut confirm = decl(
        "Confirm",
        "Read the booking back.",
        &["hang_up", "human.handover"],
        &[],
        &[],
    );
    confirm.end = true;
    assert_eq!(
        decls(&file),
        [
            decl(
                "Verify",
                "Ask for the caller's name.\n\n  Check it with `find_patient`.",
                &["find_patient", "hang_up", "human.handover"],
                &[1, 2],
                &["crm", "crm-eu"],
            ),
            decl(
                "Booking",
                "Offer the slots.\n               Book one.",
                &["open_slots", "book", "hang_up", "human.handover"],
                &[2],
                &[],
            ),
            confirm,
        ]
    );
    let tools = strings(const_value(trait_impl(&file, "Stages"), "__TOOLS"));
    let named: Vec<&str> = tools.iter().step_by(2).map(String::as_str).collect();
    assert_eq!(
        named,
        [
            "find_patient",
            "hang_up",
            "open_slots",
            "book",
            "hang_up",
            "human.handover"
        ]
    );
    assert!(tools[1].starts_with("stage `Verify` of `Clinic` names the tool `find_patient`"));
    assert!(tools[1].contains("`#[brain(stages = Clinic)]`"));
    assert!(tools[11].starts_with("`#[stages(every(..))]` of `Clinic` names the tool"));

    let arms = [
        ("Clinic::Verify".to_owned(), 0),
        ("Clinic::Booking".to_owned(), 1),
        ("Clinic::r#Confirm".to_owned(), 2),
    ];
    assert_eq!(index_arms_of(&file, "index"), arms);
    assert_eq!(index_arms_of(&file, "__voqalize_stage_index"), arms);
    let from = method(trait_impl(&file, "Stages"), "from_index");
    let indices: Vec<usize> = index_arms(first_match(from))
        .iter()
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(indices, [0, 1, 2]);
}

/// `(input, errors, whether the impl is still emitted)` for each input: the input is text so
/// the table stays one line a case.
fn assert_errors(cases: &[(&str, usize, bool)]) {
    for (bad, n, emitted) in cases {
        let Ok(tokens) = bad.parse() else {
            panic!("test input does not tokenize: {bad}");
        };
        let file = parse_file(expand(tokens));
        let errors = compile_errors(&file);
        assert_eq!(errors.len(), *n, "{bad}\n{errors:#?}");
        let has_impl = impls(&file).iter().any(|i| i.trait_.is_some());
        assert_eq!(has_impl, *emitted, "{bad}");
    }
}

#[test]
fn a_shape_without_stages_is_one_error_each() {
    assert_errors(&[
        ("struct S;", 1, false),
        ("union U { a: u8 }", 1, false),
        ("enum E {}", 1, true),
        ("enum E<T> { /** A. */ #[stage(end)] A(T) }", 2, false),
        ("enum E<'a> { /** A. */ #[stage(end)] A }", 1, false),
        (
            "enum E { /** A. */ #[stage(to(B))] A { x: u8 }, /** B. */ #[stage(end)] B(u8) }",
            2,
            false,
        ),
        ("enum E { /** A. */ #[stage(end)] A = 7 }", 0, true),
    ]);
}

#[test]
fn a_missing_doc_comment_is_one_error() {
    assert_errors(&[
        ("enum E { #[stage(end)] A }", 1, true),
        ("enum E { #[doc = \" \"] #[stage(end)] A }", 1, true),
        (
            "enum E { #[doc = concat!(\"a\")] #[stage(end)] A }",
            1,
            true,
        ),
        ("enum E { #[doc(hidden)] #[stage(end)] A }", 1, true),
    ]);
}

#[test]
fn grammar_mistakes_are_one_error_each() {
    assert_errors(&[
        ("enum E { /** A. */ #[stage(tols(x), end)] A }", 1, true),
        ("enum E { /** A. */ #[stage(end, end)] A }", 1, true),
        ("enum E { /** A. */ #[stage(end = true)] A }", 1, true),
        ("enum E { /** A. */ #[stage(end(x))] A }", 1, true),
        ("enum E { /** A. */ #[stage(tools = x, end)] A }", 1, true),
        (
            "enum E { /** A. */ #[stage(tools(a, a, \"\"), end)] A }",
            2,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(tools(a), tools(b), end)] A }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(tools(a::b), mcp(\"\", m, m), end)] A }",
            3,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(end)] #[stage(end)] A }",
            1,
            true,
        ),
        ("enum E { /** A. */ #[stage] A }", 1, true),
        ("enum E { /** A. */ #[stage = \"x\"] A }", 1, true),
        ("enum E { /** A. */ #[stage(tools(,,))] A }", 1, true),
        (
            "enum E { /** A. */ #[stage(to = B)] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(to(\"B\"))] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(to(E::B))] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stages(every(a))] #[stage(end)] A }",
            1,
            true,
        ),
        (
            "#[stage(end)] enum E { /** A. */ #[stage(end)] A }",
            1,
            true,
        ),
        ("#[stages] enum E { /** A. */ #[stage(end)] A }", 1, true),
        (
            "#[stages(evry(a), every(a, a))] enum E { /** A. */ #[stage(end)] A }",
            2,
            true,
        ),
        // A key that is not one: the stage's way out is unknown, so the graph is not checked.
        (
            "enum E { /** A. */ #[stage(ende)] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
    ]);
}

#[test]
fn graph_mistakes_are_one_error_each() {
    assert_errors(&[
        ("enum E { /** A. */ A }", 1, true),
        ("enum E { /** A. */ #[stage(to(A))] A }", 1, true),
        ("enum E { /** A. */ #[stage(to())] A }", 1, true),
        (
            "enum E { /** A. */ #[stage(to(B), end)] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(to(Bb))] A, /** B. */ #[stage(end)] Bc }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(to(Zzz))] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(to(B, B))] A, /** B. */ #[stage(end)] B }",
            1,
            true,
        ),
        (
            "enum E { /** A. */ #[stage(end)] A, /** B. */ #[stage(to(C))] B, \
             /** C. */ #[stage(to(B))] C }",
            2,
            true,
        ),
        // Everything at once: one error each.
        (
            "enum E { #[stage(to(Bookng))] Verify, /** B. */ #[stage(to(Booking, Done), end)] \
             Booking, /** D. */ Done, /** F. */ #[stage(end)] Far }",
            6,
            true,
        ),
    ]);
}

#[test]
fn a_typo_in_to_names_the_stage_it_means() {
    let file = parse_file(expand(quote! {
        enum Clinic {
            /// Verify.
            #[stage(to(Bookng))]
            Verify,
            /// Book.
            #[stage(end)]
            Booking,
        }
    }));
    // One error: `Booking` counts as reached through the fix the error suggests.
    assert_eq!(
        compile_errors(&file),
        ["`Bookng` is not a stage of `Clinic`: did you mean `Booking`?"]
    );
    // The impl holds what was read, the unknown target dropped.
    assert_eq!(decls(&file)[0].to, Vec::<usize>::new());

    let file = parse_file(expand(quote! {
        enum Clinic {
            /// Verify.
            #[stage(to(Elsewhere))]
            Verify,
            /// Book.
            #[stage(end)]
            Booking,
        }
    }));
    assert_eq!(
        compile_errors(&file),
        ["`Elsewhere` is not a stage of `Clinic`: its stages are `Verify`, `Booking`"]
    );
}

#[test]
fn unreachable_and_dead_end_stages_name_the_fix() {
    let file = parse_file(expand(quote! {
        enum Clinic {
            /// Verify.
            #[stage(to(Booking))]
            Verify,
            /// Book.
            #[stage(end)]
            Booking,
            /// Never reached.
            #[stage(end)]
            Survey,
            /// A dead end.
            Limbo,
        }
    }));
    assert_eq!(
        compile_errors(&file),
        [
            "stage `Limbo` has no way out: add `to(NextStage)` to hand the call on, or `end` if \
             the call may end here",
            "stage `Survey` cannot be reached: no stage's `to(..)` leads to it from `Verify`, \
             where a call starts. Add `Survey` to the `to(..)` of a stage the call reaches \
             (`Booking`), or remove it",
            "stage `Limbo` cannot be reached: no stage's `to(..)` leads to it from `Verify`, \
             where a call starts. Add `Limbo` to the `to(..)` of a stage the call reaches \
             (`Booking`), or remove it",
        ]
    );
}

#[test]
fn unknown_keys_suggest_the_nearest() {
    let file = parse_file(expand(quote! {
        #[stages(evrey(a))]
        enum E {
            /// A.
            #[stage(tool(a), ende, colour)]
            A,
        }
    }));
    assert_eq!(
        compile_errors(&file),
        [
            "unknown `#[stages]` key `evrey`: did you mean `every`? (the keys are `every(..)`)",
            "unknown `#[stage]` key `tool`: did you mean `tools`? (the keys are `tools(..)`, \
             `to(..)`, `mcp(..)`, `end`)",
            "unknown `#[stage]` key `ende`: did you mean `end`? (the keys are `tools(..)`, \
             `to(..)`, `mcp(..)`, `end`)",
            "unknown `#[stage]` key `colour`: the keys are `tools(..)`, `to(..)`, `mcp(..)`, \
             `end`",
        ]
    );
}

//! Compile-fail cases for voqalize's macros (trybuild). The cases live in `ui-tests/cases/`: each
//! `fail_*.rs` must fail with exactly the `.stderr` beside it. Regenerate those with
//! `TRYBUILD=overwrite` and read every one. (The compile-pass cases are plain tests, in
//! `tests/pass/`: with no pass case, trybuild only type-checks, as `cargo check` does.)

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("cases/fail_*.rs");
}

//! Compile-pass and compile-fail cases for voqalize's macros (trybuild). The cases live in
//! `ui-tests/cases/`: `pass_*.rs` must compile and run, `fail_*.rs` must fail with exactly the
//! `.stderr` beside them. Regenerate those with `TRYBUILD=overwrite` and read every one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("cases/pass_*.rs");
    t.compile_fail("cases/fail_*.rs");
}

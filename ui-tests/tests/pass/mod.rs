//! The compile-pass cases: each module is a brain, Action or AppEvent written as a user writes it,
//! in this crate that depends on voqalize alone, and a test that runs it. They are ordinary tests
//! (not trybuild cases) so that trybuild only type-checks its compile-fail cases and never builds
//! its fixture's dependencies with code generation.

mod actions_and_events;
mod brain_options;
mod brain_stages;
mod cfg_tool;
mod coach;
mod integer_enum;
mod lazy_unit_in_read_loop;
mod needs_result_now_order;
mod newtype_argument;
mod result_and_arguments;
mod stages;
mod tool_policies;

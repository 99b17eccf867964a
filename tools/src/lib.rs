//! What the tooling binaries share (a library for them, not for anyone else): the comparison
//! workload's answer, the session counters and `--stats-file` of the measured brains, and the
//! examples' own command line (`examples/support/`), so a measured brain takes the same flags and
//! is served the same way as the examples.

pub mod answer;
pub mod stats;

// Their doc comments are the flags' help, written for a terminal: bare URLs, `<placeholders>`.

/// The examples' hosting flags and `serve` (`examples/support/cli.rs`).
#[allow(rustdoc::bare_urls, rustdoc::invalid_html_tags)]
#[path = "../../examples/support/cli.rs"]
pub mod cli;

/// The model-backed examples' provider flags (`examples/support/model.rs`).
#[allow(rustdoc::bare_urls, rustdoc::invalid_html_tags)]
#[path = "../../examples/support/model.rs"]
pub mod model;

//! Fixture crate: it depends on voqalize only (no direct serde or schemars), so generated code must name `::voqalize::...` paths.

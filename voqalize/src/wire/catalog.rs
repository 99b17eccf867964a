//! The deprecated Language and Voice catalogs, generated (and committed) from the `iso_code` and
//! `voice_id` enum-value options in `proto/voqalize/frames/frames.proto` (docs/protocol.md §1.4).
//!
//! Both catalogs are frozen. New code should pass strings (a BCP-47 tag, a voice id) through
//! [`Config`](crate::wire::Config), which the runtime accepts when it advertises
//! [`Capability::StringConfig`](crate::wire::Capability::StringConfig).

include!("generated/catalog.rs");

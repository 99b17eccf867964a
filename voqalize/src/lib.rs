//! voqalize: write Voqalize brains in Rust.

pub mod wire;

/// The protobuf types generated from `proto/voqalize/frames/frames.proto` (prost). Most code uses
/// [`wire`] instead; these are here for peers that need the raw messages.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/voqalize.frames.rs"));
}
pub mod actions;

//! # voqalize: write Voqalize brains in Rust
//!
//! Voqalize runs the voice of a call (speech recognition, synthesis, turn-taking, barge-in); a
//! *brain* decides what to say. One WebSocket per call carries protobuf frames (wire version 3):
//! the user's finalized text comes in, speech streams out in speech units, and Voqalize reports
//! what the user actually heard of each unit.
//!
//! A brain implements [`Brain`]; [`host`] serves it; [`testing`] drives it in tests.
//!
//! | module | what it holds |
//! |---|---|
//! | [`wire`] | frames of wire v3, the codec, `Config`, the Language/Voice catalogs |
//! | [`session`] | [`Session`], [`Turn`] and [`SpeechUnit`]: the brain's handles on a call |
//! | [`brain`] | the [`Brain`] trait |
//! | [`host`] | `run_session`, token verification, axum and tokio-tungstenite adapters |
//! | [`actions`] | typed UI commands ([`Action`](actions::Action)) and app events |
//! | [`testing`] | a driver that plays Voqalize against a brain |
//! | [`prelude`] | every name a brain file needs |

pub mod actions;
pub mod brain;
pub mod host;
pub mod prelude;
pub mod session;
pub mod testing;
pub mod wire;

/// The protobuf types generated from `proto/voqalize/frames/frames.proto` (prost). Most code uses
/// [`wire`] instead; these are here for peers that need the raw messages.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/voqalize.frames.rs"));
}

pub use brain::{Brain, BrainError, BrainResult};
pub use host::{HostError, HostOptions, MakeBrain, run_session};
pub use session::{Finalized, Session, SessionError, SpeechUnit, Step, Turn};

//! A testing kit for brains: [`Voqalize`] plays the runtime's side of a call against your brain,
//! in-process or over a socket, with the conformance suite's playout and heard-truth model plus the
//! checks that suite does not make. [`TokenSigner`] mints real RS256 tokens for hosting tests.
//! [`ModelServer`] stands in for a model provider (every built-in [`Provider`], or any
//! [`WireFormat`] of your own with [`ModelServer::start_with`]), streaming scripted replies in the
//! provider's own SSE format, so a model-backed brain is tested
//! end to end without the network; [`LayerKit`] runs the scripted cases every model layer passes
//! against a layer of your own. [`ToolHarness`] and [`Voqalize::call_tool`] unit-test one tool
//! inside a real session, and [`offline_model`] builds a model-backed brain for that with no
//! provider at all. [`Replay`] plays a recorded call against a new build of the brain.
//! [`eval`] plays a caller, scripted or simulated by a model, against the brain as it is now,
//! many times, and checks and judges what happened: a suite a team runs before every prompt
//! change ([`eval::Suite`]).
//!
//! The kit reaches the runtime only through voqalize's public API (and a few seams voqalize keeps
//! hidden for it). Feature `model` (on by default) brings [`LayerKit`], [`offline_model`] and
//! [`Replay::forward_unmatched`] (forwarding to a real provider), and turns voqalize's `model`
//! feature on; without it, the driver, the token signer, the stand-in provider and replay work for
//! a brain built without models.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod driver;
pub mod eval;
mod formats;
#[cfg(feature = "model")]
mod layer_kit;
mod memory;
mod model_server;
#[cfg(feature = "model")]
mod offline;
mod replay;
mod token;
mod tool_harness;
mod wire_format;

pub use driver::{
    BargeAt, BargeIn, CancelHeard, DriverError, Start, ToolCalled, TurnRecord, UnitRecord, Voqalize,
};
pub use formats::Provider;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub use layer_kit::{KitReport, LayerKit};
pub use model_server::{Gate, ModelServer, Reply};
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub use offline::offline_model;
pub use replay::{
    Answered, DEFAULT_REPLAY_DEADLINE, DEFAULT_REPLAY_TURN_TIMEOUT, Replay, ReplayError,
    ReplayReport, RequestMatch, TurnDiff, TurnOutput,
};
pub use token::{SignError, TokenSigner};
pub use tool_harness::{ToolCall, ToolHarness};
pub use wire_format::{ReadBack, Recorded, Said, StreamWriter, WireFormat};

/// `m`'s guard, even after a panic poisoned it: the kit's lists stay readable when a test's
/// brain panicked.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The README's example compiles and runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

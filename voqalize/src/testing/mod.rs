//! A testing kit for brains: [`Voqalize`] plays the runtime's side of a call against your brain,
//! in-process or over a socket, with the conformance suite's playout and heard-truth model plus the
//! checks that suite does not make. [`TokenSigner`] mints real RS256 tokens for hosting tests.
//! [`ModelServer`] stands in for a model provider (every built-in [`Provider`], or any
//! [`WireFormat`] of your own with [`ModelServer::start_with`]), streaming scripted replies in the
//! provider's own SSE format, so a model-backed brain is tested
//! end to end without the network; [`LayerKit`] runs the scripted cases every model layer passes
//! against a layer of your own. [`ToolHarness`] and [`Voqalize::call_tool`] unit-test one tool
//! inside a real session, and [`offline_model`] builds a model-backed brain for that with no
//! provider at all.

mod driver;
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

pub use driver::{
    BargeAt, BargeIn, CancelHeard, DriverError, Start, TurnRecord, UnitRecord, Voqalize,
};
pub use formats::Provider;
#[cfg(feature = "model")]
pub use layer_kit::{KitReport, LayerKit};
pub use model_server::{
    Gate, ModelServer, ReadBack, Recorded, Reply, Said, StreamWriter, WireFormat,
};
#[cfg(feature = "model")]
pub use offline::offline_model;
pub use replay::{
    Answered, DEFAULT_REPLAY_DEADLINE, DEFAULT_REPLAY_TURN_TIMEOUT, Replay, ReplayError,
    ReplayReport, RequestMatch, ToolCalled, TurnDiff, TurnOutput,
};
pub use token::TokenSigner;
pub use tool_harness::{ToolCall, ToolHarness};

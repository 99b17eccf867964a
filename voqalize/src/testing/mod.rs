//! A testing kit for brains: [`Voqalize`] plays the runtime's side of a call against your brain,
//! in-process or over a socket, with the conformance suite's playout and heard-truth model plus the
//! checks that suite does not make. [`TokenSigner`] mints real RS256 tokens for hosting tests.
//! [`ModelServer`] stands in for a model provider (Gemini, OpenAI Responses, chat completions),
//! streaming scripted replies in the provider's own SSE format, so a model-backed brain is tested
//! end to end without the network. [`ToolHarness`] and [`Voqalize::call_tool`] unit-test one tool
//! inside a real session.

mod driver;
mod formats;
#[cfg(feature = "model")]
mod layer_kit;
mod memory;
mod model_server;
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
pub use token::TokenSigner;
pub use tool_harness::{ToolCall, ToolHarness};

//! A testing kit for brains: [`Voqalize`] plays the runtime's side of a call against your brain,
//! in-process or over a socket, with the conformance suite's playout and heard-truth model plus the
//! checks that suite does not make. [`TokenSigner`] mints real RS256 tokens for hosting tests.

mod driver;
mod memory;
mod token;

pub use driver::{
    BargeAt, BargeIn, CancelHeard, DriverError, Start, TurnRecord, UnitRecord, Voqalize,
};
pub use token::TokenSigner;

//! The session: the brain's handle on a call ([`Session`]), speaking ([`Turn`], [`SpeechUnit`]),
//! and the runtime that drives a [`Brain`](crate::Brain) from the frames of one call (wire.md §2).

mod context;
mod error;
mod handle;
mod lanes;
mod outbound;
pub(crate) mod runner;
mod speech;

pub use error::SessionError;
pub use handle::{Finalized, Session, Step};
pub use speech::{SpeechUnit, Turn};

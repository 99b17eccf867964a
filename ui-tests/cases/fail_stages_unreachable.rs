//! A stage no `to(..)` leads to from the first (where a call starts) cannot be reached; nor can
//! one reached only from such a stage.
use voqalize::prelude::*;

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Clinic {
    /// Verify the caller.
    #[stage(to(Booking))]
    Verify,
    /// Book a slot.
    #[stage(end)]
    Booking,
    /// Ask how the call went.
    #[stage(to(Thanks))]
    Survey,
    /// Thank the caller.
    #[stage(end)]
    Thanks,
}

fn main() {}

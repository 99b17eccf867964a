//! A `to(..)` naming no stage is an error on that name, with the closest stage suggested (or the
//! stages listed when none is close).
use voqalize::prelude::*;

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Clinic {
    /// Verify the caller.
    #[stage(to(Bookng))]
    Verify,
    /// Book a slot.
    #[stage(to(Confirm, Elsewhere))]
    Booking,
    /// Read it back.
    #[stage(end)]
    Confirm,
}

fn main() {}

//! A stage with no `to(..)` that is not `end` has no way out; one that is `end` and has `to(..)`
//! says two things.
use voqalize::prelude::*;

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Clinic {
    /// Verify the caller.
    #[stage(to(Booking))]
    Verify,
    /// Book a slot.
    #[stage(tools(book))]
    Booking,
}

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Desk {
    /// Greet the caller.
    #[stage(end, to(Done))]
    Greet,
    /// Done.
    #[stage(end)]
    Done,
}

fn main() {}

//! A key `#[stage]` or `#[stages]` does not know is an error naming the nearest key; a key or an
//! entry given twice is an error on the second.
use voqalize::prelude::*;

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
#[stages(evry(hang_up))]
enum Clinic {
    /// Verify the caller.
    #[stage(tool(find_patient), to(Booking))]
    Verify,
    /// Book a slot.
    #[stage(tools(book, book), to(Confirm), colour = "red")]
    Booking,
    /// Read it back.
    #[stage(end, end)]
    Confirm,
}

fn main() {}

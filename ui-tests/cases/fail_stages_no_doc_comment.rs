//! A stage's doc comment is its instruction: a stage without one (or with a blank one) is an
//! error on the variant.
use voqalize::prelude::*;

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Clinic {
    #[stage(to(Booking))]
    Verify,
    ///
    #[stage(end)]
    Booking,
}

fn main() {
    let _ = Clinic::Verify.name();
}

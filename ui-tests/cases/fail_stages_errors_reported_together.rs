//! Several mistakes in one enum are reported together, one error each, and the derive still
//! implements `Stages` with what it read: the uses below add no error.
use voqalize::prelude::*;

#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Clinic {
    #[stage(tools(find_patient), to(Bookng))]
    Verify,
    /// Book a slot.
    #[stage(to(Booking, Confirm), end)]
    Booking,
    /// Read it back.
    Confirm,
    /// Never reached.
    #[stage(end)]
    Survey,
}

fn first<S: Stages>() -> &'static str {
    S::STAGES[0].name()
}

fn main() {
    let _ = Clinic::Booking.name();
    let _ = Clinic::from_index(1).map(Stages::index);
    let _ = first::<Clinic>();
    const _: usize = Clinic::Survey.__voqalize_stage_index();
}

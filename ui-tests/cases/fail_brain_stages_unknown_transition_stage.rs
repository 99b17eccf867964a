use voqalize::prelude::*;

/// The clinic line.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Clinic {
    /// Check who the caller is.
    #[stage(tools(find_patient), to(Booking))]
    Verify,
    /// Book a slot.
    #[stage(tools(book), to(Confirm))]
    Booking,
    /// Read the booking back.
    #[stage(end)]
    Confirm,
}

struct Desk;

#[brain(stages = Clinic)]
impl Desk {
    /// Look a patient up.
    #[tool]
    async fn find_patient(&self) -> &'static str {
        "p-17"
    }

    /// Book a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// The caller is verified.
    #[transition(to = Bookng)]
    async fn verified(&self) -> &'static str {
        ""
    }
}

fn main() {}

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

// `book` is named by the stage `Booking` but the brain does not declare it.
#[brain(stages = Clinic)]
impl Desk {
    /// Look a patient up.
    #[tool]
    async fn find_patient(&self) -> &'static str {
        "p-17"
    }

    /// The caller is verified.
    #[transition(to = Booking)]
    async fn verified(&self) -> &'static str {
        ""
    }

    /// The slot is booked.
    #[transition(to = Confirm)]
    async fn booked(&self) -> &'static str {
        ""
    }
}

fn main() {}

use voqalize::prelude::*;

struct Desk;

#[brain]
impl Desk {
    /// Book a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// The caller is verified.
    #[transition(to = Booking)]
    async fn verified(&self) -> &'static str {
        ""
    }
}

fn main() {}

use voqalize::prelude::*;

struct Desk;

#[brain(stages = "Clinic")]
impl Desk {
    /// Book a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        "booked"
    }
}

struct Front;

#[brain(stages)]
impl Front {
    /// Book a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        "booked"
    }
}

fn main() {}

use voqalize::prelude::*;

/// Not a `#[derive(Stages)]` enum.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NotAnEnum {
    Only,
}

struct Desk;

#[brain(stages = NotAnEnum)]
impl Desk {
    /// Book a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        "booked"
    }
}

fn main() {}

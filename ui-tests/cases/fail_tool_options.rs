use voqalize::prelude::*;

struct Desk;

#[brain]
impl Desk {
    /// Looks the table up.
    #[tool(timeout = "5 sec")]
    async fn look_up(&self) -> &'static str {
        "free"
    }

    /// Holds the table.
    #[tool(timeout = "0s")]
    async fn hold(&self) -> &'static str {
        "held"
    }

    /// Books the table.
    #[tool(on_bargein = cancel)]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// Cancels the booking.
    #[tool(on_barge_in = stop, filler = "")]
    async fn cancel(&self) -> &'static str {
        "cancelled"
    }
}

fn main() {}

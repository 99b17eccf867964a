use voqalize::prelude::*;

struct Desk;

#[brain]
impl Desk {
    /// Books the table; slow, so it runs in the background.
    #[tool(background)]
    #[needs_result_now]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// Sends the confirmation email.
    #[tool(background, on_barge_in = cancel)]
    async fn email(&self) -> &'static str {
        "sent"
    }
}

fn main() {}

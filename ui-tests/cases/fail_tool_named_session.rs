use voqalize::prelude::*;

struct Desk;

#[brain]
impl Desk {
    /// Start a session.
    #[tool]
    async fn session(&self) {}
}

fn main() {}

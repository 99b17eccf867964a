#![allow(unused_variables)]
use voqalize::Session;
use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// End the call.
    #[tool]
    async fn hang_up(&self, session: Session) {}
}

fn main() {}

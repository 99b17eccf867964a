#![allow(unused_variables)]
use voqalize::Session;
use voqalize::prelude::*;

#[json_type]
struct Section {
    name: String,
}

struct Coach;

#[brain]
impl Coach {
    /// Show a section.
    #[tool]
    async fn show(&self, session: &Session, args: Section) -> String {
        args.name
    }

    /// End the call.
    #[tool]
    async fn hang_up(&self, session: Session) {}
}

fn main() {}

#![allow(unused_variables)]
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
    async fn show(&self, args: &Section) -> String {
        args.name.clone()
    }
}

fn main() {}

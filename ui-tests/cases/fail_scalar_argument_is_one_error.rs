#![allow(unused_variables)]
use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Count something.
    #[tool]
    async fn count(&self, n: u32) {}
}

fn main() {}

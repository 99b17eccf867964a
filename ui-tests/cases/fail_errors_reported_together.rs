//! Several mistakes in one block: all reported at once, and the methods are still emitted (main
//! calls one).
#![allow(unused_variables)]
use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    #[tool]
    fn no_doc_and_not_async(&self) {}

    /// Two arguments.
    #[tool]
    async fn two(&self, a: u8, b: u8) {}

    /// Fine.
    #[tool]
    async fn fine(&self) -> u8 {
        1
    }

    fn helper(&self) -> u8 {
        2
    }
}

fn main() {
    let _ = Coach.helper();
    let _ = Coach.tools();
}

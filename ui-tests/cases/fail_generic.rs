#![allow(unused_variables)]
use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Generic over its argument.
    #[tool]
    async fn show<T: Send>(&self, args: T) {}

    /// An `impl Trait` argument is generic too.
    #[tool]
    async fn log(&self, args: impl Send) {}
}

fn main() {}

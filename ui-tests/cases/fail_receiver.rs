use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Takes `&mut self`.
    #[tool]
    async fn count(&mut self) {}

    /// Takes `self`.
    #[tool]
    async fn consume(self) {}

    /// Takes nothing.
    #[tool]
    async fn nothing() {}

    /// Takes a box.
    #[tool]
    async fn boxed(self: Box<Self>) {}
}

fn main() {}

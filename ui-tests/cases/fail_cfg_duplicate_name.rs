use voqalize::prelude::*;

struct Desk;

#[brain]
impl Desk {
    /// One.
    #[tool]
    #[cfg(not(any()))]
    async fn mode(&self) {}

    /// Two, under a cfg that is also true.
    #[tool(name = "mode")]
    #[cfg(all())]
    async fn mode_again(&self) {}
}

fn main() {}

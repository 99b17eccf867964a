use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Show today.
    #[tool]
    async fn show(&self) {}

    /// Show the week.
    #[tool(name = "show")]
    async fn show_week(&self) {}
}

fn main() {}

use voqalize::prelude::*;

struct Coach;

impl Coach {
    /// Forgot `#[brain]` on the impl block.
    #[tool]
    async fn log_meal(&self) {}

    /// Same.
    #[needs_result_now]
    async fn weekly_average(&self) {}
}

fn main() {}

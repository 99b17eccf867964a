use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Not a tool.
    #[needs_result_now]
    async fn weekly_average(&self) -> f64 {
        5.4
    }
}

fn main() {}

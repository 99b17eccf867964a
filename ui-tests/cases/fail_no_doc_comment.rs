use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    #[tool]
    async fn log_meal(&self) -> &'static str {
        "logged"
    }
}

fn main() {}

use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Record that the user ate, now.
    #[tool]
    fn log_meal(&self) -> &'static str {
        "logged"
    }
}

fn main() {}

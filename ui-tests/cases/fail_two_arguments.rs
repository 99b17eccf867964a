#![allow(unused_variables)]
use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// Log a meal.
    #[tool]
    async fn log_meal(&self, food: String, grams: u32) -> String {
        format!("{grams} g of {food}")
    }
}

fn main() {}

use voqalize::prelude::*;

struct Coach;

#[brain]
impl Default for Coach {
    /// Not a tool: a trait impl holds no tools.
    #[tool]
    fn default() -> Self {
        Coach
    }
}

struct Desk;

#[brain(strict)]
impl Desk {}

fn main() {}

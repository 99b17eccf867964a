use voqalize::prelude::*;

struct Coach;

#[brain]
impl Coach {
    /// A name with a space.
    #[tool(name = "log meal")]
    async fn log_meal(&self) {}

    /// A name starting with a digit.
    #[tool(name = "2nd_opinion")]
    async fn second_opinion(&self) {}

    /// A method name the providers refuse.
    #[tool]
    async fn café(&self) {}
}

fn main() {}

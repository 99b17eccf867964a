use voqalize::prelude::*;

struct Average(f64);

#[derive(Debug)]
struct NoReading;

struct Coach;

#[brain]
impl Coach {
    /// The weekly average.
    #[tool]
    async fn weekly_average(&self) -> Average {
        Average(5.4)
    }

    /// The last reading.
    #[tool]
    async fn last_reading(&self) -> Result<f64, NoReading> {
        Err(NoReading)
    }
}

fn main() {}

use std::rc::Rc;

use voqalize::prelude::*;

async fn pause() {}

struct Coach;

#[brain]
impl Coach {
    /// Holds an `Rc` across an await.
    #[tool]
    async fn count(&self) -> usize {
        let shared = Rc::new(1);
        pause().await;
        *shared
    }
}

fn main() {}

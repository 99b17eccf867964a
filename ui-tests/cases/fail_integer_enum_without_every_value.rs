//! An integer enum gives every variant its number.
use voqalize::prelude::*;

#[json_type]
enum Pace {
    Slow = 1,
    Fast,
}

fn main() {}

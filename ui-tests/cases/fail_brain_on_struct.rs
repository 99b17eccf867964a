use voqalize::prelude::*;

#[brain]
struct Coach;

fn main() {}

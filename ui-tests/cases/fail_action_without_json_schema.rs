use voqalize::prelude::*;

#[json_type(Serialize)]
#[derive(Action)]
struct ShowSection {
    name: String,
}

fn main() {}

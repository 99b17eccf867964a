//! `#[derive(Stages)]` goes on a fieldless enum without generics: anything else is one error (and no
//! impl, which a wrong shape cannot have).
use voqalize::prelude::*;

#[derive(Stages)]
struct Clinic;

#[derive(Stages)]
enum Desk<T> {
    /// Greet.
    #[stage(end)]
    Greet(T),
}

#[derive(Stages)]
enum Line {
    /// Greet.
    #[stage(to(Done))]
    Greet { name: String },
    /// Done.
    #[stage(end)]
    Done,
}

// The impl is still emitted for an enum with no variant, so it needs the derives the trait
// asks for, as a real one does.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Empty {}

fn main() {}

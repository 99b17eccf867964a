#![allow(unused_variables, dead_code)]
use std::marker::PhantomData;
use std::path::PathBuf;

use voqalize::prelude::*;

#[json_type]
struct Section {
    name: String,
}

/// A newtype around a number: serde reads it as the number.
#[json_type]
struct Grams(u32);

/// A unit enum: serde reads it as a string.
#[json_type]
enum Mood {
    Good,
    Bad,
}

/// A unit struct: serde reads it as `null`.
#[json_type]
struct Nothing;

/// Two fields without names: serde reads an array.
#[json_type]
struct Pair(u8, u8);

/// Transparent around a list.
#[json_type]
#[serde(transparent)]
struct Names {
    names: Vec<String>,
}

struct Coach;

#[brain]
impl Coach {
    /// Set a goal.
    #[tool]
    async fn set_goal(&self, grams: Grams) {}

    /// Record a mood.
    #[tool]
    async fn mood(&self, mood: Mood) {}

    /// Nothing at all.
    #[tool]
    async fn nothing(&self, n: Nothing) {}

    /// A pair.
    #[tool]
    async fn pair(&self, p: Pair) {}

    /// Names.
    #[tool]
    async fn names(&self, n: Names) {}

    /// A boxed string.
    #[tool]
    async fn boxed(&self, text: Box<str>) {}

    /// A path.
    #[tool]
    async fn open(&self, path: PathBuf) {}

    /// A boxed slice.
    #[tool]
    async fn sections(&self, all: Box<[Section]>) {}
}

struct Generic<T>(PhantomData<fn() -> T>);

#[brain]
impl<T: Send + 'static> Generic<T> {
    /// A tool that does not use `T` is still checked.
    #[tool]
    async fn mood(&self, mood: Mood) {}
}

fn main() {}

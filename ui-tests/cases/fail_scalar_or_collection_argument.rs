#![allow(unused_variables)]
use std::collections::HashMap;

use voqalize::prelude::*;

#[json_type]
struct Section {
    name: String,
}

type Name = String;

struct Coach;

#[brain]
impl Coach {
    /// Greet someone.
    #[tool]
    async fn greet(&self, name: String) {}

    /// Set a goal.
    #[tool]
    async fn set_goal(&self, grams: u32) {}

    /// Toggle reminders.
    #[tool]
    async fn remind(&self, on: bool) {}

    /// Log foods.
    #[tool]
    async fn log_foods(&self, foods: Vec<String>) {}

    /// Maybe show a section.
    #[tool]
    async fn show(&self, section: Option<Section>) {}

    /// Set many goals.
    #[tool]
    async fn set_goals(&self, goals: HashMap<String, u32>) {}

    /// Rename the user (through a type alias).
    #[tool]
    async fn rename(&self, name: Name) {}
}

fn main() {}

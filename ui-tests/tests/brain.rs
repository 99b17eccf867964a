//! The macros at run time, in a crate that depends on voqalize alone: the tests below, and the
//! compile-pass cases in `pass/`.

#[path = "pass/mod.rs"]
mod pass;

use std::sync::atomic::{AtomicU32, Ordering};

use voqalize::prelude::*;
use voqalize::tools::{Dialect, ToolErrorKind};
use voqalize_ui_tests::block_on;

/// A meal.
#[json_type(Deserialize, JsonSchema)]
struct Meal {
    /// What was eaten.
    food: String,
    /// Grams, if known.
    grams: Option<u32>,
}

#[derive(Debug)]
struct TooMuch(u32);

impl std::fmt::Display for TooMuch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} g is more than a meal", self.0)
    }
}

#[derive(Default)]
struct Coach {
    meals: AtomicU32,
}

#[brain]
impl Coach {
    /// Record a meal.
    #[tool]
    async fn log_meal(&self, meal: Meal) -> Result<u32, TooMuch> {
        match meal.grams {
            Some(g) if g > 2000 => Err(TooMuch(g)),
            _ => {
                let _ = meal.food;
                Ok(self.meals.fetch_add(1, Ordering::SeqCst) + 1)
            }
        }
    }

    /// The user's average glucose this week, in mmol/L.
    #[tool]
    #[needs_result_now]
    async fn weekly_average(&self) -> f64 {
        5.4
    }

    /// Always fails.
    #[tool]
    async fn broken(&self) -> u8 {
        panic!("a bug in the tool")
    }
}

fn call(coach: &Coach, name: &str, arguments: &str) -> voqalize::tools::ToolOutcome {
    let turn = coach.tools_for_turn();
    block_on(coach.call_tool(&turn, name, arguments.into()))
}

#[test]
fn declarations_come_from_the_methods() {
    let coach = Coach::default();
    let tools = coach.tools();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0].name(), "log_meal");
    assert_eq!(tools[0].description(), "Record a meal.");
    assert_eq!(
        tools[0].gemini().to_string(),
        r#"{"name":"log_meal","description":"Record a meal.","parameters":{"type":"object","properties":{"food":{"type":"string","description":"What was eaten."},"grams":{"type":"integer","description":"Grams, if known.","nullable":true}},"required":["food"],"description":"A meal."}}"#
    );
    assert_eq!(
        tools[1].openai(false).to_string(),
        r#"{"type":"function","name":"weekly_average","description":"The user's average glucose this week, in mmol/L.","parameters":{"type":"object","properties":{}},"strict":false}"#
    );
    assert_eq!(
        tools[0].parameters(Dialect::OpenAiStrict)["required"].to_string(),
        r#"["food","grams"]"#
    );
    assert!(tools[1].needs_result_now());
}

#[test]
fn calls_never_end_the_turn() {
    let coach = Coach::default();
    assert_eq!(
        call(&coach, "log_meal", r#"{"food":"rice"}"#)
            .response()
            .to_string(),
        r#"{"result":1}"#
    );
    assert_eq!(
        call(&coach, "log_meal", r#"{"food":"rice","grams":null}"#)
            .response()
            .to_string(),
        r#"{"result":2}"#
    );
    let e = call(&coach, "log_meal", r#"{"food":"rice","grams":5000}"#)
        .result
        .unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ToolErrorKind::Failed, "5000 g is more than a meal")
    );
    let e = call(&coach, "log_meal", r#"{"food":1}"#)
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    assert!(e.message.contains("`food`"), "{e}");
    let e = call(&coach, "broken", "").result.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Panicked);
    let e = call(&coach, "weekly", "").result.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unknown);
    assert_eq!(
        call(&coach, "weekly_average", "").response().to_string(),
        r#"{"result":5.4}"#
    );
}

#[test]
fn this_crate_depends_on_voqalize_alone() {
    let manifest = include_str!("../Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap();
    let names: Vec<&str> = deps
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.split(['.', '=', ' ']).next().unwrap())
        .collect();
    assert_eq!(names, ["voqalize"], "{deps}");
}

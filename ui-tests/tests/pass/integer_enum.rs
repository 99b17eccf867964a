//! An integer enum in `#[json_type]`: every variant a number (`Slow = 1`), read and written as
//! that number, declared as an integer enum (and for Gemini, which takes enums of strings only,
//! as the strings of the numbers), with no serde_repr and no direct serde or schemars dependency.
use voqalize::prelude::*;
use voqalize::tools::Dialect;

/// How fast to go.
#[json_type]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    Slow = 1,
    Steady = 2,
    Fast = 3,
}

/// A run.
#[json_type]
struct Run {
    /// The pace, 1 to 3.
    pace: Pace,
    /// Below zero is downhill.
    slope: Option<Slope>,
}

#[json_type]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slope {
    Down = -1,
    Flat = 0,
    Up = 1,
}

struct Coach;

#[brain]
impl Coach {
    /// Start a run.
    #[tool]
    async fn start_run(&self, run: Run) -> String {
        format!("{:?} {:?}", run.pace, run.slope)
    }

    /// The usual pace.
    #[tool]
    async fn usual_pace(&self) -> Pace {
        Pace::Steady
    }
}

#[test]
fn compiles_and_runs() {
    let turn = Coach.tools_for_turn();
    let decl = turn.get("start_run").unwrap();
    let pace = &decl.parameters(Dialect::OpenAi)["properties"]["pace"];
    assert_eq!(pace["type"], "integer", "{pace}");
    assert_eq!(pace["enum"], voqalize::json!([1, 2, 3]), "{pace}");
    let gemini = decl.gemini();
    assert_eq!(
        gemini["parameters"]["properties"]["pace"]["enum"],
        voqalize::json!(["1", "2", "3"]),
        "{gemini}"
    );
    let call = |args: &str| {
        voqalize_ui_tests::block_on(Coach.call_tool(&turn, "start_run", args.into())).response()
    };
    assert_eq!(
        call(r#"{"pace": 3, "slope": -1}"#),
        voqalize::json!({"result": "Fast Some(Down)"})
    );
    let refused = call(r#"{"pace": 5}"#).to_string();
    assert!(refused.contains("5 is not one of 1, 2, 3"), "{refused}");
    let usual = voqalize_ui_tests::block_on(Coach.call_tool(&turn, "usual_pace", "{}".into()));
    assert_eq!(
        usual.response(),
        voqalize::json!({"result": 2}),
        "written as its number"
    );
}

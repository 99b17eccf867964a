//! `#[needs_result_now]` above or below `#[tool]`, and `#[tool(name = "...")]`.

use voqalize::prelude::*;

struct Brain;

#[brain]
impl Brain {
    /// Marked below.
    #[tool]
    #[needs_result_now]
    async fn below(&self) -> u8 {
        1
    }

    /// Marked above.
    #[needs_result_now]
    #[tool(name = "above.v2")]
    async fn above(&self) -> u8 {
        2
    }

    /// Not marked.
    #[tool]
    async fn plain(&self) -> u8 {
        3
    }

    /// A helper that is not a tool.
    async fn helper(&self) -> u8 {
        4
    }
}

#[test]
fn compiles_and_runs() {
    let marks: Vec<(&str, bool)> = Brain
        .tools()
        .iter()
        .map(|t| (t.name(), t.needs_result_now()))
        .collect();
    assert_eq!(
        marks,
        [("below", true), ("above.v2", true), ("plain", false)]
    );
    assert_eq!(voqalize_ui_tests::block_on(Brain.helper()), 4);
}

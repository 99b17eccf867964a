//! `#[cfg]` on a tool: a compiled-out tool disappears from the table and the dispatcher, and two
//! tools may share a name under exclusive cfgs.
use voqalize::prelude::*;

struct Desk;

#[brain]
impl Desk {
    /// Never compiled.
    #[tool]
    #[cfg(any())]
    async fn gone(&self) {}

    /// Always here.
    #[tool]
    async fn here(&self) {}

    /// The test build's variant.
    #[cfg(not(any()))]
    #[tool(name = "mode")]
    async fn mode_on(&self) -> &'static str {
        "on"
    }

    /// The other variant.
    #[cfg(any())]
    #[tool(name = "mode")]
    async fn mode_off(&self) -> &'static str {
        "off"
    }
}

#[test]
fn compiles_and_runs() {
    let names: Vec<&str> = Desk.tools().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["here", "mode"]);
}

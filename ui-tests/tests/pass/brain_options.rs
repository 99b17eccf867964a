//! `#[brain(visible = ...)]`, a generic brain, a brain without tools, a brain that defines its own
//! `session`, and a future that stays `Send`.

use std::sync::atomic::{AtomicBool, Ordering};

use voqalize::prelude::*;

#[json_type(Deserialize, JsonSchema)]
struct Credentials {
    user: String,
}

struct Desk {
    signed_in: AtomicBool,
}

#[brain(visible = tools_for_state)]
impl Desk {
    /// Sign the user in.
    #[tool]
    async fn sign_in(&self, args: Credentials) -> String {
        self.signed_in.store(true, Ordering::SeqCst);
        args.user
    }

    /// The user's balance.
    #[tool]
    async fn balance(&self) -> f64 {
        12.5
    }

    fn tools_for_state(&self, tool: &ToolDecl) -> bool {
        tool.name() == "sign_in" || self.signed_in.load(Ordering::SeqCst)
    }
}

struct Counter<T> {
    step: T,
}

#[brain]
impl<T: Copy + Into<u64> + Send + Sync + 'static> Counter<T> {
    /// Count one step.
    #[tool]
    async fn step(&self) -> u64 {
        self.step.into()
    }
}

struct Quiet;

#[brain]
impl Quiet {}

struct OwnSession;

#[brain]
impl OwnSession {
    /// Uses the brain's own `session`.
    #[tool]
    async fn ask(&self) -> &'static str {
        self.session()
    }

    fn session(&self) -> &'static str {
        "mine"
    }
}

fn assert_send<T: Send>(_: &T) {}

#[test]
fn compiles_and_runs() {
    let desk = Desk {
        signed_in: AtomicBool::new(false),
    };
    let turn = desk.tools_for_turn();
    let names: Vec<&str> = turn.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["sign_in"]);
    let balance = voqalize_ui_tests::block_on(desk.call_tool(&turn, "balance", "{}".into()));
    assert!(balance.is_error());
    let call = desk.call_tool(&turn, "sign_in", r#"{"user":"ada"}"#.into());
    assert_send(&call);
    assert_eq!(
        voqalize_ui_tests::block_on(call).response().to_string(),
        r#"{"result":"ada"}"#
    );
    assert_eq!(desk.tools_for_turn().len(), 2);

    let counter = Counter { step: 3u8 };
    assert_eq!(counter.tools()[0].method(), "Counter::step");
    let out = voqalize_ui_tests::block_on(counter.call_tool(
        &counter.tools_for_turn(),
        "step",
        "".into(),
    ));
    assert_eq!(out.response().to_string(), r#"{"result":3}"#);
    assert!(!std::ptr::eq(
        Counter { step: 1u8 }.tools(),
        Counter { step: 1u32 }.tools()
    ));

    assert!(Quiet.tools().is_empty());
    let out = voqalize_ui_tests::block_on(OwnSession.call_tool(
        &OwnSession.tools_for_turn(),
        "ask",
        "".into(),
    ));
    assert_eq!(out.response().to_string(), r#"{"result":"mine"}"#);
}

//! Inside a turn, a tool reaches the session serving it (what `self.session()` reads).

use super::*;

#[derive(Serialize)]
struct ShowSection {
    name: &'static str,
}

impl crate::actions::Action for ShowSection {
    const NAME: &'static str = "show_section";
}

struct Screen;

impl Screen {
    async fn show(&self) -> String {
        let session = private::current_session();
        session.dispatch(&ShowSection { name: "week" }).unwrap();
        session.id().to_owned()
    }
}

impl Toolbox for Screen {
    fn tools(&self) -> &'static [ToolDecl] {
        private::tool_table::<Self>(|| vec![private::declare_without_args(info("show", 0))])
    }

    #[allow(clippy::needless_borrow)]
    fn __run_tool(&self, index: usize, _: Value) -> ToolRun<'_> {
        #[allow(unused_imports)]
        use private::{Probe, ViaPlain as _, ViaResult as _};
        match index {
            0 => Box::pin(async move {
                let out = self.show().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            _ => private::unknown_index(index),
        }
    }
}

impl crate::Brain for Screen {
    async fn on_user_message(
        &self,
        turn: &mut crate::Turn,
        _: crate::wire::UserMessage,
    ) -> crate::BrainResult {
        let tools = self.tools_for_turn();
        let out = self
            .call_tool(&tools, "show", Arguments::Raw(String::new()))
            .await;
        turn.say(&out.response().to_string());
        Ok(())
    }
}

#[tokio::test]
async fn inside_a_turn_a_tool_reaches_the_session_serving_it() {
    let mut v = crate::testing::Voqalize::in_process(|| Screen);
    v.start_silent().await.unwrap();
    let turn = v.user_says("show the week").await.unwrap();
    assert_eq!(turn.text(), r#"{"result":"test-session"}"#);
    // The command went out before the turn's speech, so the turn's record already holds it.
    assert_eq!(
        v.ui_commands(),
        [json!({"command": "show_section", "payload": {"name": "week"}})]
    );
}

#[test]
#[should_panic(expected = "self.session() was called outside a session")]
fn outside_a_session_the_session_is_a_clear_panic() {
    let _ = private::current_session();
}

//! Every option of `#[tool]`, as the tool table reports it.

use std::time::Duration;

use voqalize::prelude::*;
use voqalize::tools::ToolPolicy;

struct Desk;

#[brain]
impl Desk {
    /// Books the table: runs on to its end if the user barges in.
    #[tool(timeout = "20s", filler = "One moment, booking that.")]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// Looks up free tables: stopped if the user barges in.
    #[tool(on_barge_in = cancel, timeout = "500ms")]
    #[needs_result_now]
    async fn look_up(&self) -> &'static str {
        "free at 9"
    }

    /// Sends the confirmation email, in the background.
    #[tool(name = "send_email", background, timeout = "2m")]
    async fn email(&self) -> &'static str {
        "sent"
    }

    /// Says finish explicitly.
    #[tool(on_barge_in = finish)]
    async fn note(&self) -> &'static str {
        "noted"
    }
}

#[test]
fn every_option_reaches_the_tool_table() {
    let table: Vec<_> = Desk
        .tools()
        .iter()
        .map(|t| {
            (
                t.name(),
                t.policy(),
                t.timeout(),
                t.filler(),
                t.needs_result_now(),
            )
        })
        .collect();
    assert_eq!(
        table,
        [
            (
                "book",
                ToolPolicy::Finish,
                Some(Duration::from_secs(20)),
                Some("One moment, booking that."),
                false
            ),
            (
                "look_up",
                ToolPolicy::Cancel,
                Some(Duration::from_millis(500)),
                None,
                true
            ),
            (
                "send_email",
                ToolPolicy::Background,
                Some(Duration::from_secs(120)),
                None,
                false
            ),
            ("note", ToolPolicy::Finish, None, None, false),
        ]
    );
}

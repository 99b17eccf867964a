//! The Coach of the README: a tool with an argument struct, one without, one `#[needs_result_now]`.

use voqalize::prelude::*;

/// The parts of the screen.
#[json_type]
#[serde(rename_all = "lowercase")]
enum SectionName {
    Today,
    Week,
}

/// Which part of the screen to show.
#[json_type]
struct Section {
    /// Section to show.
    name: SectionName,
}

/// Put a section of the screen in front of the user.
#[json_type]
#[derive(Action)]
struct ShowSection {
    name: SectionName,
}

struct Coach;

#[brain]
impl Coach {
    /// Put a section of the screen in front of the user.
    #[tool]
    async fn show(&self, args: Section) -> &'static str {
        let _ = self.session().dispatch(&ShowSection { name: args.name });
        "shown"
    }

    /// Record that the user ate, now.
    #[tool]
    async fn log_meal(&self) -> &'static str {
        "logged"
    }

    /// The user's average glucose this week, in mmol/L.
    #[tool]
    #[needs_result_now]
    async fn weekly_average(&self) -> String {
        String::new()
    }
}

#[test]
fn compiles_and_runs() {
    let tools = Coach.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["show", "log_meal", "weekly_average"]);
    assert_eq!(
        tools[0].description(),
        "Put a section of the screen in front of the user."
    );
    assert_eq!(
        tools[0].schema()["properties"]["name"]["description"],
        "Section to show."
    );
    assert!(!tools[0].needs_result_now());
    assert!(!tools[1].has_arguments());
    assert!(tools[2].needs_result_now());
    assert_eq!(tools[2].method(), "Coach::weekly_average");
    assert_eq!(<ShowSection as Action>::NAME, "show_section");

    let turn = Coach.tools_for_turn();
    let out = voqalize_ui_tests::block_on(Coach.call_tool(&turn, "log_meal", "{}".into()));
    assert_eq!(out.response().to_string(), r#"{"result":"logged"}"#);
}

//! Reading scenario files: what a good one gives, and what each mistake says.

use super::*;

const GOOD: &str = r#"
name = "changes their mind"
lines = ["I'm Ana Lima, born 12 March 1984", "Tuesday please", "Actually, Friday at nine"]
max_turns = 6
barge_in = { when_said = "Tuesday" }
rubric = ["The agent books the slot the caller settled on"]
repetitions = 3
required_pass_rate = 0.66

[facts]
name = "Ana Lima"

[[expect]]
tool_called = "booked"
args = { slot = "Friday 09:00" }

[[expect]]
tool_not_called = "booked"
args = { slot = "Tuesday 10:00" }

[[expect]]
never_said = "p-17"

[[expect]]
ended = ["script_done", "agent_ended"]
"#;

#[test]
fn a_good_file_reads_into_every_field() {
    let s = Scenario::from_toml("good.toml", GOOD).expect("reads");
    assert_eq!(s.name, "changes their mind");
    assert_eq!(s.lines.len(), 3);
    assert!(s.is_scripted());
    assert_eq!(s.max_turns, 6);
    assert_eq!(s.barge_in, BargeRule::WhenSaid("Tuesday".into()));
    assert_eq!(s.facts["name"], "Ana Lima");
    assert_eq!(s.repetitions, Some(3));
    assert_eq!(s.required_pass_rate, Some(0.66));
    let checks: Vec<String> = s.checks.iter().map(Check::describe).collect();
    assert_eq!(
        checks,
        [
            r#"tool_called booked {"slot":"Friday 09:00"}"#,
            r#"tool_not_called booked {"slot":"Tuesday 10:00"}"#,
            r#"never_said "p-17""#,
            "ended script_done or agent_ended",
        ]
    );
}

#[test]
fn the_barge_in_forms_read() {
    let read = |b: &str| {
        Scenario::from_toml("b.toml", &format!("lines = [\"hi\"]\nbarge_in = {b}"))
            .map(|s| s.barge_in)
    };
    assert_eq!(read("\"never\""), Ok(BargeRule::Never));
    assert_eq!(read("{ after_words = 4 }"), Ok(BargeRule::AfterWords(4)));
    assert_eq!(read("{ random = 0.5 }"), Ok(BargeRule::Random(0.5)));
}

/// The error `text` gives, as (key, why).
fn error(text: &str) -> (String, String) {
    let e = Scenario::from_toml("clinic/bad.toml", text).expect_err("refused");
    assert_eq!(e.origin, "clinic/bad.toml");
    assert!(e.to_string().starts_with("clinic/bad.toml: "), "{e}");
    (e.key, e.why)
}

#[test]
fn an_unknown_key_is_named_with_the_keys_there_are() {
    let (key, why) = error("lines = [\"hi\"]\nmax_turn = 3");
    assert_eq!(key, "max_turn");
    assert!(why.contains("unknown field `max_turn`"), "{why}");
    assert!(why.contains("max_turns"), "the keys there are: {why}");
    let (key, why) = error("lines = [\"hi\"]\n[[expect]]\ntool_caled = \"booked\"");
    assert_eq!(key, "expect[0].tool_caled");
    assert!(why.contains("unknown field `tool_caled`"), "{why}");
    let (key, why) = error("lines = [\"hi\"]\nbarge_in = { after_word = 2 }");
    assert!(key.starts_with("barge_in"), "{key}");
    assert!(why.contains("after_word"), "{why}");
}

#[test]
fn a_bad_type_is_named_at_its_key() {
    let (key, why) = error("lines = [\"hi\"]\nmax_turns = \"six\"");
    assert_eq!(key, "max_turns");
    assert!(why.contains("invalid type"), "{why}");
    let (key, _) = error("lines = [\"hi\", 3]");
    assert_eq!(key, "lines[1]");
    let (key, _) =
        error("lines = [\"hi\"]\n[[expect]]\ntool_called = \"a\"\n[[expect]]\nturns_at_most = -1");
    assert_eq!(key, "expect[1].turns_at_most");
}

#[test]
fn a_file_that_is_not_toml_says_where() {
    let (key, why) = error("lines = [\"hi\"\nname = ");
    assert_eq!(key, "");
    assert!(why.contains("line"), "{why}");
}

#[test]
fn each_mistake_a_check_can_hold_is_named() {
    let (key, why) = error("lines = [\"hi\"]\n[[expect]]\nargs = { slot = \"x\" }");
    assert_eq!(key, "expect[0].args");
    assert!(why.contains("tool_called"), "{why}");
    let (key, why) = error("lines = [\"hi\"]\n[[expect]]\nsaid = \"a\"\nheard = \"b\"");
    assert_eq!(key, "expect[0]");
    assert!(why.contains("one kind"), "{why}");
    let (key, why) = error("lines = [\"hi\"]\n[[expect]]\nended = \"hung_up\"");
    assert_eq!(key, "expect[0].ended");
    assert!(why.contains("goal_met"), "{why}");
    let (key, _) = error("lines = [\"hi\"]\n[[expect]]\nnever_said = \" \"");
    assert_eq!(key, "expect[0].never_said");
    let (key, why) = error("lines = [\"hi\"]\n[[expect]]\n");
    assert_eq!(key, "expect[0]");
    assert!(why.contains("tool_called"), "{why}");
}

#[test]
fn a_scenario_needs_a_caller_and_sane_numbers() {
    assert_eq!(error("name = \"x\"").0, "lines");
    assert_eq!(error("persona = \"a nurse\"").0, "goal");
    assert_eq!(error("lines = [\"a\"]\ngoal = \"book\"").0, "goal");
    assert_eq!(error("lines = [\"a\"]\npersona = \"a nurse\"").0, "persona");
    assert_eq!(error("lines = [\"a\"]\nopening = \"b\"").0, "opening");
    assert_eq!(error("lines = [\"a\"]\nmax_turns = 0").0, "max_turns");
    assert_eq!(error("lines = [\"a\"]\nrepetitions = 0").0, "repetitions");
    assert_eq!(
        error("lines = [\"a\"]\nrequired_pass_rate = 1.5").0,
        "required_pass_rate"
    );
    assert_eq!(
        error("lines = [\"a\"]\nbarge_in = { random = 2.0 }").0,
        "barge_in.random"
    );
    assert_eq!(
        error("lines = [\"a\"]\nbarge_in = { after_words = 0 }").0,
        "barge_in.after_words"
    );
    let ok = Scenario::from_toml(
        "p.toml",
        "persona = \"a nurse\"\ngoal = \"book\"\nopening = \"hi\"",
    );
    assert!(ok.is_ok_and(|s| !s.is_scripted()));
}

#[test]
fn a_folder_reads_in_name_order_and_a_bad_file_is_named() {
    let dir = std::env::temp_dir().join(format!("voqalize-scenarios-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("made");
    std::fs::write(dir.join("b.toml"), "lines = [\"two\"]").expect("written");
    std::fs::write(dir.join("a.toml"), "lines = [\"one\"]").expect("written");
    std::fs::write(dir.join("notes.md"), "not a scenario").expect("written");
    let all = Scenario::load_dir(&dir).expect("read");
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"], "named by file stem, in order");
    std::fs::write(dir.join("c.toml"), "lines = [\"x\"]\nturns = 2").expect("written");
    let e = Scenario::load_dir(&dir).expect_err("c is bad");
    assert!(e.origin.ends_with("c.toml"), "{e}");
    assert!(e.why.contains("unknown field `turns`"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

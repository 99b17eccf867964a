//! The eval suite runner against brains in this process, over the real wire (the testing kit's
//! driver): the order and count of runs, pass rates against required rates, failed checks in
//! every report, a brain that never answers, a factory that panics, the JUnit XML, scenarios the
//! suite cannot play, and barge-in heard truth agreeing on both sides.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use voqalize::prelude::*;
use voqalize_testing::eval::{
    BargeRule, Check, Ending, RunReport, Scenario, Speaker, Suite, SuiteReport,
};

/// Says "Hello." and echoes every line.
struct Echo;

impl Brain for Echo {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("Hello.".to_owned()))
    }

    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }
}

/// Says "right" on the calls the factory made first, third, fifth..., and "wrong" on the others.
struct EveryOther {
    right: bool,
}

impl Brain for EveryOther {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        turn.say(if self.right { "right" } else { "wrong" });
        Ok(())
    }
}

/// A factory of [`EveryOther`] brains alternating from "right".
fn every_other() -> impl Fn() -> EveryOther + Send + Sync + 'static {
    let made = AtomicUsize::new(0);
    move || EveryOther {
        right: made.fetch_add(1, Ordering::SeqCst).is_multiple_of(2),
    }
}

/// Never answers a line.
struct Mute;

impl Brain for Mute {
    async fn on_user_message(&self, _turn: &mut Turn, _m: UserMessage) -> BrainResult {
        std::future::pending::<()>().await;
        Ok(())
    }
}

/// Says one long sentence on every line, and records the heard text of every unit finalized.
struct Talker {
    heard: Arc<Mutex<Vec<String>>>,
}

impl Brain for Talker {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        turn.say("one two three four five six seven");
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, finalized: Finalized) -> BrainResult {
        self.heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(finalized.heard);
        Ok(())
    }
}

/// Runs `suite`, bounded so a hang fails the test instead of stalling the binary.
async fn run<M: MakeBrain>(suite: Suite<M>) -> SuiteReport {
    tokio::time::timeout(Duration::from_secs(120), suite.run())
        .await
        .expect("the suite returns")
}

/// The scripted echo scenario from a scenario file's text.
fn from_file() -> Scenario {
    Scenario::from_toml(
        "ping.toml",
        r#"
        name = "ping"
        lines = ["ping", "ping again"]

        [[expect]]
        said = "ping again"

        [[expect]]
        ended = "script_done"
        "#,
    )
    .expect("a good scenario file")
}

#[tokio::test]
async fn a_suite_plays_every_scenario_its_times_in_order() {
    let report = run(Suite::new(|| Echo)
        .scenario(
            Scenario::new("hello")
                .lines(["hello there"])
                .check(Check::Heard("hello there".into())),
        )
        .scenarios([
            Scenario::new("two lines")
                .lines(["first", "second"])
                .check(Check::TurnsAtLeast(2))
                .check(Check::NeverSaid("third".into())),
            from_file(),
        ])
        .repetitions(3)
        .concurrency(2))
    .await;

    let names: Vec<&str> = report.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["hello", "two lines", "ping"]);
    for (s, checks) in report.scenarios.iter().zip([1, 2, 2]) {
        let reps: Vec<u32> = s.runs.iter().map(|r| r.repetition).collect();
        assert_eq!(reps, [1, 2, 3], "{}: runs by repetition", s.name);
        assert!(
            s.passed && (s.pass_rate - 1.0).abs() < f64::EPSILON,
            "{report}"
        );
        for run in &s.runs {
            assert!(run.passed, "{}", run.problems.join("; "));
            assert_eq!(run.transcript.ending, Ending::ScriptDone);
            assert_eq!(run.checks.len(), checks);
        }
    }
    let greeting = &report.scenarios[0].runs[0].transcript.lines[0];
    assert_eq!(
        (greeting.speaker, greeting.heard.as_str()),
        (Speaker::Agent, "Hello."),
        "the greeting was awaited"
    );
    let seeds: Vec<u64> = report.scenarios[2].runs.iter().map(|r| r.seed).collect();
    assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2], "{seeds:?}");
    assert!(report.passed());
    assert_eq!(report.exit_code(), ExitCode::SUCCESS);
    let table = report.to_string();
    assert!(table.contains("two lines"), "{table}");
    assert!(
        table.contains("3 of 3 scenarios passed, 9 of 9 runs passed"),
        "{table}"
    );
    assert!(!table.contains("failed runs"), "{table}");
}

#[tokio::test]
async fn a_failing_check_reaches_the_table_the_junit_failure_and_the_exit_code() {
    let report = run(Suite::new(|| Echo).scenario(
        Scenario::new("goodbye")
            .lines(["hello"])
            .check(Check::Said("goodbye".into())),
    ))
    .await;

    let run = &report.scenarios[0].runs[0];
    assert!(!run.passed);
    assert!(!report.passed());
    assert_eq!(report.exit_code(), ExitCode::FAILURE);
    let table = report.to_string();
    assert!(table.contains("FAIL"), "{table}");
    assert!(
        table.contains("check `said \"goodbye\"` failed: the agent never said it"),
        "{table}"
    );
    let xml = report.junit_xml();
    well_formed(&xml);
    assert!(
        xml.contains(
            "<failure message=\"check `said &quot;goodbye&quot;` failed: the agent never said it\""
        ),
        "{xml}"
    );
    assert!(xml.contains("tests=\"1\" failures=\"1\""), "{xml}");
    let dir = std::env::temp_dir().join(format!("voqalize-evals-{}", std::process::id()));
    report.write_to(&dir).expect("the report is written");
    let written = std::fs::read_to_string(dir.join("report.txt")).expect("report.txt");
    assert_eq!(written, table);
    assert_eq!(
        std::fs::read_to_string(dir.join("junit.xml")).ok(),
        Some(xml.clone())
    );
    assert!(dir.join("transcripts.txt").is_file());
    let blocked = dir.join("report.txt").join("below a file");
    let err = report
        .write_to(&blocked)
        .expect_err("a folder below a file");
    assert!(err.to_string().contains("below a file"), "{err}");
    std::fs::remove_dir_all(&dir).expect("removed");
    assert!(
        xml.contains(
            "<system-out>agent: Hello.&#10;caller: hello&#10;agent: hello&#10;ended: script_done"
        ),
        "{xml}"
    );
}

#[tokio::test]
async fn half_the_runs_failing_meets_a_half_rate_and_a_scenarios_own_rate_wins() {
    let scenario = || {
        Scenario::new("right")
            .lines(["well?"])
            .check(Check::Said("right".into()))
    };
    let half = run(Suite::new(every_other())
        .scenario(scenario())
        .repetitions(4)
        .required_pass_rate(0.5)
        .greeting(false))
    .await;
    let s = &half.scenarios[0];
    assert_eq!(s.passed_runs(), 2, "{half}");
    assert!((s.pass_rate - 0.5).abs() < f64::EPSILON);
    assert!(s.passed && half.passed(), "{half}");
    assert_eq!(half.exit_code(), ExitCode::SUCCESS);

    let strict = run(Suite::new(every_other())
        .scenario(scenario().required_pass_rate(0.75))
        .repetitions(4)
        .required_pass_rate(0.5)
        .greeting(false))
    .await;
    assert_eq!(strict.scenarios[0].passed_runs(), 2);
    assert!(!strict.passed(), "{strict}");
    assert_eq!(strict.exit_code(), ExitCode::FAILURE);
    assert!(strict.to_string().contains("75%"), "{strict}");
}

#[tokio::test]
async fn a_brain_that_never_answers_is_cut_at_the_deadline() {
    let report = run(Suite::new(|| Mute)
        .scenario(Scenario::new("mute").lines(["hello?", "anyone?"]))
        .deadline(Duration::from_secs(2))
        .turn_timeout(Duration::from_secs(60))
        .greeting(false))
    .await;

    let run = &report.scenarios[0].runs[0];
    assert_eq!(run.transcript.ending, Ending::Deadline, "{report}");
    assert!(!run.passed);
    assert!(run.problems.iter().any(|p| p == "the call ended: deadline"));
    assert!(report.to_string().contains("ended deadline"), "{report}");

    // A scenario that expects the deadline accepts it.
    let accepted = run_accepting_deadline().await;
    assert!(accepted.passed(), "{accepted}");
}

/// The mute brain's scenario with `ended = "deadline"` checked.
async fn run_accepting_deadline() -> SuiteReport {
    run(Suite::new(|| Mute)
        .scenario(
            Scenario::new("mute, as expected")
                .lines(["hello?"])
                .check(Check::Ended(vec!["deadline".into()])),
        )
        .deadline(Duration::from_secs(1))
        .greeting(false))
    .await
}

#[tokio::test]
async fn a_run_that_panics_fails_alone_and_the_suite_goes_on() {
    let made = AtomicUsize::new(0);
    let factory = move || {
        assert!(
            made.fetch_add(1, Ordering::SeqCst) != 1,
            "the second brain cannot be made"
        );
        Echo
    };
    let report = run(Suite::new(factory)
        .scenario(Scenario::new("factory").lines(["hi"]))
        .scenario(Scenario::new("check").lines(["hi"]).check(Check::custom(
            "a check that panics",
            |_| -> Result<(), String> { panic!("this check panics") },
        )))
        .repetitions(3)
        .concurrency(1))
    .await;

    let factory = &report.scenarios[0];
    let passed: Vec<bool> = factory.runs.iter().map(|r| r.passed).collect();
    assert_eq!(passed, [true, false, true], "{report}");
    let Ending::Failed(why) = &factory.runs[1].transcript.ending else {
        panic!("the refused call failed: {report}");
    };
    assert!(why.contains("brain factory failed"), "{why}");
    let check = &report.scenarios[1];
    assert_eq!(check.passed_runs(), 0);
    for run in &check.runs {
        assert!(
            run.problems[0].contains("this check panics"),
            "{:?}",
            run.problems
        );
    }
    assert_eq!(report.exit_code(), ExitCode::FAILURE);
}

#[tokio::test]
async fn the_junit_xml_escapes_what_the_brain_said_and_stays_well_formed() {
    let nasty = "<b>Tom & \"Jerry\"</b> 'x' \u{1}\u{1b}[31m ]]> end";
    let report = run(Suite::new(|| Echo)
        .scenario(
            Scenario::new("a <name> & \"quotes\"")
                .lines([nasty])
                .check(Check::Said("nothing like this".into())),
        )
        .greeting(false))
    .await;

    let xml = report.junit_xml();
    well_formed(&xml);
    assert!(
        xml.contains(
            "&lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt; &apos;x&apos; [31m ]]&gt; end"
        ),
        "{xml}"
    );
    assert!(
        xml.contains("name=\"a &lt;name&gt; &amp; &quot;quotes&quot;\""),
        "{xml}"
    );
    assert!(!xml.contains('\u{1}') && !xml.contains('\u{1b}'), "{xml}");
    assert!(
        report.transcripts().contains(nasty),
        "the transcripts keep the text verbatim"
    );
}

#[tokio::test]
async fn a_scenario_the_suite_cannot_play_fails_saying_why() {
    let report = run(Suite::new(|| Echo)
        .scenario(
            Scenario::new("persona")
                .persona("a patient", "book a visit")
                .check(Check::Ended(vec!["failed".into()])),
        )
        .scenario(
            Scenario::new("rubric")
                .lines(["hi"])
                .rubric("the agent is polite"),
        )
        .scenario(Scenario::new("nobody").check(Check::TurnsAtLeast(1)))
        .scenario(Scenario::new("rubric").lines(["hello"]))
        .scenario(
            Scenario::new("empty")
                .lines(["hi"])
                .check(Check::Said(" ".into())),
        ))
    .await;

    let why = |run: &RunReport| match &run.transcript.ending {
        Ending::Failed(why) => why.clone(),
        other => panic!("ended {other}"),
    };
    let persona = why(&report.scenarios[0].runs[0]);
    assert!(
        persona.contains("has a persona but the suite has no caller: Suite::caller(...)"),
        "{persona}"
    );
    let rubric = why(&report.scenarios[1].runs[0]);
    assert!(
        rubric.contains("has a rubric but the suite has no judge: Suite::judge(...)"),
        "{rubric}"
    );
    assert!(
        !report.scenarios[0].runs[0].passed,
        "unplayable, even with its failure expected"
    );
    let nobody = &report.scenarios[2].runs[0];
    assert!(
        why(nobody).contains("has no caller: give it `lines`"),
        "{}",
        why(nobody)
    );
    assert!(
        nobody.checks.is_empty(),
        "a call never played is not checked"
    );
    let twin = why(&report.scenarios[3].runs[0]);
    assert!(
        twin.contains("another scenario of the suite is named"),
        "{twin}"
    );
    let empty = &report.scenarios[4].runs[0];
    assert!(!empty.passed, "an empty phrase checks nothing, so it fails");
    assert!(empty.checks[0].why.contains("empty"), "{:?}", empty.checks);
    assert!(!report.passed());
    assert!(report.to_string().contains("has a persona"), "{report}");
}

#[tokio::test]
async fn a_barge_in_after_two_words_is_heard_the_same_on_both_sides() {
    let heard: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = heard.clone();
    let report = run(Suite::new(move || Talker { heard: log.clone() })
        .scenario(
            Scenario::new("barge")
                .lines(["talk to me"])
                .barge_in(BargeRule::AfterWords(2))
                .check(Check::Heard("one two".into()))
                .check(Check::NeverSaid("three".into())),
        )
        .greeting(false))
    .await;

    let run = &report.scenarios[0].runs[0];
    let agent = run
        .transcript
        .agent_lines()
        .next()
        .expect("the agent answered");
    assert_eq!(agent.heard, "one two");
    assert_eq!(agent.unheard, "three four five six seven");
    assert!(agent.cut);
    assert_eq!(
        heard.lock().unwrap_or_else(|p| p.into_inner()).as_slice(),
        ["one two"],
        "the brain's heard truth"
    );
    assert!(!run.checks[0].why.contains("cut"), "{:?}", run.checks);
    assert!(run.checks[0].passed, "heard: {:?}", run.checks[0]);
    assert!(
        !run.checks[1].passed,
        "said, not heard: never_said still fails"
    );
    assert!(
        report
            .transcripts()
            .contains("agent: one two [unheard: three four five six seven]"),
        "{}",
        report.transcripts()
    );
}

/// Panics unless `xml` is well-formed as far as these reports go: one root, every tag closed in
/// order, no raw `<` or `&` in text, attribute values quoted, only the five named entities and
/// numeric references.
fn well_formed(xml: &str) {
    let body = xml
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        .expect("an XML declaration");
    let mut stack: Vec<String> = Vec::new();
    let mut rest = body;
    let mut roots = 0;
    while let Some(open) = rest.find('<') {
        entities_ok(&rest[..open]);
        let close = rest[open..].find('>').expect("a tag ends") + open;
        let tag = &rest[open + 1..close];
        assert!(!tag.contains('<'), "a raw < in a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "closed in order");
        } else {
            let self_closing = tag.ends_with('/');
            let tag = tag.trim_end_matches('/');
            let name = tag.split_whitespace().next().expect("a tag name");
            attributes_ok(&tag[name.len()..]);
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name.to_owned());
            }
        }
        rest = &rest[close + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(roots, 1, "one root");
    assert!(rest.trim().is_empty(), "nothing after the root");
}

/// `text` holds `&` only as an entity or a character reference, and no `>` after `]]`.
fn entities_ok(text: &str) {
    assert!(!text.contains("]]>"), "]]> in text");
    let mut parts = text.split('&');
    parts.next();
    for part in parts {
        let entity = &part[..part.find(';').expect("an entity ends")];
        let ok = ["amp", "lt", "gt", "quot", "apos"].contains(&entity)
            || entity
                .strip_prefix('#')
                .is_some_and(|n| n.parse::<u32>().is_ok());
        assert!(ok, "a bad entity: &{entity};");
    }
}

/// ` a="x" b="y"`: every value double-quoted, with no raw `"` or `<` inside.
fn attributes_ok(attributes: &str) {
    let mut rest = attributes.trim();
    while !rest.is_empty() {
        let eq = rest.find("=\"").expect("name=\"value\"");
        let value_end = rest[eq + 2..].find('"').expect("a value ends") + eq + 2;
        entities_ok(&rest[eq + 2..value_end]);
        rest = rest[value_end + 1..].trim_start();
    }
}

#[tokio::test]
async fn the_judge_is_asked_only_about_a_run_that_may_still_pass() {
    let server = voqalize_testing::ModelServer::start(voqalize_testing::Provider::Gemini)
        .await
        .expect("a port");
    server.answer_with(|_: &voqalize_testing::ReadBack| {
        voqalize_testing::Reply::new()
            .text(
                r#"{"verdict": "pass", "reasons": [{"item": "1", "quote": "hi", "why": "said"}]}"#,
            )
            .finish()
    });
    let judge = voqalize_testing::eval::Judge::new(crate::support::layer(
        voqalize_testing::Provider::Gemini,
        &server.base_url(),
        "judge",
        voqalize::model::Timeouts::default(),
    ));
    let report = run(Suite::new(|| Echo)
        .judge(judge)
        .scenario(Scenario::new("fine").lines(["hi"]).rubric("it echoes"))
        .scenario(
            Scenario::new("broken")
                .lines(["hi"])
                .rubric("it echoes")
                .check(Check::Said("goodbye".into())),
        ))
    .await;
    assert!(report.scenarios[0].passed, "{report}");
    assert!(report.scenarios[0].runs[0].judgement.is_some());
    let broken = &report.scenarios[1].runs[0];
    assert!(!broken.passed);
    assert!(
        broken.judgement.is_none(),
        "a run whose check failed is not judged"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "one judge request, for the run that may pass"
    );
}

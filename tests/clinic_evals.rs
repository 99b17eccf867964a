//! The clinic's eval suite (`examples/evals/clinic`) against the clinic's desk, offline: the desk,
//! the simulated caller and the judge are answered by stand-in models playing by rules
//! (`examples/support/clinic_offline.rs`). The suite passes; a desk with a planted bug fails it,
//! naming the check; a judge's fail reaches the report, the JUnit XML and the exit code; the
//! `clinic_evals` example runs a folder as a team's CI would and exits by the result.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use voqalize::prelude::*;
use voqalize_testing::eval::{
    Ending, Judge, Scenario, SimulatedCaller, Speaker, Suite, SuiteReport,
};
use voqalize_testing::{ModelServer, Provider, ReadBack, Reply};

use crate::support::layer;

// The example's `pub` items are what a user copies; in this crate they reach no further.
#[allow(unreachable_pub, dead_code)]
#[path = "../examples/support/clinic_offline.rs"]
mod clinic_offline;

use crate::clinic::clinic_desk::{Desk, Ledger, Patient, Records};

/// The scenario folder the example runs.
fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/evals/clinic")
}

fn scenarios() -> Vec<Scenario> {
    Scenario::load_dir(folder()).expect("the clinic's scenarios read")
}

fn timeouts() -> voqalize::model::Timeouts {
    voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(10),
        gap: Duration::from_secs(10),
    }
}

/// A stand-in Gemini answering by `rules`.
async fn stand_in(rules: impl Fn(&ReadBack) -> Reply + Send + Sync + 'static) -> ModelServer {
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    server.answer_with(rules);
    server
}

/// `scenarios` against the desk on records from `records` (fresh for each call), every model a
/// stand-in playing by the clinic's offline rules.
async fn run<R: Records>(
    records: impl Fn() -> R + Send + Sync + 'static,
    scenarios: Vec<Scenario>,
) -> SuiteReport {
    let (desk, caller, judge) = (
        stand_in(clinic_offline::desk).await,
        stand_in(clinic_offline::simulated_caller).await,
        stand_in(clinic_offline::judge).await,
    );
    let at = |s: &ModelServer, name| layer(Provider::Gemini, &s.base_url(), name, timeouts());
    let desk_layer = at(&desk, "desk");
    Suite::new(move || Desk::new(Model::new(desk_layer.clone()), Arc::new(records())))
        .scenarios(scenarios)
        .caller(SimulatedCaller::new(at(&caller, "caller")))
        .judge(Judge::new(at(&judge, "judge")))
        .greeting(false)
        .run()
        .await
}

#[tokio::test]
async fn the_clinic_suite_passes_offline_with_its_cuts_heard_as_cut() {
    let report = run(Ledger::new, scenarios()).await;
    assert!(report.passed(), "{report}\n{}", report.transcripts());
    assert_eq!(report.exit_code(), ExitCode::SUCCESS);
    assert_eq!(report.scenarios.len(), 6, "{report}");
    let call = |name: &str| {
        let s = report
            .scenarios
            .iter()
            .find(|s| s.name == name)
            .expect(name);
        s.runs[0].transcript.clone()
    };
    // Cut when "Tuesday" was said: heard through it, the rest not.
    let mind = call("changes_mind");
    let cut = mind.agent_lines().find(|l| l.cut).expect("a cut answer");
    assert!(cut.heard.ends_with("Tuesday"), "{cut:?}");
    assert!(cut.unheard.starts_with("10:00"), "{cut:?}");
    // Every answer with more than four words was cut at four.
    let rushed = call("interrupts_every_answer");
    for line in rushed.agent_lines().filter(|l| !l.unheard.is_empty()) {
        assert!(line.cut, "{line:?}");
        assert_eq!(line.heard.split_whitespace().count(), 4, "{line:?}");
    }
    assert!(rushed.agent_lines().any(|l| l.cut), "{rushed:?}");
    // The simulated caller hung up with its goal met, and the judge passed on a quote.
    let simulated = &report.scenario("simulated_caller").expect("simulated").runs[0];
    assert_eq!(simulated.transcript.ending, Ending::GoalMet);
    assert_eq!(
        simulated
            .transcript
            .lines
            .first()
            .map(|l| (l.speaker, l.heard.as_str())),
        Some((Speaker::Caller, "Hi, I'd like to book an appointment."))
    );
    let judged = simulated.judgement.as_ref().expect("judged");
    assert!(judged.reasons.iter().all(|r| r.quoted), "{judged:?}");
    assert!(
        !simulated.transcript.caller_counts.is_empty(),
        "the caller's tokens are counted"
    );
}

/// The clinic's records with a planted bug: a caller is found by name alone, so a misheard date
/// of birth still verifies them.
struct NameOnly(Ledger);

impl Records for NameOnly {
    fn find(&self, name: &str, _date_of_birth: &str) -> Option<Patient> {
        ["1984-03-12", "1990-11-02", "1975-06-30"]
            .into_iter()
            .find_map(|dob| self.0.find(name, dob))
    }

    fn chart(&self, patient_id: &str) -> impl Future<Output = Option<String>> + Send {
        self.0.chart(patient_id)
    }

    fn open_slots(&self) -> Vec<String> {
        self.0.open_slots()
    }

    fn book(&self, patient_id: &str, slot: &str) -> Result<String, String> {
        self.0.book(patient_id, slot)
    }

    fn send_reminder(&self, patient_id: &str, slot: &str) {
        self.0.send_reminder(patient_id, slot);
    }
}

#[tokio::test]
async fn a_planted_bug_fails_the_suite_by_the_check_it_breaks() {
    let report = run(|| NameOnly(Ledger::new()), scenarios()).await;
    assert!(!report.passed(), "{report}");
    assert_eq!(report.exit_code(), ExitCode::FAILURE);
    let failed: Vec<&str> = report.failed().map(|s| s.name.as_str()).collect();
    assert_eq!(failed, ["tool_fails"], "{report}");
    let text = report.to_string();
    assert!(text.contains(r#"heard "can't find you""#), "{text}");
}

#[tokio::test]
async fn a_judges_fail_reaches_the_report_the_junit_and_the_exit_code() {
    let mut scenario = scenarios()
        .into_iter()
        .find(|s| s.name == "simulated_caller")
        .expect("the simulated scenario");
    scenario.rubric = vec![r#"The desk books a weekend slot, saying "Booked Saturday""#.into()];
    let report = run(Ledger::new, vec![scenario]).await;
    assert!(!report.passed(), "{report}");
    assert_eq!(report.exit_code(), ExitCode::FAILURE);
    let run = &report.scenarios[0].runs[0];
    assert!(
        run.checks.iter().all(|c| c.passed),
        "only the judge fails: {report}"
    );
    let text = report.to_string();
    assert!(text.contains("fail"), "{text}");
    assert!(
        text.contains(r#"the call never says \"Booked Saturday\""#)
            || text.contains("the call never says \"Booked Saturday\""),
        "{text}"
    );
    let junit = report.junit_xml();
    assert!(junit.contains("<failure"), "{junit}");
    assert!(junit.contains("Booked Saturday"), "{junit}");
}

/// The built `clinic_evals` example (`scripts/test-all` builds it).
fn example() -> PathBuf {
    crate::deploy::example("clinic_evals")
}

#[tokio::test]
async fn the_example_runs_a_folder_writes_its_reports_and_exits_by_the_result() {
    let out = std::env::temp_dir().join(format!("voqalize-clinic-evals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let passing = tokio::process::Command::new(example())
        .args(["--provider", "offline", "--out"])
        .arg(out.join("passing"))
        .output()
        .await
        .expect("the example runs");
    let said = String::from_utf8_lossy(&passing.stdout);
    assert!(
        passing.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&passing.stderr)
    );
    let junit = std::fs::read_to_string(out.join("passing/junit.xml")).expect("junit.xml written");
    assert_eq!(junit.matches("<testcase").count(), 6, "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
    // A folder with a scenario the desk cannot pass: a non-zero exit, the failure in the files.
    let folder = out.join("failing-scenarios");
    std::fs::create_dir_all(&folder).expect("made");
    std::fs::write(
        folder.join("saturday.toml"),
        "lines = [\"I'm Ana Lima, born 1984-03-12\", \"Saturday please\"]\n\
         [[expect]]\ntool_called = \"booked\"\nargs = { slot = \"Saturday 09:00\" }\n",
    )
    .expect("written");
    let failing = tokio::process::Command::new(example())
        .args(["--provider", "offline", "--scenarios"])
        .arg(&folder)
        .arg("--out")
        .arg(out.join("failing"))
        .output()
        .await
        .expect("the example runs");
    assert_eq!(
        failing.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&failing.stdout)
    );
    let junit = std::fs::read_to_string(out.join("failing/junit.xml")).expect("junit.xml written");
    assert!(junit.contains("<failure"), "{junit}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A call to the desk, recorded: the caller gives their details, then picks Friday.
async fn a_recorded_call() -> voqalize::record::Recording {
    let desk = stand_in(clinic_offline::desk).await;
    let base = desk.base_url();
    crate::replay::recorded(
        move || {
            let model = Model::new(layer(Provider::Gemini, &base, "desk", timeouts()));
            Desk::new(model, Arc::new(Ledger::new()))
        },
        async |v| {
            for line in ["Hi, I'm Ana Lima, born 1984-03-12", "Friday please"] {
                // What the desk answered does not matter here: the caller's lines do.
                let _ = v.user_says_within(line, Duration::from_secs(10)).await;
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_recorded_call_becomes_a_scripted_scenario_and_a_simulated_one() {
    let recording = a_recorded_call().await;
    let scripted = Scenario::from_recording("recorded", &recording).check(
        voqalize_testing::eval::Check::ToolCalled {
            tool: "booked".into(),
            args: Some(voqalize::json!({"slot": "Friday 09:00"})),
        },
    );
    assert_eq!(
        scripted.lines,
        ["Hi, I'm Ana Lima, born 1984-03-12", "Friday please"]
    );
    // A model summarises the recorded caller into a persona (here a stand-in that checks it
    // was given the caller's lines, and only theirs).
    let summariser = stand_in(|request: &ReadBack| {
        let asked = format!("{:?}", request.said);
        if !asked.contains("caller: Friday please") || asked.contains("Booked") {
            return Reply::new().text("no").finish();
        }
        let persona = voqalize::json!({
            "persona": "Ana Lima, a patient who wants the Friday slot",
            "goal": "Book Friday's appointment",
            "facts": {"name": "Ana Lima", "date_of_birth": "1984-03-12", "day": "Friday"},
        });
        Reply::new().text(&format!("Here: {persona}")).finish()
    })
    .await;
    let at = layer(
        Provider::Gemini,
        &summariser.base_url(),
        "summariser",
        timeouts(),
    );
    let simulated =
        Scenario::persona_from_recording("persona", &recording, at, Duration::from_secs(10))
            .await
            .expect("summarised");
    assert_eq!(simulated.goal, "Book Friday's appointment");
    assert_eq!(
        simulated.opening.as_deref(),
        Some("Hi, I'm Ana Lima, born 1984-03-12")
    );
    assert_eq!(simulated.facts["day"], "Friday");
    let simulated = simulated.check(voqalize_testing::eval::Check::Ended(vec![
        "goal_met".into(),
    ]));
    let report = run(Ledger::new, vec![scripted, simulated]).await;
    assert!(report.passed(), "{report}\n{}", report.transcripts());
    // A summariser that answers no JSON is an error saying so.
    let garbage =
        stand_in(|_: &ReadBack| Reply::new().text("Sure! She sounded nice.").finish()).await;
    let at = layer(
        Provider::Gemini,
        &garbage.base_url(),
        "summariser",
        timeouts(),
    );
    let e = Scenario::persona_from_recording("p", &recording, at, Duration::from_secs(10))
        .await
        .expect_err("no JSON");
    assert!(e.why.contains("no JSON object"), "{e}");
}

//! Attacks on the evals: a hostile brain under test, a hostile model playing the simulated
//! caller or the judge (a stand-in provider on 127.0.0.1), and a hostile scenario file. Each
//! test pins a bound: in bytes, in counts, in time, and no panic.

use std::time::Duration;

use voqalize::prelude::*;
use voqalize_testing::eval::{
    BargeRule, Ending, MAX_CALL_TEXT_BYTES, MAX_LINE_BYTES, Scenario, Speaker, Suite, SuiteReport,
};

/// Runs `suite`, bounded so a hang fails the test instead of stalling the binary.
async fn run<M: MakeBrain>(suite: Suite<M>) -> SuiteReport {
    tokio::time::timeout(Duration::from_secs(120), suite.run())
        .await
        .expect("the suite returns")
}

/// Streams speech within one turn until the turn is cut: a unit of endless small chunks.
struct Endless;

impl Brain for Endless {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        let chunk = "blah ".repeat(200);
        loop {
            turn.say(&chunk);
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test]
async fn a_brain_that_talks_forever_in_one_turn_leaves_a_bounded_transcript() {
    let report = run(Suite::new(|| Endless)
        .scenario(Scenario::new("endless").lines(["hi"]))
        .greeting(false)
        .turn_timeout(Duration::from_secs(2))
        .deadline(Duration::from_secs(6)))
    .await;
    let run = &report.scenarios[0].runs[0];
    let agent: usize = run
        .transcript
        .lines
        .iter()
        .filter(|l| l.speaker == Speaker::Agent)
        .map(|l| l.heard.len() + l.unheard.len())
        .sum();
    assert!(
        agent <= 2 * MAX_LINE_BYTES + 1024,
        "the agent's line is bounded: {agent} bytes"
    );
    assert!(
        run.transcript.lines[1].heard.ends_with("more bytes cut]"),
        "the cut is marked"
    );
    assert!(report.junit_xml().len() < 1024 * 1024);
}

/// Answers every line with 100 KiB of text.
struct Verbose;

impl Brain for Verbose {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        turn.say(&"word ".repeat(20 * 1024));
        Ok(())
    }
}

#[tokio::test]
async fn a_call_of_many_long_answers_ends_at_its_text_bound() {
    let lines: Vec<String> = (0..80).map(|i| format!("line {i}")).collect();
    let report = run(Suite::new(|| Verbose)
        .scenario(Scenario::new("verbose").lines(lines).max_turns(100))
        .greeting(false))
    .await;
    let run = &report.scenarios[0].runs[0];
    let bytes: usize = run
        .transcript
        .lines
        .iter()
        .map(|l| l.heard.len() + l.unheard.len())
        .sum();
    assert!(
        bytes <= MAX_CALL_TEXT_BYTES + 2 * MAX_LINE_BYTES + 1024,
        "the call's text is bounded: {bytes} bytes"
    );
    assert!(
        matches!(&run.transcript.ending, Ending::Failed(why) if why.contains("bytes of text")),
        "{}",
        run.transcript.ending
    );
}

/// A scratch folder of its own under the target folder, emptied.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "voqalize-eval-attacks-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

#[cfg(unix)]
#[tokio::test]
async fn a_scenario_file_that_grows_past_its_size_as_it_is_read_is_refused() {
    // A FIFO reports 0 bytes, then gives as much as its writer writes: the size check must hold
    // for what is read, not only for what the file said it had.
    let dir = scratch("fifo");
    let path = dir.join("grows.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            use std::io::Write as _;
            let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&path) else {
                return;
            };
            let comment = format!("# {}\n", "x".repeat(1000));
            for _ in 0..1024 {
                if f.write_all(comment.as_bytes()).is_err() {
                    return; // the reader stopped reading: as it should
                }
            }
            let _ = f.write_all(b"lines = [\"hi\"]\n");
        })
    };
    let loaded = tokio::task::spawn_blocking(move || Scenario::load(&path))
        .await
        .expect("load returns");
    let _ = writer.join();
    let err = loaded.expect_err("a file past the size bound is refused");
    assert!(err.to_string().contains("grows.toml"), "{err}");
    assert!(err.why.contains("bytes"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_scenario_file_asking_for_billions_of_runs_is_refused_by_key() {
    let err = Scenario::from_toml("many.toml", "lines = [\"hi\"]\nrepetitions = 4000000000\n")
        .expect_err("too many runs");
    assert_eq!(err.key, "repetitions", "{err}");
    assert!(err.to_string().starts_with("many.toml: "), "{err}");
}

/// A call where the agent said little: "Hello." then "Goodbye." (its second cut short).
fn short_call() -> voqalize_testing::eval::Transcript {
    use voqalize_testing::eval::{Line, Transcript};
    let line = |speaker, heard: &str, unheard: &str| Line::new(speaker, heard, unheard);
    let mut call = Transcript::empty(Ending::GoalMet);
    call.lines = vec![
        line(Speaker::Caller, "Hi", ""),
        line(Speaker::Agent, "Hello.", ""),
        line(Speaker::Caller, "Bye", ""),
        line(Speaker::Agent, "Good", "bye."),
    ];
    call
}

#[tokio::test]
async fn a_judge_quoting_only_the_transcripts_labels_backs_nothing() {
    use voqalize_testing::Reply;
    use voqalize_testing::eval::{Judge, Verdict};
    let (server, layer) = crate::evals_judge::gemini().await;
    let judge = Judge::new(layer);
    let scenario = Scenario::new("labels")
        .persona("a caller", "book a table")
        .rubric("The agent books a table");
    for quote in ["agent:", "caller: hi", "[unheard:", "unheard"] {
        let answer = serde_json::json!({
            "verdict": "pass",
            "reasons": [{"item": "The agent books a table", "quote": quote, "why": "it did"}],
        });
        server.reply(Reply::new().text(&answer.to_string()).finish());
        let j = judge.judge(&scenario, &short_call()).await;
        assert_eq!(j.verdict, Verdict::Unsure, "quote {quote:?}: {j:?}");
    }
    // Words the agent said, heard and unheard, still back a verdict.
    let answer = serde_json::json!({
        "verdict": "fail",
        "reasons": [{"item": "The agent books a table", "quote": "good bye.", "why": "no booking"}],
    });
    server.reply(Reply::new().text(&answer.to_string()).finish());
    let j = judge.judge(&scenario, &short_call()).await;
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
}

/// Echoes every line.
struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }
}

#[tokio::test]
async fn a_suite_with_no_practical_timeouts_still_plays() {
    // `Duration::MAX` reads "no limit": the run is played, never a panic on an instant's overflow.
    let report = run(Suite::new(|| Echo)
        .scenario(Scenario::new("forever").lines(["ping", "pong"]))
        .greeting(false)
        .turn_timeout(Duration::MAX)
        .deadline(Duration::MAX))
    .await;
    let run = &report.scenarios[0].runs[0];
    assert!(run.passed, "{report}");
    assert_eq!(run.transcript.ending, Ending::ScriptDone);
}

/// Answers with one unit of 20,000 one-word chunks, yielding as a streamed answer does.
struct Chatty;

impl Brain for Chatty {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        let mut unit = turn.open_unit();
        for i in 0..20_000 {
            unit.write("la ");
            if i % 20 == 0 {
                tokio::task::yield_now().await;
            }
        }
        unit.close();
        Ok(())
    }
}

#[tokio::test]
async fn an_answer_of_many_tiny_chunks_is_played_out_whole_under_a_phrase_rule() {
    // The phrase never comes: the driver looks for it as each chunk arrives, and must keep up
    // (a driver that falls behind makes the runtime shed the brain's speech).
    let report = run(Suite::new(|| Chatty)
        .scenario(
            Scenario::new("chatty")
                .lines(["hi"])
                .barge_in(BargeRule::WhenSaid("never said".into())),
        )
        .greeting(false)
        .turn_timeout(Duration::from_secs(60)))
    .await;
    let run = &report.scenarios[0].runs[0];
    assert_eq!(run.transcript.ending, Ending::ScriptDone, "{report}");
    assert_eq!(
        run.transcript.lines[1].heard.len(),
        "la ".len() * 20_000 - 1
    );
}

#[tokio::test]
async fn a_huge_scenario_name_is_bounded_in_every_report() {
    let name = "n".repeat(100_000);
    let report = run(Suite::new(|| Echo)
        .scenario(Scenario::new(name).lines(["ping"]).repetitions(20))
        .greeting(false))
    .await;
    assert!(report.passed(), "{report}");
    let junit = report.junit_xml();
    assert!(junit.len() < 256 * 1024, "JUnit of {} bytes", junit.len());
    let transcripts = report.transcripts();
    assert!(
        transcripts.len() < 256 * 1024,
        "transcripts of {} bytes",
        transcripts.len()
    );
    assert!(report.to_string().len() < 64 * 1024);
}

/// Ends the call in the middle of its answer, then goes on talking.
struct Leaves;

impl Brain for Leaves {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        turn.say("One moment please, let me");
        turn.session().end("bye");
        turn.say("check that for you");
        Ok(())
    }
}

#[tokio::test]
async fn a_brain_that_ends_the_call_mid_answer_ends_the_run_as_agent_ended() {
    let report = run(Suite::new(|| Leaves)
        .scenario(Scenario::new("leaves").lines(["hi", "hello?"]))
        .scenario(
            Scenario::new("leaves, cut")
                .lines(["hi", "hello?"])
                .barge_in(BargeRule::AfterWords(2)),
        )
        .greeting(false)
        .deadline(Duration::from_secs(20)))
    .await;
    for s in &report.scenarios {
        let t = &s.runs[0].transcript;
        assert_eq!(t.ending, Ending::AgentEnded, "{}: {report}", s.name);
        assert_eq!(t.caller_turns(), 1, "{}", s.name);
    }
}

/// Says one sentence as three units, then keeps opening units for a while after.
struct Stubborn;

impl Brain for Stubborn {
    async fn on_user_message(&self, turn: &mut Turn, _m: UserMessage) -> BrainResult {
        turn.say("one two three");
        turn.say("four five");
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            turn.say("six");
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_brain_talking_on_after_the_barge_in_is_heard_only_to_the_cut() {
    let report = run(Suite::new(|| Stubborn)
        .scenario(
            Scenario::new("stubborn")
                .lines(["hi"])
                .barge_in(BargeRule::AfterWords(2)),
        )
        .greeting(false))
    .await;
    let t = &report.scenarios[0].runs[0].transcript;
    assert_eq!(t.lines[1].heard, "one two", "{report}");
    assert!(t.lines[1].cut);
}

#[tokio::test]
async fn a_caller_model_hanging_up_at_once_or_answering_a_megabyte_in_one_piece_ends_in_bounds() {
    use voqalize_testing::Reply;
    use voqalize_testing::eval::SimulatedCaller;
    let (server, layer) = crate::evals_judge::gemini().await;
    // The first move of each run decides: a bare marker, or a megabyte with no marker.
    server.answer_with(|asked| {
        let goal = asked.instruction.as_deref().unwrap_or_default();
        if goal.contains("hang up at once") {
            Reply::new().text("[HANG UP: goal met]").finish()
        } else {
            Reply::new().text(&"blah ".repeat(200_000)).finish()
        }
    });
    let report = run(Suite::new(|| Echo)
        .scenario(Scenario::new("at once").persona("a caller", "hang up at once"))
        .scenario(
            Scenario::new("megabyte")
                .persona("a caller", "talk a lot")
                .max_turns(3),
        )
        .caller(SimulatedCaller::new(layer).timeout(Duration::from_secs(30)))
        .greeting(false))
    .await;
    let at_once = &report.scenarios[0].runs[0].transcript;
    assert_eq!(at_once.ending, Ending::GoalMet, "{report}");
    assert_eq!(at_once.caller_turns(), 0);
    // A megabyte in one streamed event passes the response's own byte bound: the request fails,
    // and the run with it (a reply streamed in pieces is cut to the line bound instead).
    let megabyte = &report.scenarios[1].runs[0].transcript;
    assert!(
        matches!(&megabyte.ending, Ending::Failed(why) if why.contains("bound")),
        "{report}"
    );
    assert!(megabyte.lines.is_empty());
    assert!(report.to_string().len() < 16 * 1024);
}

//! Recording a call and replaying it against another build of the brain: a model-backed brain
//! on a real session socket records its call to a file (frames, model requests, tool calls); the
//! recording is read back and replayed against the same brain, a brain whose tool changed, and a
//! brain whose instruction changed (refused, then forwarded to a stand-in).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::record::{Direction, Recorder, Recording};
use voqalize::testing::{
    Answered, BargeAt, BargeIn, ModelServer, Provider, Replay, ReplayReport, Reply, TurnOutput,
};
use voqalize::voice::ModelLayer;
use voqalize::wire::Frame;

use crate::support::driver_with;

/// An item of the shop.
#[json_type]
struct Item {
    /// Its stock-keeping unit.
    sku: String,
}

/// The UI command the app gets.
#[json_type]
#[derive(Action)]
struct ShowItem {
    sku: String,
    highlight: bool,
}

/// What differs between the builds of the shop brain under replay.
#[derive(Clone)]
struct Build {
    instruction: &'static str,
    highlight: bool,
}

const LAST_WEEK: Build = Build {
    instruction: "Be brief.",
    highlight: false,
};

/// A model-backed brain with a tool that drives the screen and one whose result the model
/// reads at once.
struct Shop {
    model: Model,
    build: Build,
}

impl Brain for Shop {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("Welcome to the shop.".into()))
    }

    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Shop {
    /// Put an item on screen.
    #[tool]
    async fn show(&self, args: Item) -> Result<&'static str, SessionError> {
        self.session().dispatch(&ShowItem {
            sku: args.sku,
            highlight: self.build.highlight,
        })?;
        Ok("shown")
    }

    /// An item's price, in euros.
    #[tool]
    #[needs_result_now]
    async fn price(&self, _args: Item) -> &'static str {
        "12.00"
    }
}

fn layer(base_url: &str) -> ModelLayer {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    crate::support::layer(Provider::Gemini, base_url, "gemini-test", timeouts)
}

fn shop(base_url: &str, build: Build) -> impl Fn() -> Shop + Send + Sync + 'static {
    let layer = layer(base_url);
    move || Shop {
        model: Model::new(layer.clone()).instruction(build.instruction),
        build: build.clone(),
    }
}

/// The replies of last week's call, in order.
fn script(server: &ModelServer) {
    server.reply(
        Reply::new()
            .text("Here it is.")
            .call("show", json!({"sku": "A1"}))
            .finish()
            .usage(20, 4),
    );
    server.reply(
        Reply::new()
            .text("Let me check.")
            .call("price", json!({"sku": "A1"}))
            .finish(),
    );
    server.reply(Reply::new().text("Twelve euros.").finish());
    server.reply(
        Reply::new()
            .text("Let me tell you the whole story of this item, from the start.")
            .finish(),
    );
    server.reply(Reply::new().text("You are welcome.").finish());
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("voqalize-replay-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The one file a recorder wrote into `dir`.
fn the_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the recorder made its folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(files.len(), 1, "one call, one file: {files:?}");
    files.into_iter().next().unwrap()
}

/// Last week's call, on a real socket, recorded to `dir`: the greeting, a tool that drives the
/// screen, an app event, a tool the model reads at once, a barge-in heard for 11 characters,
/// a turn after it, the end.
async fn record_last_week(dir: &Path) -> PathBuf {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    script(&server);
    let options = HostOptions::allow_unverified().record(Recorder::to_dir(dir));
    let mut v = driver_with(shop(&server.base_url(), LAST_WEEK), options).await;
    let greeting = v.start().await.unwrap();
    assert_eq!(greeting.text(), "Welcome to the shop.");
    assert_eq!(
        v.user_says("show me A1").await.unwrap().text(),
        "Here it is."
    );
    v.send_ui_event("scrolled", json!({"to": "reviews"}))
        .await
        .unwrap();
    let priced = v.user_says("how much is it").await.unwrap();
    assert_eq!(priced.text(), "Let me check. Twelve euros.");
    let barge = BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some("Let me tell".into()),
    };
    v.barge_in("tell me about it", barge).await.unwrap();
    assert_eq!(
        v.user_says("thanks").await.unwrap().text(),
        "You are welcome."
    );
    v.end().await.unwrap();
    v.brain_result().await.unwrap().unwrap();
    v.assert_clean();
    assert_eq!(server.requests().len(), 5);
    the_file(dir)
}

#[tokio::test]
async fn a_recorded_call_reads_back_whole_and_replays_the_same_against_its_brain() {
    let dir = fresh_dir("same");
    let file = record_last_week(&dir).await;
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("-test-session.jsonl"), "{name}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("test-key"),
        "no header, no API key, is ever written"
    );
    assert!(
        text.starts_with(r#"{"voqalize_recording":{"version":1,"#),
        "{}",
        &text[..80]
    );

    let recording = Recording::open(&file).unwrap();
    assert_eq!(recording.session_id(), Some("test-session"));
    assert!(!recording.truncated);
    let inbound: Vec<&str> = recording
        .frames
        .iter()
        .filter(|f| f.direction == Direction::In)
        .map(|f| f.frame.name())
        .filter(|n| *n != "Finalize")
        .collect();
    assert_eq!(
        inbound,
        [
            "SessionStart",
            "UserMessage",
            "RTVIFrame",
            "UserMessage",
            "UserMessage",
            "Interruption",
            "UserMessage",
            "End"
        ]
    );
    let heard: Vec<&str> = recording
        .frames
        .iter()
        .filter_map(|f| match &f.frame {
            Frame::Finalize { heard_text, .. } => Some(heard_text.as_str()),
            _ => None,
        })
        .collect();
    assert!(heard.contains(&"Let me tell"), "{heard:?}");
    assert!(
        recording
            .frames
            .iter()
            .any(|f| f.direction == Direction::Out
                && matches!(&f.frame, Frame::SpeechChunk { text, .. } if text == "Twelve euros."))
    );
    assert_eq!(recording.exchanges.len(), 5);
    let first = &recording.exchanges[0];
    assert_eq!(
        (first.provider.as_str(), first.model.as_str(), first.status),
        ("google", "gemini-test", Some(200))
    );
    assert_eq!(first.path, "/v1/models/gemini-test:streamGenerateContent");
    assert_eq!(
        first.request["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );
    assert!(first.response.contains("Here it is."), "{}", first.response);
    let tools: Vec<(&str, &serde_json::Value, &str)> = recording
        .tool_runs
        .iter()
        .map(|t| (t.name.as_str(), &t.arguments, t.outcome.as_str()))
        .collect();
    assert_eq!(
        tools,
        [
            ("show", &json!({"sku": "A1"}), "ok"),
            ("price", &json!({"sku": "A1"}), "ok")
        ]
    );

    let replay = Replay::start(recording).await.unwrap();
    let report = replay
        .run(shop(&replay.base_url(), LAST_WEEK))
        .await
        .unwrap();
    assert!(report.is_same(), "{report}");
    assert_eq!(report.turns.len(), 5);
    assert_eq!(
        report.turns[1].recorded.ui_commands,
        [json!({"command": "show_item", "payload": {"sku": "A1", "highlight": false}})]
    );
    assert_eq!(
        report.turns[3].recorded.units,
        ["Let me tell you the whole story of this item, from the start."]
    );
    let answered: Vec<&Answered> = report.requests.iter().map(|r| &r.answered).collect();
    assert_eq!(answered.len(), 5, "{report}");
    assert!(
        answered
            .iter()
            .all(|a| matches!(a, Answered::Recorded { again: false, .. })),
        "{answered:?}"
    );
    // The request after the barge-in holds what was heard, as the recorded one did: matching it
    // proves the replay heard the same 11 characters.
    assert!(
        report.requests[4]
            .request
            .to_string()
            .contains("Let me tell"),
        "{}",
        report.requests[4].request
    );
    // A second run of the same replay starts afresh.
    let again = replay
        .run(shop(&replay.base_url(), LAST_WEEK))
        .await
        .unwrap();
    assert!(again.is_same(), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_changed_tool_shows_up_as_its_ui_command_and_nothing_else() {
    let dir = fresh_dir("tool");
    let recording = Recording::open(record_last_week(&dir).await).unwrap();
    let replay = Replay::start(recording).await.unwrap();
    let changed = Build {
        highlight: true,
        ..LAST_WEEK
    };
    let report = replay.run(shop(&replay.base_url(), changed)).await.unwrap();
    assert!(!report.is_same());
    assert_eq!(
        report.unmatched(),
        0,
        "the model saw the same call: {report}"
    );
    let differing: Vec<usize> = report.differing().map(|t| t.index).collect();
    assert_eq!(differing, [1], "{report}");
    let turn = &report.turns[1];
    assert_eq!(
        turn.replayed.as_ref().map(|t| t.ui_commands.clone()),
        Some(vec![
            json!({"command": "show_item", "payload": {"sku": "A1", "highlight": true}})
        ])
    );
    let shown = report.to_string();
    assert!(shown.contains("turn 1 (show me A1):"), "{shown}");
    assert!(shown.contains("ui commands:"), "{shown}");
    assert!(!shown.contains("spoken:"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_changed_prompt_is_refused_by_default_and_answered_by_a_forward_when_asked() {
    let dir = fresh_dir("prompt");
    let recording = Recording::open(record_last_week(&dir).await).unwrap();
    let changed = Build {
        instruction: "Be warm and brief.",
        ..LAST_WEEK
    };

    // Each refused turn says nothing: the replay waits its turn timeout, then goes on.
    let replay = Replay::start(recording.clone())
        .await
        .unwrap()
        .turn_timeout(Duration::from_millis(800));
    let report: ReplayReport = replay
        .run(shop(&replay.base_url(), changed.clone()))
        .await
        .unwrap();
    assert!(!report.is_same());
    assert_eq!(report.unmatched(), report.requests.len(), "{report}");
    assert!(
        report
            .requests
            .iter()
            .all(|r| r.answered == Answered::Unmatched { forwarded: false })
    );
    let shown = report.to_string();
    assert!(
        shown.contains("recorded request 0 differs at /systemInstruction/parts/0/text:"),
        "{shown}"
    );
    assert!(
        shown.contains(r#"replayed: "Be warm and brief.""#),
        "{shown}"
    );
    // The greeting needs no model: it is the same.
    assert!(report.turns[0].is_same(), "{report}");

    // Forwarded to a stand-in provider, the new prompt gets its own answers.
    let stand_in = ModelServer::start(Provider::Gemini).await.unwrap();
    for _ in 0..5 {
        stand_in.reply(Reply::new().text("Warmly, yes.").finish());
    }
    let replay = Replay::start(recording)
        .await
        .unwrap()
        .forward_unmatched(stand_in.base_url());
    let report = replay.run(shop(&replay.base_url(), changed)).await.unwrap();
    assert_eq!(report.unmatched(), 4, "{report}");
    assert!(
        report
            .requests
            .iter()
            .all(|r| r.answered == Answered::Unmatched { forwarded: true })
    );
    assert_eq!(stand_in.requests().len(), 4);
    assert_eq!(
        stand_in.requests()[0].body["systemInstruction"]["parts"][0]["text"],
        "Be warm and brief."
    );
    assert_eq!(
        stand_in.requests()[0].header("x-goog-api-key"),
        Some("test-key")
    );
    let spoken: Vec<Vec<String>> = report
        .turns
        .iter()
        .map(|t| {
            t.replayed
                .as_ref()
                .map_or_else(Vec::new, |o: &TurnOutput| o.units.clone())
        })
        .collect();
    assert_eq!(spoken[1], ["Warmly, yes."], "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_recording_past_its_byte_bound_ends_truncated_and_still_replays() {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    let long = "word ".repeat(2000);
    server.reply(Reply::new().text(&long).finish());
    let recorder = Recorder::in_memory().max_bytes(8 << 10);
    let options = HostOptions::allow_unverified().record(recorder.clone());
    let mut v = driver_with(shop(&server.base_url(), LAST_WEEK), options).await;
    v.start().await.unwrap();
    v.user_says("talk").await.unwrap();
    v.end().await.unwrap();
    v.brain_result().await.unwrap().unwrap();
    let recordings = recorder.take().unwrap();
    assert_eq!(recordings.len(), 1);
    let recording = &recordings[0];
    assert!(recording.truncated);
    assert_eq!(recording.session_id(), Some("test-session"));
    assert!(recorder.take().unwrap().is_empty(), "taken once");

    // The model's answer is past the cut: the replayed turn is refused and says nothing.
    let replay = Replay::start(recording.clone())
        .await
        .unwrap()
        .turn_timeout(Duration::from_millis(800));
    let report = replay
        .run(shop(&replay.base_url(), LAST_WEEK))
        .await
        .unwrap();
    assert!(report.truncated);
    assert!(
        report.to_string().contains("cut at its byte bound"),
        "{report}"
    );
}

#[tokio::test]
async fn one_call_in_n_is_recorded() {
    let recorder = Recorder::in_memory().every(2);
    for _ in 0..3 {
        let options = HostOptions::allow_unverified().record(recorder.clone());
        let mut v = driver_with(|| Echo, options).await;
        v.start_silent().await.unwrap();
        v.user_says("hello").await.unwrap();
        v.end().await.unwrap();
        v.brain_result().await.unwrap().unwrap();
    }
    // Calls 1 and 3 of 3.
    assert_eq!(recorder.take().unwrap().len(), 2);
}

struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }
}

#[test]
fn an_unreadable_recording_names_its_line() {
    let header = r#"{"voqalize_recording":{"version":1,"sdk":"0.1.0","started_unix_ms":1}}"#;
    let frame = r#"{"frame":{"at_ms":1,"dir":"in","kind":"End","pb":"YgA="}}"#;
    let good = format!("{header}\n{frame}\n");
    let parsed = Recording::parse(&good).unwrap();
    assert_eq!(parsed.frames.len(), 1);
    assert_eq!(parsed.frames[0].frame, Frame::End);
    let cases: [(String, &str); 8] = [
        (String::new(), "the recording is empty"),
        ("hello\n".to_owned(), "line 1:"),
        (r#"{"frame":{}}"#.to_owned(), "line 1: not a recording"),
        (
            r#"{"voqalize_recording":{"version":2,"sdk":"9.0.0","started_unix_ms":1}}"#.to_owned(),
            "line 1: the recording is format version 2",
        ),
        (
            format!("{header}\n{frame}\n{{\"frame\":{{\"at_ms\":2,\"dir\""),
            "line 3:",
        ),
        (
            format!("{header}\n{{\"bogus\":{{}}}}\n"),
            "line 2: unknown variant `bogus`",
        ),
        (
            format!("{header}\n{}\n", frame.replace("YgA=", "!!")),
            "line 2: `pb` is not base64",
        ),
        (
            format!("{header}\n{{\"truncated\":{{\"at_ms\":1,\"limit\":4096}}}}\n{frame}\n"),
            "line 3: a line after the `truncated` line",
        ),
    ];
    for (text, expected) in cases {
        let error = Recording::parse(&text).unwrap_err().to_string();
        assert!(
            error.starts_with(expected) || error.contains(expected),
            "{error:?} for {text:?}"
        );
    }
    let missing = Recording::open("/nonexistent/voqalize.jsonl").unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/voqalize.jsonl"),
        "{missing}"
    );
}

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
use voqalize::voice::ModelLayer;
use voqalize::wire::Frame;
use voqalize_testing::{
    Answered, BargeAt, BargeIn, ModelServer, Provider, Replay, ReplayReport, Reply, TurnOutput,
};

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
    let options = HostOptions::builder()
        .allow_unverified()
        .record(Recorder::to_dir(dir))
        .build()
        .expect("options");
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

    let mut replay = Replay::start(recording).await.unwrap();
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
    let mut replay = Replay::start(recording).await.unwrap();
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

    // Each refused turn says nothing and is over: the replay goes on at once.
    let mut replay = Replay::start(recording.clone())
        .await
        .unwrap()
        .turn_timeout(Duration::from_millis(400));
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
        shown.contains(
            "the nearest, recorded request 0, differs at /systemInstruction/parts/0/text:"
        ),
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
    let mut replay = Replay::start(recording)
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
    let options = HostOptions::builder()
        .allow_unverified()
        .record(recorder.clone())
        .build()
        .expect("options");
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
    let mut replay = Replay::start(recording.clone())
        .await
        .unwrap()
        .turn_timeout(Duration::from_millis(400));
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
        let options = HostOptions::builder()
            .allow_unverified()
            .record(recorder.clone())
            .build()
            .expect("options");
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

// What a hostile review found, kept as tests.

/// A model-backed brain with no tools.
struct Chatty {
    model: Model,
}

impl Brain for Chatty {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Chatty {}

fn chatty(provider: Provider, base_url: &str) -> impl Fn() -> Chatty + Send + Sync + 'static {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let layer = crate::support::layer(provider, base_url, "gemini-test", timeouts);
    move || Chatty {
        model: Model::new(layer.clone()).instruction("Be brief."),
    }
}

/// Replays `recording` against the `Chatty` brain on `provider`'s layer: it must do the same.
async fn replays_the_same(recording: Recording, provider: Provider) {
    let mut replay = Replay::start(recording).await.unwrap();
    let report = replay
        .run(chatty(provider, &replay.base_url()))
        .await
        .unwrap();
    assert!(report.is_same(), "{report}");
}

/// Records one call of `factory` in memory, played by `play`.
pub(crate) async fn recorded<M, F>(factory: M, play: F) -> Recording
where
    M: voqalize::MakeBrain,
    F: AsyncFnOnce(&mut voqalize_testing::Voqalize),
{
    let recorder = Recorder::in_memory();
    let options = HostOptions::builder()
        .allow_unverified()
        .record(recorder.clone())
        .build()
        .expect("options");
    let mut v = driver_with(factory, options).await;
    v.start_silent().await.unwrap();
    play(&mut v).await;
    v.end().await.unwrap();
    v.brain_result().await.unwrap().unwrap();
    recorder.take().unwrap().remove(0)
}

#[tokio::test]
async fn a_barge_in_mid_stream_still_records_its_request_and_replays_the_same() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let (reply, gate) = Reply::new().text("Let me tell you a long story").pause();
    server.reply(reply.text(" about this item.").finish());
    server.reply(Reply::new().text("You are welcome.").finish());
    let recording = recorded(chatty(Provider::Gemini, &server.base_url()), async |v| {
        let barge = BargeIn {
            at: BargeAt::FirstText,
            heard_prefix: Some("Let me".into()),
        };
        v.barge_in("tell me a story", barge).await.unwrap();
        gate.release();
        v.user_says("thanks").await.unwrap();
    })
    .await;
    assert_eq!(server.requests().len(), 2);
    assert_eq!(recording.exchanges.len(), 2, "the cut request has its line");
    let cut = &recording.exchanges[0];
    assert!(
        cut.error
            .as_deref()
            .is_some_and(|e| e.starts_with("cancelled")),
        "{:?}",
        cut.error
    );
    assert!(
        cut.response.contains("Let me tell you"),
        "what was read: {}",
        cut.response
    );
    replays_the_same(recording, Provider::Gemini).await;
}

/// Says two units, the second after the first was played.
struct TwoUnits;

impl Brain for TwoUnits {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        turn.say("First part.");
        tokio::time::sleep(Duration::from_millis(300)).await;
        turn.say("Second part, the longer one.");
        Ok(())
    }
}

#[tokio::test]
async fn a_barge_in_on_a_turns_second_unit_is_replayed_on_its_second_unit() {
    let recording = recorded(
        || TwoUnits,
        async |v| {
            let barge = BargeIn {
                at: BargeAt::After(Duration::from_millis(600)),
                heard_prefix: Some("Second".into()),
            };
            v.barge_in("go on", barge).await.unwrap();
        },
    )
    .await;
    let mut replay = Replay::start(recording).await.unwrap();
    let report = replay.run(|| TwoUnits).await.unwrap();
    assert!(report.is_same(), "{report}");
    assert_eq!(
        report.turns[1].recorded.units,
        ["First part.", "Second part, the longer one."]
    );
}

#[tokio::test]
async fn an_interruption_after_a_turn_was_heard_in_full_cuts_nothing_in_the_replay() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    server.reply(Reply::new().text("Hello there.").finish());
    server.reply(Reply::new().text("Sure.").finish());
    let recording = recorded(chatty(Provider::Gemini, &server.base_url()), async |v| {
        v.user_says("hi").await.unwrap();
        v.send(Frame::Interruption { through_turn: 2 })
            .await
            .unwrap();
        v.user_says("ok").await.unwrap();
    })
    .await;
    replays_the_same(recording, Provider::Gemini).await;
}

#[tokio::test]
async fn a_brain_whose_layer_bypasses_the_replay_is_not_the_same() {
    let live = ModelServer::start(Provider::Gemini).await.unwrap();
    live.reply(Reply::new().text("Hello there.").finish());
    live.reply(Reply::new().text("Hello there.").finish());
    let recording = recorded(chatty(Provider::Gemini, &live.base_url()), async |v| {
        v.user_says("hi").await.unwrap();
    })
    .await;
    let mut replay = Replay::start(recording).await.unwrap();
    // The factory still points at the "live" provider.
    let report = replay
        .run(chatty(Provider::Gemini, &live.base_url()))
        .await
        .unwrap();
    assert!(report.requests.is_empty());
    assert!(!report.is_same(), "{report}");
    assert_eq!(report.unused, [0]);
    assert!(
        report
            .to_string()
            .contains("is the brain's layer pointed at Replay::base_url?"),
        "{report}"
    );
}

/// Says what it heard eight times.
struct Loud;

impl Brain for Loud {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        for _ in 0..8 {
            turn.say(&m.text);
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_long_call_replays_whole_past_the_default_recording_bound() {
    let recorder = Recorder::in_memory().max_bytes(64 << 20);
    let options = HostOptions::builder()
        .allow_unverified()
        .record(recorder.clone())
        .build()
        .expect("options");
    let mut v = driver_with(|| Loud, options).await;
    v.start_silent().await.unwrap();
    // About 4.8 MB of speech: past the 4 MiB default.
    let text = "x".repeat(60_000);
    for _ in 0..10 {
        v.user_says(&text).await.unwrap();
    }
    v.end().await.unwrap();
    v.brain_result().await.unwrap().unwrap();
    let recording = recorder.take().unwrap().remove(0);
    assert!(!recording.truncated);
    let mut replay = Replay::start(recording).await.unwrap();
    let report = replay.run(|| Loud).await.unwrap();
    assert!(!report.replay_truncated);
    assert!(
        report.is_same(),
        "{}",
        &report.to_string()[..600.min(report.to_string().len())]
    );
}

#[tokio::test]
async fn a_refused_session_start_does_not_name_the_file_and_names_never_collide() {
    use voqalize::host::Upgrade;
    use voqalize_testing::{Start, Voqalize};
    let dir = fresh_dir("names");
    let recorder = Recorder::to_dir(&dir);
    let upgrade = Upgrade {
        session_id: Some("victim-a".into()),
        authorization: None,
    };
    let options = HostOptions::builder()
        .allow_unverified()
        .record(recorder.clone())
        .build()
        .expect("options");
    let mut v = Voqalize::in_process_with(|| Echo, options, upgrade);
    let start = Start {
        session_id: Some("victim-b".into()),
        expect_greeting: false,
        ..Start::default()
    };
    let _ = v.start_with(start).await;
    v.hang_up().await;
    let _ = v.brain_result().await;
    // Twenty calls of one session id ending at once: twenty files.
    let mut calls = Vec::new();
    for _ in 0..20 {
        let options = HostOptions::builder()
            .allow_unverified()
            .record(recorder.clone())
            .build()
            .expect("options");
        let mut v = Voqalize::in_process_with(|| Echo, options, Upgrade::default());
        v.start_silent().await.unwrap();
        calls.push(v);
    }
    futures_util::future::join_all(calls.iter_mut().map(|v| async move {
        v.end().await.unwrap();
        v.brain_result().await.unwrap().unwrap();
    }))
    .await;
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 21, "{names:?}");
    assert_eq!(
        names.iter().filter(|n| n.contains("victim-a")).count(),
        1,
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("victim-b")), "{names:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for name in &names {
            let mode = std::fs::metadata(dir.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn arguments_too_deep_to_read_back_are_kept_as_text() {
    let server = ModelServer::start(Provider::OpenAi).await.unwrap();
    let deep: serde_json::Value =
        serde_json::from_str(&format!("{}{}", "[".repeat(126), "]".repeat(126))).unwrap();
    server.reply(
        Reply::new()
            .text("Working.")
            .call("anything", json!({"a": deep}))
            .finish(),
    );
    let recording = recorded(chatty(Provider::OpenAi, &server.base_url()), async |v| {
        v.user_says("go").await.unwrap();
    })
    .await;
    let run = &recording.tool_runs[0];
    assert_eq!(run.name, "anything");
    assert!(
        run.arguments
            .as_str()
            .is_some_and(|t| t.starts_with(r#"{"a":[[["#)),
        "{}",
        run.arguments
    );
    replays_the_same(recording, Provider::OpenAi).await;
}

#[tokio::test]
async fn a_request_that_got_no_answer_records_no_url() {
    // Nothing listens on port 9: the request fails to connect.
    let recording = recorded(chatty(Provider::Gemini, "http://127.0.0.1:9"), async |v| {
        let _ = v.user_says_within("hi", Duration::from_secs(1)).await;
    })
    .await;
    assert!(!recording.exchanges.is_empty());
    for e in &recording.exchanges {
        assert_eq!(e.status, None);
        let error = e.error.as_deref().unwrap_or_default();
        assert!(
            !error.is_empty() && !error.contains("127.0.0.1") && !error.contains("alt=sse"),
            "{error}"
        );
    }
}

#[test]
fn a_hostile_line_is_named_clipped_and_escaped_and_a_line_not_utf8_is_named() {
    let header = r#"{"voqalize_recording":{"version":1,"sdk":"0.1.0","started_unix_ms":1}}"#;
    let evil = format!(
        "{header}\n{{\"\\u001b[2J\\nINFO forged line{}\":{{}}}}\n",
        "A".repeat(100_000)
    );
    let e = Recording::parse(&evil).unwrap_err().to_string();
    assert!(e.starts_with("line 2: "), "{e:.80}");
    assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e:.200}");
    assert!(e.len() < 1000, "{} bytes", e.len());

    let dir = fresh_dir("utf8");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.jsonl");
    let mut bytes = format!("{header}\n").into_bytes();
    bytes.extend_from_slice(b"{\"frame\":\xff}\n");
    std::fs::write(&path, bytes).unwrap();
    let e = Recording::open(&path).unwrap_err().to_string();
    assert!(e.starts_with("line 2: not UTF-8"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_recording_of_thirty_thousand_finalizes_replays_in_one_pass() {
    use voqalize::wire::UserMessage as Said;
    // A hand-made recording: a start, a message, an Interruption, then 30,000 Finalizes of
    // units that do not exist. Read in one pass, it replays at once.
    let recording = recorded(
        || Echo,
        async |v| {
            v.send(Frame::UserMessage(Said::new(2, "hi")))
                .await
                .unwrap();
            v.send(Frame::Interruption { through_turn: 2 })
                .await
                .unwrap();
            for i in 0..30_000u64 {
                let finalize = Frame::Finalize {
                    speech_id: 1_000_000 + i,
                    heard_text: String::new(),
                };
                v.send(finalize).await.unwrap();
            }
        },
    )
    .await;
    let mut replay = Replay::start(recording)
        .await
        .unwrap()
        .turn_timeout(Duration::from_millis(300));
    let report = replay.run(|| Echo).await.unwrap();
    assert_eq!(report.turns.len(), 2, "{report}");
}

//! The port path: an agent's own text stream spoken with `Turn::speak_stream`, `Turn::has_spoken`,
//! and `HeardLines` keeping the agent's history to what the user heard, over a real session on a
//! loopback socket.

use std::sync::Arc;

use futures_util::stream::{self, BoxStream, StreamExt};
use voqalize::prelude::*;
use voqalize_testing::{BargeAt, BargeIn};

use crate::support::{Log, driver};

/// What an agent's stream fails with.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct AgentError(&'static str);

/// The stream an "agent" answers `text` with:
/// * `pieces a|b|c`: those pieces (empty ones included);
/// * `fail`: `Part one. `, then an error;
/// * `hang`: `Still `, then nothing ever again.
fn agent(text: &str) -> BoxStream<'static, Result<String, AgentError>> {
    match text.split_once(' ') {
        Some(("pieces", rest)) => {
            let pieces: Vec<_> = rest.split('|').map(|p| Ok(p.to_owned())).collect();
            stream::iter(pieces).boxed()
        }
        _ if text == "fail" => {
            stream::iter([Ok("Part one. ".to_owned()), Err(AgentError("broken"))]).boxed()
        }
        _ if text == "hang" => stream::iter([Ok("Still ".to_owned())])
            .chain(stream::pending())
            .boxed(),
        _ => stream::empty().boxed(),
    }
}

/// A brain that brings its own agent: it speaks the agent's stream and logs what came back, and
/// logs the heard lines it takes at the start of every turn.
struct Ported {
    log: Arc<Log>,
    greeting: Option<&'static str>,
    heard: HeardLines,
}

impl Ported {
    fn new(log: &Arc<Log>, greeting: Option<&'static str>) -> Self {
        Ported {
            log: log.clone(),
            greeting,
            heard: HeardLines::new(),
        }
    }
}

impl Brain for Ported {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(self.greeting.map(str::to_owned))
    }

    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        self.log.push(format!("heard {:?}", self.heard.take()));
        match turn.speak_stream(agent(&message.text)).await {
            Ok(id) => self.log.push(format!("spoke {id:?} {}", turn.has_spoken())),
            Err(e) => self.log.push(format!("err {e} {}", turn.has_spoken())),
        }
        if !turn.has_spoken() {
            // A silent unit does not count as speech; it ends the turn for the driver.
            let id = turn.say("");
            self.log.push(format!("silent {id} {}", turn.has_spoken()));
        }
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, finalized: Finalized) -> BrainResult {
        self.heard.record(&finalized);
        Ok(())
    }
}

#[tokio::test]
async fn a_stream_is_spoken_as_one_unit_opened_on_its_first_piece() {
    let log = Arc::new(Log::default());
    let brain = log.clone();
    let mut v = driver(move || Ported::new(&brain, None)).await;
    v.start_silent().await.unwrap();

    let turn = v.user_says("pieces |Hello|| world|").await.unwrap();
    assert_eq!(turn.units.len(), 1);
    assert_eq!(turn.units[0].speech_id, 1);
    assert_eq!(turn.units[0].chunks, ["Hello", " world"]);
    assert!(turn.units[0].ended);
    assert!(log.events().contains(&"spoke Some(1) true".to_owned()));

    // Nothing but empty pieces: no unit at all, no speech id used up.
    let turn = v.user_says("pieces ||").await.unwrap();
    assert_eq!(turn.units.len(), 1, "only the silent unit");
    assert_eq!(turn.units[0].speech_id, 2);
    assert!(turn.units[0].chunks.is_empty());
    let events = log.events();
    assert!(
        events.contains(&"spoke None false".to_owned()),
        "{events:?}"
    );
    assert!(events.contains(&"silent 2 false".to_owned()), "{events:?}");

    v.assert_clean();
}

#[tokio::test]
async fn an_error_closes_the_unit_and_is_returned() {
    let log = Arc::new(Log::default());
    let brain = log.clone();
    let mut v = driver(move || Ported::new(&brain, None)).await;
    v.start_silent().await.unwrap();

    let turn = v.user_says("fail").await.unwrap();
    assert_eq!(turn.units.len(), 1);
    assert_eq!(turn.units[0].chunks, ["Part one. "]);
    assert!(
        turn.units[0].ended,
        "the unit is closed: SpeechEnd went out"
    );
    assert!(log.events().contains(&"err broken true".to_owned()));

    // The session goes on.
    let turn = v.user_says("pieces Fine.").await.unwrap();
    assert_eq!(turn.text(), "Fine.");
    v.assert_clean();
}

#[tokio::test]
async fn a_barge_in_stops_reading_the_stream() {
    let log = Arc::new(Log::default());
    let brain = log.clone();
    let mut v = driver(move || Ported::new(&brain, None)).await;
    v.start_silent().await.unwrap();

    let turn = v.barge_in("hang", BargeIn::default()).await.unwrap();
    assert!(turn.interrupted);
    assert_eq!(turn.units[0].chunks, ["Still "]);
    assert!(
        !log.events()
            .iter()
            .any(|e| e.starts_with("spoke") || e.starts_with("err")),
        "the turn was dropped inside speak_stream: {:?}",
        log.events()
    );
    let turn = v.user_says("pieces Next.").await.unwrap();
    assert_eq!(turn.text(), "Next.");
    v.assert_clean();
}

#[tokio::test]
async fn heard_lines_follow_what_the_user_heard() {
    let log = Arc::new(Log::default());
    let brain = log.clone();
    let mut v = driver(move || Ported::new(&brain, Some("Hi there!"))).await;
    let greeting = v.start().await.unwrap();
    assert_eq!(greeting.text(), "Hi there!");

    // The greeting is the first heard line.
    v.user_says("pieces One. |Two.").await.unwrap();
    // A whole unit heard: one line, the pieces joined.
    let cut = |prefix: &str| BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some(prefix.to_owned()),
    };
    v.barge_in("hang", cut("Sti")).await.unwrap();
    // Cut to the heard prefix.
    v.barge_in("hang", cut("")).await.unwrap();
    // Heard nothing: no line.
    v.user_says("pieces End.").await.unwrap();

    let taken: Vec<String> = log
        .events()
        .into_iter()
        .filter(|e| e.starts_with("heard"))
        .collect();
    assert_eq!(
        taken,
        [
            r#"heard ["Hi there!"]"#,
            r#"heard ["One. Two."]"#,
            r#"heard ["Sti"]"#,
            r#"heard []"#,
        ]
    );
    v.assert_clean();
}

/// What most agents return, a plain stream of text (no `Result`), is spoken as one unit, and
/// borrowed pieces too.
#[tokio::test]
async fn a_plain_stream_of_text_is_spoken_as_one_unit() {
    struct Plain;
    impl Brain for Plain {
        async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
            let words: Vec<String> = message
                .text
                .split_inclusive(' ')
                .map(str::to_owned)
                .collect();
            let id = turn.speak_stream(stream::iter(words)).await?;
            let again = turn
                .speak_stream(stream::iter(["", " (", "that was all", ")"]))
                .await?;
            assert!(id.is_some() && again.is_some() && id != again);
            let none = turn.speak_stream(stream::iter([""; 3])).await?;
            assert_eq!(none, None, "nothing spoken, no unit");
            Ok(())
        }
    }
    let mut v = driver(|| Plain).await;
    v.start_silent().await.unwrap();
    let turn = v.user_says("hello there you").await.unwrap();
    assert_eq!(turn.unit_texts(), ["hello there you", " (that was all)"]);
}

/// One item of a framework's streamed answer, typed as rig's `MultiTurnStreamItem` is: text
/// beside tool calls and their results.
#[derive(Debug, Clone)]
enum Item {
    Text(&'static str),
    ToolCall {
        id: &'static str,
        name: &'static str,
    },
    ToolResult {
        id: &'static str,
        output: &'static str,
    },
    Reasoning(&'static str),
}

/// The agent's own message type.
#[derive(Debug, Clone, PartialEq)]
enum Msg {
    User(String),
    Assistant(String),
    Call(String),
    Result(String),
    Reasoning(String),
}

/// An agent's typed stream for `text`:
/// * `book`: words, a reasoning step, a call and its result, more words, then the end;
/// * `hang`: words, then a call whose tool never answers.
fn typed_agent(text: &str) -> BoxStream<'static, Result<Item, AgentError>> {
    match text {
        "book" => stream::iter(
            [
                Item::Text("Let me check. "),
                Item::Reasoning("the user wants a table"),
                Item::ToolCall {
                    id: "c1",
                    name: "book",
                },
                Item::ToolResult {
                    id: "c1",
                    output: "booked 20:00",
                },
                Item::Text("Booked for eight, "),
                Item::Text("see you then."),
            ]
            .map(Ok),
        )
        .boxed(),
        "hang" => stream::iter(
            [
                Item::Text("Checking "),
                Item::ToolCall {
                    id: "c2",
                    name: "slow",
                },
            ]
            .map(Ok),
        )
        .chain(stream::pending())
        .boxed(),
        _ => stream::iter([Ok(Item::Text("Fine."))]).boxed(),
    }
}

/// A ported agent keeping its own typed history with `HeardHistory`: logs the history it hands
/// the agent at the start of every turn.
struct Historian {
    log: Arc<Log>,
    history: HeardHistory<Msg>,
}

impl Brain for Historian {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        self.history.push(Msg::User(message.text.clone()));
        self.log.push(format!("{:?}", self.history.messages()));
        let answer = typed_agent(&message.text);
        self.history
            .speak(turn, answer, |item| match item {
                Item::Text(t) => AnswerPart::Say(t.into()),
                Item::ToolCall { id, name } => AnswerPart::Call {
                    id: id.into(),
                    message: Msg::Call(name.into()),
                },
                Item::ToolResult { id, output } => AnswerPart::Result {
                    id: id.into(),
                    message: Msg::Result(output.into()),
                },
                Item::Reasoning(r) => AnswerPart::Keep(Msg::Reasoning(r.into())),
            })
            .await?;
        Ok(())
    }

    async fn on_finalize(&self, _session: &Session, finalized: Finalized) -> BrainResult {
        self.history.heard(&finalized);
        Ok(())
    }
}

#[tokio::test]
async fn a_typed_history_holds_what_was_heard_with_its_tools_in_place() {
    let log = Arc::new(Log::default());
    let brain = log.clone();
    let mut v = driver(move || Historian {
        log: brain.clone(),
        history: HeardHistory::new(Msg::Assistant),
    })
    .await;
    v.start_silent().await.unwrap();
    let user = |t: &str| Msg::User(t.into());
    let said = |t: &str| Msg::Assistant(t.into());

    // Heard in full: the words around the tool, each its own message, in stream order.
    let turn = v.user_says("book").await.unwrap();
    assert_eq!(turn.text(), "Let me check. Booked for eight, see you then.");
    // Cut after "Booked": the tool stays (it ran), the words go to the heard prefix.
    v.barge_in(
        "book",
        BargeIn {
            at: BargeAt::FirstText,
            heard_prefix: Some("Let me check. Booked".into()),
        },
    )
    .await
    .unwrap();
    // Cut while a tool runs: its call never got a result, so it leaves the history.
    v.barge_in("hang", BargeIn::default()).await.unwrap();
    v.user_says("next").await.unwrap();

    let booked = [
        said("Let me check. "),
        Msg::Reasoning("the user wants a table".into()),
        Msg::Call("book".into()),
        Msg::Result("booked 20:00".into()),
    ];
    let mut expected = vec![user("book")];
    expected.extend(booked.clone());
    expected.push(said("Booked for eight, see you then."));
    expected.push(user("book"));
    expected.extend(booked);
    expected.push(said("Booked"));
    expected.extend([user("hang"), said("Checking "), user("next")]);
    let last = log.events().last().cloned().unwrap_or_default();
    assert_eq!(last, format!("{expected:?}"));
    v.assert_clean();
}

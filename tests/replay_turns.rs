//! Replaying turns: a turn is over once the brain did what the recorded one did (not at its
//! turn timeout), the whole replay is bounded by its deadline, and a greeting the caller barged
//! in on is heard as the caller heard it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::wire::Frame;
use voqalize_testing::{ModelServer, Provider, Replay, Reply};

use crate::replay::recorded;

/// A bound for a hung replay, far below the turn timeouts the tests set (an hour): reaching it
/// means the replay waited out a turn timeout. Not a timing.
const HUNG: Duration = Duration::from_secs(120);

/// What the brain under replay did, in order.
type Events = Arc<Mutex<Vec<String>>>;

/// Says nothing to `quiet` (nor to silence); to `paced`, one unit, then a second after a second.
struct Paced {
    events: Events,
}

impl Brain for Paced {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        self.events
            .lock()
            .unwrap()
            .push(format!("start {}", m.text));
        if m.text.starts_with("paced") {
            turn.say("One.");
            tokio::time::sleep(Duration::from_secs(1)).await;
            // Logged before the unit is said: the replay cannot see its end before this line.
            self.events
                .lock()
                .unwrap()
                .push(format!("second unit of {}", m.text));
            turn.say("Two.");
        }
        Ok(())
    }
}

/// The user says `text` to `Paced`, and the turn is heard in full once both units ended.
async fn paced_in_full(v: &mut voqalize_testing::Voqalize, text: &str) {
    let turn = v.send_user_message(text).await.unwrap();
    let done = v
        .wait_for(Duration::from_secs(30), |v| {
            v.turn(turn).units.len() == 2 && v.turn(turn).completed()
        })
        .await
        .unwrap();
    assert!(done, "{:?}", v.turn(turn));
    for unit in v.turn(turn).units {
        v.finalize(unit.speech_id, &unit.text()).await.unwrap();
    }
}

#[tokio::test]
async fn each_turn_ends_when_it_did_what_the_recorded_one_did_not_at_its_turn_timeout() {
    let events = Events::default();
    let brain = {
        let events = events.clone();
        move || Paced {
            events: events.clone(),
        }
    };
    let recording = recorded(brain.clone(), async |v| {
        let short = Duration::from_millis(300);
        v.user_says_within("quiet 1", short).await.unwrap();
        paced_in_full(v, "paced 1").await;
        v.user_says_within("quiet 2", short).await.unwrap();
        v.user_idle_within(1, 5000, short).await.unwrap();
        paced_in_full(v, "paced 2").await;
        v.user_says_within("quiet 3", short).await.unwrap();
    })
    .await;
    events.lock().unwrap().clear();

    // Four turns that said nothing, each of which would wait out an hour if a turn waited for
    // speech.
    let mut replay = Replay::start(recording)
        .await
        .unwrap()
        .turn_timeout(Duration::from_secs(3600));
    let report = tokio::time::timeout(HUNG, replay.run(brain))
        .await
        .expect("no turn waits out its timeout")
        .unwrap();
    assert!(report.is_same(), "{report}");
    assert_eq!(report.turns[2].recorded.units, ["One.", "Two."]);
    // A paced turn's second unit came before the next turn started: the replay waited for it,
    // not for a quiet window after the first.
    let events = events.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "start quiet 1",
            "start paced 1",
            "second unit of paced 1",
            "start quiet 2",
            "start paced 2",
            "second unit of paced 2",
            "start quiet 3"
        ]
    );
}

/// Answers nothing for an hour.
struct Stalls;

impl Brain for Stalls {
    async fn on_user_message(&self, _turn: &mut Turn, _m: UserMessage) -> BrainResult {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    }
}

struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }
}

#[tokio::test]
async fn a_replay_against_a_brain_that_never_answers_stops_at_its_deadline() {
    let recording = recorded(
        || Echo,
        async |v| {
            for text in ["one", "two", "three", "four"] {
                v.user_says(text).await.unwrap();
            }
        },
    )
    .await;
    let deadline = Duration::from_secs(2);
    let mut replay = Replay::start(recording)
        .await
        .unwrap()
        .turn_timeout(Duration::from_secs(3600))
        .deadline(deadline);
    let report = tokio::time::timeout(HUNG, replay.run(|| Stalls))
        .await
        .expect("the replay ends at its deadline")
        .unwrap();
    assert_eq!(report.stopped_at_deadline, Some(deadline));
    assert!(!report.is_same());
    assert_eq!(report.turns.len(), 5);
    // The first turn is never answered: the replay cannot have got past it.
    let played = report.turns.iter().filter(|t| t.replayed.is_some()).count();
    assert!(played <= 2, "{report}");
    assert!(report.turns[2..].iter().all(|t| t.replayed.is_none()));
    let shown = report.to_string();
    assert!(
        shown.contains("the replay reached its deadline, 2.0 s, at turn"),
        "{shown}"
    );
    assert!(
        shown.contains("turn 4 (four):\n  the replay ended before this turn"),
        "{shown}"
    );
}

/// A receptionist on a model, with a greeting of its own.
struct Dental {
    model: Model,
}

impl Brain for Dental {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some(
            "Bright Smile Dental, how can I help you today?".into(),
        ))
    }

    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Dental {}

fn dental(base_url: &str) -> impl Fn() -> Dental + Send + Sync + 'static {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let layer = crate::support::layer(Provider::Gemini, base_url, "gemini-test", timeouts);
    move || Dental {
        model: Model::new(layer.clone()).instruction("Be brief."),
    }
}

#[tokio::test]
async fn a_greeting_cut_by_a_barge_in_replays_the_same_against_its_brain() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    server.reply(Reply::new().text("Sure, when can you come?").finish());
    let recording = recorded(dental(&server.base_url()), async |v| {
        // The caller speaks over the greeting, having heard it up to "how".
        let greeted = v
            .wait_for(Duration::from_secs(30), |v| {
                v.units().any(|u| u.turn_id == 1 && !u.chunks.is_empty())
            })
            .await
            .unwrap();
        assert!(greeted, "the greeting is said");
        let greeting = v.units().find(|u| u.turn_id == 1).unwrap().speech_id;
        v.send(Frame::Interruption { through_turn: 1 })
            .await
            .unwrap();
        v.finalize(greeting, "Bright Smile Dental, how")
            .await
            .unwrap();
        let answer = v.user_says("I need a cleaning").await.unwrap();
        assert_eq!(answer.text(), "Sure, when can you come?");
    })
    .await;
    // The model was told the greeting as the caller heard it.
    let asked = &recording.exchanges[0].request;
    assert_eq!(
        asked["contents"][0]["parts"][0]["text"], "Bright Smile Dental, how",
        "{asked}"
    );

    let mut replay = Replay::start(recording).await.unwrap();
    let report = replay.run(dental(&replay.base_url())).await.unwrap();
    assert!(report.is_same(), "{report}");
    assert_eq!(
        report.turns[0].recorded.units,
        ["Bright Smile Dental, how can I help you today?"]
    );
}

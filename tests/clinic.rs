//! The `clinic` example's brain (`examples/support/clinic.rs`) in a whole call, over a real
//! session socket against the stand-in model server: verify, book, confirm, with each request's
//! declared tools, the notes the transitions carry, the calendar the app is shown and the
//! TurnSteps; a transition the desk refuses; a barge-in while the handoff to Booking runs.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{Semaphore, watch};
use voqalize::prelude::*;
use voqalize::wire::Frame;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::support::{driver, layer, said, says};

// The example's `pub` items are what a user copies; in this crate they reach no further.
#[allow(unreachable_pub)]
#[path = "../examples/support/clinic.rs"]
pub(crate) mod clinic_desk;

use clinic_desk::{Desk, Ledger, Patient, Records};

const VERIFY_TOOLS: [&str; 2] = ["find_patient", "verified"];
const BOOKING_TOOLS: [&str; 3] = ["open_slots", "booked", "wrong_caller"];
const CONFIRM_TOOLS: [&str; 1] = ["send_reminder"];

/// The note the fresh handoff to Booking starts from, for Ana Lima.
const ANA_VERIFIED: &str = "user: (The call moved from stage Verify to stage Booking. Note: The \
caller is Ana Lima (patient p-17), verified by name and date of birth. Usual doctor: Dr. Rivera.)";

fn timeouts() -> voqalize::model::Timeouts {
    voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    }
}

/// The clinic's desk on `records`, answered by a stand-in Gemini server.
async fn desk<R: Records>(records: Arc<R>) -> (ModelServer, Voqalize) {
    let server = ModelServer::start(Provider::Gemini).await.expect("a port");
    let base = server.base_url();
    let v = driver(move || {
        let model = Model::new(layer(Provider::Gemini, &base, "gemini-test", timeouts()));
        Desk::new(model, records.clone())
    })
    .await;
    (server, v)
}

/// The (kind, name, provider) of turn `turn`'s `stage` and `transition` steps, in order.
fn stage_steps(v: &Voqalize, turn: u64) -> Vec<(String, String, String)> {
    v.turn_steps()
        .iter()
        .filter(|s| s.turn_id == turn && matches!(s.kind.as_str(), "stage" | "transition"))
        .map(|s| (s.kind.clone(), s.name.clone(), s.provider.clone()))
        .collect()
}

fn step(kind: &str, name: &str, provider: &str) -> (String, String, String) {
    (kind.into(), name.into(), provider.into())
}

fn calendar_for(patient: &str) -> serde_json::Value {
    json!({"command": "show_calendar", "payload": {"patient_id": patient}})
}

#[tokio::test]
async fn a_whole_call_verifies_books_and_confirms_each_stage_declaring_its_own_tools() {
    let ledger = Arc::new(Ledger::new());
    let (server, mut v) = desk(ledger.clone()).await;
    v.start_silent().await.unwrap();
    verify_into_booking(&server, &mut v).await;
    book_into_confirm(&server, &mut v, &ledger).await;
}

/// The first turn of the whole call: Verify looks the caller up and moves the call on with what
/// it found; Booking starts from the carried note, lists the slots, and shows the calendar.
async fn verify_into_booking(server: &ModelServer, v: &mut Voqalize) {
    server.reply(
        Reply::new()
            .call(
                "find_patient",
                json!({"name": "ana lima", "date_of_birth": "1984-03-12"}),
            )
            .finish(),
    );
    server.reply(
        Reply::new()
            .text("Thank you, Ana.")
            .call(
                "verified",
                json!({"patient_id": "p-17", "name": "Ana Lima"}),
            )
            .finish(),
    );
    server.reply(Reply::new().call("open_slots", json!({})).finish());
    server.reply(
        Reply::new()
            .text("I have Tuesday at ten, Wednesday at half past three or Friday at nine.")
            .finish(),
    );
    let first = says(v, "I'm Ana Lima, born 1984-03-12", 3).await;
    assert_eq!(
        first.text(),
        "Thank you, Ana. Let's find you a slot. I have Tuesday at ten, Wednesday at half past \
         three or Friday at nine."
    );
    for (i, tools) in [
        &VERIFY_TOOLS[..],
        &VERIFY_TOOLS,
        &BOOKING_TOOLS,
        &BOOKING_TOOLS,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            server.read_back(i).expect("a request").tools,
            tools,
            "request {i}"
        );
    }
    assert!(
        server
            .read_back(0)
            .and_then(|r| r.instruction)
            .is_some_and(|i| i.starts_with(clinic_desk::INSTRUCTION) && i.contains("date of birth")),
        "the clinic's instruction, then Verify's"
    );
    assert_eq!(
        said(server, 1)[1..],
        [
            "call: find_patient",
            r#"result: {"result":{"patient_id":"p-17","name":"Ana Lima"}}"#
        ]
    );
    // Fresh: Booking starts from the carried note and its entry line, nothing of Verify.
    assert_eq!(
        said(server, 2),
        [ANA_VERIFIED, "model: Let's find you a slot."]
    );
    assert_eq!(
        said(server, 3)[2..],
        [
            "call: open_slots",
            r#"result: {"result":["Tuesday 10:00","Wednesday 15:30","Friday 09:00"]}"#
        ]
    );
    // Entering Booking put the patient's calendar on the app's screen.
    assert_eq!(v.ui_commands(), [calendar_for("p-17")]);
    assert_eq!(
        stage_steps(v, first.turn_id),
        [
            step("stage", "Verify", "Clinic"),
            step("transition", "Booking", "Verify")
        ]
    );
}

/// The second turn: Booking refuses a slot that is not open (the model reads why), books one
/// that is, and Confirm reads the booking back from the kept conversation and sends a reminder.
async fn book_into_confirm(server: &ModelServer, v: &mut Voqalize, ledger: &Ledger) {
    server.reply(
        Reply::new()
            .call("booked", json!({"slot": "Saturday 09:00"}))
            .finish(),
    );
    server.reply(
        Reply::new()
            .call("booked", json!({"slot": "tuesday 10:00"}))
            .finish(),
    );
    server.reply(
        Reply::new()
            .text("You're booked for Tuesday at ten. Goodbye!")
            .call("send_reminder", json!({}))
            .finish(),
    );
    let second = says(v, "Saturday, or else Tuesday", 1).await;
    assert_eq!(second.text(), "You're booked for Tuesday at ten. Goodbye!");
    assert_eq!(server.read_back(4).expect("a request").tools, BOOKING_TOOLS);
    assert_eq!(
        said(server, 5).last().map(String::as_str),
        Some(
            r#"result: {"error":"that slot is not open; the open slots are: Tuesday 10:00, Wednesday 15:30, Friday 09:00"}"#
        )
    );
    assert_eq!(
        server.read_back(5).expect("a request").tools,
        BOOKING_TOOLS,
        "a refused move leaves the call in Booking"
    );
    // Keep: Confirm reads the Booking conversation as it was, the carried note as the result.
    let confirm = said(server, 6);
    assert_eq!(confirm[0], ANA_VERIFIED);
    assert_eq!(
        confirm[confirm.len() - 5..],
        [
            "user: Saturday, or else Tuesday",
            "call: booked",
            r#"result: {"error":"that slot is not open; the open slots are: Tuesday 10:00, Wednesday 15:30, Friday 09:00"}"#,
            "call: booked",
            r#"result: {"result":"Booked Tuesday 10:00 for Ana Lima."}"#
        ][..]
    );
    assert_eq!(server.read_back(6).expect("a request").tools, CONFIRM_TOOLS);
    assert_eq!(
        stage_steps(v, second.turn_id),
        [
            step("stage", "Booking", "Clinic"),
            step("transition", "Confirm", "Booking")
        ]
    );
    assert_eq!(
        ledger.bookings(),
        [("p-17".to_owned(), "Tuesday 10:00".to_owned())]
    );
    assert_eq!(
        ledger.open_slots(),
        ["Wednesday 15:30", "Friday 09:00"],
        "a slot booked is gone for the next caller"
    );
    assert!(
        v.wait_for(Duration::from_secs(10), |v| v
            .turn_steps()
            .iter()
            .any(|s| s.kind == "tool" && s.name == "send_reminder"))
            .await
            .unwrap()
    );
    assert_eq!(
        ledger.reminders(),
        [("p-17".to_owned(), "Tuesday 10:00".to_owned())]
    );
    assert_eq!(v.ui_commands().len(), 1, "only Booking shows a screen");
}

#[tokio::test]
async fn a_patient_find_patient_did_not_give_is_refused_and_the_call_stays_in_verify() {
    let (server, mut v) = desk(Arc::new(Ledger::new())).await;
    v.start_silent().await.unwrap();
    server.reply(
        Reply::new()
            .call(
                "find_patient",
                json!({"name": "Ana Lima", "date_of_birth": "1984-03-12"}),
            )
            .finish(),
    );
    // Another patient's id, never looked up in this call; then the right id with another name.
    server.reply(
        Reply::new()
            .call(
                "verified",
                json!({"patient_id": "p-42", "name": "Ben Okafor"}),
            )
            .finish(),
    );
    server.reply(
        Reply::new()
            .call(
                "verified",
                json!({"patient_id": "p-17", "name": "Bea Lima"}),
            )
            .finish(),
    );
    server.reply(Reply::new().text("Let me check that again.").finish());
    let turn = says(
        &mut v,
        "I'm Ana Lima, born 1984-03-12, booking for Ben Okafor",
        1,
    )
    .await;
    assert_eq!(turn.text(), "Let me check that again.");
    assert_eq!(
        said(&server, 2).last().map(String::as_str),
        Some(
            r#"result: {"error":"that patient id is not one find_patient gave in this call: look the caller up first"}"#
        )
    );
    assert_eq!(
        said(&server, 3).last().map(String::as_str),
        Some(r#"result: {"error":"that name is not the one on the patient's record"}"#)
    );
    for i in 0..4 {
        assert_eq!(server.read_back(i).expect("a request").tools, VERIFY_TOOLS);
    }
    assert_eq!(
        stage_steps(&v, turn.turn_id),
        [step("stage", "Verify", "Clinic")]
    );
    assert!(v.ui_commands().is_empty(), "{:?}", v.ui_commands());
    // The next turn is still in Verify.
    server.reply(Reply::new().text("Your date of birth again?").finish());
    let next = says(&mut v, "hello?", 1).await;
    assert_eq!(server.read_back(4).expect("a request").tools, VERIFY_TOOLS);
    assert_eq!(
        stage_steps(&v, next.turn_id),
        [step("stage", "Verify", "Clinic")]
    );
}

/// The ledger, with a chart that opens only when the test says: a records system that is slow
/// while the caller talks over the desk.
struct SlowCharts {
    ledger: Ledger,
    opening: watch::Sender<bool>,
    gate: Semaphore,
}

impl Records for SlowCharts {
    fn find(&self, name: &str, date_of_birth: &str) -> Option<Patient> {
        self.ledger.find(name, date_of_birth)
    }

    async fn chart(&self, patient_id: &str) -> Option<String> {
        self.opening.send_replace(true);
        if let Ok(permit) = self.gate.acquire().await {
            permit.forget();
        }
        self.ledger.chart(patient_id).await
    }

    fn open_slots(&self) -> Vec<String> {
        self.ledger.open_slots()
    }

    fn book(&self, patient_id: &str, slot: &str) -> Result<String, String> {
        self.ledger.book(patient_id, slot)
    }

    fn send_reminder(&self, patient_id: &str, slot: &str) {
        self.ledger.send_reminder(patient_id, slot);
    }
}

#[tokio::test]
async fn a_handoff_the_caller_barged_in_on_finishes_and_the_next_turn_starts_in_booking() {
    let records = Arc::new(SlowCharts {
        ledger: Ledger::new(),
        opening: watch::channel(false).0,
        gate: Semaphore::new(0),
    });
    let mut opening = records.opening.subscribe();
    let (server, mut v) = desk(records.clone()).await;
    v.start_silent().await.unwrap();
    server.reply(
        Reply::new()
            .call(
                "find_patient",
                json!({"name": "Ana Lima", "date_of_birth": "1984-03-12"}),
            )
            .finish(),
    );
    server.reply(
        Reply::new()
            .text("Thank you, Ana. I'm opening your chart.")
            .call(
                "verified",
                json!({"patient_id": "p-17", "name": "Ana Lima"}),
            )
            .finish(),
    );
    let turn = v
        .send_user_message("I'm Ana Lima, born 1984-03-12")
        .await
        .unwrap();
    // The caller talks over the desk while `verified` waits on the chart.
    let waited = v
        .run_until(Duration::from_secs(10), opening.wait_for(|o| *o))
        .await
        .unwrap();
    assert!(waited.is_some_and(|w| w.is_ok()), "verified never ran");
    let cut = interrupt(&mut v, turn, "Thank you").await;
    assert!(v.ui_commands().is_empty(), "the call has not moved yet");
    // The chart opens: the transition ends after its turn, moves the call, shows the calendar.
    records.gate.add_permits(1);
    assert!(
        v.wait_for(Duration::from_secs(10), |v| !v.ui_commands().is_empty())
            .await
            .unwrap()
    );
    assert_eq!(v.ui_commands(), [calendar_for("p-17")]);
    assert!(
        v.wait_for(Duration::from_secs(10), |v| stage_steps(v, turn)
            .contains(&step("transition", "Booking", "Verify")))
            .await
            .unwrap(),
        "{:#?}",
        v.turn_steps()
    );
    assert_eq!(
        server.requests().len(),
        2,
        "no follow-up after the barge-in"
    );
    let after: Vec<u64> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| u.speech_id)
        .collect();
    assert_eq!(after, cut, "no speech of the cut turn after the barge-in");

    server.reply(Reply::new().text("Which day suits you?").finish());
    let next = says(&mut v, "hello?", 1).await;
    assert_eq!(server.read_back(2).expect("a request").tools, BOOKING_TOOLS);
    assert_eq!(
        stage_steps(&v, next.turn_id),
        [step("stage", "Booking", "Clinic")]
    );
    // The caller spoke since the move: the entry line's moment has passed, and the request ends
    // with the caller's words.
    assert_eq!(said(&server, 2), [ANA_VERIFIED, "user: hello?"]);
    assert_eq!(next.text(), "Which day suits you?");
}

/// The caller barges in on `turn` now, as Voqalize plays it: `Interruption`, the quiet window,
/// then each unit of the turn finalized as heard up to `heard`. Gives those units' speech ids.
async fn interrupt(v: &mut Voqalize, turn: u64, heard: &str) -> Vec<u64> {
    v.send(Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    v.quiesce(v.quiet, v.timeout).await.unwrap();
    let cut: Vec<u64> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| u.speech_id)
        .collect();
    for id in &cut {
        v.finalize(*id, heard).await.unwrap();
    }
    cut
}

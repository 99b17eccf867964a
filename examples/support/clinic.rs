//! The Elm Street Clinic's phone desk: a brain in three stages. `Verify` looks the caller up by
//! name and date of birth, `Booking` offers the open slots and books one, `Confirm` reads the
//! booking back and sends a reminder. Two transitions move the call and carry data: `verified`
//! (into `Booking`, starting afresh from one note: who the caller is) and `booked` (into `Confirm`,
//! keeping the conversation). Each refuses a move the desk cannot back: a patient `find_patient`
//! did not find in this call, a slot that is not open. Entering `Booking` puts the patient's
//! calendar on the app's screen (a typed UI command, from the stage's `on_enter` hook).
//!
//! Shared by `examples/clinic.rs` and the voqalize test `tests/clinic.rs` (included by path): it
//! uses voqalize and std only.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use voqalize::prelude::*;

/// What every request is told, before the stage's own instruction.
pub const INSTRUCTION: &str = "You answer the phone of the Elm Street Clinic. Speak in one or two \
short sentences, with no lists or markdown. Never read a patient id out loud.";

/// What the caller hears on entering `Booking`, before the model speaks there.
pub const BOOKING_LINE: &str = "Let's find you a slot.";

/// The clinic line, stage by stage.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Clinic {
    /// Ask for the caller's full name and date of birth, and look them up with `find_patient`
    /// (the date as YYYY-MM-DD). Once it finds them, call `verified` with the id and name it
    /// gave. Book nothing yet.
    #[stage(tools(find_patient), to(Booking))]
    Verify,
    /// Call `open_slots`, offer the caller the slots it lists, and call `booked` with the one
    /// they pick, written as `open_slots` wrote it. If the caller is not the patient verified,
    /// call `wrong_caller`.
    #[stage(tools(open_slots), to(Confirm, Verify))]
    Booking,
    /// Read the booking back (day and time), send a reminder with `send_reminder`, and say
    /// goodbye.
    #[stage(tools(send_reminder), end)]
    Confirm,
}

/// A caller to look up.
#[json_type]
pub struct Lookup {
    /// The caller's full name, as they said it.
    pub name: String,
    /// Their date of birth, YYYY-MM-DD.
    pub date_of_birth: String,
}

/// A patient of the clinic, as `find_patient` gives it to the model.
#[json_type]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patient {
    /// The clinic's id for the patient (`p-17`).
    pub patient_id: String,
    /// The name on the patient's record.
    pub name: String,
}

/// Who the caller is, once `find_patient` found them: the argument of `verified`.
#[json_type]
pub struct Verified {
    /// The patient id `find_patient` gave.
    pub patient_id: String,
    /// The patient's name, as `find_patient` gave it.
    pub name: String,
}

/// The slot the caller picked: the argument of `booked`.
#[json_type]
pub struct Booked {
    /// The slot, written as `open_slots` wrote it (`Tuesday 10:00`).
    pub slot: String,
}

/// The UI command that puts a patient's calendar on the app's screen:
/// `{"command": "show_calendar", "payload": {"patient_id": "p-17"}}`.
#[json_type]
#[derive(Action)]
pub struct ShowCalendar {
    /// Whose calendar.
    pub patient_id: String,
}

/// The clinic's records, as the desk reaches them: its patients, its open slots, its bookings
/// and reminders. [`Ledger`] keeps them in memory; a real desk calls its practice-management
/// system here.
pub trait Records: Send + Sync + 'static {
    /// The patient called `name` (any case, spaces trimmed) born on `date_of_birth`
    /// (YYYY-MM-DD), if there is one. Both come from the model: compare, never store them.
    fn find(&self, name: &str, date_of_birth: &str) -> Option<Patient>;

    /// What the booking clerk should know of a verified patient (their usual doctor), read from
    /// their chart: a real system reads it over the network, so the caller waits on it. `None`
    /// when the chart says nothing worth carrying.
    fn chart(&self, patient_id: &str) -> impl Future<Output = Option<String>> + Send;

    /// The open slots, as the caller is offered them (`Tuesday 10:00`), soonest first.
    fn open_slots(&self) -> Vec<String>;

    /// Books `slot` for the patient; gives the slot as the records write it.
    ///
    /// # Errors
    /// The slot is not open (never was, or someone took it): the text the model reads.
    fn book(&self, patient_id: &str, slot: &str) -> Result<String, String>;

    /// Sends the patient a text-message reminder of their booking at `slot`.
    fn send_reminder(&self, patient_id: &str, slot: &str);
}

/// One patient of the [`Ledger`].
struct Row {
    patient: Patient,
    date_of_birth: &'static str,
    doctor: &'static str,
}

/// The clinic's records in memory: three patients and a week of slots, shared by every call of
/// the process (a slot one caller books is gone for the next). Bookings and reminders are kept
/// for reading back: at most one each per open slot.
pub struct Ledger {
    patients: Vec<Row>,
    slots: Mutex<Vec<String>>,
    bookings: Mutex<Vec<(String, String)>>,
    reminders: Mutex<Vec<(String, String)>>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

impl Ledger {
    /// The demo records: Ana Lima (p-17, born 1984-03-12), Ben Okafor (p-42, born 1990-11-02)
    /// and Chloé Martin (p-58, born 1975-06-30); open slots Tuesday 10:00, Wednesday 15:30 and
    /// Friday 09:00.
    pub fn new() -> Ledger {
        let row = |id: &str, name: &str, date_of_birth, doctor| Row {
            patient: Patient {
                patient_id: id.to_owned(),
                name: name.to_owned(),
            },
            date_of_birth,
            doctor,
        };
        Ledger {
            patients: vec![
                row("p-17", "Ana Lima", "1984-03-12", "Dr. Rivera"),
                row("p-42", "Ben Okafor", "1990-11-02", "Dr. Chen"),
                row("p-58", "Chloé Martin", "1975-06-30", "Dr. Rivera"),
            ],
            slots: Mutex::new(
                ["Tuesday 10:00", "Wednesday 15:30", "Friday 09:00"]
                    .map(str::to_owned)
                    .to_vec(),
            ),
            bookings: Mutex::new(Vec::new()),
            reminders: Mutex::new(Vec::new()),
        }
    }

    /// Every booking made, as (patient id, slot), oldest first.
    #[allow(dead_code)] // the test reads them; the example does not
    pub fn bookings(&self) -> Vec<(String, String)> {
        locked(&self.bookings).clone()
    }

    /// Every reminder sent, as (patient id, slot), oldest first.
    #[allow(dead_code)] // the test reads them; the example does not
    pub fn reminders(&self) -> Vec<(String, String)> {
        locked(&self.reminders).clone()
    }
}

impl Records for Ledger {
    fn find(&self, name: &str, date_of_birth: &str) -> Option<Patient> {
        let (name, date_of_birth) = (name.trim(), date_of_birth.trim());
        self.patients
            .iter()
            .find(|r| r.date_of_birth == date_of_birth && r.patient.name.eq_ignore_ascii_case(name))
            .map(|r| r.patient.clone())
    }

    fn chart(&self, patient_id: &str) -> impl Future<Output = Option<String>> + Send {
        let doctor = self
            .patients
            .iter()
            .find(|r| r.patient.patient_id == patient_id)
            .map(|r| format!("Usual doctor: {}.", r.doctor));
        std::future::ready(doctor)
    }

    fn open_slots(&self) -> Vec<String> {
        locked(&self.slots).clone()
    }

    fn book(&self, patient_id: &str, slot: &str) -> Result<String, String> {
        let mut slots = locked(&self.slots);
        let Some(at) = slots
            .iter()
            .position(|s| s.eq_ignore_ascii_case(slot.trim()))
        else {
            return Err(format!(
                "that slot is not open; the open slots are: {}",
                slots.join(", ")
            ));
        };
        let slot = slots.remove(at);
        locked(&self.bookings).push((patient_id.to_owned(), slot.clone()));
        Ok(slot)
    }

    fn send_reminder(&self, patient_id: &str, slot: &str) {
        locked(&self.reminders).push((patient_id.to_owned(), slot.to_owned()));
    }
}

/// A lock whose holder never panics with it held; taken back all the same if one did.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the desk knows of its call, shared with the workflow's hook.
#[derive(Default)]
struct CallState {
    /// The patients `find_patient` found in this call (from the records: at most one per
    /// patient).
    found: Vec<Patient>,
    /// The patient the call is about, once `verified` moved it on.
    verified: Option<Patient>,
    /// The slot booked, once `booked` moved it on.
    booked: Option<String>,
    /// Whether `send_reminder` sent one (once per call).
    reminded: bool,
}

/// One call of the clinic's desk: its voice core, the clinic's records, what it knows of the
/// call.
pub struct Desk<R: Records = Ledger> {
    model: Model,
    records: Arc<R>,
    call: Arc<Mutex<CallState>>,
}

impl<R: Records> Desk<R> {
    /// The desk of one call: `model` (its provider and settings: give each call its own) told
    /// [`INSTRUCTION`] (in place of any it had) and following the [`Clinic`] stages, with
    /// [`BOOKING_LINE`] spoken on entering `Booking` and the patient's calendar put on the app's
    /// screen then ([`ShowCalendar`]); `records` the clinic's, shared by every call.
    pub fn new(model: Model, records: Arc<R>) -> Desk<R> {
        let call = Arc::new(Mutex::new(CallState::default()));
        let on_screen = call.clone();
        let workflow = Workflow::<Clinic>::new()
            .enter_line(Clinic::Booking, BOOKING_LINE)
            .on_enter(Clinic::Booking, move |change| {
                // Cheap: a lock and a frame queued. `verified` set the patient before the move.
                let patient = locked(&on_screen).verified.clone();
                if let Some(patient) = patient {
                    // Fails only when the call is ending: nothing left to show.
                    let _ = change.session.dispatch(&ShowCalendar {
                        patient_id: patient.patient_id,
                    });
                }
            });
        Desk {
            model: model.instruction(INSTRUCTION).workflow(workflow),
            records,
            call,
        }
    }
}

impl<R: Records> Brain for Desk<R> {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain(stages = Clinic)]
impl<R: Records> Desk<R> {
    /// Look a patient up by full name and date of birth (YYYY-MM-DD). Gives their patient id
    /// and the name on their record.
    #[tool]
    #[needs_result_now]
    async fn find_patient(&self, who: Lookup) -> Result<Patient, &'static str> {
        let Some(patient) = self.records.find(&who.name, &who.date_of_birth) else {
            return Err(
                "no patient with that name and date of birth: ask the caller to say \
                        them again, the name spelled out",
            );
        };
        let mut call = locked(&self.call);
        if !call.found.contains(&patient) {
            call.found.push(patient.clone());
        }
        Ok(patient)
    }

    /// The slots open for booking, soonest first, each written as `booked` takes it.
    #[tool]
    #[needs_result_now]
    async fn open_slots(&self) -> Vec<String> {
        self.records.open_slots()
    }

    /// Send the caller a text-message reminder of their booking.
    #[tool]
    async fn send_reminder(&self) -> Result<&'static str, &'static str> {
        let (patient, slot) = {
            let mut call = locked(&self.call);
            let (Some(patient), Some(slot)) = (call.verified.clone(), call.booked.clone()) else {
                return Err("nothing is booked yet");
            };
            if std::mem::replace(&mut call.reminded, true) {
                return Ok("the reminder was already sent");
            }
            (patient, slot)
        };
        self.records.send_reminder(&patient.patient_id, &slot);
        Ok("a reminder will go to the phone number on the patient's record")
    }

    /// The caller is the patient `find_patient` found: move on to booking. Refused for a
    /// patient `find_patient` did not give in this call.
    #[transition(to = Booking, context = fresh)]
    async fn verified(&self, who: Verified) -> Result<String, &'static str> {
        let patient = {
            let call = locked(&self.call);
            let Some(patient) = call.found.iter().find(|p| p.patient_id == who.patient_id) else {
                return Err(
                    "that patient id is not one find_patient gave in this call: look \
                            the caller up first",
                );
            };
            if !patient.name.eq_ignore_ascii_case(who.name.trim()) {
                return Err("that name is not the one on the patient's record");
            }
            patient.clone()
        };
        let chart = self.records.chart(&patient.patient_id).await;
        let note = format!(
            "The caller is {} (patient {}), verified by name and date of birth.{}",
            patient.name,
            patient.patient_id,
            chart.map(|c| format!(" {c}")).unwrap_or_default()
        );
        locked(&self.call).verified = Some(patient);
        Ok(note)
    }

    /// The slot is booked: read it back. Refused for a slot that is not open.
    // `keep`: Booking started afresh from who the caller is, so its conversation is short and
    // holds what Confirm reads back (the caller, the slot); a summary would be a model request
    // the caller waits on for nothing.
    #[transition(to = Confirm, context = keep)]
    async fn booked(&self, pick: Booked) -> Result<String, String> {
        let Some(patient) = locked(&self.call).verified.clone() else {
            return Err("no patient is verified in this call".to_owned());
        };
        let slot = self.records.book(&patient.patient_id, &pick.slot)?;
        let note = format!("Booked {slot} for {}.", patient.name);
        locked(&self.call).booked = Some(slot);
        Ok(note)
    }

    /// The caller is not the patient verified (someone else came to the phone): verify them.
    #[transition(to = Verify, context = fresh)]
    async fn wrong_caller(&self) -> &'static str {
        let mut call = locked(&self.call);
        call.verified = None;
        call.found.clear();
        "The caller is not the patient verified before: verify them."
    }
}

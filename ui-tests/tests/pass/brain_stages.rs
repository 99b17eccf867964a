//! `#[brain(stages = ...)]` as a user writes it: tools in stages, transitions with each context,
//! a transition back to the first stage, a compiled-out tool in no stage, a cfg'd tool a stage
//! names, and the enum named by a path. The checks pass; the table carries each transition and the brain its stages.
use voqalize::prelude::*;
use voqalize::stages::{Context, Transition};

/// The clinic line.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
#[stages(every(hang_up))]
enum Clinic {
    /// Check who the caller is.
    #[stage(tools(find_patient), to(Booking))]
    Verify,
    /// Book a slot.
    #[stage(tools(book), to(Verify, Confirm))]
    Booking,
    /// Read the booking back.
    #[stage(end)]
    Confirm,
}

/// Who the caller is.
#[json_type]
struct Verified {
    /// The patient's id.
    patient: String,
}

struct Desk;

#[brain(stages = self::Clinic)]
impl Desk {
    /// Look a patient up.
    #[tool]
    async fn find_patient(&self) -> &'static str {
        "p-17"
    }

    /// Book a slot.
    #[tool(on_barge_in = cancel)]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// End the call (compiled in: its cfg holds).
    #[cfg(not(any()))]
    #[tool]
    async fn hang_up(&self) {}

    /// Compiled out: in no stage, and no error.
    #[cfg(any())]
    #[tool]
    async fn gone(&self) {}

    /// The caller is verified.
    #[transition(to = Booking, context = fresh)]
    async fn verified(&self, who: Verified) -> String {
        format!("The caller is patient {}.", who.patient)
    }

    /// Start again with another caller.
    #[transition(to = Verify, context = summary, name = "start_over")]
    async fn again(&self) -> &'static str {
        ""
    }

    /// The slot is booked.
    #[voqalize::transition(to = Confirm)]
    #[needs_result_now]
    async fn booked(&self) -> Result<&'static str, String> {
        Ok("")
    }
}

#[test]
fn transitions_are_tools_read_at_once_and_the_brain_has_its_stages() {
    let tools = Desk.tools();
    let read: Vec<(&str, bool, Option<Transition>)> = tools
        .iter()
        .map(|t| (t.name(), t.needs_result_now(), t.transition()))
        .collect();
    let to = |to, context| Some(Transition { to, context });
    assert_eq!(
        read,
        [
            ("find_patient", false, None),
            ("book", false, None),
            ("hang_up", false, None),
            ("verified", true, to("Booking", Context::Fresh)),
            ("start_over", true, to("Verify", Context::Summary)),
            ("booked", true, to("Confirm", Context::Keep)),
        ]
    );
    let Some(table) = Desk.stage_table() else {
        panic!("a brain with stages hands them to the voice core");
    };
    assert!(table.is::<Clinic>());
    assert_eq!(table.type_name(), "Clinic");
    assert_eq!(table.index_of("Confirm"), Some(2));
}

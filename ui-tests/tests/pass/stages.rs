//! `#[derive(Stages)]` as a user writes it: three stages with `every(..)`, `mcp(..)` and `end`,
//! read back through the `Stages` trait.
use voqalize::prelude::*;

/// The clinic line, stage by stage.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
#[stages(every(hang_up))]
enum Clinic {
    /// Ask for the caller's name and date of birth,
    /// and check them with `find_patient`.
    ///
    ///   Be brief.
    #[stage(tools(find_patient), to(Booking), mcp(crm, "crm-eu"))]
    Verify,
    /// Offer the open slots and book the one the caller picks.
    #[stage(to(Verify, Confirm), tools(open_slots, book, hang_up))]
    Booking = 10,
    /// Read the booking back and say goodbye.
    #[stage(end)]
    Confirm,
}

#[test]
fn stages_come_from_the_variants() {
    let names: Vec<&str> = Clinic::STAGES.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["Verify", "Booking", "Confirm"]);
    let [verify, booking, confirm] = Clinic::STAGES else {
        panic!("three stages");
    };
    assert_eq!(
        verify.instruction(),
        "Ask for the caller's name and date of birth,\nand check them with `find_patient`.\n\n  Be brief."
    );
    assert_eq!(verify.tools(), ["find_patient", "hang_up"]);
    assert_eq!(verify.to(), [1]);
    assert_eq!(verify.mcp(), ["crm", "crm-eu"]);
    assert!(!verify.is_end());
    assert!(verify.leads_to(1) && !verify.leads_to(2));

    assert_eq!(
        booking.instruction(),
        "Offer the open slots and book the one the caller picks."
    );
    // `every(..)` adds `hang_up` once: the stage names it already.
    assert_eq!(booking.tools(), ["open_slots", "book", "hang_up"]);
    assert_eq!(booking.to(), [0, 2]);
    assert_eq!(booking.mcp(), [""; 0]);

    assert_eq!(confirm.tools(), ["hang_up"]);
    assert_eq!(confirm.to(), [0usize; 0]);
    assert!(confirm.is_end());
}

#[test]
fn a_stage_knows_its_place() {
    for (i, stage) in [Clinic::Verify, Clinic::Booking, Clinic::Confirm]
        .into_iter()
        .enumerate()
    {
        assert_eq!(stage.index(), i);
        assert_eq!(Clinic::from_index(i), Some(stage));
        assert_eq!(stage.__voqalize_stage_index(), i);
    }
    assert_eq!(Clinic::from_index(3), None);
    // The place is the declaration order, whatever the discriminant.
    assert_eq!(Clinic::Booking as usize, 10);
    assert_eq!(Clinic::Booking.name(), "Booking");
    assert_eq!(Clinic::Confirm.decl().name(), "Confirm");
    const BOOKING: usize = Clinic::Booking.__voqalize_stage_index();
    assert_eq!(BOOKING, 1);
}

#[test]
fn each_named_tool_carries_the_error_a_brain_without_it_gets() {
    let tools: Vec<&str> = <Clinic as Stages>::__TOOLS.iter().map(|t| t.0).collect();
    assert_eq!(
        tools,
        ["find_patient", "open_slots", "book", "hang_up", "hang_up"]
    );
    let (_, message) = <Clinic as Stages>::__TOOLS[0];
    assert!(
        message.starts_with(
            "stage `Verify` of `Clinic` names the tool `find_patient`, which the brain does not \
             declare as a `#[tool]`"
        ),
        "{message}"
    );
    let (_, message) = <Clinic as Stages>::__TOOLS[4];
    assert!(
        message.starts_with("`#[stages(every(..))]` of `Clinic` names the tool `hang_up`"),
        "{message}"
    );
}

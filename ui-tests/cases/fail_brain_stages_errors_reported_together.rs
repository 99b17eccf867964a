use voqalize::prelude::*;

/// The clinic line.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
#[stages(every(hang_up))]
enum Clinic {
    /// Check who the caller is.
    #[stage(tools(find_patient), to(Booking))]
    Verify,
    /// Book a slot.
    #[stage(tools(book), to(Confirm))]
    Booking,
    /// Read the booking back.
    #[stage(end)]
    Confirm,
}

struct Desk;

#[brain(stages = Clinic)]
impl Desk {
    /// Look a patient up.
    #[tool]
    async fn find_patient(&self) -> &'static str {
        "p-17"
    }

    /// Book a slot.
    #[tool]
    async fn book(&self) -> &'static str {
        "booked"
    }

    /// Cancel a booking: no stage names it.
    #[tool]
    async fn cancel(&self) -> &'static str {
        "cancelled"
    }

    /// The caller is verified.
    #[transition(to = Bookng)]
    async fn verified(&self) -> &'static str {
        ""
    }

    /// In the background.
    #[transition(to = Confirm, background, context = sumary)]
    async fn booked(&self) -> &'static str {
        ""
    }

    /// Not a tool.
    #[transition]
    async fn nowhere(&self) -> &'static str {
        ""
    }
}

// The good tools still work: the brain's table is there.
fn good_tools_work(desk: &Desk) -> usize {
    use voqalize::tools::Toolbox;
    desk.tools().len()
}

fn main() {
    let _ = good_tools_work(&Desk);
}

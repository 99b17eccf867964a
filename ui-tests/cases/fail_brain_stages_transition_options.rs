use voqalize::prelude::*;

/// The clinic line.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
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

    /// No stage named.
    #[transition]
    async fn no_to(&self) -> &'static str {
        ""
    }

    /// Options but no stage.
    #[transition(context = fresh)]
    async fn options_no_to(&self) -> &'static str {
        ""
    }

    /// In the background.
    #[transition(to = Booking, background)]
    async fn in_background(&self) -> &'static str {
        ""
    }

    /// A typo in the context.
    #[transition(to = Booking, context = sumary)]
    async fn typo(&self) -> &'static str {
        ""
    }

    /// The stage as a string.
    #[transition(to = "Booking")]
    async fn quoted(&self) -> &'static str {
        ""
    }

    /// The stage as a path.
    #[transition(to = Clinic::Booking)]
    async fn path(&self) -> &'static str {
        ""
    }

    /// A typo in an option.
    #[transition(to = Booking, contxt = fresh)]
    async fn option_typo(&self) -> &'static str {
        ""
    }

    /// A tool with a transition's option.
    #[tool(to = Booking)]
    async fn tool_to(&self) -> &'static str {
        ""
    }

    /// A transition and a tool.
    #[transition(to = Confirm)]
    #[tool]
    async fn twice(&self) -> &'static str {
        ""
    }

    /// Two transitions.
    #[transition(to = Booking)]
    #[transition(to = Confirm)]
    async fn two_ways(&self) -> &'static str {
        ""
    }
}

fn main() {}

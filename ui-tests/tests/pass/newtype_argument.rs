//! A newtype around a struct serialises as the struct: it is a valid argument, declared with the
//! struct's fields, and it reaches the model.
use voqalize::prelude::*;

/// A guest.
#[json_type]
struct Guest {
    /// Who is coming.
    name: String,
}

/// The guest, wrapped.
#[json_type]
struct Wrapped(Guest);

/// Transparent around the guest.
#[json_type]
#[serde(transparent)]
struct Transparent {
    guest: Guest,
}

struct Desk;

#[brain]
impl Desk {
    /// Book a guest.
    #[tool]
    async fn book(&self, args: Wrapped) -> String {
        args.0.name
    }

    /// Book a guest again.
    #[tool]
    async fn again(&self, args: Transparent) -> String {
        args.guest.name
    }
}

#[test]
fn compiles_and_runs() {
    let set = Desk.tools_for_turn();
    assert!(set.contains("book"), "{set:?}");
    assert!(set.contains("again"), "{set:?}");
    let decl = set.get("book").unwrap();
    assert!(
        decl.gemini()["parameters"]["properties"]
            .get("name")
            .is_some(),
        "{}",
        decl.gemini()
    );
}

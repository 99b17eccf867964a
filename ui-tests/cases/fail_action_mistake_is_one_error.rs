//! A mistake in `#[derive(Action)]` is reported once, at the derive: the derive still implements
//! `Action`, so the `dispatch` call below adds no second error.
use voqalize::prelude::*;

#[json_type(Serialize, JsonSchema)]
#[derive(Action)]
#[action(title = "Open the page")]
struct OpenUrl {
    url: String,
}

fn open(session: &Session) -> Result<(), SessionError> {
    session.dispatch(&OpenUrl {
        url: "https://example.com".to_owned(),
    })
}

fn main() {
    let _ = open;
}

//! Each mistake in `#[derive(Action)]` is reported once, at the derive: the derive still
//! implements `Action`, so the `dispatch` calls below add no error of their own.
use voqalize::prelude::*;

#[json_type(Serialize, JsonSchema)]
#[derive(Action)]
#[action(title = "Open the page")]
struct OpenUrl {
    url: String,
}

/// Generic, which an action cannot be: the fallback impl is generic too.
#[json_type(Serialize, JsonSchema)]
#[derive(Action)]
struct Page<T> {
    item: T,
}

fn open(session: &Session) -> Result<(), SessionError> {
    session.dispatch(&OpenUrl {
        url: "https://example.com".to_owned(),
    })?;
    session.dispatch(&Page { item: 1_u8 })
}

fn main() {
    let _ = open;
}

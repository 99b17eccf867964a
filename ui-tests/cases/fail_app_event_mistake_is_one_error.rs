//! A mistake in `#[derive(AppEvent)]` is reported once, at the derive: the derive still implements
//! `AppEvent` and `Payloads`, so the uses below add no second error.
use voqalize::prelude::*;
use voqalize::typescript::TypeScript;

#[derive(AppEvent)]
enum UiEvent {
    Scrolled(i32),
}

fn main() {
    let _ = <UiEvent as AppEvent>::NAMES;
    let _ = TypeScript::new().event::<UiEvent>();
}

use voqalize::prelude::*;

#[derive(AppEvent)]
enum UiEvent {
    Tapped {
        row: u32,
    },
    #[app_event(name = "tapped")]
    Touched {
        row: u32,
    },
    Scrolled(i32),
}

#[derive(AppEvent)]
struct Moved<T> {
    to: T,
}

fn main() {}

//! `#[derive(Action)]`, `#[derive(AppEvent)]` and the TypeScript they give `voqalize types`.

use voqalize::actions::{parse_app_event, ui_command_data};
use voqalize::prelude::*;
use voqalize::typescript::TypeScript;
use voqalize::wire::{Rtvi, RtviType};

/// Open a link in the app.
#[json_type]
#[derive(Action)]
struct OpenURL {
    url: String,
}

#[json_type]
#[derive(Action)]
#[action(name = "serve")]
struct HTTPServer {
    port: u16,
    note: Option<String>,
}

#[json_type(Serialize, JsonSchema)]
#[derive(Action)]
struct Row2Added {}

/// Events from the screen.
#[derive(Debug, PartialEq, AppEvent)]
enum UiEvent {
    /// A row was tapped.
    RowTapped {
        row: u32,
        #[serde(default)]
        label: Option<String>,
    },
    #[app_event(name = "closed_all")]
    Closed,
    #[serde(rename_all = "camelCase")]
    Scrolled { by_lines: i32 },
}

/// The app is alive.
#[derive(Debug, PartialEq, AppEvent)]
struct Ping {}

fn event(name: &str, payload: &str) -> Rtvi {
    Rtvi {
        kind: RtviType::UiEvent,
        data: Some(
            format!(r#"{{"event":"{name}","payload":{payload}}}"#)
                .parse()
                .unwrap(),
        ),
        id: None,
        turn_id: None,
    }
}

#[test]
fn compiles_and_runs() {
    assert_eq!(<OpenURL as Action>::NAME, "open_url");
    assert_eq!(<HTTPServer as Action>::NAME, "serve");
    assert_eq!(<Row2Added as Action>::NAME, "row2_added");
    let data = ui_command_data(&HTTPServer {
        port: 80,
        note: None,
    })
    .unwrap();
    assert_eq!(
        data.to_string(),
        r#"{"command":"serve","payload":{"port":80,"note":null}}"#
    );

    assert_eq!(
        <UiEvent as AppEvent>::NAMES,
        ["row_tapped", "closed_all", "scrolled"]
    );
    assert_eq!(
        parse_app_event::<UiEvent>(&event("row_tapped", r#"{"row":3}"#)),
        Some(UiEvent::RowTapped {
            row: 3,
            label: None
        })
    );
    assert_eq!(
        parse_app_event::<UiEvent>(&event("scrolled", r#"{"byLines":-2}"#)),
        Some(UiEvent::Scrolled { by_lines: -2 })
    );
    assert_eq!(
        parse_app_event::<UiEvent>(&event("closed_all", "{}")),
        Some(UiEvent::Closed)
    );
    // Fields the event does not declare make it unreadable, as do missing ones.
    assert_eq!(
        parse_app_event::<UiEvent>(&event("row_tapped", r#"{"row":3,"x":1}"#)),
        None
    );
    assert_eq!(
        parse_app_event::<UiEvent>(&event("closed_all", r#"{"x":1}"#)),
        None
    );
    assert_eq!(parse_app_event::<UiEvent>(&event("row_tapped", "{}")), None);
    assert_eq!(parse_app_event::<Ping>(&event("ping", "{}")), Some(Ping {}));
    let err = <UiEvent as AppEvent>::from_payload("row_tapped", r#"{"row":"x"}"#.parse().unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("`row`"), "{err}");

    let ts = TypeScript::new()
        .action::<OpenURL>()
        .action::<HTTPServer>()
        .action::<Row2Added>()
        .event::<UiEvent>()
        .event::<Ping>()
        .render()
        .unwrap();
    for line in [
        "/** Open a link in the app. */\nexport interface OpenURL {\n  url: string;\n}",
        "export interface HTTPServer {\n  port: number;\n  note: string | null;\n}",
        "export type Row2Added = Record<string, never>;",
        "/** A row was tapped. */\nexport interface UiEventRowTapped {\n  row: number;\n  label?: string | null;\n}",
        "export interface UiEventScrolled {\n  byLines: number;\n}",
        "  | { command: \"open_url\"; payload: OpenURL }\n",
        "  | { command: \"serve\"; payload: HTTPServer }\n",
        "  | { event: \"closed_all\"; payload: UiEventClosed }\n",
        "  | { event: \"ping\"; payload: Ping };\n",
        "export const ACTION_COMMANDS: readonly ActionCommand[] = [\"open_url\", \"serve\", \"row2_added\"];\n",
        "export const APP_EVENT_NAMES: readonly AppEventName[] = [\"row_tapped\", \"closed_all\", \"scrolled\", \"ping\"];\n",
        "  serve: (payload) => ({ command: \"serve\", payload }),\n",
        "  closed_all: (event): event is AppEventOf<\"closed_all\"> => event.event === \"closed_all\",\n",
        "export function assertNever(value: never): never {\n",
    ] {
        assert!(ts.contains(line), "missing {line:?} in\n{ts}");
    }

    let renamed = TypeScript::new()
        .action::<OpenURL>()
        .event::<Ping>()
        .union_names("UiCommand", "UiEvent")
        .render()
        .unwrap();
    for line in [
        "export type UiCommand =\n  | { command: \"open_url\"; payload: OpenURL };\n",
        "export const UI_COMMAND_COMMANDS: readonly UiCommandCommand[] = [\"open_url\"];\n",
        "export const UI_EVENT_NAMES: readonly UiEventName[] = [\"ping\"];\n",
        "export function sendUiEvent(\n",
    ] {
        assert!(renamed.contains(line), "missing {line:?} in\n{renamed}");
    }

    // Discovery finds every derived type of the program without registering one by hand, sorted
    // by wire name: here, this module's and the `coach` case's `show_section`.
    let found = TypeScript::new().discover().render().unwrap();
    for line in [
        "export const ACTION_COMMANDS: readonly ActionCommand[] = [\"open_url\", \"row2_added\", \"serve\", \"show_section\"];\n",
        "export const APP_EVENT_NAMES: readonly AppEventName[] = [\"ping\", \"row_tapped\", \"closed_all\", \"scrolled\"];\n",
    ] {
        assert!(found.contains(line), "missing {line:?} in\n{found}");
    }
}

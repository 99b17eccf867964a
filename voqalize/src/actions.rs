//! Actions (UI commands the brain sends to the app's screen) and AppEvents (what the app tells the
//! brain), both typed.
//!
//! * An [`Action`] is a serde-serialisable value with a wire name. [`Session::dispatch`] sends it as
//!   an RTVI `ui-command` with data `{"command": <name>, "payload": <every field, null included>}`
//!   (docs/protocol.md §4.11, pipecat's own ui-command shape). Derive it with `#[derive(Action)]`: the name
//!   is the snake_case of the type name (`OpenURL` → `open_url`), overridable with
//!   `#[action(name = "...")]`.
//! * An [`AppEvent`] is parsed from an inbound RTVI `ui-event` (`{"event": name, "payload": {...}}`)
//!   or the deprecated `client-message` form (`{"t": name, "d": {...}}`) by [`parse_app_event`],
//!   which never fails a live call: anything it cannot read gives `None` and a log line.
//!
//! [`Session::dispatch`]: crate::Session::dispatch

use std::sync::Once;

use serde::Serialize;

// What `#[derive(Action)]`'s compile errors name, re-exported (hidden) outside `__private` so that
// rustc names it by its bare name, without an SDK-internal path.
#[doc(hidden)]
use serde_json::{Map, Value};

use crate::wire::{Rtvi, RtviType};

/// A UI command for the app, sent with [`Session::dispatch`](crate::Session::dispatch).
///
/// Serialise every field: `Option` fields are sent as `null` when empty (do not skip them), so the
/// app always sees one shape.
pub trait Action: Serialize {
    /// The command's wire name (`command` in the ui-command data).
    const NAME: &'static str;
}

/// The JSON data of the ui-command that carries `action`: `{"command": NAME, "payload": {...}}`.
///
/// # Errors
/// The action's `Serialize` implementation failed (for example a map with non-string keys).
pub fn ui_command_data<A: Action + ?Sized>(action: &A) -> Result<Value, serde_json::Error> {
    let mut data = Map::new();
    data.insert("command".to_owned(), Value::String(A::NAME.to_owned()));
    data.insert("payload".to_owned(), serde_json::to_value(action)?);
    Ok(Value::Object(data))
}

/// An event the app sends the brain, parsed by [`parse_app_event`].
///
/// Derive it with `#[derive(AppEvent)]` on a struct (one event, named by the snake_case of the type)
/// or on an enum (one event per variant). Payload fields the type does not declare make the event
/// unreadable (logged, `None`), as do missing required fields.
pub trait AppEvent: Sized {
    /// The event names this type answers to.
    const NAMES: &'static [&'static str];

    /// Builds the event called `name` (one of [`Self::NAMES`]) from its payload object.
    ///
    /// # Errors
    /// The payload does not fit the type; the message names the bad field.
    fn from_payload(name: &str, payload: Value) -> Result<Self, serde_json::Error>;
}

static CLIENT_MESSAGE_DEPRECATION: Once = Once::new();

/// Reads an app event from an inbound RTVI message; never fails.
///
/// * `ui-event` with data `{"event": name, "payload": {...}}` → the event named `name`.
/// * `client-message` with data `{"t": name, "d": {...}}` → the same (deprecated form; one warning
///   per process, logged only when it resolves to an event).
/// * Anything else is `None`: another RTVI type, data that is not an object, a name that is not a
///   string, an unknown name (warn on ui-event, debug on client-message), or a payload that does not
///   fit (warn, naming the field). A payload that is not an object reads as `{}`.
pub fn parse_app_event<E: AppEvent>(message: &Rtvi) -> Option<E> {
    let (name_key, payload_key, deprecated) = match message.kind {
        RtviType::UiEvent => ("event", "payload", false),
        RtviType::ClientMessage => ("t", "d", true),
        _ => return None,
    };
    let Some(Value::Object(data)) = &message.data else {
        return None;
    };
    let Some(Value::String(name)) = data.get(name_key) else {
        return None;
    };
    if !E::NAMES.contains(&name.as_str()) {
        if deprecated {
            tracing::debug!(
                "no app event answers to {name}; the app knows an act this brain does not"
            );
        } else {
            tracing::warn!(
                "no app event answers to {name}; the app knows an act this brain does not"
            );
        }
        return None;
    }
    let payload = match data.get(payload_key) {
        Some(Value::Object(p)) => Value::Object(p.clone()),
        _ => Value::Object(Map::new()),
    };
    match E::from_payload(name, payload) {
        Ok(event) => {
            if deprecated {
                CLIENT_MESSAGE_DEPRECATION.call_once(|| {
                    tracing::warn!(
                        "app event {name} arrived as a client-message {{t, d}}; that form is \
                         deprecated: send a ui-event {{event, payload}}"
                    );
                });
            }
            Some(event)
        }
        Err(e) => {
            tracing::warn!("{name} did not fit {}: {e}", std::any::type_name::<E>());
            None
        }
    }
}

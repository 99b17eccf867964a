//! `#[derive(Action)]` and `#[derive(AppEvent)]`: payload schemas for `voqalize types`, and app
//! events read from their JSON payload.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Adds an app event's payload (its generated payload struct).
pub fn event_payload_schema<P: JsonSchema>(
    out: &mut crate::typescript::PayloadCollector<'_>,
    name: &'static str,
) {
    out.add::<P>(name);
}

/// Deserialises an app event's payload; the error names the bad field's path.
///
/// # Errors
/// The payload does not fit (a missing field, a field the event does not declare...).
pub fn event_payload<P: DeserializeOwned>(payload: Value) -> Result<P, serde_json::Error> {
    serde_path_to_error::deserialize(payload).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            inner
        } else {
            <serde_json::Error as serde::de::Error>::custom(format!("at `{path}`: {inner}"))
        }
    })
}

/// The error for an event name the type does not answer to.
pub fn unknown_event(type_name: &str, name: &str) -> serde_json::Error {
    <serde_json::Error as serde::de::Error>::custom(format!(
        "{type_name} has no event named {name}"
    ))
}

//! Fixtures the layers' tests share: a tool set, history builders, SSE items.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::model::history::{Call, Entry, Part, RequestSpec, Role, ToolChoice, ToolResult};
use crate::model::http::HttpRequest;
use crate::model::sse::{SseEvent, SseItem};
use crate::private::{ToolInfo, declare, declare_without_args, tool_table};
use crate::tools::{Arguments, ToolDecl, ToolSet};

/// A booking to open.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
pub(crate) struct OpenBooking {
    /// The city
    city: String,
    /// How many nights.
    nights: Option<u32>,
}

fn info(name: &'static str, description: &'static str, index: usize) -> ToolInfo {
    ToolInfo {
        name,
        description,
        needs_result_now: false,
        policy: crate::tools::ToolPolicy::Finish,
        timeout_ms: None,
        filler: None,
        method: name,
        index,
        transition: None,
    }
}

struct Fixture;

fn table() -> &'static [ToolDecl] {
    tool_table::<Fixture>(|| {
        vec![
            declare::<OpenBooking>(info("open_booking", "Put the booking form on screen.", 0)),
            declare_without_args(info("show_help", "Show help.", 1)),
        ]
    })
}

/// `open_booking(OpenBooking)` and `show_help()`.
pub(crate) fn tools() -> ToolSet {
    ToolSet::from_table(table(), |_| true)
}

/// The fixture tool called `name` alone.
pub(crate) fn tools_named(name: &str) -> ToolSet {
    ToolSet::from_table(table(), |t| t.name() == name)
}

pub(crate) fn user(id: u64, text: &str) -> Entry {
    Entry::new(id, Role::User, vec![Part::text(text)])
}

pub(crate) fn model(id: u64, parts: Vec<Part>) -> Entry {
    Entry::new(id, Role::Model, parts)
}

pub(crate) fn results(id: u64, results: Vec<ToolResult>) -> Entry {
    Entry::new(
        id,
        Role::Results,
        results.into_iter().map(Part::Result).collect(),
    )
}

pub(crate) fn result(call_id: Option<&str>, name: &str, response: Value) -> ToolResult {
    ToolResult {
        call_id: call_id.map(str::to_owned),
        name: name.to_owned(),
        response,
    }
}

pub(crate) fn text(t: &str) -> Part {
    Part::text(t)
}

pub(crate) fn trimmed(t: &str) -> Part {
    Part::Text {
        text: t.to_owned(),
        raw: Value::Null,
        trimmed: true,
    }
}

pub(crate) fn call(id: Option<&str>, name: &str, arguments: Arguments, raw: Value) -> Part {
    Part::Call {
        call: Call {
            id: id.map(str::to_owned),
            name: name.to_owned(),
            arguments,
        },
        raw,
    }
}

pub(crate) fn spec<'a>(
    instruction: Option<&'a str>,
    history: &'a [Entry],
    tools: &'a ToolSet,
    choice: &'a ToolChoice,
) -> RequestSpec<'a> {
    RequestSpec {
        instruction,
        history,
        note: None,
        tools,
        choice,
        rendered: None,
    }
}

/// A `data:`-only event.
pub(crate) fn data(d: &str) -> SseItem {
    SseItem::Event(SseEvent {
        event: None,
        data: d.to_owned(),
        id: None,
    })
}

/// An event with an `event:` name.
pub(crate) fn named(name: &str, d: &str) -> SseItem {
    SseItem::Event(SseEvent {
        event: Some(name.to_owned()),
        data: d.to_owned(),
        id: None,
    })
}

/// The request's body as JSON.
pub(crate) fn body(req: &HttpRequest) -> Value {
    serde_json::from_slice(&req.body).unwrap()
}

/// The value of header `name`.
pub(crate) fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

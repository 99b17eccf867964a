//! Tests of the tools module, by topic: schema rewrites per provider ([`providers`]), the
//! field-faults F01–F06 one by one ([`field_faults`]), enums with data, flattened enums and maps
//! ([`enums`]), `$ref` resolution ([`refs`]), the dispatcher ([`calls`]) and a tool
//! outside a session ([`session`]). The example argument structs they share are below.

mod calls;
mod enums;
mod field_faults;
mod losses;
mod providers;
mod refs;
mod session;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::schema::{self, Dialect};
use super::*;
use crate::private::{self, ToolInfo, ToolRun};

// ---------------------------------------------------------------------------------------------
// Example argument structs.

/// F01.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct BookTable {
    city: String,
    extras: HashMap<String, String>,
}

/// F02.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Transfer {
    department: String,
    note: Option<String>,
    priority: Option<u8>,
}

/// A guest.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Guest {
    /// Who is coming.
    name: String,
    /// How many people.
    party_size: u8,
}

/// F03.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Reserve {
    /// The main guest.
    guest: Guest,
    /// Someone else, if the main guest cannot come.
    alt: Option<Guest>,
}

/// Stand-ins for `url::Url`, `uuid::Uuid` and `chrono::DateTime<Utc>`: the schemas their
/// schemars impls give.
macro_rules! string_with_format {
    ($name:ident, $format:literal) => {
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct $name(String);
        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string", "format": $format})
            }
        }
    };
}
string_with_format!(Url, "uri");
string_with_format!(Uuid, "uuid");
string_with_format!(DateTime, "date-time");
string_with_format!(Email, "email");

/// F04.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct OpenLink {
    link: Url,
    id: Uuid,
    count: u32,
    when: DateTime,
    mail: Email,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Paging {
    size: u32,
}

/// F05.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Query {
    text: String,
    filter: Option<String>,
    page: Paging,
}

/// F06.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Tagged {
    tags: std::option::Option<Vec<String>>,
}

/// A unit enum with a documented variant (schemars writes `oneOf` + `const`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Kind {
    /// The first kind.
    Alpha,
    Beta,
}

/// An internally tagged enum.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(dead_code)]
enum Step {
    Walk { meters: u32 },
    Ride { line: String, stops: Option<u16> },
}

/// An externally tagged enum with data.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
enum Shape {
    Circle(f64),
    Square { side: f64 },
    Nothing,
}

/// A recursive type.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Tree {
    label: String,
    children: Vec<Tree>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Extras {
    note: String,
}

/// Everything else schemars can write.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Kitchen {
    kind: Kind,
    maybe_kind: Option<Kind>,
    steps: Vec<Step>,
    shape: Shape,
    tree: Tree,
    pair: (u8, String),
    any: Value,
    set: HashSet<String>,
    map: BTreeMap<String, Guest>,
    #[serde(rename = "ID")]
    id: i64,
    ratio: f64,
    #[serde(default)]
    count: u32,
    #[serde(default)]
    paging: Option<Paging>,
    guests: Option<Vec<Guest>>,
    unit: (),
    #[serde(flatten)]
    extras: Extras,
}

/// Settings with defaults (optional, not nullable).
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Settings {
    #[serde(default)]
    volume: u8,
    #[serde(default)]
    page: Option<Paging>,
    #[serde(default = "default_label")]
    label: String,
}

fn default_label() -> String {
    "none".into()
}

fn neutral<T: JsonSchema>() -> Value {
    schema::neutral_schema::<T>()
}

fn all_examples() -> Vec<(&'static str, Value)> {
    vec![
        ("BookTable", neutral::<BookTable>()),
        ("Transfer", neutral::<Transfer>()),
        ("Reserve", neutral::<Reserve>()),
        ("OpenLink", neutral::<OpenLink>()),
        ("Query", neutral::<Query>()),
        ("Tagged", neutral::<Tagged>()),
        ("Kitchen", neutral::<Kitchen>()),
        ("Settings", neutral::<Settings>()),
        ("Tree", neutral::<Tree>()),
        ("Guest", neutral::<Guest>()),
        ("empty", schema::empty_parameters()),
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers.

fn parse<T: serde::de::DeserializeOwned>(neutral: &Value, arguments: Value) -> T {
    let decl = ToolDecl::new(info("t", 0), Some(neutral.clone()), None);
    let prepared = dispatch::prepare(&decl, Arguments::Json(arguments)).unwrap();
    serde_json::from_value(prepared).unwrap()
}

fn info(name: &'static str, index: usize) -> ToolInfo {
    let description: &'static str = Box::leak(format!("Does {name}.").into_boxed_str());
    ToolInfo {
        name,
        description,
        needs_result_now: false,
        policy: crate::tools::ToolPolicy::Finish,
        timeout_ms: None,
        filler: None,
        method: Box::leak(format!("Desk::{name}").into_boxed_str()),
        index,
        transition: None,
    }
}

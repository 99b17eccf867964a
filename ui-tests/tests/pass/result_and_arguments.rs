//! Tools returning `Result<T, E: Display>` (also through a renamed error type alias, F06), and
//! argument structs with `Option`, nested structs, enums, `Vec`, renamed fields and
//! `std::option::Option<...>` paths.

use std::fmt;

use voqalize::prelude::*;

#[derive(Debug)]
struct Unavailable(String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not available", self.0)
    }
}

type BookingError = Unavailable;
type Outcome<T> = Result<T, BookingError>;

/// A guest.
#[json_type(Deserialize, JsonSchema)]
struct Guest {
    /// Who is coming.
    name: String,
    party_size: u8,
}

#[json_type]
#[serde(rename_all = "snake_case")]
enum Seating {
    Inside,
    Terrace,
}

/// A booking.
#[json_type(Deserialize, JsonSchema)]
struct Booking {
    guest: Guest,
    alt: Option<Guest>,
    seating: Seating,
    dishes: Vec<String>,
    #[serde(rename = "when")]
    at: String,
    tags: std::option::Option<Vec<String>>,
    note: core::option::Option<String>,
}

#[json_type(Serialize)]
struct Confirmation {
    table: u32,
}

struct Host;

#[brain]
impl Host {
    /// Book a table.
    #[tool]
    async fn book(&self, args: Booking) -> Result<Confirmation, Unavailable> {
        if args.guest.party_size > 8 || args.guest.name.is_empty() {
            return Err(Unavailable(args.at));
        }
        let _ = (args.alt, args.seating, args.dishes, args.note);
        Ok(Confirmation {
            table: args.tags.map_or(1, |t| t.len() as u32),
        })
    }

    /// Cancel a booking.
    #[tool]
    async fn cancel(&self) -> Outcome<()> {
        Err(Unavailable("cancelling".into()))
    }

    /// Say hello.
    #[tool]
    async fn hello(&self) -> Result<String, String> {
        Ok("hello".into())
    }
}

#[test]
fn compiles_and_runs() {
    let turn = Host.tools_for_turn();
    let run = |name: &str, args: &str| {
        voqalize_ui_tests::block_on(Host.call_tool(&turn, name, args.into()))
            .response()
            .to_string()
    };
    let booking = r#"{"guest":{"name":"Ada","party_size":2},"alt":null,"seating":"terrace",
        "dishes":[],"when":"20:00","tags":["a","b"]}"#;
    assert_eq!(run("book", booking), r#"{"result":{"table":2}}"#);
    let too_many = booking.replace("\"party_size\":2", "\"party_size\":9");
    assert_eq!(
        run("book", &too_many),
        r#"{"error":"20:00 is not available"}"#
    );
    let no_tags = booking.replace(r#""tags":["a","b"]"#, r#""tags":null"#);
    assert_eq!(run("book", &no_tags), r#"{"result":{"table":1}}"#);
    let bad = booking.replace("\"terrace\"", "\"roof\"");
    assert!(
        run("book", &bad).contains("invalid arguments at `seating`"),
        "{}",
        run("book", &bad)
    );
    assert_eq!(
        run("cancel", ""),
        r#"{"error":"cancelling is not available"}"#
    );
    assert_eq!(run("hello", ""), r#"{"result":"hello"}"#);

    let schema = Host.tools()[0].schema().clone();
    let props = schema["properties"].as_object().unwrap();
    let names: Vec<&String> = props.keys().collect();
    assert_eq!(
        names,
        ["guest", "alt", "seating", "dishes", "when", "tags", "note"]
    );
    assert_eq!(
        schema["required"].to_string(),
        r#"["guest","seating","dishes","when"]"#
    );
}

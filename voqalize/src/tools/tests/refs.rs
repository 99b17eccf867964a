//! `$ref` resolution: a definition whose name holds `/` and `~` (escaped `~1` and `~0` in the
//! reference) is found by every user of the one `$ref` parser.

use super::*;

/// A place, under a definition name that needs JSON-pointer escaping.
#[allow(dead_code)]
#[derive(Debug, Serialize, Deserialize)]
struct Zone {
    label: String,
    #[serde(default)]
    floor: u32,
}

impl JsonSchema for Zone {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        ODD_NAME.into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "A zone of the venue.",
            "properties": {
                "label": {"type": "string"},
                "floor": {"type": "integer"},
            },
            "required": ["label"],
        })
    }
}

/// `/` and `~`, with a `~1` that must not read as `/` once unescaped.
const ODD_NAME: &str = "Zone/A~1";

#[allow(dead_code)]
#[derive(Debug, Deserialize, JsonSchema)]
struct Seat {
    zone: Zone,
}

#[test]
fn a_defs_name_with_slash_and_tilde_is_a_pointer_escape() {
    let n = neutral::<Seat>();
    assert_eq!(n["properties"]["zone"]["$ref"], json!("#/$defs/Zone~1A~01"));
    assert!(n["$defs"].get(ODD_NAME).is_some(), "{n}");
}

#[test]
fn the_rewrites_inline_a_defs_name_with_slash_and_tilde() {
    let n = neutral::<Seat>();
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&n, dialect).schema;
        let zone = &s["properties"]["zone"];
        assert!(zone.get("$ref").is_none(), "{dialect:?}: {s}");
        assert_eq!(
            zone["description"],
            json!("A zone of the venue."),
            "{dialect:?}"
        );
        assert_eq!(
            zone["properties"]["label"]["type"],
            json!("string"),
            "{dialect:?}"
        );
    }
    assert!(schema::root_problem(&n).is_none());
}

#[test]
fn the_dispatcher_follows_a_defs_name_with_slash_and_tilde() {
    // `floor` is optional and does not accept `null`: through the `$ref`, `null` reads as absent.
    let seat: Seat = parse(
        &neutral::<Seat>(),
        json!({"zone": {"label": "A", "floor": null}}),
    );
    assert_eq!(seat.zone.label, "A");
    assert_eq!(seat.zone.floor, 0);
}

#[cfg(feature = "typescript")]
#[test]
fn the_typescript_names_a_defs_name_with_slash_and_tilde() {
    use crate::actions::Action;
    use crate::typescript::{PayloadCollector, Payloads, TypeScript};

    #[derive(Serialize, JsonSchema)]
    struct Show {
        zone: Zone,
    }
    impl Action for Show {
        const NAME: &'static str = "show";
    }
    impl Payloads for Show {
        fn payloads(out: &mut PayloadCollector<'_>) {
            crate::__private::action_payload::<Self>(out, Self::NAME);
        }
    }
    let out = TypeScript::new().action::<Show>().render().unwrap();
    // The reference names the definition it points at, not its escaped spelling.
    assert!(
        out.contains(&format!("export interface {ODD_NAME} {{")),
        "{out}"
    );
    assert!(out.contains(&format!("  zone: {ODD_NAME};")), "{out}");
    assert!(!out.contains("Zone~1"), "{out}");
}

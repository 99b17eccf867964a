//! The field-faults F01–F06, one by one.

use super::providers::keys_anywhere;
use super::*;

#[test]
fn f01_gemini_drops_keys_it_does_not_model_and_openai_keeps_the_object() {
    let n = neutral::<BookTable>();
    let g = schema::rewrite(&n, Dialect::Gemini).schema;
    let keys = keys_anywhere(&g);
    for k in ["$schema", "additionalProperties", "const"] {
        assert!(!keys.contains(k), "{k} in {g}");
    }
    assert_eq!(g["properties"]["extras"], json!({"type": "object"}));
    assert_eq!(g["properties"]["city"], json!({"type": "string"}));

    let o = schema::rewrite(&n, Dialect::OpenAi).schema;
    assert_eq!(
        o["properties"]["extras"],
        json!({"type": "object", "additionalProperties": {"type": "string"}})
    );
    assert_eq!(o["additionalProperties"], json!(false));
    assert!(!keys_anywhere(&o).contains("$schema"));
}

#[test]
fn f02_options_are_nullable_for_gemini_and_null_reads_as_none() {
    let g = schema::rewrite(&neutral::<Transfer>(), Dialect::Gemini).schema;
    assert_eq!(
        g["properties"]["note"],
        json!({"type": "string", "nullable": true})
    );
    assert_eq!(
        g["properties"]["priority"],
        json!({"type": "integer", "nullable": true})
    );
    assert_eq!(g["required"], json!(["department"]));
    let t: Transfer = parse(
        &neutral::<Transfer>(),
        json!({"department": "billing", "note": null}),
    );
    assert_eq!(t.department, "billing");
    assert!(t.note.is_none() && t.priority.is_none());
}

#[test]
fn f03_nested_structs_are_inlined_with_their_docs() {
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&neutral::<Reserve>(), dialect).schema;
        let keys = keys_anywhere(&s);
        for k in ["$ref", "$defs", "definitions"] {
            assert!(!keys.contains(k), "{dialect:?}: {k} in {s}");
        }
        let guest = &s["properties"]["guest"];
        assert_eq!(guest["type"], json!("object"), "{dialect:?} {s}");
        assert_eq!(guest["description"], json!("The main guest."));
        assert_eq!(guest["required"], json!(["name", "party_size"]));
        assert_eq!(
            guest["properties"]["name"]["description"],
            json!("Who is coming.")
        );
        assert_eq!(
            guest["properties"]["party_size"]["description"],
            json!("How many people.")
        );
        let alt = &s["properties"]["alt"];
        match dialect {
            Dialect::Gemini => {
                assert_eq!(alt["type"], json!("object"));
                assert_eq!(alt["nullable"], json!(true));
                assert_eq!(alt["properties"], guest["properties"]);
                assert_eq!(alt["required"], guest["required"]);
                assert_eq!(
                    alt["description"],
                    json!("Someone else, if the main guest cannot come.")
                );
            }
            Dialect::OpenAi | Dialect::OpenAiStrict => {
                let branches = alt["anyOf"].as_array().unwrap();
                assert_eq!(branches.len(), 2, "{alt}");
                assert_eq!(branches[0]["properties"], guest["properties"]);
                assert_eq!(branches[0]["required"], guest["required"]);
                assert_eq!(branches[1], json!({"type": "null"}));
            }
        }
    }
}

#[test]
fn f04_gemini_keeps_only_formats_it_accepts() {
    let g = schema::rewrite(&neutral::<OpenLink>(), Dialect::Gemini).schema;
    let p = &g["properties"];
    assert_eq!(p["link"], json!({"type": "string"}));
    assert_eq!(p["id"], json!({"type": "string"}));
    assert_eq!(p["count"], json!({"type": "integer"}));
    assert_eq!(p["when"], json!({"type": "string", "format": "date-time"}));
    assert_eq!(p["mail"], json!({"type": "string"}));

    let strict = schema::rewrite(&neutral::<OpenLink>(), Dialect::OpenAiStrict).schema;
    let p = &strict["properties"];
    assert_eq!(p["link"], json!({"type": "string"}));
    assert_eq!(p["id"], json!({"type": "string", "format": "uuid"}));
    assert_eq!(p["when"], json!({"type": "string", "format": "date-time"}));
    let loose = schema::rewrite(&neutral::<OpenLink>(), Dialect::OpenAi).schema;
    assert_eq!(
        loose["properties"]["link"],
        json!({"type": "string", "format": "uri"})
    );
    assert_eq!(
        loose["properties"]["count"],
        json!({"type": "integer", "minimum": 0})
    );
}

#[test]
fn f05_strict_mode_is_met_without_making_options_mandatory() {
    let n = neutral::<Query>();
    let strict = schema::rewrite(&n, Dialect::OpenAiStrict);
    assert!(strict.strict_problems.is_empty());
    let s = strict.schema;
    assert_eq!(s["required"], json!(["text", "filter", "page"]));
    assert_eq!(
        s["properties"]["filter"],
        json!({"type": ["string", "null"]})
    );
    assert_eq!(s["additionalProperties"], json!(false));
    assert_eq!(
        s["properties"]["page"]["additionalProperties"],
        json!(false)
    );
    assert_eq!(s["properties"]["page"]["required"], json!(["size"]));
    let q: Query = parse(
        &n,
        json!({"text": "a", "filter": null, "page": {"size": 2}}),
    );
    assert_eq!((q.text.as_str(), q.filter, q.page.size), ("a", None, 2));

    let loose = schema::rewrite(&n, Dialect::OpenAi).schema;
    assert_eq!(loose["required"], json!(["text", "page"]));
    assert!(!keys_anywhere(&loose).contains("additionalProperties"));
}

#[test]
fn f05_strict_null_for_a_defaulted_field_means_absent() {
    let n = neutral::<Settings>();
    let s = schema::rewrite(&n, Dialect::OpenAiStrict).schema;
    assert_eq!(
        s["properties"]["volume"]["type"],
        json!(["integer", "null"])
    );
    assert_eq!(s["properties"]["label"]["type"], json!(["string", "null"]));
    let settings: Settings = parse(&n, json!({"volume": null, "page": null, "label": null}));
    assert_eq!(settings.volume, 0);
    assert!(settings.page.is_none());
    assert_eq!(settings.label, "none");
}

#[test]
fn f06_a_fully_qualified_option_is_still_optional() {
    let n = neutral::<Tagged>();
    for dialect in Dialect::ALL {
        let s = schema::rewrite(&n, dialect).schema;
        let tags = &s["properties"]["tags"];
        assert_eq!(tags["items"], json!({"type": "string"}), "{dialect:?} {s}");
        if dialect != Dialect::OpenAiStrict {
            assert!(s.get("required").is_none_or(|r| r == &json!([])), "{s}");
        }
    }
    let t: Tagged = parse(&n, json!({"tags": null}));
    assert!(t.tags.is_none());
    let t: Tagged = parse(&n, json!({}));
    assert!(t.tags.is_none());
}

#[test]
fn enums_and_recursion() {
    let n = neutral::<Kitchen>();
    let g = schema::rewrite(&n, Dialect::Gemini).schema;
    let p = &g["properties"];
    assert_eq!(p["kind"]["type"], json!("string"));
    let mut kinds: Vec<&str> = p["kind"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["alpha", "beta"]);
    assert!(
        p["kind"]["description"]
            .as_str()
            .unwrap()
            .contains("`alpha`: The first kind.")
    );
    assert_eq!(p["maybe_kind"]["nullable"], json!(true));
    assert_eq!(p["maybe_kind"]["type"], json!("string"));
    // The tagged enum: branches with a one-value enum for the tag.
    let walk_branch = &p["steps"]["items"]["anyOf"][0];
    assert_eq!(
        walk_branch["properties"]["type"],
        json!({"type": "string", "enum": ["walk"]})
    );
    // The recursive type ends in an object for Gemini...
    assert_eq!(
        p["tree"]["properties"]["children"]["items"],
        json!({"type": "object"})
    );
    // ...and keeps one `$defs` entry for OpenAI.
    let o = schema::rewrite(&n, Dialect::OpenAi).schema;
    assert_eq!(
        o["properties"]["tree"]["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Tree"})
    );
    assert_eq!(o["$defs"].as_object().unwrap().len(), 1);
    // A recursive root refers to itself.
    let t = schema::rewrite(&neutral::<Tree>(), Dialect::OpenAiStrict).schema;
    assert_eq!(t["properties"]["children"]["items"], json!({"$ref": "#"}));
    // Flattened fields land in the properties; renamed fields keep their wire name.
    assert!(g["properties"].get("note").is_some());
    assert!(g["properties"].get("ID").is_some());
}

#[test]
fn declarations_per_provider() {
    let with = ToolDecl::new(info("transfer", 0), Some(neutral::<Transfer>()), None);
    let without = ToolDecl::new(info("ping", 1), None, None);
    assert_eq!(
        without.schema(),
        &json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        without.gemini(),
        json!({"name": "ping", "description": "Does ping."})
    );
    assert!(with.gemini()["parameters"]["properties"].is_object());
    let o = with.openai(false);
    assert_eq!(o["type"], json!("function"));
    assert_eq!(o["name"], json!("transfer"));
    assert_eq!(o["strict"], json!(false));
    assert_eq!(o["parameters"]["required"], json!(["department"]));
    let o = with.openai(true);
    assert_eq!(o["strict"], json!(true));
    assert_eq!(
        o["parameters"]["required"],
        json!(["department", "note", "priority"])
    );
    let c = with.chat(true);
    assert_eq!(c["function"]["strict"], json!(true));
    assert_eq!(c["function"]["name"], json!("transfer"));
    assert!(with.chat(false)["function"].get("strict").is_none());
    assert_eq!(
        without.openai(false)["parameters"],
        json!({"type": "object", "properties": {}})
    );
    // A map cannot be strict: the tool goes out strict: false with the loose schema.
    let book = ToolDecl::new(info("book", 2), Some(neutral::<BookTable>()), None);
    let o = book.openai(true);
    assert_eq!(o["strict"], json!(false));
    assert_eq!(o["parameters"], *book.parameters(Dialect::OpenAi));
}

#[test]
fn a_non_struct_argument_is_left_out_of_every_turn() {
    #[derive(Deserialize, JsonSchema)]
    enum Choice {
        A,
        B,
    }
    let decl = private::declare::<Choice>(info("choose", 0));
    assert!(schema::root_problem(decl.schema()).is_some());
    let table: &'static [ToolDecl] = Box::leak(vec![decl].into_boxed_slice());
    assert!(ToolSet::from_table(table, |_| true).is_empty());
    let _ = (Choice::A, Choice::B);
}

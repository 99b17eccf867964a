//! Lossy declarations are never silent: what a provider's schema cannot say is listed.

use super::*;

/// Everything Gemini's subset cannot say, and one it can since its enums became strings.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Order {
    /// Extras by name.
    extras: HashMap<String, u32>,
    /// Strictly positive.
    #[schemars(extend("exclusiveMinimum" = 0))]
    amount: f64,
    /// Who ordered.
    #[schemars(extend("format" = "uuid"))]
    customer: String,
    /// One of three sizes.
    #[schemars(extend("enum" = [1, 2, 3]))]
    size: u8,
    /// A note, maybe, no longer than 20.
    #[schemars(length(max = 20))]
    note: Option<String>,
}

#[test]
fn each_constraint_a_provider_drops_is_listed_with_its_place() {
    let decl = ToolDecl::new(info("order", 0), Some(neutral::<Order>()), None);
    let gemini: Vec<String> = decl
        .losses(Dialect::Gemini)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        gemini,
        [
            "extras: additionalProperties (a map's value type, or that no other field is allowed)",
            "amount: exclusiveMinimum: 0",
            "customer: format: \"uuid\"",
        ],
        "{:#}",
        decl.parameters(Dialect::Gemini)
    );
    // OpenAI takes the schema as it is.
    assert_eq!(decl.losses(Dialect::OpenAi), []);
    // A brain's test can say its tools lose nothing on the providers it uses.
    let plain = ToolDecl::new(info("plain", 0), Some(neutral::<Transfer>()), None);
    assert_eq!(plain.losses(Dialect::Gemini), [], "{:#}", plain.schema());
}

/// An MCP tool's schema is a server's text: the warning that names what a provider loses of it
/// quotes its property names clipped and escaped, however many and however long.
#[cfg(feature = "mcp")]
#[test]
fn a_servers_schema_reaches_the_loss_warning_clipped_and_escaped() {
    struct Nobody;
    impl super::super::AddedRunner for Nobody {
        fn run(&self, _: std::sync::Arc<str>, _: Value) -> super::super::AddedRun {
            Box::pin(std::future::ready(Ok(Value::Null)))
        }
    }
    let mut properties = serde_json::Map::new();
    for i in 0..200 {
        properties.insert(
            format!("field\u{1b}[31m{i}{}", "x".repeat(100)),
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
        );
    }
    let decl = ToolDecl::added(super::super::AddedDecl {
        name: "lookup".into(),
        description: "Looks up.".into(),
        schema: json!({"type": "object", "properties": properties}),
        needs_result_now: true,
        policy: ToolPolicy::Finish,
        timeout: None,
        filler: None,
        added: super::super::Added {
            source: "crm".into(),
            kind: "mcp",
            remote: "lookup".into(),
            runner: std::sync::Arc::new(Nobody),
        },
    });
    let (losses, text) = crate::logging::logged_at_debug(|| decl.losses(Dialect::Gemini).len());
    let ((), text2) = crate::logging::logged_at_debug(|| {
        let _ = decl.parameters(Dialect::Gemini);
    });
    assert!(losses >= 200 && text.is_empty());
    let line = text2
        .lines()
        .find(|l| l.contains("is declared to"))
        .expect("the loss warning");
    assert!(!line.contains('\u{1b}'), "{line}");
    assert!(line.len() < 2000, "{} bytes", line.len());
}

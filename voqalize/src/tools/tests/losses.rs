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

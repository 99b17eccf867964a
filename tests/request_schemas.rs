//! Every request body the model layers build validates against the provider's own published
//! schema: OpenAI's OpenAPI document (`CreateResponse`, `CreateChatCompletionRequest`, trimmed to
//! what they reference) and Gemini's `GenerateContentRequest` (the googleapis protos, read with
//! the proto3 JSON mapping, unknown fields refused). The bodies come from real sessions: a turn
//! with history, reasoning to replay, a call and its result, and tools whose arguments have
//! enums, nested objects, optional and array fields. Sources and versions:
//! `tests/fixtures/schemas/README.md`.

use std::path::Path;
use std::sync::Arc;

use prost_reflect::{DeserializeOptions, DynamicMessage};
use serde_json::{Value, json};
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::support::{Log, driver, heard_turn};

/// A size, a string enum.
#[json_type]
enum Size {
    /// Small.
    Small,
    /// Large.
    Large,
}

/// Someone at the table.
#[json_type]
struct Diner {
    /// Their name.
    name: String,
    /// How many they are.
    party: u8,
}

/// A table to reserve: nested, optional, array and enum fields.
#[json_type]
struct Table {
    /// Who booked.
    host: Diner,
    /// Who else might come.
    guest: Option<Diner>,
    /// Notes for the kitchen.
    notes: Vec<String>,
    /// The table's size.
    size: Size,
    /// The floor, from a fixed set.
    #[schemars(extend("enum" = [1, 2, 3]))]
    floor: u8,
}

struct Host {
    model: Model,
    log: Arc<Log>,
}

impl Brain for Host {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Host {
    /// Reserve a table.
    #[tool]
    async fn reserve(&self, args: Table) -> String {
        self.log.push(format!("reserve {}", args.host.name));
        "reserved".into()
    }

    /// Show the menu.
    #[tool]
    async fn show_menu(&self) -> &'static str {
        "shown"
    }
}

fn layer(provider: Provider, base: &str, strict: bool) -> ModelLayer {
    match provider {
        Provider::Gemini => Gemini::builder("test-key")
            .model("schemas")
            .base_url(base)
            .build()
            .expect("a layer")
            .into(),
        Provider::OpenAi => OpenAi::builder("test-key", "schemas")
            .base_url(base)
            .reasoning("low")
            .strict(strict)
            .build()
            .expect("a layer")
            .into(),
        Provider::Chat => Chat::builder(base, "schemas")
            .reasoning_effort("low")
            .strict(strict)
            .build()
            .expect("a layer")
            .into(),
        other => panic!("no published request schema is checked for {other:?}"),
    }
}

/// Three turns against the stand-in provider; every request body it received.
async fn bodies(provider: Provider, strict: bool) -> Vec<Value> {
    let server = ModelServer::start(provider).await.expect("a loopback port");
    let base = server.base_url();
    let log = Arc::new(Log::default());
    let l = log.clone();
    let mut v: Voqalize = driver(move || Host {
        model: Model::new(layer(provider, &base, strict)).instruction("Be brief."),
        log: l.clone(),
    })
    .await;
    let table = json!({"host": {"name": "Ada", "party": 2}, "guest": null, "notes": ["window"],
        "size": "Large", "floor": 2});
    server.reply(
        Reply::new()
            .thought("They want a table.")
            .text("Booking it.")
            .call("reserve", table)
            .usage(40, 12)
            .finish(),
    );
    server.reply(
        Reply::new()
            .thought("The menu next.")
            .call("show_menu", json!({}))
            .finish(),
    );
    server.reply(Reply::new().text("Enjoy.").finish());
    v.start_silent().await.expect("a session");
    for said in ["a table for two", "and the menu", "thanks"] {
        heard_turn(&mut v, said).await.expect("a turn");
    }
    assert_eq!(log.events(), ["reserve Ada"], "the call ran");
    server.requests().into_iter().map(|r| r.body).collect()
}

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/schemas")
}

/// The validator for one component of the trimmed OpenAPI document.
pub(crate) fn openai_validator(file: &str, component: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("openai").join(file)).expect("the schema");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    let schema = json!({
        "$ref": format!("#/components/schemas/{component}"),
        "components": doc["components"],
    });
    jsonschema::draft202012::new(&schema).expect("a valid schema")
}

/// Asserts `body` validates against `validator`, naming `what` and every error.
pub(crate) fn check_openai(validator: &jsonschema::Validator, body: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: {} errors:\n{}\nbody: {body:#}",
        errors.len(),
        errors.join("\n")
    );
}

#[tokio::test]
async fn openai_responses_bodies_validate_against_create_response() {
    let validator = openai_validator("create-response-request.schemas.json", "CreateResponse");
    for strict in [false, true] {
        let bodies = bodies(Provider::OpenAi, strict).await;
        assert_eq!(bodies.len(), 3);
        // The last request replays reasoning, a message, calls and their outputs.
        let kinds: Vec<&str> = bodies[2]["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["type"].as_str())
            .collect();
        assert!(
            kinds.contains(&"reasoning") && kinds.contains(&"function_call_output"),
            "{kinds:?}"
        );
        for (i, body) in bodies.iter().enumerate() {
            check_openai(&validator, body, &format!("request {i} (strict: {strict})"));
        }
    }
}

#[tokio::test]
async fn chat_bodies_validate_against_create_chat_completion_request() {
    let validator = openai_validator(
        "create-chat-completion-request.schemas.json",
        "CreateChatCompletionRequest",
    );
    for strict in [false, true] {
        let bodies = bodies(Provider::Chat, strict).await;
        assert!(
            bodies[2]["messages"].to_string().contains("tool_calls"),
            "{:#}",
            bodies[2]
        );
        for (i, body) in bodies.iter().enumerate() {
            check_openai(&validator, body, &format!("request {i} (strict: {strict})"));
        }
    }
}

/// Gemini's JSON reader takes the `Type` enum of a declaration's schema in lower case as the SDK
/// sends it (`"object"`); the proto3 JSON mapping names it in upper case (`"OBJECT"`). Only that
/// spelling is changed before the check.
fn upper_schema_types(v: &mut Value, in_schema: bool) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if in_schema && k == "type" {
                    if let Value::String(t) = child {
                        *t = t.to_uppercase();
                    }
                    continue;
                }
                let schema_here = in_schema || k == "parameters";
                // Inside a schema, `properties` maps names to schemas; `enum` holds plain values.
                if k == "enum" || k == "required" {
                    continue;
                }
                upper_schema_types(child, schema_here);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| upper_schema_types(i, in_schema)),
        _ => {}
    }
}

/// Gemini's `GenerateContentRequest`, from the googleapis protos.
pub(crate) fn gemini_request() -> prost_reflect::MessageDescriptor {
    let protos = root().join("gemini");
    let mut compiler = protox::Compiler::new([&protos]).expect("the protos");
    compiler
        .open_file("google/ai/generativelanguage/v1beta/generative_service.proto")
        .expect("generative_service.proto compiles");
    compiler
        .descriptor_pool()
        .get_message_by_name("google.ai.generativelanguage.v1beta.GenerateContentRequest")
        .expect("GenerateContentRequest")
}

/// Asserts `body` reads as a `request` (the proto3 JSON mapping, unknown fields refused), naming
/// `what`.
pub(crate) fn check_gemini(request: &prost_reflect::MessageDescriptor, body: &Value, what: &str) {
    let mut body = body.clone();
    upper_schema_types(&mut body, false);
    // The one field the SDK sends that these protos do not carry yet: the Gemini API documents
    // `thinkingConfig.thinkingLevel` for its thinking models (Vertex's v1 `ThinkingConfig`
    // has `thinking_level`; generativelanguage v1beta at this commit has only the budget).
    if let Some(Value::Object(config)) = body.pointer_mut("/generationConfig/thinkingConfig") {
        config.remove("thinkingLevel");
    }
    let text = body.to_string();
    let mut de = serde_json::Deserializer::from_str(&text);
    let read = DynamicMessage::deserialize_with_options(
        request.clone(),
        &mut de,
        &DeserializeOptions::new().deny_unknown_fields(true),
    );
    assert!(read.is_ok(), "{what}: {:?}\nbody: {body:#}", read.err());
}

#[tokio::test]
async fn gemini_bodies_validate_against_generate_content_request() {
    let request = gemini_request();
    let bodies = bodies(Provider::Gemini, false).await;
    assert!(
        bodies[2].to_string().contains("functionResponse"),
        "{:#}",
        bodies[2]
    );
    for (i, body) in bodies.iter().enumerate() {
        check_gemini(&request, body, &format!("request {i}"));
    }
}

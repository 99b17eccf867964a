//! A call that moves between providers mid-turn: Gemini (signed thoughts, signed calls without
//! ids) hands over to OpenAI Responses (encrypted reasoning), which hands over to Anthropic
//! (thinking on), which hands back to Gemini. Over a real session socket against three stand-in
//! providers, every request body satisfies its provider: Gemini's and OpenAI's published request
//! schemas (the checks of `request_schemas`), Anthropic's rules on `messages`; and no provider is
//! sent another's signatures, reasoning or thinking.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use voqalize::model::{Anthropic, Gemini, OpenAi, Timeouts};
use voqalize::prelude::*;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::request_schemas::{check_gemini, check_openai, gemini_request, openai_validator};
use crate::support::{Log, driver, says};

/// Who answers the call.
#[derive(Stages, Clone, Copy, PartialEq, Eq, Debug)]
enum Leg {
    /// Gemini answers.
    #[stage(tools(find_order), to(Responses, Messages))]
    Gemini,
    /// OpenAI Responses answers.
    #[stage(tools(find_order), to(Messages, Gemini))]
    Responses,
    /// Anthropic Messages answers.
    #[stage(tools(find_order), to(Gemini, Responses))]
    Messages,
}

struct Shop {
    model: Model,
    log: Arc<Log>,
}

impl Brain for Shop {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain(stages = Leg)]
impl Shop {
    /// Finds the caller's order.
    #[tool]
    #[needs_result_now]
    async fn find_order(&self) -> &'static str {
        self.log.push("find_order");
        "ships Tuesday"
    }

    /// Hand the call to the OpenAI desk.
    #[transition(to = Responses)]
    async fn to_openai(&self) -> &'static str {
        "moved"
    }

    /// Hand the call to the Anthropic desk.
    #[transition(to = Messages)]
    async fn to_anthropic(&self) -> &'static str {
        "moved"
    }

    /// Hand the call back to the Gemini desk.
    #[transition(to = Gemini)]
    async fn to_gemini(&self) -> &'static str {
        "moved"
    }
}

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(10),
        gap: Duration::from_secs(10),
    }
}

/// Gemini's own signatures, as a real Gemini 3 stream carries them.
const GEMINI_SIGS: [&str; 3] = ["R0VNLVNJRy0x", "R0VNLVNJRy0y", "R0VNLVNJRy0z"];

/// One Gemini response of `parts` (written as a real stream: one chunk, then the finish).
fn gemini(parts: Value) -> Reply {
    let chunk = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]});
    Reply::new().raw(&format!("data: {chunk}\r\n\r\n")).finish()
}

/// Anthropic's rules on a request's `messages`: the user's first, roles alternating, every
/// `tool_use` answered by a `tool_result` in the next message under the same id (of the
/// characters its ids allow), only Anthropic's block kinds; with thinking on, the last assistant
/// message of a tool loop starts with a thinking block.
pub(crate) fn check_anthropic(body: &Value, what: &str) {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "user", "{what}: {body:#}");
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "{what}: {body:#}");
        let ids = |m: &Value, kind: &str, key: &str| -> Vec<String> {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b["type"] == kind)
                .map(|b| b[key].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let used = ids(&pair[0], "tool_use", "id");
        assert_eq!(
            used,
            ids(&pair[1], "tool_result", "tool_use_id"),
            "{what}: {body:#}"
        );
        assert!(
            used.iter().all(|id| !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')),
            "{what}: {used:?}"
        );
    }
    for block in messages
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
    {
        let kind = block["type"].as_str().unwrap_or_default();
        assert!(
            [
                "text",
                "tool_use",
                "tool_result",
                "thinking",
                "redacted_thinking"
            ]
            .contains(&kind),
            "{what}: a foreign block {block}"
        );
    }
    if body.get("thinking").is_some() {
        let last = messages.iter().rposition(|m| m["role"] == "assistant");
        let looping = messages.last().is_some_and(|m| {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b["type"] == "tool_result")
        });
        if let (Some(last), true) = (last, looping) {
            assert_eq!(
                messages[last]["content"][0]["type"], "thinking",
                "{what}: thinking on, and the tool loop's last assistant message starts otherwise: {body:#}"
            );
        }
    }
}

/// `body` holds none of `marks`.
fn assert_none(body: &Value, marks: &[&str], what: &str) {
    let text = body.to_string();
    for mark in marks {
        assert!(!text.contains(mark), "{what}: {mark} in {body:#}");
    }
}

/// The three stand-in providers and what the brain's tools did.
struct Desks {
    gemini: ModelServer,
    openai: ModelServer,
    anthropic: ModelServer,
    log: Arc<Log>,
}

/// A shop whose call starts on Gemini, with a stage on OpenAI Responses (reasoning on) and one
/// on Anthropic (thinking on), each on its own stand-in; the session started.
async fn shop() -> (Desks, Voqalize) {
    let gemini_server = ModelServer::start(Provider::Gemini).await.expect("a port");
    let openai_server = ModelServer::start(Provider::OpenAi).await.expect("a port");
    let anthropic_server = ModelServer::start(Provider::Anthropic)
        .await
        .expect("a port");
    let log = Arc::new(Log::default());
    let (g, o, a) = (
        gemini_server.base_url(),
        openai_server.base_url(),
        anthropic_server.base_url(),
    );
    let l = log.clone();
    let mut v = driver(move || {
        let gemini = Gemini::builder("test-key")
            .model("gemini-3-test")
            .base_url(&g)
            .timeouts(timeouts())
            .build()
            .expect("a layer");
        let openai = OpenAi::builder("test-key", "gpt-test")
            .base_url(&o)
            .reasoning("low")
            .timeouts(timeouts())
            .build()
            .expect("a layer");
        let anthropic = Anthropic::builder("test-key", "claude-test")
            .base_url(&a)
            .thinking(1024)
            .timeouts(timeouts())
            .build()
            .expect("a layer");
        Shop {
            model: Model::new(gemini)
                .instruction("You answer the shop's phone.")
                .workflow(
                    Workflow::new()
                        .layer(Leg::Responses, openai)
                        .layer(Leg::Messages, anthropic),
                ),
            log: l.clone(),
        }
    })
    .await;
    v.start_silent().await.expect("a session");
    let desks = Desks {
        gemini: gemini_server,
        openai: openai_server,
        anthropic: anthropic_server,
        log,
    };
    (desks, v)
}

/// Five turns: Gemini alone; Gemini handing over to OpenAI mid-turn; OpenAI handing over to
/// Anthropic mid-turn; Anthropic handing back to Gemini mid-turn; Gemini alone.
async fn talk(d: &Desks, v: &mut Voqalize) {
    let (gemini_server, openai_server, anthropic_server) = (&d.gemini, &d.openai, &d.anthropic);
    // Turn 0: Gemini thinks and speaks, signed.
    gemini_server.reply(gemini(json!([
        {"text": "The caller wants their order.", "thought": true, "thoughtSignature": GEMINI_SIGS[0]},
        {"text": "Hello, the shop.", "thoughtSignature": GEMINI_SIGS[1]},
    ])));
    says(v, "Hello?", 1).await;

    // Turn 1: Gemini calls (signed, no call id), then hands over to OpenAI, which answers the
    // same turn.
    gemini_server.reply(gemini(json!([
        {"functionCall": {"name": "find_order", "args": {}}, "thoughtSignature": GEMINI_SIGS[2]},
    ])));
    gemini_server.reply(gemini(json!([
        {"functionCall": {"name": "to_openai", "args": {}}, "thoughtSignature": GEMINI_SIGS[2]},
    ])));
    openai_server.reply(
        Reply::new()
            .thought("Answer it.")
            .text("It ships Tuesday.")
            .finish(),
    );
    says(v, "Where is my order?", 1).await;

    // Turn 2: OpenAI reasons (encrypted), calls, hands over to Anthropic mid-turn.
    openai_server.reply(
        Reply::new()
            .thought("Look again.")
            .call("find_order", json!({}))
            .finish(),
    );
    openai_server.reply(
        Reply::new()
            .thought("Anthropic handles changes.")
            .call("to_anthropic", json!({}))
            .finish(),
    );
    anthropic_server.reply(Reply::new().text("Still Tuesday.").finish());
    says(v, "Can you check again?", 1).await;

    // Turn 3: Anthropic thinks (signed), calls, hands back to Gemini mid-turn.
    anthropic_server.reply(
        Reply::new()
            .thought("Cancel it.")
            .call("find_order", json!({}))
            .finish(),
    );
    anthropic_server.reply(
        Reply::new()
            .thought("Gemini closes.")
            .call("to_gemini", json!({}))
            .finish(),
    );
    gemini_server.reply(gemini(json!([{"text": "Cancelled."}])));
    says(v, "Please cancel it.", 1).await;

    // Turn 4: Gemini again, its own turns of turn 1 still signed.
    gemini_server.reply(gemini(json!([{"text": "Goodbye."}])));
    says(v, "Thanks, bye.", 1).await;
}

/// The request bodies `server` received, in order.
fn bodies(server: &ModelServer) -> Vec<Value> {
    server.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test]
async fn a_call_that_alternates_providers_sends_each_a_body_it_accepts() {
    let (d, mut v) = shop().await;
    talk(&d, &mut v).await;
    assert_eq!(d.log.events(), ["find_order", "find_order", "find_order"]);
    let (gemini_bodies, openai_bodies, anthropic_bodies) =
        (bodies(&d.gemini), bodies(&d.openai), bodies(&d.anthropic));
    assert_eq!(
        (
            gemini_bodies.len(),
            openai_bodies.len(),
            anthropic_bodies.len()
        ),
        (5, 3, 3)
    );

    // What each provider alone may be sent: OpenAI's encrypted reasoning and item ids, Anthropic's
    // signed thinking, Gemini's signatures and thought text.
    let openai_marks = ["gAAAAenc", "\"reasoning\"", "rs_", "fc_", "msg_"];
    let anthropic_marks = ["EqQBc2ln", "\"thinking\":\"Cancel", "Gemini closes"];
    let gemini_marks = [
        GEMINI_SIGS[0],
        GEMINI_SIGS[1],
        GEMINI_SIGS[2],
        "thoughtSignature",
        "The caller wants",
    ];

    let request = gemini_request();
    for (i, body) in gemini_bodies.iter().enumerate() {
        let what = format!("Gemini request {i}");
        check_gemini(&request, body, &what);
        assert_none(body, &openai_marks, &what);
        assert_none(body, &anthropic_marks, &what);
    }
    // Back on Gemini mid-turn: Anthropic's calls of this turn carry the documented placeholder;
    // Gemini's own signed turn of turn 1 is replayed as it came.
    let back = gemini_bodies[3].to_string();
    assert!(
        back.contains("skip_thought_signature_validator") && back.contains(GEMINI_SIGS[2]),
        "{:#}",
        gemini_bodies[3]
    );

    let responses = openai_validator("create-response-request.schemas.json", "CreateResponse");
    for (i, body) in openai_bodies.iter().enumerate() {
        let what = format!("OpenAI request {i}");
        check_openai(&responses, body, &what);
        assert_none(body, &gemini_marks, &what);
        assert_none(body, &anthropic_marks, &what);
    }
    // OpenAI's own reasoning of this turn goes back to it.
    assert!(
        openai_bodies[2].to_string().contains("gAAAAenc"),
        "{:#}",
        openai_bodies[2]
    );

    for (i, body) in anthropic_bodies.iter().enumerate() {
        let what = format!("Anthropic request {i}");
        check_anthropic(body, &what);
        assert_none(body, &gemini_marks, &what);
        assert_none(body, &openai_marks, &what);
    }
    // Taking over mid-turn from OpenAI's calls: no thinking block can precede them, so that
    // request goes without thinking; the next turn, all Anthropic's own, thinks.
    assert!(anthropic_bodies[0].get("thinking").is_none());
    assert_eq!(anthropic_bodies[1]["thinking"]["type"], "enabled");
    assert_eq!(anthropic_bodies[2]["thinking"]["type"], "enabled");
}

//! A history that moves between providers: each built-in layer sent model turns another layer
//! wrote renders them with none of that layer's JSON and in its own valid shape; a history all
//! its own renders byte for byte as it did before turns had an origin.

use serde_json::{Value, json};

use super::test_support::{body, call, model, result, results, spec, text, tools, user};
use crate::model::gemini::request::FOREIGN_SIGNATURE;
use crate::model::history::{Entry, Origin, Part, ToolChoice};
use crate::model::layer::Layer;
use crate::model::origin::for_layer;
use crate::model::{Anthropic, Chat, Gemini, Interactions, OpenAi};
use crate::tools::Arguments;

const GEMINI: (&str, &str) = ("google.generateContent", "gemini-3-pro");
const OPENAI: (&str, &str) = ("openai.responses", "gpt-5");
const ANTHROPIC: (&str, &str) = ("anthropic.messages", "claude-opus");
const INTERACTIONS: (&str, &str) = ("google.interactions", "gemini-3-flash");

/// What each format's turns carry that no other provider may be sent.
const MARKS: [(&str, &[&str]); 4] = [
    ("google.generateContent", &["GEM-SIG", "gem-thinks"]),
    ("openai.responses", &["OAI-ENC", "rs_1", "fc_1", "msg_1"]),
    (
        "anthropic.messages",
        &["ANT-THINK", "ANT-SIG", "ANT-REDACTED"],
    ),
    ("google.interactions", &["INT-SIG", "int-thinks"]),
];

fn of((format, model_name): (&str, &str), entry: Entry) -> Entry {
    entry.with_origin(Origin::new(format, model_name))
}

fn args(json: &str) -> Arguments {
    Arguments::Raw(json.to_owned())
}

/// A call that went Gemini (signed thoughts, a call without an id), OpenAI Responses (encrypted
/// reasoning before a call and before a message), Anthropic (thinking, redacted thinking, a call)
/// and Interactions (a signed thought before a call, in the current turn).
fn history() -> Vec<Entry> {
    [
        gemini_turns(),
        openai_turns(),
        anthropic_turns(),
        interactions_turns(),
    ]
    .concat()
}

/// Gemini: a signed thought, signed text, a signed call without an id, and its result.
fn gemini_turns() -> Vec<Entry> {
    vec![
        user(1, "Book Paris."),
        of(
            GEMINI,
            model(
                2,
                vec![
                    Part::Thought {
                        raw: json!({"text": "gem-thinks", "thought": true, "thoughtSignature": "GEM-SIG1"}),
                    },
                    Part::Text {
                        text: "Opening.".into(),
                        raw: json!({"text": "", "thoughtSignature": "GEM-SIG2"}),
                        trimmed: false,
                    },
                    call(
                        None,
                        "open_booking",
                        args(r#"{"city":"Paris"}"#),
                        json!({"functionCall": {}, "thoughtSignature": "GEM-SIG3"}),
                    ),
                ],
            ),
        ),
        results(
            3,
            vec![result(None, "open_booking", json!({"result": "ok"}))],
        ),
    ]
}

/// OpenAI Responses: encrypted reasoning before a call, then before a message.
fn openai_turns() -> Vec<Entry> {
    vec![
        user(4, "And help?"),
        of(
            OPENAI,
            model(
                5,
                vec![
                    Part::Thought {
                        raw: json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "OAI-ENC1"}),
                    },
                    call(
                        Some("call_1"),
                        "show_help",
                        args("{}"),
                        json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                            "name": "show_help", "arguments": "{}"}),
                    ),
                ],
            ),
        ),
        results(
            6,
            vec![result(
                Some("call_1"),
                "show_help",
                json!({"result": "shown"}),
            )],
        ),
        of(
            OPENAI,
            model(
                7,
                vec![
                    Part::Thought {
                        raw: json!({"type": "reasoning", "id": "rs_1b", "summary": [], "encrypted_content": "OAI-ENC2"}),
                    },
                    text("Here."),
                    Part::Other {
                        raw: json!({"type": "message", "id": "msg_1", "role": "assistant",
                            "content": [{"type": "output_text", "text": "Here."}]}),
                    },
                ],
            ),
        ),
    ]
}

/// Anthropic: thinking, redacted thinking, text and a call.
fn anthropic_turns() -> Vec<Entry> {
    vec![
        user(8, "Thanks. Help again?"),
        of(
            ANTHROPIC,
            model(
                9,
                vec![
                    Part::Thought {
                        raw: json!({"type": "thinking", "thinking": "ANT-THINK", "signature": "ANT-SIG"}),
                    },
                    Part::Thought {
                        raw: json!({"type": "redacted_thinking", "data": "ANT-REDACTED"}),
                    },
                    text("Sure."),
                    call(Some("toolu_1"), "show_help", args("{}"), Value::Null),
                ],
            ),
        ),
        results(
            10,
            vec![result(
                Some("toolu_1"),
                "show_help",
                json!({"result": "shown"}),
            )],
        ),
    ]
}

/// Interactions: a signed thought before a call, in the current turn.
fn interactions_turns() -> Vec<Entry> {
    vec![
        of(
            INTERACTIONS,
            model(
                11,
                vec![
                    Part::Thought {
                        raw: json!({"type": "thought", "signature": "INT-SIG",
                            "summary": [{"type": "text", "text": "int-thinks"}]}),
                    },
                    call(
                        Some("int_1"),
                        "open_booking",
                        args(r#"{"city":"Rome"}"#),
                        Value::Null,
                    ),
                ],
            ),
        ),
        results(
            12,
            vec![result(
                Some("int_1"),
                "open_booking",
                json!({"result": "ok"}),
            )],
        ),
    ]
}

/// The body `layer` builds from `history`, through the path every request takes.
fn render(layer: &dyn Layer, history: &[Entry]) -> Value {
    let history = for_layer(history, layer);
    let tools = tools();
    let req = layer
        .build(&spec(
            Some("Be brief."),
            &history,
            &tools,
            &ToolChoice::Auto,
        ))
        .expect("a buildable history");
    body(&req)
}

/// No mark of a format other than `own` (the layer's own turns) is in `body`.
fn assert_no_foreign(body: &Value, own: Option<&str>) {
    let text = body.to_string();
    for (format, marks) in MARKS {
        if Some(format) == own {
            continue;
        }
        for mark in marks {
            assert!(!text.contains(mark), "{format}'s {mark} in {body:#}");
        }
    }
}

fn fits(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[test]
fn gemini_gets_foreign_turns_as_words_and_calls_and_a_placeholder_on_this_turn_s_call() {
    let layer = Gemini::builder("k").model("gemini-other").build().unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, None);
    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert!(
        roles.windows(2).all(|w| w != ["model", "model"]),
        "{roles:?}"
    );
    let calls: Vec<&Value> = contents
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter(|p| p.get("functionCall").is_some())
        .collect();
    assert_eq!(calls.len(), 4);
    // Only the current turn's calls (Anthropic's and Interactions', after "Thanks. Help
    // again?") are checked by Gemini 3: they alone get the documented placeholder.
    let signed: Vec<&str> = calls
        .iter()
        .filter_map(|p| p["thoughtSignature"].as_str())
        .collect();
    assert_eq!(signed, [FOREIGN_SIGNATURE, FOREIGN_SIGNATURE]);
    assert_eq!(calls[3]["functionCall"]["name"], "open_booking");
    assert_eq!(calls[3]["thoughtSignature"], FOREIGN_SIGNATURE);
    // The id-less Gemini call of another model got an id, and its result the same one.
    let ids: Vec<&str> = calls
        .iter()
        .map(|p| p["functionCall"]["id"].as_str().unwrap())
        .collect();
    let answered: Vec<&str> = contents
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter_map(|p| p["functionResponse"]["id"].as_str())
        .collect();
    assert_eq!(ids, answered);
}

#[test]
fn gemini_keeps_its_own_model_s_signatures_and_thoughts() {
    let layer = Gemini::builder("k").model(GEMINI.1).build().unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, Some(GEMINI.0));
    let text = body.to_string();
    for mark in ["GEM-SIG1", "GEM-SIG2", "GEM-SIG3", "gem-thinks"] {
        assert!(text.contains(mark), "{mark}: {body:#}");
    }
}

#[test]
fn openai_gets_no_foreign_reasoning_and_every_output_follows_its_call() {
    let layer = OpenAi::builder("k", "gpt-other")
        .reasoning("low")
        .build()
        .unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, None);
    let input = body["input"].as_array().unwrap();
    assert!(input.iter().all(|i| i["type"] != "reasoning"), "{body:#}");
    let mut called = Vec::new();
    for item in input {
        match item["type"].as_str() {
            Some("function_call") => {
                assert!(item.get("id").is_none(), "{item}");
                called.push(item["call_id"].as_str().unwrap());
            }
            Some("function_call_output") => {
                assert!(
                    called.contains(&item["call_id"].as_str().unwrap()),
                    "{item}"
                );
            }
            _ => assert!(item.get("id").is_none(), "{item}"),
        }
    }
    assert_eq!(called.len(), 4);
}

#[test]
fn openai_keeps_its_own_model_s_reasoning() {
    let layer = OpenAi::builder("k", OPENAI.1)
        .reasoning("low")
        .build()
        .unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, Some(OPENAI.0));
    let text = body.to_string();
    for mark in ["OAI-ENC1", "OAI-ENC2", "fc_1", "msg_1"] {
        assert!(text.contains(mark), "{mark}: {body:#}");
    }
}

/// Anthropic's rules on `messages`: the user's first, roles alternating, each `tool_use`
/// answered by a `tool_result` in the next message, ids of the allowed characters.
fn assert_anthropic_shape(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "{body:#}");
        let used: Vec<&str> = pair[0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        let answered: Vec<&str> = pair[1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap())
            .collect();
        assert_eq!(used, answered, "{body:#}");
        assert!(used.iter().all(|id| fits(id)), "{used:?}");
    }
    for block in messages
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
    {
        let kind = block["type"].as_str().unwrap();
        assert!(
            [
                "text",
                "tool_use",
                "tool_result",
                "thinking",
                "redacted_thinking"
            ]
            .contains(&kind),
            "{block}"
        );
    }
}

#[test]
fn anthropic_gets_foreign_turns_without_their_blocks_and_thinks_not_over_a_foreign_call() {
    let layer = Anthropic::builder("k", "claude-other")
        .thinking(1024)
        .build()
        .unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, None);
    assert_anthropic_shape(&body);
    // The current turn ends in a call another layer made, with no thinking block before it: a
    // request with thinking on would be refused.
    assert!(body.get("thinking").is_none(), "{body:#}");
    // A turn that ends with the caller's words thinks as configured.
    let body = render(&layer, &next_turn(history()));
    assert_eq!(body["thinking"]["type"], "enabled");
    assert_anthropic_shape(&body);
}

#[test]
fn anthropic_keeps_its_own_model_s_thinking_before_the_turn_and_drops_it_in_a_foreign_loop() {
    let layer = Anthropic::builder("k", ANTHROPIC.1)
        .thinking(1024)
        .build()
        .unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, Some(ANTHROPIC.0));
    assert!(body.get("thinking").is_none());
    // Its own thinking in the turn that ended in another layer's call is left out with it.
    assert!(!body.to_string().contains("ANT-THINK"), "{body:#}");
    assert_anthropic_shape(&body);
    let body = render(&layer, &next_turn(history()));
    assert!(body.to_string().contains("ANT-SIG"), "{body:#}");
    assert_anthropic_shape(&body);
}

#[test]
fn chat_gets_every_call_answered_after_it() {
    let layer = Chat::builder("https://llm.example/v1", "m")
        .build()
        .unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, None);
    let mut called: Vec<String> = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        for c in message["tool_calls"].as_array().into_iter().flatten() {
            called.push(c["id"].as_str().unwrap().to_owned());
        }
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap();
            assert!(called.iter().any(|c| c == id), "{body:#}");
        }
    }
    assert_eq!(called.len(), 4);
}

#[test]
fn interactions_gets_no_foreign_thought_and_every_result_follows_its_call() {
    let layer = Interactions::builder("k")
        .model("gemini-other")
        .build()
        .unwrap();
    let body = render(&layer, &history());
    assert_no_foreign(&body, None);
    let steps = body["input"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["type"] != "thought"), "{body:#}");
    let mut called = Vec::new();
    for step in steps {
        match step["type"].as_str() {
            Some("function_call") => called.push(step["id"].as_str().unwrap()),
            Some("function_result") => {
                assert!(
                    called.contains(&step["call_id"].as_str().unwrap()),
                    "{step}"
                );
            }
            _ => {}
        }
    }
    assert_eq!(called.len(), 4);
    let own = Interactions::builder("k")
        .model(INTERACTIONS.1)
        .build()
        .unwrap();
    let body = render(&own, &history());
    assert_no_foreign(&body, Some(INTERACTIONS.0));
    assert!(body.to_string().contains("INT-SIG"));
}

/// `history` with the turn closed (the model's words after the last result) and the caller's
/// next words.
fn next_turn(mut h: Vec<Entry>) -> Vec<Entry> {
    h.push(of(INTERACTIONS, model(13, vec![text("Booked.")])));
    h.push(user(14, "Bye."));
    h
}

/// Every turn of `history` marked as `layer`'s own.
fn all_own(layer: &dyn Layer) -> Vec<Entry> {
    history()
        .into_iter()
        .map(|e| match e.origin {
            Some(_) => e.with_origin(Origin::of(layer)),
            None => e,
        })
        .collect()
}

#[test]
fn a_history_all_the_layer_s_own_is_borrowed_and_renders_as_before_origins() {
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(Gemini::builder("k").model("gemini-3-pro").build().unwrap()),
        Box::new(
            OpenAi::builder("k", "gpt-5")
                .reasoning("low")
                .build()
                .unwrap(),
        ),
        Box::new(
            Anthropic::builder("k", "claude")
                .thinking(1024)
                .build()
                .unwrap(),
        ),
        Box::new(
            Chat::builder("https://llm.example/v1", "m")
                .build()
                .unwrap(),
        ),
        Box::new(Interactions::builder("k").model("g").build().unwrap()),
    ];
    let tools = tools();
    for layer in &layers {
        let own = all_own(&**layer);
        let borrowed = for_layer(&own, &**layer);
        assert!(
            matches!(borrowed, std::borrow::Cow::Borrowed(_)),
            "{}",
            layer.format()
        );
        // The same turns with no origin: what the layer rendered before turns had one.
        let before: Vec<Entry> = history()
            .into_iter()
            .map(|mut e| {
                e.origin = None;
                e
            })
            .collect();
        let spec_now = spec(Some("Be brief."), &borrowed, &tools, &ToolChoice::Auto);
        let spec_before = spec(Some("Be brief."), &before, &tools, &ToolChoice::Auto);
        let now = layer.build(&spec_now);
        let then = layer.build(&spec_before);
        match (now, then) {
            (Ok(now), Ok(then)) => assert_eq!(now.body, then.body, "{}", layer.format()),
            (now, then) => assert_eq!(now.is_err(), then.is_err(), "{}", layer.format()),
        }
    }
}

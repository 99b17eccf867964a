//! Reading a recorded request back in neutral terms ([`ReadBack`]), one function per built-in
//! provider.

use serde_json::{Value, json};

use super::{json_of, output_of, text_of};
use crate::wire_format::{ReadBack, Said};

pub(super) fn read_gemini(body: &Value) -> ReadBack {
    let instruction = text_of(&body["systemInstruction"]["parts"][0]["text"]);
    let tools = body["tools"][0]["functionDeclarations"]
        .as_array()
        .map(|d| d.iter().filter_map(|t| text_of(&t["name"])).collect())
        .unwrap_or_default();
    let mut said = Vec::new();
    for content in body["contents"].as_array().into_iter().flatten() {
        let model = content["role"] == "model";
        for part in content["parts"].as_array().into_iter().flatten() {
            if part["thought"] == true {
                continue;
            }
            if let Some(f) = part.get("functionCall") {
                said.push(Said::Call {
                    id: text_of(&f["id"]),
                    name: text_of(&f["name"]).unwrap_or_default(),
                    arguments: f["args"].clone(),
                });
            } else if let Some(f) = part.get("functionResponse") {
                said.push(Said::Result {
                    id: text_of(&f["id"]),
                    output: output_of(&f["response"]),
                });
            } else if let Some(t) = part["text"].as_str().filter(|t| !t.is_empty()) {
                said.push(if model {
                    Said::Model(t.to_owned())
                } else {
                    Said::User(t.to_owned())
                });
            }
        }
    }
    ReadBack {
        instruction,
        tools,
        said,
    }
}

/// The words of a Responses or chat `content`: a string, or a list of parts with `text`.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            (!text.is_empty()).then_some(text)
        }
        _ => None,
    }
}

pub(super) fn read_openai(body: &Value) -> ReadBack {
    let instruction = text_of(&body["instructions"]);
    let tools = body["tools"]
        .as_array()
        .map(|d| d.iter().filter_map(|t| text_of(&t["name"])).collect())
        .unwrap_or_default();
    let mut said = Vec::new();
    for item in body["input"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("function_call") => said.push(Said::Call {
                id: text_of(&item["call_id"]),
                name: text_of(&item["name"]).unwrap_or_default(),
                arguments: json_of(&item["arguments"]),
            }),
            Some("function_call_output") => said.push(Said::Result {
                id: text_of(&item["call_id"]),
                output: output_of(&item["output"]),
            }),
            Some("reasoning") => {}
            _ => {
                if let Some(text) = content_text(&item["content"]) {
                    said.push(if item["role"] == "assistant" {
                        Said::Model(text)
                    } else {
                        Said::User(text)
                    });
                }
            }
        }
    }
    ReadBack {
        instruction,
        tools,
        said,
    }
}

pub(super) fn read_chat(body: &Value) -> ReadBack {
    let mut instruction = None;
    let tools = body["tools"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|t| text_of(&t["function"]["name"]))
                .collect()
        })
        .unwrap_or_default();
    let mut said = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        let text = content_text(&message["content"]);
        match message["role"].as_str() {
            Some("system") => instruction = text,
            Some("assistant") => {
                said.extend(text.map(Said::Model));
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    said.push(Said::Call {
                        id: text_of(&call["id"]),
                        name: text_of(&call["function"]["name"]).unwrap_or_default(),
                        arguments: json_of(&call["function"]["arguments"]),
                    });
                }
            }
            Some("tool") => said.push(Said::Result {
                id: text_of(&message["tool_call_id"]),
                output: output_of(&message["content"]),
            }),
            _ => said.extend(text.map(Said::User)),
        }
    }
    ReadBack {
        instruction,
        tools,
        said,
    }
}

pub(super) fn read_anthropic(body: &Value) -> ReadBack {
    let instruction = match &body["system"] {
        Value::Null => None,
        system => content_text(system),
    };
    let tools = body["tools"]
        .as_array()
        .map(|d| d.iter().filter_map(|t| text_of(&t["name"])).collect())
        .unwrap_or_default();
    let mut said = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        let model = message["role"] == "assistant";
        let blocks = match &message["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            _ => Vec::new(),
        };
        for block in blocks {
            match block["type"].as_str() {
                Some("text") => {
                    let text = text_of(&block["text"]).unwrap_or_default();
                    said.push(if model {
                        Said::Model(text)
                    } else {
                        Said::User(text)
                    });
                }
                Some("tool_use") => said.push(Said::Call {
                    id: text_of(&block["id"]),
                    name: text_of(&block["name"]).unwrap_or_default(),
                    arguments: block["input"].clone(),
                }),
                Some("tool_result") => said.push(Said::Result {
                    id: text_of(&block["tool_use_id"]),
                    output: content_text(&block["content"]).unwrap_or_default(),
                }),
                _ => {}
            }
        }
    }
    ReadBack {
        instruction,
        tools,
        said,
    }
}

pub(super) fn read_interactions(body: &Value) -> ReadBack {
    let tools = body["tools"]
        .as_array()
        .map(|d| d.iter().filter_map(|t| text_of(&t["name"])).collect())
        .unwrap_or_default();
    let mut said = Vec::new();
    for step in body["input"].as_array().into_iter().flatten() {
        let text = || content_text(&step["content"]).unwrap_or_default();
        match step["type"].as_str() {
            Some("user_input") => said.push(Said::User(text())),
            Some("model_output") => said.push(Said::Model(text())),
            Some("function_call") => said.push(Said::Call {
                id: text_of(&step["id"]),
                name: text_of(&step["name"]).unwrap_or_default(),
                arguments: step["arguments"].clone(),
            }),
            Some("function_result") => said.push(Said::Result {
                id: text_of(&step["call_id"]),
                output: output_of(&step["result"]),
            }),
            _ => {}
        }
    }
    ReadBack {
        instruction: text_of(&body["system_instruction"]),
        tools,
        said,
    }
}

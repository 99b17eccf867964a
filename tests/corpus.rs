//! Real provider streams, replayed: every recording in `tests/fixtures/providers/` (streams the
//! live APIs sent, published as test fixtures by other open-source projects; each notes file
//! names its source, commit and licence) is served byte for byte by the stand-in provider over
//! loopback HTTP to a model-backed `Brain` on a real session socket, and must be spoken, called,
//! counted and (when it stopped short of a normal end) named on the `turn:` line as `expect` in
//! its notes says. `expect` is read from the recording by
//! `tests/fixtures/providers/expect.py`, never from this SDK's decoders (docs/protocol.md §6.15).
//!
//! A `.sse` file is a response body as recorded; a `.chunks` file is one provider payload per
//! line as recorded, framed here as its API frames it on the wire (Gemini `data: …\r\n\r\n`,
//! Responses and Anthropic `event: <type>\ndata: …\n\n`, Interactions `event: <event_type>\ndata: …\n\n`, chat `data: …\n\n`); a `.json.body` file is a whole
//! JSON body (an HTTP error, with the notes' status, or a non-streamed response).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::support::{driver, heard_turn, logs};

/// A brain with no tools of its own: every recorded call is answered (with an error result naming
/// the missing tool) and kept in the history, where the next request shows it as the core holds
/// it.
struct Listener {
    model: Model,
}

impl Brain for Listener {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Listener {}

/// One recording and its notes.
struct Recording {
    name: String,
    body: PathBuf,
    notes: Value,
}

impl Recording {
    fn api(&self) -> &str {
        self.notes["api"].as_str().unwrap_or_default()
    }

    fn provider(&self) -> Provider {
        match self.api() {
            "gemini" => Provider::Gemini,
            "responses" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            "interactions" => Provider::Interactions,
            _ => Provider::Chat,
        }
    }

    fn status(&self) -> u16 {
        self.notes["http_status"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(200)
    }

    /// The body on the wire, as recorded.
    fn wire(&self) -> String {
        let text = std::fs::read_to_string(&self.body).expect("a recording");
        if !self.body.to_string_lossy().ends_with(".chunks") {
            return text;
        }
        let mut out = String::with_capacity(text.len() * 2);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match self.api() {
                "gemini" => out.push_str(&format!("data: {line}\r\n\r\n")),
                "responses" | "anthropic" | "interactions" => {
                    let key = if self.api() == "interactions" {
                        "event_type"
                    } else {
                        "type"
                    };
                    let kind = serde_json::from_str::<Value>(line)
                        .ok()
                        .and_then(|v| v[key].as_str().map(str::to_owned))
                        .unwrap_or_default();
                    out.push_str(&format!("event: {kind}\ndata: {line}\n\n"));
                }
                _ => out.push_str(&format!("data: {line}\n\n")),
            }
        }
        out
    }

    /// The scripted reply: the body in pieces of about 97 bytes (cut on character boundaries),
    /// so the SSE parser meets events split anywhere, as a network splits them.
    fn reply(&self) -> Reply {
        let wire = self.wire();
        if self.status() != 200 {
            let body: Value = serde_json::from_str(&wire).expect("a JSON error body");
            return Reply::status(self.status(), body);
        }
        let mut reply = Reply::new();
        let mut rest = wire.as_str();
        while !rest.is_empty() {
            let mut end = rest.len().min(97);
            while !rest.is_char_boundary(end) {
                end += 1;
            }
            reply = reply.raw(&rest[..end]);
            rest = &rest[end..];
        }
        reply
    }

    fn layer(&self, base: &str) -> ModelLayer {
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(5),
            gap: Duration::from_secs(5),
        };
        let model = self.name.replace('/', "-");
        match self.provider() {
            Provider::Chat => {
                let company = self.notes["layer_provider"].as_str().unwrap_or_default();
                Chat::builder(base, model)
                    .provider(company)
                    .timeouts(timeouts)
                    .build()
                    .expect("a layer")
                    .into()
            }
            other => crate::support::layer(other, base, &model, timeouts),
        }
    }
}

fn recordings() -> Vec<Recording> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/providers");
    let mut out = Vec::new();
    let mut families: Vec<_> = std::fs::read_dir(&root)
        .expect("the corpus")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    families.sort();
    for family in families {
        let mut notes: Vec<_> = std::fs::read_dir(&family)
            .expect("a family")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|e| e == "json")
                    && !p.to_string_lossy().ends_with(".json.body")
            })
            .collect();
        notes.sort();
        for path in notes {
            let stem = path.with_extension("");
            let body = ["sse", "chunks", "json.body"]
                .iter()
                .map(|ext| PathBuf::from(format!("{}.{ext}", stem.display())))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("no body beside {}", path.display()));
            let name = stem
                .strip_prefix(&root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let notes: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("notes"))
                    .expect("notes are JSON");
            out.push(Recording { name, body, notes });
        }
    }
    out
}

/// What a session made of one recording.
#[derive(Debug, PartialEq)]
struct Outcome {
    spoken: String,
    calls: Vec<Value>,
    counts: BTreeMap<String, u64>,
}

/// The calls of the model turn in a request's history, as `{name, arguments}`.
fn calls_in(api: &str, body: &Value) -> Vec<Value> {
    let parse = |a: &Value| match a {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    };
    let mut out = Vec::new();
    match api {
        "gemini" => {
            for c in body["contents"].as_array().into_iter().flatten() {
                for p in c["parts"].as_array().into_iter().flatten() {
                    if let Some(f) = p.get("functionCall") {
                        out.push(json!({"name": f["name"], "arguments": f["args"]}));
                    }
                }
            }
        }
        "anthropic" => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "tool_use" {
                        out.push(json!({"name": b["name"], "arguments": b["input"]}));
                    }
                }
            }
        }
        "interactions" => {
            for step in body["input"].as_array().into_iter().flatten() {
                if step["type"] == "function_call" {
                    out.push(json!({"name": step["name"], "arguments": step["arguments"]}));
                }
            }
        }
        "responses" => {
            for i in body["input"].as_array().into_iter().flatten() {
                if i["type"] == "function_call" {
                    out.push(json!({"name": i["name"], "arguments": parse(&i["arguments"])}));
                }
            }
        }
        _ => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let f = &c["function"];
                    out.push(json!({"name": f["name"], "arguments": parse(&f["arguments"])}));
                }
            }
        }
    }
    out
}

/// OpenAI refuses a reasoning item not immediately followed by its own output item, with its id
/// ("… was provided without its required following item"): every reasoning item of a request
/// must be followed by a `message` or `function_call` that has one. A response that reasoned
/// with `encrypted_content` and was heard in full must have its reasoning replayed.
fn reasoning_pairs(input: &Value, reasoned: bool) -> Result<(), String> {
    let items = input.as_array().cloned().unwrap_or_default();
    let mut replayed = false;
    for (i, item) in items.iter().enumerate() {
        if item["type"] != "reasoning" {
            continue;
        }
        replayed = true;
        let next = items.get(i + 1).cloned().unwrap_or(Value::Null);
        let own = matches!(next["type"].as_str(), Some("message" | "function_call"))
            && next["id"].as_str().is_some_and(|id| !id.is_empty());
        if !own {
            return Err(format!(
                "reasoning item {} is followed by {next}, not by its own item",
                item["id"]
            ));
        }
    }
    if reasoned && !replayed {
        return Err("the encrypted reasoning of a reply heard in full was not replayed".into());
    }
    Ok(())
}

/// Replays one recording through a session; `Err` says what differed from its `expect`.
async fn replay(r: &Recording) -> Result<(), String> {
    let expect = &r.notes["expect"];
    let server = ModelServer::start(r.provider())
        .await
        .map_err(|e| e.to_string())?;
    server.reply(r.reply());
    let retry = expect["retry"] == json!(true);
    if retry {
        server.reply(Reply::new().text("OK.").finish());
    }
    server.reply(Reply::new().text("OK.").finish());
    let layer = r.layer(&server.base_url());
    let mut v: Voqalize = driver(move || Listener {
        model: Model::new(layer.clone()),
    })
    .await;
    v.start_silent().await.map_err(|e| e.to_string())?;
    let (turn, spoken) = heard_turn(&mut v, "go").await?;
    // The recording's own request (a retry is a second `model` step of the turn).
    let counts = v
        .turn_steps()
        .iter()
        .find(|s| s.turn_id == turn && s.kind == "model")
        .map(|s| s.counts.clone())
        .unwrap_or_default();
    if let Some(error) = expect["error"].as_str() {
        // The provider's own words reach the log (clipped): a phrase of them is enough.
        let phrase: String = error.chars().take(24).collect();
        let logged = v
            .wait_for(Duration::from_secs(5), |_| {
                !logs().lines_with(&phrase).is_empty()
            })
            .await
            .map_err(|e| e.to_string())?;
        if !logged {
            return Err(format!("no log line with the provider's error {phrase:?}"));
        }
    }
    // The `turn:` line names a stop that was not a normal end, last (docs/protocol.md §6.2).
    let line = format!("model={} hops=", r.name.replace('/', "-"));
    let stop = expect["stop"].as_str().map(|s| format!(" stop={s}"));
    let named = v
        .wait_for(Duration::from_secs(5), |_| {
            let lines = logs().lines_with(&line);
            match &stop {
                Some(stop) => lines.iter().any(|l| l.ends_with(stop.as_str())),
                None => !lines.is_empty() && lines.iter().all(|l| !l.contains(" stop=")),
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    if !named {
        return Err(format!(
            "the turn line does not say{}: {:?}",
            stop.as_deref().unwrap_or(" no stop"),
            logs().lines_with(&line)
        ));
    }
    // The next request shows the response as the core keeps it: its calls with their arguments.
    v.user_says("next").await.map_err(|e| {
        format!(
            "{e}; log: {:?}",
            logs().lines_with(&r.name.replace('/', "-"))
        )
    })?;
    let requests = server.requests();
    let calls = requests
        .last()
        .map(|q| calls_in(r.api(), &q.body))
        .unwrap_or_default();
    if r.api() == "responses"
        && let Some(last) = requests.last()
    {
        let reasoned = !r.notes["expect"]["spoken"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
            && r.wire().contains("\"encrypted_content\":\"");
        reasoning_pairs(&last.body["input"], reasoned)?;
    }
    let got = Outcome {
        spoken,
        calls,
        counts,
    };
    let mut spoken = expect["spoken"].as_str().unwrap_or_default().to_owned();
    if retry {
        // What the model said when asked once more.
        spoken.push_str("OK.");
    }
    let want = Outcome {
        spoken,
        calls: expect["calls"].as_array().cloned().unwrap_or_default(),
        counts: serde_json::from_value(expect["counts"].clone()).unwrap_or_default(),
    };
    if got == want {
        Ok(())
    } else {
        Err(format!("got {got:#?}\nwant {want:#?}"))
    }
}

/// Every recording of the corpus is spoken, called and counted as it really was; the families
/// docs/protocol.md §6.15 names each have a text and a tool-call recording at least.
#[tokio::test]
async fn every_recorded_stream_is_spoken_called_and_counted_as_it_was() {
    logs();
    // `VOQALIZE_CORPUS=chat-mistral` replays only the recordings whose name holds it.
    let only = std::env::var("VOQALIZE_CORPUS").unwrap_or_default();
    let all: Vec<Recording> = recordings()
        .into_iter()
        .filter(|r| r.name.contains(&only))
        .collect();
    assert!(
        !only.is_empty() || all.len() >= 60,
        "the corpus holds {} recordings",
        all.len()
    );
    let failures: Vec<String> = futures_util::stream::iter(all.iter())
        .map(|r| async move {
            match replay(r).await {
                Ok(()) => None,
                Err(why) => Some(format!("{}: {why}", r.name)),
            }
        })
        .buffer_unordered(8)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{} of {} recordings differ:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

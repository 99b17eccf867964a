//! MCP tools in a voice call: the model calls a server's tool beside the brain's own, reads its
//! result, hears its progress, and a barge-in cancels it on the server or lets it finish, as the
//! toolset's policy says. Over a real session socket, against the stand-in model server and the
//! FastMCP server of `tests/mcp`.

use std::time::Duration;

use serde_json::json;
use voqalize::mcp::{McpError, McpTool, McpToolset};
use voqalize::prelude::*;
use voqalize::tools::ToolPolicy;
use voqalize_testing::{BargeAt, BargeIn, ModelServer, Provider, Reply, Voqalize};

use crate::mcp_servers::{events_file, events_when, fastmcp};
use crate::support::{driver, layer, said};

/// A front desk with one tool of its own and a CRM's MCP tools.
struct Desk {
    model: Model,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Desk {
    /// Says hello back.
    #[tool]
    async fn echo(&self) -> &'static str {
        "the desk's own echo"
    }
}

/// A desk whose model lends it `toolset`, over the stand-in model.
async fn desk(toolset: McpToolset) -> (ModelServer, Voqalize) {
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    let v = driver(desk_on(server.base_url(), toolset)).await;
    (server, v)
}

fn named(events: &[serde_json::Value], event: &str) -> usize {
    events.iter().filter(|e| e["event"] == event).count()
}

#[tokio::test]
async fn the_model_calls_an_mcp_tool_beside_the_brains_own_and_reads_its_result() {
    let events = events_file("voice_call");
    let toolset = McpToolset::builder("crm", fastmcp(&events))
        .allow(["add", "fail"])
        .prefix("crm_")
        .connect()
        .await
        .expect("the FastMCP server connects");
    let (server, mut v) = desk(toolset).await;
    server.reply(
        Reply::new()
            .call("crm_add", json!({"a": 2, "b": 40}))
            .finish(),
    );
    server.reply(Reply::new().text("That makes forty-two.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("add them").await.unwrap();
    assert_eq!(turn.text(), "That makes forty-two.");
    // The model was declared both the brain's tool and the server's, and read the result.
    let first = server.read_back(0).expect("the first request");
    let declared: Vec<&str> = first.tools.iter().map(String::as_str).collect();
    assert_eq!(declared, ["echo", "crm_add", "crm_fail"]);
    let lines = said(&server, 1);
    assert_eq!(lines[1], "call: crm_add", "{lines:#?}");
    assert!(lines[2].contains(r#""sum":42"#), "{lines:#?}");
    // The run's TurnStep is of kind `mcp`, its provider the toolset.
    let step = v
        .turn_steps()
        .iter()
        .find(|s| s.kind == "mcp")
        .cloned()
        .expect("an mcp TurnStep");
    assert_eq!(
        (step.name.as_str(), step.provider.as_str()),
        ("crm_add", "crm")
    );
    // A server's isError result reaches the model as the server's text.
    server.reply(
        Reply::new()
            .call("crm_fail", json!({"reason": "the CRM is down"}))
            .finish(),
    );
    server.reply(Reply::new().text("The CRM is down.").finish());
    v.user_says("and the orders?").await.unwrap();
    let lines = said(&server, 3);
    let result = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("result:"))
        .expect("a result");
    assert!(result.contains("the CRM is down"), "{lines:#?}");
    v.assert_clean();
}

#[tokio::test]
async fn a_barge_in_cancels_a_cancel_tool_on_the_server_and_the_model_reads_it() {
    let events = events_file("barge_cancel");
    let toolset = McpToolset::builder("crm", fastmcp(&events))
        .tool("slow", McpTool::new().on_barge_in(ToolPolicy::Cancel))
        .connect()
        .await
        .expect("the FastMCP server connects");
    let (server, mut v) = desk(toolset).await;
    server.reply(
        Reply::new()
            .text("Looking that up. ")
            .call("slow", json!({"seconds": 30, "steps": 30}))
            .finish(),
    );
    v.start_silent().await.unwrap();
    let barge = BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some("Looking".into()),
    };
    let started = events_when(&events, |e| named(e, "started") == 1);
    let (turn, seen) = tokio::join!(v.barge_in("look it up", barge), started);
    turn.unwrap();
    assert_eq!(named(&seen, "started"), 1, "{seen:?}");
    let seen = events_when(&events, |e| named(e, "cancelled") == 1).await;
    assert_eq!(
        named(&seen, "cancelled"),
        1,
        "the server saw the cancellation: {seen:?}"
    );
    server.reply(Reply::new().text("Sure.").finish());
    v.user_says("never mind").await.unwrap();
    let lines = said(&server, 1);
    let result = lines
        .iter()
        .find(|l| l.starts_with("result:"))
        .expect("the call's answer");
    assert!(result.contains("cancel"), "{lines:#?}");
    assert_eq!(named(&seen, "finished"), 0);
}

#[tokio::test]
async fn a_finish_tool_runs_on_after_a_barge_in_and_its_progress_is_spoken_before() {
    crate::support::logs();
    let events = events_file("barge_finish");
    let toolset = McpToolset::builder("crm", fastmcp(&events))
        .progress_every(Duration::ZERO)
        .connect()
        .await
        .expect("the FastMCP server connects");
    let (server, mut v) = desk(toolset).await;
    // First, a call the caller waits for: each progress message is spoken.
    server.reply(
        Reply::new()
            .call("slow", json!({"seconds": 0.3, "steps": 3}))
            .finish(),
    );
    server.reply(Reply::new().text("Done.").finish());
    v.start_silent().await.unwrap();
    let turn = v.user_says("do it").await.unwrap();
    let text = turn.text();
    assert!(
        text.contains("step 1 of 3") && text.contains("Done."),
        "{text}"
    );
    // A network call is not held to the 20 ms budget of a tool in the brain's process.
    let budget = crate::support::logs().lines_with("tool mcp:crm/slow took");
    assert!(budget.is_empty(), "{budget:?}");
    // Then one the user cuts in on: it finishes, and its result is filed.
    server.reply(
        Reply::new()
            .text("Working on it. ")
            .call("slow", json!({"seconds": 1, "steps": 1}))
            .finish(),
    );
    let barge = BargeIn {
        at: BargeAt::FirstText,
        heard_prefix: Some("Working".into()),
    };
    v.barge_in("again", barge).await.unwrap();
    let seen = events_when(&events, |e| named(e, "finished") == 2).await;
    assert_eq!(named(&seen, "finished"), 2, "{seen:?}");
    assert_eq!(named(&seen, "cancelled"), 0, "{seen:?}");
    server.reply(Reply::new().text("It is done.").finish());
    v.user_says("is it done?").await.unwrap();
    let last = server.requests().len() - 1;
    let lines = said(&server, last);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("result:") && l.contains("slept 1")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn two_toolsets_with_one_tool_name_are_refused_naming_both() {
    let a = McpToolset::builder("one", fastmcp(&events_file("clash_a")))
        .allow(["echo"])
        .connect()
        .await
        .unwrap();
    let b = McpToolset::builder("two", fastmcp(&events_file("clash_b")))
        .allow(["echo"])
        .connect()
        .await
        .unwrap();
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let timeouts = voqalize::model::Timeouts::default();
    let layer = layer(
        Provider::Gemini,
        &server.base_url(),
        "gemini-test",
        timeouts,
    );
    // The same toolset twice is named as such.
    let twice = Model::new(layer.clone())
        .mcp(a.clone())
        .unwrap()
        .mcp(a.clone())
        .unwrap_err();
    assert!(
        twice.to_string().contains("lent to this Model already"),
        "{twice}"
    );
    let clash = Model::new(layer).mcp(a).unwrap().mcp(b).unwrap_err();
    let McpError::NameClash {
        name,
        first,
        second,
    } = &clash
    else {
        panic!("{clash:?}")
    };
    assert!(clash.to_string().contains("different prefixes"), "{clash}");
    assert_eq!(
        (name.as_str(), first.as_str(), second.as_str()),
        ("echo", "mcp:one/echo", "mcp:two/echo")
    );
    // With the brain's table given, a toolset whose tool is the brain's own does not connect.
    let desk = Desk {
        model: voqalize_testing::offline_model(),
    };
    let own = McpToolset::builder("three", fastmcp(&events_file("clash_c")))
        .beside(desk.tools())
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(&own, McpError::NameClash { first, second, .. } if first == "Desk::echo" && second == "mcp:three/echo"),
        "{own:?}"
    );
}

/// A desk factory over the model at `base`, lending `toolset`.
fn desk_on(base: String, toolset: McpToolset) -> impl Fn() -> Desk + Send + Sync + 'static {
    let timeouts = voqalize::model::Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(10),
    };
    let layer = layer(Provider::Gemini, &base, "gemini-test", timeouts);
    move || Desk {
        model: Model::new(layer.clone())
            .filler_after(Duration::from_secs(60))
            .mcp(toolset.clone())
            .expect("one toolset"),
    }
}

#[tokio::test]
async fn a_recorded_call_with_mcp_tools_replays_without_the_server() {
    let events = events_file("replay");
    let toolset = McpToolset::builder("crm", fastmcp(&events))
        .allow(["add", "slow", "fail"])
        .tool("slow", McpTool::new().on_barge_in(ToolPolicy::Cancel))
        .connect()
        .await
        .expect("the FastMCP server connects");
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    server.reply(Reply::new().call("add", json!({"a": 1, "b": 2})).finish());
    server.reply(Reply::new().text("Three.").finish());
    server.reply(
        Reply::new()
            .text("Checking. ")
            .call("slow", json!({"seconds": 30, "steps": 30}))
            .finish(),
    );
    server.reply(
        Reply::new()
            .call("fail", json!({"reason": "no such order"}))
            .finish(),
    );
    server.reply(Reply::new().text("There is no such order.").finish());
    let recording = crate::replay::recorded(
        desk_on(server.base_url(), toolset.clone()),
        async |v: &mut Voqalize| {
            v.user_says("one and two").await.unwrap();
            let barge = BargeIn {
                at: BargeAt::FirstText,
                heard_prefix: Some("Checking".into()),
            };
            v.barge_in("check it", barge).await.unwrap();
            v.user_says("order 7?").await.unwrap();
        },
    )
    .await;
    let runs: Vec<(&str, &str)> = recording
        .tool_runs
        .iter()
        .map(|r| (r.name.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(
        runs,
        [("add", "ok"), ("slow", "cancelled"), ("fail", "failed")]
    );
    assert_eq!(recording.mcp_tools.len(), 1, "the list is written once");
    drop(toolset);
    // The replay needs no server: the recording answers every call.
    let replayed = McpToolset::replay(&recording, "crm").expect("the recording lists crm's tools");
    let mut names = replayed.tool_names();
    names.sort();
    assert_eq!(names, ["add", "fail", "slow"]);
    let mut replay = voqalize_testing::Replay::start(recording).await.unwrap();
    let report = replay
        .run(desk_on(replay.base_url(), replayed))
        .await
        .unwrap();
    assert!(report.is_same(), "{report}");
}

/// A desk that connects its CRM for each call, as the call starts.
struct PerCall {
    model: Model,
    events: std::path::PathBuf,
}

impl Brain for PerCall {
    async fn on_session_start(&self, _: &Session) -> BrainResult {
        let toolset = McpToolset::builder("crm", fastmcp(&self.events))
            .allow(["echo"])
            .connect()
            .await?;
        self.model.add_mcp(toolset)?;
        Ok(())
    }

    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl PerCall {}

#[tokio::test]
async fn a_toolset_connected_for_one_call_lends_its_tools_to_that_call() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let timeouts = voqalize::model::Timeouts::default();
    let layer = layer(
        Provider::Gemini,
        &server.base_url(),
        "gemini-test",
        timeouts,
    );
    let events = events_file("per_call");
    let mut v = driver(move || PerCall {
        model: Model::new(layer.clone()),
        events: events.clone(),
    })
    .await;
    server.reply(
        Reply::new()
            .call("echo", json!({"text": "per call"}))
            .finish(),
    );
    server.reply(Reply::new().text("Done.").finish());
    v.start_silent().await.unwrap();
    v.user_says("echo it").await.unwrap();
    let first = server.read_back(0).expect("the first request");
    assert_eq!(first.tools, ["echo"]);
    let lines = said(&server, 1);
    assert!(lines[2].contains("per call"), "{lines:#?}");
}

#[tokio::test]
async fn the_guards_check_an_mcp_call_before_it_reaches_the_server_and_its_result_after() {
    let events = events_file("guards");
    let toolset = McpToolset::builder("crm", fastmcp(&events))
        .connect()
        .await
        .expect("the FastMCP server connects");
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let layer = layer(
        Provider::Gemini,
        &server.base_url(),
        "gemini-test",
        voqalize::model::Timeouts::default(),
    );
    let mut v = driver(move || Desk {
        model: Model::new(layer.clone())
            .before_tool(|call| match call.name {
                "slow" => Err(voqalize::voice::Refusal::new(
                    "slow lookups are not allowed",
                )),
                _ => Ok(()),
            })
            .after_tool(|_, response| {
                *response = json!({"result": "[redacted]"});
                Ok(())
            })
            .mcp(toolset.clone())
            .unwrap(),
    })
    .await;
    server.reply(
        Reply::new()
            .call("slow", json!({"seconds": 1, "steps": 1}))
            .call("echo", json!({"text": "a secret"}))
            .finish(),
    );
    server.reply(Reply::new().text("Done.").finish());
    v.start_silent().await.unwrap();
    v.user_says("look it up").await.unwrap();
    let lines = said(&server, 1);
    let results: Vec<&String> = lines.iter().filter(|l| l.starts_with("result:")).collect();
    assert_eq!(results.len(), 2, "{lines:#?}");
    assert!(
        results[0].contains("slow lookups are not allowed"),
        "{lines:#?}"
    );
    assert!(
        results[1].contains("[redacted]") && !results[1].contains("secret"),
        "{lines:#?}"
    );
    // The refused call never reached the server.
    let seen = events_when(&events, |e| !e.is_empty()).await;
    assert_eq!(named(&seen, "started"), 0, "{seen:?}");
}

//! The testing kit's own checks must be able to fail: a raw brain on a real socket that breaks the
//! protocol in each way the driver watches for.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use voqalize::wire::{self, Frame, Rtvi, RtviType};
use voqalize_testing::{BargeAt, BargeIn, DriverError, Voqalize};

/// What the raw brain does after the SessionStart and the first UserMessage.
#[derive(Clone, Copy)]
enum Fault {
    /// Reuses speech id 1 for the turn's unit (the greeting had it).
    ReusedSpeechId,
    /// Sends a chunk after the unit's SpeechEnd.
    ChunkAfterEnd,
    /// Keeps speaking for the turn after the Interruption.
    SpeaksAfterBarge,
    /// Sends an RTVI frame with type 0, which no driver can decode.
    UndecodableRtvi,
    /// Names a turn the runtime never opened.
    UnknownTurn,
    /// Sends speech after End.
    SpeechAfterEnd,
    /// Sends a UI command and a TurnStep for the turn after the Interruption.
    RtviAfterBarge,
    /// Answers the turn with a `tool` TurnStep and no speech (a brain that only called a tool).
    SilentTurn,
}

/// Serves one connection with a hand-written (wrong) brain and returns the URL.
async fn raw_brain(fault: Fault) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let send = |f: Frame| Message::Binary(wire::encode(&f).into());
        while let Some(Ok(Message::Binary(bytes))) = ws.next().await {
            let frame = match wire::decode(&bytes) {
                Ok(Some(f)) => f,
                _ => continue,
            };
            let out: Vec<Frame> = match (frame, fault) {
                (Frame::SessionStart(_), _) => vec![
                    Frame::SpeechStart {
                        speech_id: 1,
                        turn_id: 1,
                    },
                    Frame::SpeechChunk {
                        speech_id: 1,
                        text: "hello".into(),
                    },
                    Frame::SpeechEnd { speech_id: 1 },
                ],
                (Frame::UserMessage(m), Fault::ReusedSpeechId) => vec![
                    Frame::SpeechStart {
                        speech_id: 1,
                        turn_id: m.turn_id,
                    },
                    Frame::SpeechChunk {
                        speech_id: 1,
                        text: "again".into(),
                    },
                    Frame::SpeechEnd { speech_id: 1 },
                ],
                (Frame::UserMessage(m), Fault::ChunkAfterEnd) => vec![
                    Frame::SpeechStart {
                        speech_id: 2,
                        turn_id: m.turn_id,
                    },
                    Frame::SpeechEnd { speech_id: 2 },
                    Frame::SpeechChunk {
                        speech_id: 2,
                        text: "late".into(),
                    },
                ],
                (Frame::UserMessage(m), Fault::SpeaksAfterBarge) => vec![
                    Frame::SpeechStart {
                        speech_id: 2,
                        turn_id: m.turn_id,
                    },
                    Frame::SpeechChunk {
                        speech_id: 2,
                        text: "one ".into(),
                    },
                ],
                (Frame::Interruption { through_turn }, Fault::SpeaksAfterBarge) => {
                    // Ignores the barge-in after the driver's quiet window has passed.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    vec![
                        Frame::SpeechChunk {
                            speech_id: 2,
                            text: "NEVER_HEARD".into(),
                        },
                        Frame::SpeechEnd { speech_id: 2 },
                        Frame::SpeechStart {
                            speech_id: 3,
                            turn_id: through_turn,
                        },
                    ]
                }
                (Frame::UserMessage(m), Fault::RtviAfterBarge) => vec![
                    Frame::SpeechStart {
                        speech_id: 2,
                        turn_id: m.turn_id,
                    },
                    Frame::SpeechChunk {
                        speech_id: 2,
                        text: "one ".into(),
                    },
                ],
                (Frame::Interruption { through_turn }, Fault::RtviAfterBarge) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    vec![
                        Frame::Rtvi(Rtvi {
                            kind: RtviType::UiCommand,
                            data: Some(serde_json::json!({"command": "late", "payload": {}})),
                            id: None,
                            turn_id: Some(through_turn),
                        }),
                        Frame::TurnStep(voqalize::wire::TurnStep {
                            turn_id: through_turn,
                            kind: "model".into(),
                            ..Default::default()
                        }),
                    ]
                }
                (Frame::UserMessage(_), Fault::UndecodableRtvi) => {
                    let mut bytes = wire::encode(&Frame::Rtvi(Rtvi {
                        kind: RtviType::ServerMessage,
                        data: None,
                        id: None,
                        turn_id: None,
                    }));
                    // Envelope{rtvi{type 1, ...}}: field 1 of the RTVI body is its type; zero it.
                    let pos = bytes.iter().position(|b| *b == 0x08).unwrap();
                    bytes[pos + 1] = 0;
                    ws.send(Message::Binary(bytes.into())).await.unwrap();
                    vec![]
                }
                (Frame::UserMessage(_), Fault::UnknownTurn) => vec![
                    Frame::SpeechStart {
                        speech_id: 2,
                        turn_id: 99,
                    },
                    Frame::SpeechEnd { speech_id: 2 },
                ],
                (Frame::UserMessage(m), Fault::SpeechAfterEnd) => vec![
                    Frame::End,
                    Frame::SpeechStart {
                        speech_id: 2,
                        turn_id: m.turn_id,
                    },
                    Frame::SpeechEnd { speech_id: 2 },
                ],
                (Frame::UserMessage(m), Fault::SilentTurn) => {
                    vec![Frame::TurnStep(voqalize::wire::TurnStep {
                        turn_id: m.turn_id,
                        kind: "tool".into(),
                        ..Default::default()
                    })]
                }
                _ => vec![],
            };
            for f in out {
                if ws.send(send(f)).await.is_err() {
                    return;
                }
            }
        }
    });
    url
}

async fn connect(fault: Fault) -> Voqalize {
    let url = raw_brain(fault).await;
    let mut v = Voqalize::connect(&url, "kit-session", None).await.unwrap();
    v.quiet = Duration::from_millis(60);
    v.linger = Duration::from_millis(500);
    v.timeout = Duration::from_secs(2);
    let greeting = v.start().await.unwrap();
    assert_eq!(greeting.text(), "hello");
    v
}

fn violated(v: &Voqalize, needle: &str) -> bool {
    v.violations().iter().any(|x| x.contains(needle))
}

/// A turn that speaks nothing never completes: the timeout says why, and names the way out.
#[tokio::test]
async fn a_turn_without_speech_times_out_saying_why() {
    let mut v = connect(Fault::SilentTurn).await;
    // The bound for a turn that will never complete, kept short: nothing is timed here.
    v.timeout = Duration::from_millis(300);
    let Err(DriverError::Timeout { what, .. }) = v.user_says("log an apple").await else {
        panic!("a turn without speech completed");
    };
    assert!(what.contains("opened no speech unit"), "{what}");
    assert!(what.contains("TurnSteps for it (tool)"), "{what}");
    assert!(what.contains("`user_says_within`"), "{what}");
    let turn = v
        .user_says_within("and a pear", Duration::from_millis(300))
        .await
        .unwrap();
    assert!(turn.units.is_empty());
}

#[tokio::test]
async fn a_reused_speech_id_is_a_violation() {
    let mut v = connect(Fault::ReusedSpeechId).await;
    let _ = v.user_says("x").await;
    assert!(
        violated(&v, "not above the last one"),
        "{:?}",
        v.violations()
    );
}

#[tokio::test]
async fn a_chunk_after_the_end_is_a_violation() {
    let mut v = connect(Fault::ChunkAfterEnd).await;
    let _ = v.user_says("x").await;
    v.quiesce(Duration::from_millis(100), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(violated(&v, "after its SpeechEnd"), "{:?}", v.violations());
}

#[tokio::test]
async fn speech_after_a_barge_in_is_a_violation() {
    let mut v = connect(Fault::SpeaksAfterBarge).await;
    let turn = v
        .barge_in(
            "x",
            BargeIn {
                at: BargeAt::FirstText,
                heard_prefix: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(turn.heard.as_deref(), Some("one "));
    assert!(
        violated(&v, "kept streaming after the barge-in"),
        "{:?}",
        v.violations()
    );
    assert!(
        violated(&v, "opened for turn 2 after the barge-in"),
        "{:?}",
        v.violations()
    );
}

#[tokio::test]
async fn an_undecodable_frame_is_a_reported_error_not_a_crash() {
    let mut v = connect(Fault::UndecodableRtvi).await;
    let err = v.user_says("x").await.unwrap_err();
    assert!(matches!(err, DriverError::Undecodable(_)), "{err}");
}

#[tokio::test]
async fn speech_for_an_unopened_turn_is_a_violation() {
    let mut v = connect(Fault::UnknownTurn).await;
    let _ = v.user_says("x").await;
    assert!(
        violated(&v, "names turn 99, never opened"),
        "{:?}",
        v.violations()
    );
}

#[tokio::test]
async fn frames_after_end_are_a_violation() {
    let mut v = connect(Fault::SpeechAfterEnd).await;
    let _ = v.user_says("x").await;
    assert!(violated(&v, "sent after End"), "{:?}", v.violations());
}

#[tokio::test]
async fn ui_commands_and_steps_after_a_barge_in_are_violations() {
    let mut v = connect(Fault::RtviAfterBarge).await;
    v.barge_in("x", BargeIn::default()).await.unwrap();
    assert!(
        violated(&v, "RTVIFrame from turn 2 after the barge-in"),
        "{:?}",
        v.violations()
    );
    assert!(
        violated(&v, "TurnStep from turn 2 after the barge-in"),
        "{:?}",
        v.violations()
    );
}

/// The party size to book.
#[voqalize::prelude::json_type]
struct Party {
    /// How many people.
    size: u32,
}

/// The UI command a booking puts on screen.
#[voqalize::prelude::json_type]
#[derive(voqalize::prelude::Action)]
struct BookingForm {
    size: u32,
}

struct Booker;

#[voqalize::prelude::brain]
impl Booker {
    /// Open the booking form for a party.
    #[tool]
    async fn book(&self, party: Party) -> Result<String, voqalize::SessionError> {
        self.session().dispatch(&BookingForm { size: party.size })?;
        Ok(format!("form open for {}", party.size))
    }
}

/// The UI command a tool puts on screen from inside a turn.
#[voqalize::prelude::json_type]
#[derive(voqalize::prelude::Action)]
struct ShowSection {
    name: String,
}

struct Screen;

#[voqalize::prelude::brain]
impl Screen {
    /// Show the week on screen.
    #[tool]
    async fn show(&self) -> Result<String, voqalize::SessionError> {
        let session = self.session();
        session.dispatch(&ShowSection {
            name: "week".into(),
        })?;
        Ok(session.id().to_owned())
    }
}

impl voqalize::Brain for Screen {
    async fn on_user_message(
        &self,
        turn: &mut voqalize::Turn,
        _: voqalize::wire::UserMessage,
    ) -> voqalize::BrainResult {
        use voqalize::tools::Toolbox;
        let tools = self.tools_for_turn();
        let out = self
            .call_tool(
                &tools,
                "show",
                voqalize::tools::Arguments::Raw(String::new()),
            )
            .await;
        turn.say(&out.response().to_string());
        Ok(())
    }
}

// Inside a turn, a tool the brain calls itself reaches the session serving it (what
// `self.session()` reads): its id, and a UI command that goes out before the turn's speech.
#[tokio::test]
async fn inside_a_turn_a_tool_reaches_the_session_serving_it() {
    let mut v = Voqalize::in_process(|| Screen);
    v.start_silent().await.unwrap();
    let turn = v.user_says("show the week").await.unwrap();
    assert_eq!(turn.text(), r#"{"result":"test-session"}"#);
    // The command went out before the turn's speech, so the turn's record already holds it.
    assert_eq!(
        v.ui_commands(),
        [serde_json::json!({"command": "show_section", "payload": {"name": "week"}})]
    );
}

// One tool, unit-tested inside a real session: its result, what it dispatched, and the errors the
// model would read for bad arguments or an unknown tool.
#[tokio::test]
async fn a_tool_is_called_by_name_inside_a_real_session() {
    let mut v = voqalize_testing::Voqalize::in_process(|| voqalize_testing::ToolHarness(Booker));
    v.start_silent().await.unwrap();
    let call = v
        .call_tool("book", serde_json::json!({"size": 4}))
        .await
        .unwrap();
    assert_eq!(
        call.response,
        serde_json::json!({"result": "form open for 4"})
    );
    assert_eq!(
        call.ui_commands,
        [serde_json::json!({"command": "booking_form", "payload": {"size": 4}})]
    );
    let bad = v
        .call_tool("book", serde_json::json!({"size": "four"}))
        .await
        .unwrap();
    assert!(
        bad.response["error"].as_str().unwrap().contains("size"),
        "{bad:?}"
    );
    assert!(bad.ui_commands.is_empty());
    let unknown = v.call_tool("nope", serde_json::json!({})).await.unwrap();
    assert!(unknown.response["error"].as_str().unwrap().contains("nope"));
    v.assert_clean();
}

/// A model-backed brain built with `offline_model()` (for its tools' tests) never reaches a
/// model: a turn handed to it says the fallback line and the session goes on.
#[tokio::test]
async fn an_offline_model_answers_with_its_fallback_line_and_sends_nothing() {
    use voqalize::prelude::*;
    use voqalize_testing::offline_model;

    struct Coach {
        model: Model,
    }
    impl Brain for Coach {
        async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
            self.model.respond(self, turn).await
        }
    }
    #[brain]
    impl Coach {}

    let mut v = Voqalize::in_process(|| Coach {
        model: offline_model().fallback_line("No model here."),
    });
    v.start_silent().await.unwrap();
    for _ in 0..2 {
        assert_eq!(v.user_says("hi").await.unwrap().text(), "No model here.");
    }
    v.assert_clean();
}

// A stand-in answering by rules answers each request from that request, even when many calls ask
// at once (it once answered from the last request recorded, so one call could get another's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stand_in_answering_by_rules_answers_each_concurrent_request_from_its_own_words() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use voqalize_testing::{ModelServer, Provider, Reply, Said};
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.answer_with(|request| {
        let words = request.said.iter().rev().find_map(|s| match s {
            Said::User(text) => Some(text.clone()),
            _ => None,
        });
        Reply::new()
            .text(&format!("echo <{}>", words.unwrap_or_default()))
            .finish()
    });
    let address = server
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let ask = |n: usize| {
        let address = address.clone();
        async move {
            let body = serde_json::json!({
                "contents": [{"role": "user", "parts": [{"text": format!("caller {n}")}]}]
            })
            .to_string();
            let mut stream = tokio::net::TcpStream::connect(&address)
                .await
                .expect("the stand-in accepts");
            let head = format!(
                "POST /v1beta/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\nhost: {address}\r\n\
                 content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream
                .write_all(format!("{head}{body}").as_bytes())
                .await
                .expect("sent");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("answered");
            (n, answer)
        }
    };
    for round in 0..20 {
        let answers = futures_util::future::join_all((0..32).map(|n| tokio::spawn(ask(n)))).await;
        for answer in answers {
            let (n, answer) = answer.expect("the request task ends");
            assert!(
                answer.contains(&format!("echo <caller {n}>")),
                "round {round}, caller {n} got: {answer}"
            );
        }
    }
}

// A dropped stand-in closes its idle keep-alive connections: a connection pooled by the process's
// HTTP client must never be answered by a server a test has dropped (a later stand-in can bind
// the same port).
#[tokio::test]
async fn a_dropped_stand_in_closes_its_idle_connections() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use voqalize_testing::{ModelServer, Provider, Reply};
    let server = ModelServer::start(Provider::Gemini)
        .await
        .expect("a loopback port");
    server.reply(Reply::new().text("Hello.").finish());
    let address = server
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let body = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("the stand-in accepts");
    let request = format!(
        "POST /v1beta/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\nhost: {address}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("sent");
    // The reply, to its last chunk: the connection is then idle and kept alive.
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.ends_with(b"0\r\n\r\n") {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "closed before the reply ended");
        answer.extend_from_slice(&buf[..n]);
    }
    drop(server);
    let after = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await;
    assert!(
        matches!(after, Ok(Ok(0)) | Ok(Err(_))),
        "the idle connection is still open after the drop: {after:?}"
    );
}

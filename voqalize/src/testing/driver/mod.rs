//! [`Voqalize`]: a driver that plays the runtime's side of a call against a brain, modelled on the
//! published conformance driver (playout, heard truth, barge-in, SpeechCancel) plus the checks that
//! suite does not make (docs/protocol.md §4.16).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri};

mod link;
mod observed;

use super::memory::pipe;
use crate::brain::MakeBrain;
use crate::host::{HostError, HostOptions, Upgrade, run_session};
use crate::wire::{
    self, Capabilities, Capability, Config, ErrorCode, ErrorFrame, Frame, Response, Rtvi, RtviType,
    SessionStart, TurnStep, UserIdle, UserMessage, WIRE_VERSION,
};
use link::{Event, Link};
use observed::{Observed, Owed};
pub use observed::{TurnRecord, UnitRecord};

/// Why the driver could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// Connecting or the WebSocket handshake failed.
    #[error("could not connect to {target}")]
    Connect {
        /// The URL or address dialed.
        target: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// [`Voqalize::brain_result`] on a driver that dialed a brain it does not run.
    #[error("this driver does not run the brain (it was made with Voqalize::connect)")]
    NoBrainTask,
    /// The task running the brain's `run_session` failed (it panicked or was cancelled).
    #[error("the brain's run_session task failed")]
    BrainTask(#[source] tokio::task::JoinError),
    /// The brain closed the connection (with the close code, when one was sent).
    #[error("the brain closed the connection (code {code:?}: {reason})")]
    Closed {
        /// The WebSocket close code.
        code: Option<u16>,
        /// The close reason.
        reason: String,
    },
    /// The brain sent bytes the driver could not decode (the published suite crashes on these).
    #[error("the brain sent an undecodable frame")]
    Undecodable(#[from] wire::WireError),
    /// What was awaited did not happen in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
}

/// When [`Voqalize::barge_in`] lands the `Interruption`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BargeAt {
    /// Once some unit of the turn has text, then 0.15 s of quiet (capped at 0.3 s): the suite's default.
    FirstText,
    /// After a fixed delay, whatever the brain did ("before audio").
    After(Duration),
}

/// How a barge-in is played.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BargeIn {
    /// When the Interruption lands.
    pub at: BargeAt,
    /// The heard text for the cut unit; `None` means all the text that reached the driver.
    pub heard_prefix: Option<String>,
}

impl Default for BargeIn {
    fn default() -> Self {
        BargeIn {
            at: BargeAt::FirstText,
            heard_prefix: None,
        }
    }
}

/// What the driver reports as heard when the brain cancels a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CancelHeard {
    /// Everything that arrived for the unit.
    #[default]
    All,
    /// Only its first chunk (what the conformance suite's `speech_cancel` uses).
    FirstChunk,
}

/// How the `SessionStart` is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// `session_id` (default `test-session`; the socket driver uses the id it dialed with).
    pub session_id: Option<String>,
    /// `wire_version` (default 3).
    pub wire_version: u32,
    /// Capabilities (default: all three).
    pub capabilities: Capabilities,
    /// `init` data (default `{}`).
    pub init: Map<String, Value>,
    /// Wait for a greeting (default true). False returns as soon as the SessionStart is sent, for
    /// brains that do not greet.
    pub expect_greeting: bool,
}

impl Default for Start {
    fn default() -> Self {
        Start {
            session_id: None,
            wire_version: WIRE_VERSION,
            capabilities: [
                Capability::SpeechCancel,
                Capability::StringConfig,
                Capability::TurnSteps,
            ]
            .into_iter()
            .collect(),
            init: Map::new(),
            expect_greeting: true,
        }
    }
}

/// Plays Voqalize against a brain: sends the runtime's frames, models playout and heard truth, and
/// records everything the brain sends. Use it in your own tests, in-process
/// ([`Voqalize::in_process`]) or over a socket ([`Voqalize::connect`]).
///
/// Playout follows the published conformance driver: a turn is over when every unit it opened has
/// ended and the brain has been quiet for [`quiet`](Self::quiet) (0.25 s by default); each ended
/// unit is then finalized with all of its text. A barge-in finalizes only the cut unit. The driver
/// answers every `configure` with acceptance, and answers a `SpeechCancel` at once like the
/// reference runtime.
///
/// Beyond the suite it records protocol violations ([`violations`](Self::violations)): speech ids
/// that are not strictly increasing across the session, speech for turns it never opened, frames
/// for a unit after its end or cancel, brain-only frames a brain must never send, and any speech
/// for a barged turn in the [`linger`](Self::linger) after a barge-in (0.6 s by default).
///
/// ```
/// use voqalize::prelude::*;
/// use voqalize::testing::Voqalize;
///
/// struct Echo;
/// impl Brain for Echo {
///     async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
///         turn.say(&m.text);
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), voqalize::testing::DriverError> {
/// let mut voqalize = Voqalize::in_process(|| Echo);
/// voqalize.start().await?;
/// let turn = voqalize.user_says("hello").await?;
/// assert_eq!(turn.text(), "hello");
/// voqalize.assert_clean();
/// # Ok(()) }
/// ```
pub struct Voqalize {
    link: Link,
    session_id: String,
    next_turn: u64,
    /// Cap on every wait (default 5 s, as the suite's `--timeout`).
    pub timeout: Duration,
    /// Quiet window that ends a turn (default 0.25 s, as the suite).
    pub quiet: Duration,
    /// How long to keep listening after a barge-in for speech that must not come (default 0.6 s).
    pub linger: Duration,
    /// What is reported heard when the brain cancels a unit.
    pub cancel_heard: CancelHeard,
    /// Answer `configure` requests (with acceptance) and `SpeechCancel`s (with a Finalize) as the
    /// reference runtime does (default true). Off, the test answers them itself.
    pub auto_answer: bool,
    seen: Observed,
    brain: Option<JoinHandle<Result<(), HostError>>>,
}

impl Voqalize {
    /// Runs a brain from `factory` in this process over an in-memory channel (no token checked).
    pub fn in_process<M: MakeBrain>(factory: M) -> Self {
        Self::in_process_with(factory, HostOptions::allow_unverified(), Upgrade::default())
    }

    /// Like [`in_process`](Self::in_process), with host options and the upgrade Voqalize would have
    /// sent (`session_id` defaults to `test-session`).
    pub fn in_process_with<M: MakeBrain>(
        factory: M,
        options: HostOptions,
        mut upgrade: Upgrade,
    ) -> Self {
        let session_id = upgrade
            .session_id
            .get_or_insert_with(|| "test-session".to_owned())
            .clone();
        let (channel, peer) = pipe();
        let brain = tokio::spawn(async move {
            run_session(channel, Arc::new(factory), upgrade, &options).await
        });
        Self::new(
            Link::Memory {
                tx: peer.tx,
                rx: peer.rx,
            },
            session_id,
            Some(brain),
        )
    }

    /// Serves a brain from `factory` on a fresh 127.0.0.1 port (the tokio-tungstenite adapter,
    /// [`crate::host::tungstenite::accept`]) for exactly one call, and dials it with `token` as
    /// Voqalize would: the whole path of a real call, socket and handshake included.
    /// [`brain_result`](Self::brain_result) then gives what hosting returned.
    ///
    /// # Errors
    /// [`DriverError::Connect`] when binding or connecting fails.
    pub async fn over_socket<M: MakeBrain>(
        factory: M,
        options: HostOptions,
        token: Option<&str>,
    ) -> Result<Self, DriverError> {
        let connect = |e: std::io::Error| DriverError::Connect {
            target: "127.0.0.1:0".to_owned(),
            source: Box::new(e),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(connect)?;
        let url = format!("ws://{}", listener.local_addr().map_err(connect)?);
        let brain = tokio::spawn(async move {
            let (stream, _) = listener
                .accept()
                .await
                .map_err(|e| HostError::Handshake(Box::new(e)))?;
            crate::host::tungstenite::accept(stream, Arc::new(factory), &options)
                .await
                .map_err(|e| match e {
                    crate::host::tungstenite::AcceptError::Host(e) => e,
                    other => HostError::Handshake(Box::new(other)),
                })
        });
        let mut driver = Self::connect(&url, "test-session", token).await?;
        driver.brain = Some(brain);
        Ok(driver)
    }

    /// Dials a brain at `url` (`ws://host:port[/path][?query]`) as Voqalize does: adds
    /// `session_id=<id>` to the query and sends `Authorization: Bearer <token>` when given.
    ///
    /// # Errors
    /// [`DriverError::Connect`] when the URL is bad or the handshake fails.
    pub async fn connect(
        url: &str,
        session_id: &str,
        token: Option<&str>,
    ) -> Result<Self, DriverError> {
        let connect =
            |e: Box<dyn std::error::Error + Send + Sync + 'static>| DriverError::Connect {
                target: url.to_owned(),
                source: e,
            };
        let uri: Uri = url.parse().map_err(|e| connect(Box::new(e)))?;
        let host = uri
            .host()
            .ok_or_else(|| connect("the URL has no host".into()))?;
        let port = uri.port_u16().unwrap_or(80);
        let mut query: Vec<(String, String)> = uri
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        query.retain(|(k, _)| k != "session_id");
        query.push(("session_id".to_owned(), session_id.to_owned()));
        let query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(query)
            .finish();
        let target = format!("ws://{host}:{port}{}?{query}", uri.path());
        let mut request = target
            .into_client_request()
            .map_err(|e| connect(Box::new(e)))?;
        if let Some(token) = token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| connect(Box::new(e)))?;
            request.headers_mut().insert("authorization", value);
        }
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(|e| connect(Box::new(e)))?;
        stream.set_nodelay(true).map_err(|e| connect(Box::new(e)))?;
        let (ws, _) = tokio_tungstenite::client_async(request, stream)
            .await
            .map_err(|e| connect(Box::new(e)))?;
        Ok(Self::new(
            Link::Socket(Box::new(ws)),
            session_id.to_owned(),
            None,
        ))
    }

    fn new(
        link: Link,
        session_id: String,
        brain: Option<JoinHandle<Result<(), HostError>>>,
    ) -> Self {
        Voqalize {
            link,
            session_id,
            next_turn: 2,
            timeout: Duration::from_secs(5),
            quiet: Duration::from_millis(250),
            linger: Duration::from_millis(600),
            cancel_heard: CancelHeard::All,
            auto_answer: true,
            seen: Observed::default(),
            brain,
        }
    }

    /// Sends the default `SessionStart` (turn 1, wire 3, all capabilities, init `{}`) and plays out
    /// the greeting: waits up to 3 s for a unit of turn 1 to end, then the quiet window, then
    /// finalizes it. A brain that does not greet gives an empty record.
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn start(&mut self) -> Result<TurnRecord, DriverError> {
        self.start_with(Start::default()).await
    }

    /// Sends the default `SessionStart` without waiting for a greeting (for brains that do not
    /// greet; waiting would take the whole 3 s greeting window).
    ///
    /// # Errors
    /// The link failed.
    pub async fn start_silent(&mut self) -> Result<(), DriverError> {
        self.start_with(Start {
            expect_greeting: false,
            ..Start::default()
        })
        .await
        .map(drop)
    }

    /// Sends a `SessionStart` built from `start`, then plays out the greeting as [`start`](Self::start)
    /// (the wait also ends when the brain sends `End`, as it does when it refuses the session).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with(&mut self, start: Start) -> Result<TurnRecord, DriverError> {
        self.seen.opened_turns.push(1);
        let session_id = start.session_id.unwrap_or_else(|| self.session_id.clone());
        self.send(Frame::SessionStart(SessionStart {
            session_id,
            turn_id: 1,
            init: start.init,
            wire_version: start.wire_version,
            capabilities: start.capabilities,
        }))
        .await?;
        if !start.expect_greeting {
            return Ok(self.turn(1));
        }
        let greeting = Duration::from_secs(3);
        let ended = self
            .wait_until(greeting, |s| {
                s.end || s.units.values().any(|u| u.turn_id == 1 && u.ended)
            })
            .await?;
        if ended {
            self.quiesce(self.quiet, self.timeout).await?;
            self.finalize_turn(1).await?;
        }
        Ok(self.turn(1))
    }

    /// Mints the next turn id.
    pub fn next_turn_id(&mut self) -> u64 {
        let t = self.next_turn;
        self.next_turn += 1;
        self.seen.opened_turns.push(t);
        t
    }

    /// Sends a `UserMessage` with `text` on the next turn id and returns that id, without waiting
    /// for an answer (for tests that watch the brain themselves).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_user_message(&mut self, text: &str) -> Result<u64, DriverError> {
        let turn_id = self.next_turn_id();
        self.send(Frame::UserMessage(UserMessage {
            turn_id,
            text: text.to_owned(),
        }))
        .await?;
        Ok(turn_id)
    }

    /// The user says `text` (a `UserMessage` on the next turn); plays the turn out and finalizes
    /// each ended unit with all of its text.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when the turn does not complete within [`timeout`](Self::timeout).
    pub async fn user_says(&mut self, text: &str) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        self.play_out(turn_id).await
    }

    /// Like [`user_says`](Self::user_says), but a turn that never completes is not an error: the
    /// record shows what arrived (for faults, where sending nothing is fine).
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn user_says_within(
        &mut self,
        text: &str,
        within: Duration,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        self.wait_until(within, move |s| s.turn_completed(turn_id))
            .await?;
        self.quiesce(self.quiet, self.timeout).await?;
        self.finalize_turn(turn_id).await?;
        Ok(self.turn(turn_id))
    }

    /// The user is silent: a `UserIdle{level, idle_ms}` on the next turn, played out.
    ///
    /// # Errors
    /// As [`user_says`](Self::user_says).
    pub async fn user_idle(&mut self, level: u32, idle_ms: u32) -> Result<TurnRecord, DriverError> {
        let turn_id = self.next_turn_id();
        self.send(Frame::UserIdle(UserIdle {
            turn_id,
            level,
            idle_ms,
        }))
        .await?;
        self.play_out(turn_id).await
    }

    async fn play_out(&mut self, turn_id: u64) -> Result<TurnRecord, DriverError> {
        let timeout = self.timeout;
        if !self
            .wait_until(timeout, move |s| s.turn_completed(turn_id))
            .await?
        {
            return Err(DriverError::Timeout {
                what: format!("turn {turn_id} to complete"),
                after: timeout,
            });
        }
        self.quiesce(self.quiet, self.timeout).await?;
        self.finalize_turn(turn_id).await?;
        Ok(self.turn(turn_id))
    }

    /// The user says `text` and barges in on the brain's answer: sends `Interruption{turn}` as
    /// `barge.at` says, waits the quiet window, finalizes the cut unit with `barge.heard_prefix` (or
    /// all its text), then lingers, recording a violation for any speech of the turn that follows.
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn barge_in(
        &mut self,
        text: &str,
        barge: BargeIn,
    ) -> Result<TurnRecord, DriverError> {
        let turn_id = self.send_user_message(text).await?;
        match barge.at {
            BargeAt::FirstText => {
                self.wait_until(self.timeout, move |s| {
                    s.units
                        .values()
                        .any(|u| u.turn_id == turn_id && !u.chunks.is_empty())
                })
                .await?;
                self.quiesce(Duration::from_millis(150), Duration::from_millis(300))
                    .await?;
            }
            BargeAt::After(d) => {
                self.wait_until(d, |_| false).await?;
            }
        }
        let units: Vec<&UnitRecord> = self.seen.units_of(turn_id).collect();
        let cut = units
            .iter()
            .rev()
            .find(|u| !u.ended)
            .or(units.last())
            .map(|u| u.speech_id);
        self.send(Frame::Interruption {
            through_turn: turn_id,
        })
        .await?;
        self.quiesce(self.quiet, self.timeout).await?;
        let mut heard = None;
        if let Some(id) = cut {
            let text = barge.heard_prefix.clone().unwrap_or_else(|| {
                self.seen
                    .units
                    .get(&id)
                    .map(UnitRecord::text)
                    .unwrap_or_default()
            });
            self.finalize(id, &text).await?;
            heard = Some(text);
        }
        let watched: Vec<(u64, usize, bool)> = self
            .seen
            .units_of(turn_id)
            .map(|u| (u.speech_id, u.chunks.len(), u.ended))
            .collect();
        let frames_before = self.seen.received.len();
        self.wait_until(self.linger, |_| false).await?;
        let late: Vec<String> = self.seen.received[frames_before..]
            .iter()
            .filter(|f| match f {
                Frame::Rtvi(r) => r.turn_id == Some(turn_id),
                Frame::TurnStep(t) => t.turn_id == turn_id,
                _ => false,
            })
            .map(|f| format!("{} from turn {turn_id} after the barge-in", f.name()))
            .collect();
        self.seen.violations.extend(late);
        for u in self.seen.units_of(turn_id).cloned().collect::<Vec<_>>() {
            match watched.iter().find(|(id, ..)| *id == u.speech_id) {
                None => self.seen.violations.push(format!(
                    "speech {} opened for turn {turn_id} after the barge-in",
                    u.speech_id
                )),
                Some((_, chunks, _)) if u.chunks.len() > *chunks => self.seen.violations.push(
                    format!("speech {} kept streaming after the barge-in", u.speech_id),
                ),
                _ => {}
            }
        }
        let mut record = self.turn(turn_id);
        record.interrupted = true;
        record.heard = heard;
        Ok(record)
    }

    /// Sends an app event as the app does: RTVI `ui-event` with `{"event": name, "payload": payload}`.
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_ui_event(&mut self, name: &str, payload: Value) -> Result<(), DriverError> {
        self.send_rtvi(
            RtviType::UiEvent,
            json!({ "event": name, "payload": payload }),
        )
        .await
    }

    /// Sends a deprecated-form app message: RTVI `client-message` with `{"t": name, "d": data}`.
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_client_message(
        &mut self,
        name: &str,
        data: Value,
    ) -> Result<(), DriverError> {
        self.send_rtvi(RtviType::ClientMessage, json!({ "t": name, "d": data }))
            .await
    }

    /// Sends an RTVI message of any type with `data`.
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_rtvi(&mut self, kind: RtviType, data: Value) -> Result<(), DriverError> {
        self.send(Frame::Rtvi(Rtvi {
            kind,
            data: Some(data),
            id: None,
            turn_id: None,
        }))
        .await
    }

    /// Waits up to `within` for at least one more ui-command than already seen, then for the quiet
    /// window, and returns every ui-command body (JSON object) received so far, in arrival order.
    ///
    /// # Errors
    /// The link failed or the brain sent an undecodable frame.
    pub async fn collect_ui_commands(
        &mut self,
        within: Duration,
    ) -> Result<Vec<Value>, DriverError> {
        let before = self.seen.ui_commands.len();
        if self
            .wait_until(within, move |s| s.ui_commands.len() > before)
            .await?
        {
            self.quiesce(self.quiet, self.timeout).await?;
        }
        Ok(self.seen.ui_commands.clone())
    }

    /// Waits until `predicate` holds over what was seen, or `within` passes; true if it held.
    ///
    /// # Errors
    /// The brain sent an undecodable frame.
    pub async fn wait_for(
        &mut self,
        within: Duration,
        predicate: impl Fn(&Voqalize) -> bool,
    ) -> Result<bool, DriverError> {
        let deadline = Instant::now() + within;
        loop {
            if predicate(self) {
                return Ok(true);
            }
            if !self.pump_once(deadline).await? {
                return Ok(predicate(self));
            }
        }
    }

    /// Keeps handling the brain's frames (recording them, answering requests and cancels) while
    /// awaiting `event`, for at most `within`. `None` when the time ran out first.
    ///
    /// Use it to wait for something the brain does outside the wire, such as a callback's side
    /// effect signalled through a channel.
    ///
    /// # Errors
    /// The brain sent an undecodable frame.
    pub async fn run_until<T>(
        &mut self,
        within: Duration,
        event: impl std::future::Future<Output = T>,
    ) -> Result<Option<T>, DriverError> {
        let deadline = Instant::now() + within;
        tokio::pin!(event);
        loop {
            if self.seen.closed.is_some() {
                return Ok(timeout_at(deadline, &mut event).await.ok());
            }
            tokio::select! {
                biased;
                out = &mut event => return Ok(Some(out)),
                more = self.pump_once(deadline) => {
                    if !more? && self.seen.closed.is_none() {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Sends any frame as the runtime (for cases the helpers above do not cover).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send(&mut self, frame: Frame) -> Result<(), DriverError> {
        self.send_bytes(wire::encode(&frame)).await
    }

    /// Sends raw bytes as one binary message (malformed input tests).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_bytes(&mut self, bytes: Vec<u8>) -> Result<(), DriverError> {
        let after = self.timeout;
        tokio::time::timeout(after, self.link.send(bytes))
            .await
            .map_err(|_| DriverError::Timeout {
                what: "the brain to take a frame".into(),
                after,
            })?
    }

    /// Sends a WebSocket text message (which a brain must ignore).
    ///
    /// # Errors
    /// The link failed.
    pub async fn send_text(&mut self, text: &str) -> Result<(), DriverError> {
        let after = self.timeout;
        tokio::time::timeout(after, self.link.send_text(text))
            .await
            .map_err(|_| DriverError::Timeout {
                what: "the brain to take a text message".into(),
                after,
            })?
    }

    /// Finalizes a unit with `heard` (a `Finalize` frame) and records it.
    ///
    /// # Errors
    /// The link failed.
    pub async fn finalize(&mut self, speech_id: u64, heard: &str) -> Result<(), DriverError> {
        if let Some(u) = self.seen.units.get_mut(&speech_id) {
            u.heard = Some(heard.to_owned());
        }
        self.send(Frame::Finalize {
            speech_id,
            heard_text: heard.to_owned(),
        })
        .await
    }

    async fn finalize_turn(&mut self, turn_id: u64) -> Result<(), DriverError> {
        let due: Vec<(u64, String)> = self
            .seen
            .units_of(turn_id)
            .filter(|u| u.ended && u.heard.is_none())
            .map(|u| (u.speech_id, u.text()))
            .collect();
        for (id, text) in due {
            self.finalize(id, &text).await?;
        }
        Ok(())
    }

    /// Waits the quiet window: until no frame has arrived for `quiet`, or `cap` passed.
    ///
    /// # Errors
    /// The brain sent an undecodable frame.
    pub async fn quiesce(&mut self, quiet: Duration, cap: Duration) -> Result<(), DriverError> {
        let cap = Instant::now() + cap;
        loop {
            let deadline = (Instant::now() + quiet).min(cap);
            let before = self.seen.frames;
            let open = self.pump_once(deadline).await?;
            if !open || self.seen.frames == before || Instant::now() >= cap {
                return Ok(());
            }
        }
    }

    /// Ends the call as Voqalize does (`End`), then waits for the brain to close the connection.
    /// Returns the close code.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when the brain does not close within the timeout.
    pub async fn end(&mut self) -> Result<Option<u16>, DriverError> {
        self.send(Frame::End).await?;
        self.wait_closed().await
    }

    /// Cancels the call (`Cancel`), then waits for the brain to close the connection.
    ///
    /// # Errors
    /// As [`end`](Self::end).
    pub async fn cancel(&mut self, reason: &str) -> Result<Option<u16>, DriverError> {
        self.send(Frame::Cancel {
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
        })
        .await?;
        self.wait_closed().await
    }

    /// Waits for the brain to close the connection and returns the close code it sent.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when it does not close within the timeout.
    pub async fn wait_closed(&mut self) -> Result<Option<u16>, DriverError> {
        let timeout = self.timeout;
        self.wait_until(timeout, |s| s.closed.is_some()).await?;
        match &self.seen.closed {
            Some((code, _)) => Ok(*code),
            None => Err(DriverError::Timeout {
                what: "the brain to close the connection".into(),
                after: timeout,
            }),
        }
    }

    /// Closes the connection from the runtime's side, as a hang-up would.
    pub async fn hang_up(&mut self) {
        self.link.close().await;
    }

    /// For an in-process brain: waits for `run_session` to return and gives its result.
    ///
    /// # Errors
    /// [`DriverError::Timeout`] when it does not return within the timeout.
    pub async fn brain_result(&mut self) -> Result<Result<(), HostError>, DriverError> {
        let timeout = self.timeout;
        let Some(handle) = self.brain.as_mut() else {
            return Err(DriverError::NoBrainTask);
        };
        match tokio::time::timeout(timeout, handle).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(DriverError::BrainTask(e)),
            Err(_) => Err(DriverError::Timeout {
                what: "run_session to return".into(),
                after: timeout,
            }),
        }
    }

    /// The session id the driver uses.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// What was seen of turn `turn_id`.
    pub fn turn(&self, turn_id: u64) -> TurnRecord {
        TurnRecord {
            turn_id,
            units: self.seen.units_of(turn_id).cloned().collect(),
            interrupted: false,
            heard: None,
        }
    }

    /// Every unit seen, by speech id.
    pub fn units(&self) -> impl Iterator<Item = &UnitRecord> {
        self.seen.units.values()
    }

    /// ui-command bodies (JSON objects) received, in order.
    pub fn ui_commands(&self) -> &[Value] {
        &self.seen.ui_commands
    }

    /// Every RTVI message received, in order.
    pub fn rtvi(&self) -> &[Rtvi] {
        &self.seen.rtvi
    }

    /// `Error` frames received.
    pub fn errors(&self) -> &[ErrorFrame] {
        &self.seen.errors
    }

    /// `TurnStep` frames received.
    pub fn turn_steps(&self) -> &[TurnStep] {
        &self.seen.steps
    }

    /// Speech ids of the `SpeechCancel` frames received.
    pub fn speech_cancels(&self) -> &[u64] {
        &self.seen.speech_cancels
    }

    /// `configure` requests received (each was answered with acceptance).
    pub fn requests(&self) -> &[(u64, Config)] {
        &self.seen.requests
    }

    /// True once the brain sent `End`.
    pub fn brain_ended(&self) -> bool {
        self.seen.end
    }

    /// Every frame the brain has sent, in arrival order.
    pub fn received(&self) -> &[Frame] {
        &self.seen.received
    }

    /// How many frames the brain has sent.
    pub fn frames_seen(&self) -> usize {
        self.seen.frames
    }

    /// Protocol violations seen so far (empty for a correct brain).
    pub fn violations(&self) -> &[String] {
        &self.seen.violations
    }

    /// Panics with the list of violations, if any.
    ///
    /// # Panics
    /// When [`violations`](Self::violations) is not empty.
    pub fn assert_clean(&self) {
        assert!(
            self.seen.violations.is_empty(),
            "protocol violations: {:#?}",
            self.seen.violations
        );
    }

    async fn wait_until(
        &mut self,
        within: Duration,
        predicate: impl Fn(&Observed) -> bool,
    ) -> Result<bool, DriverError> {
        let deadline = Instant::now() + within;
        loop {
            if predicate(&self.seen) {
                return Ok(true);
            }
            if !self.pump_once(deadline).await? {
                return Ok(predicate(&self.seen));
            }
        }
    }

    /// Receives and handles one frame; false at the deadline or once the link is closed.
    async fn pump_once(&mut self, deadline: Instant) -> Result<bool, DriverError> {
        if self.seen.closed.is_some() {
            return Ok(false);
        }
        let event = match timeout_at(deadline, self.link.recv()).await {
            Err(_) => return Ok(false),
            Ok(e) => e,
        };
        match event {
            Event::Closed(code, reason) => {
                self.seen.closed = Some((code, reason));
                Ok(false)
            }
            Event::Bytes(b) if b.is_empty() => Ok(true),
            Event::Bytes(b) => {
                match wire::decode(&b)? {
                    Some(frame) => {
                        self.seen.frames += 1;
                        self.seen.received.push(frame.clone());
                        self.observe(frame).await?;
                    }
                    None => self
                        .seen
                        .violations
                        .push("an envelope with no known body".into()),
                }
                Ok(true)
            }
        }
    }

    /// Records one frame the brain sent and gives the answers the runtime owes for it.
    async fn observe(&mut self, frame: Frame) -> Result<(), DriverError> {
        match self.seen.record(frame) {
            Owed::Nothing => Ok(()),
            Owed::CancelAnswer(speech_id) if self.auto_answer => {
                self.answer_cancel(speech_id).await
            }
            Owed::ConfigureAnswer(request_id) if self.auto_answer => {
                self.send(Frame::Response(Response {
                    request_id,
                    accepted: true,
                    detail: String::new(),
                    code: None,
                }))
                .await
            }
            Owed::CancelAnswer(_) | Owed::ConfigureAnswer(_) => Ok(()),
        }
    }

    /// The reference runtime's answer to a SpeechCancel (docs/protocol.md §4.16).
    async fn answer_cancel(&mut self, speech_id: u64) -> Result<(), DriverError> {
        let Some(unit) = self.seen.units.get(&speech_id).cloned() else {
            return self
                .send(Frame::Error(ErrorFrame {
                    code: ErrorCode::Protocol,
                    message: format!(
                        "SpeechCancel names speech {speech_id}, which this session never opened"
                    ),
                    fatal: false,
                }))
                .await;
        };
        if unit.cancelled || unit.heard.is_some() {
            return Ok(());
        }
        let heard_on_cancel = |u: &UnitRecord, policy: CancelHeard| match policy {
            CancelHeard::All => u.text(),
            CancelHeard::FirstChunk => u.chunks.first().cloned().unwrap_or_default(),
        };
        let policy = self.cancel_heard;
        let earlier: Vec<(u64, String)> = self
            .seen
            .units_of(unit.turn_id)
            .filter(|u| u.speech_id < speech_id && u.ended && u.heard.is_none() && !u.cancelled)
            .map(|u| (u.speech_id, u.text()))
            .collect();
        let later: Vec<u64> = self
            .seen
            .units_of(unit.turn_id)
            .filter(|u| u.speech_id > speech_id && u.heard.is_none())
            .map(|u| u.speech_id)
            .collect();
        if let Some(u) = self.seen.units.get_mut(&speech_id) {
            u.cancelled = true;
            u.ended = true;
        }
        for (id, text) in earlier {
            self.finalize(id, &text).await?;
        }
        let heard = heard_on_cancel(&unit, policy);
        self.finalize(speech_id, &heard).await?;
        for id in later {
            if let Some(u) = self.seen.units.get_mut(&id) {
                u.cancelled = true;
                u.ended = true;
            }
            self.finalize(id, "").await?;
        }
        Ok(())
    }
}

//! [`Voqalize`]: a driver that plays the runtime's side of a call against a brain, modelled on the
//! published conformance driver (playout, heard truth, barge-in, SpeechCancel) plus the checks that
//! suite does not make (docs/protocol.md §4.16).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::task::JoinHandle;

mod cut;
mod link;
mod observed;
mod outcome;
mod play;
mod pump;
mod seen;

use crate::memory::pipe;
pub(crate) use cut::CutAt;
use link::Link;
use observed::Observed;
pub use observed::{ToolCalled, TurnRecord, UnitRecord};
pub(crate) use outcome::Outcome;
use voqalize::brain::MakeBrain;
use voqalize::host::{HostError, HostOptions, Upgrade, run_session};
use voqalize::wire::{self, Capabilities, Capability, WIRE_VERSION};

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
/// unit is then finalized with all of its text. A brain the driver runs itself
/// ([`in_process`](Self::in_process), [`over_socket`](Self::over_socket)) tells it when a turn's
/// task ended, so such a turn is over as soon as that turn's frames have all arrived, with no
/// quiet window to wait (the window still ends a turn that runs on after it spoke). A barge-in
/// finalizes only the cut unit. The driver answers every `configure` with acceptance, and
/// answers a `SpeechCancel` at once like the reference runtime.
///
/// Beyond the suite it records protocol violations ([`violations`](Self::violations)): speech ids
/// that are not strictly increasing across the session, speech for turns it never opened, frames
/// for a unit after its end or cancel, brain-only frames a brain must never send, and any speech
/// for a barged turn in the [`linger`](Self::linger) after a barge-in (0.6 s by default).
///
/// ```
/// use voqalize::prelude::*;
/// use voqalize_testing::Voqalize;
///
/// struct Echo;
/// impl Brain for Echo {
///     async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
///         turn.say(&m.text);
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), voqalize_testing::DriverError> {
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
    /// The tool calls answered, by turn (of a brain the driver runs itself).
    tools: Answered,
    /// The turns that ran to their end (of a brain the driver runs itself).
    turns_ended: Arc<TurnsEnded>,
    /// Whether `turns_ended` is told (a brain the driver runs itself).
    watches_turns: bool,
    brain: Option<JoinHandle<Result<(), HostError>>>,
}

/// The tool calls a driver saw answered, each with its turn id.
type Answered = Arc<std::sync::Mutex<Vec<(u64, ToolCalled)>>>;

/// The turns of a brain the driver runs that ran to their end, each with how many frames the
/// session had queued by then; and what wakes a driver waiting for one.
#[derive(Default)]
pub(crate) struct TurnsEnded {
    ended: std::sync::Mutex<Vec<(u64, u64)>>,
    pub(crate) wake: tokio::sync::Notify,
}

impl TurnsEnded {
    /// Whether `turn_id` is over for a driver that has received `frames` frames: its task ended
    /// and every frame the session had queued by then arrived.
    pub(crate) fn over(&self, turn_id: u64, frames: usize) -> bool {
        crate::lock(&self.ended)
            .iter()
            .find(|(t, _)| *t == turn_id)
            .is_some_and(|(_, n)| u64::try_from(frames).is_ok_and(|got| got >= *n))
    }
}

/// A driver's list of answered tool calls and of ended turns, and the host options that fill
/// them.
fn watched(options: HostOptions) -> (HostOptions, Answered, Arc<TurnsEnded>) {
    let turns = Arc::new(TurnsEnded::default());
    let told = turns.clone();
    let options = voqalize::__kit::watch_turns(options, move |turn_id, queued| {
        crate::lock(&told.ended).push((turn_id, queued));
        told.wake.notify_one();
    });
    let tools: Answered = Arc::default();
    let list = tools.clone();
    let options = voqalize::__kit::watch_tools(options, move |a| {
        crate::lock(&list).push((
            a.turn_id,
            ToolCalled {
                name: a.name,
                arguments: a.arguments,
                outcome: a.outcome,
                end: a.end.to_owned(),
            },
        ));
    });
    (options, tools, turns)
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
        let (options, tools, turns) = watched(options);
        let brain = tokio::spawn(async move {
            run_session(channel, Arc::new(factory), upgrade, &options).await
        });
        let mut driver = Self::new(
            Link::Memory {
                tx: peer.tx,
                rx: peer.rx,
            },
            session_id,
            Some(brain),
        );
        driver.tools = tools;
        driver.turns_ended = turns;
        driver.watches_turns = true;
        driver
    }

    /// Serves a brain from `factory` on a fresh 127.0.0.1 port (the tokio-tungstenite adapter,
    /// [`voqalize::host::accept`]) for exactly one call, and dials it with `token` as
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
        let (options, tools, turns) = watched(options);
        let brain = tokio::spawn(async move {
            let (stream, _) = listener
                .accept()
                .await
                .map_err(|e| HostError::Handshake(Box::new(e)))?;
            let admission = voqalize::host::Admission::new(&options);
            voqalize::host::accept(stream, Arc::new(factory), &options, &admission)
                .await
                .map_err(|e| match e {
                    voqalize::host::AcceptError::Host(e) => e,
                    other => HostError::Handshake(Box::new(other)),
                })
        });
        let mut driver = Self::connect(&url, "test-session", token).await?;
        driver.brain = Some(brain);
        driver.tools = tools;
        driver.turns_ended = turns;
        driver.watches_turns = true;
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
        let ws = voqalize::__kit::dial(url, session_id, token, None)
            .await
            .map_err(|source| DriverError::Connect {
                target: url.to_owned(),
                source,
            })?;
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
            tools: Arc::default(),
            turns_ended: Arc::default(),
            watches_turns: false,
            brain,
        }
    }
}

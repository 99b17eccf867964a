//! [`Replay`]: plays a recorded call against another build of a brain and reports what differs.
//!
//! The replay plays Voqalize's side as the recording did: the same `SessionStart` (session id,
//! capabilities, `init`), the same user turns and idle prompts, the same app events and `End`,
//! in the same order. A turn the user heard in full is heard in full; a turn the user barged in
//! on is barged in on once the new answer has text, and the cut unit is heard for as many
//! characters as the recorded one was. The model is answered by a stand-in on 127.0.0.1 from
//! the recording, where a request matches a recorded one (the same body, the same path or one
//! ending the other); a request that matches none is refused with a `400`, unless the replay is
//! told to forward it ([`Replay::forward_unmatched`]): a replay never calls a provider on its
//! own. The brain's `configure` requests are accepted, as the testing driver accepts them,
//! whatever the recorded call answered. A turn, the greeting included, is played until the brain
//! has done what the recorded brain did in it (as many speech units opened and ended, TurnSteps
//! and UI commands) or until the brain's turn is over (its task ended and all it sent arrived),
//! so a turn that said nothing is over at once; a brain whose turn runs on doing less waits
//! [`turn_timeout`](Replay::turn_timeout) before the replay goes on, and
//! the whole call is bounded by [`deadline`](Replay::deadline). A run keeps every model request
//! the brain makes, body included, for its report (each body at most 64 MiB): a replay is a test
//! of a call, not a server.

mod path;
mod report;
mod script;
mod server;

use std::time::Duration;

use tokio::time::Instant;

use voqalize::brain::MakeBrain;
use voqalize::host::{HostOptions, Upgrade};
use voqalize::record::{Direction, RecordError, Recorder, Recording};
use voqalize::wire::Frame;

use crate::driver::{BargeAt, DriverError, Start, Voqalize};
pub use report::{Answered, ReplayReport, RequestMatch, TurnDiff, TurnOutput};
use script::{Barge, Step};
#[cfg(feature = "model")]
use server::Fallback;
use server::Server;

/// The bound on the replay's own recording of the brain under test: 1 GiB.
const REPLAY_RECORDING_BYTES: usize = 1 << 30;

/// The default bound on one turn: 5 s.
pub const DEFAULT_REPLAY_TURN_TIMEOUT: Duration = Duration::from_secs(5);

/// The default bound on a whole replay: 10 minutes.
pub const DEFAULT_REPLAY_DEADLINE: Duration = Duration::from_secs(600);

/// How long the replay waits for the brain's session to end once it hung up: 15 s.
const TEARDOWN: Duration = Duration::from_secs(15);

/// Why a replay could not run to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The replay's host options did not build (not expected: they take no key).
    #[error("the replay's host options did not build")]
    Options(#[from] voqalize::host::HostError),
    /// The recording has no `SessionStart`: there is no call to replay.
    #[error("the recording has no SessionStart: there is no call to replay")]
    NoCall,
    /// The driver playing the call failed (the brain closed the connection, or sent a frame
    /// that does not decode).
    #[error("the replay could not play the call")]
    Driver(#[from] DriverError),
    /// The replay's own recording did not read back.
    #[error("the replay's recording did not read back")]
    Record(#[from] RecordError),
    /// The brain's session did not end within `after` of the replay hanging up (a callback
    /// that does not return on teardown): there is no recording of the replay to compare.
    #[error("the brain's session did not end within {after:?} of the replay hanging up")]
    Unfinished {
        /// How long the replay waited.
        after: Duration,
    },
}

/// A recorded call, ready to be replayed: the recording and the stand-in model provider that
/// answers from it.
///
/// ```no_run
/// use voqalize::record::Recording;
/// use voqalize_testing::Replay;
/// use voqalize::prelude::*;
/// # struct Coach { model: Model }
/// # impl Brain for Coach {
/// #     async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
/// #         self.model.respond(self, turn).await
/// #     }
/// # }
/// # #[brain] impl Coach {}
/// # async fn check() -> Result<(), Box<dyn std::error::Error>> {
/// let recording = Recording::open("calls/1733000000000-call-42.jsonl")?;
/// let mut replay = Replay::start(recording).await?;
/// // The brain under test, its model layer pointed at the replay's stand-in (the key is the
/// // layer's own: a forwarded request carries it).
/// let layer = Gemini::builder("unused").base_url(replay.base_url()).build()?;
/// let report = replay
///     .run(move || Coach { model: Model::new(layer.clone()).instruction("Be brief.") })
///     .await?;
/// assert!(report.is_same(), "{report}");
/// # Ok(()) }
/// ```
pub struct Replay {
    recording: Recording,
    server: Server,
    turn_timeout: Duration,
    deadline: Duration,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("base_url", &self.server.base_url)
            .field("frames", &self.recording.frames.len())
            .field("exchanges", &self.recording.exchanges.len())
            .finish_non_exhaustive()
    }
}

impl Replay {
    /// Starts the stand-in model provider for `recording` on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// The port could not be bound.
    pub async fn start(recording: Recording) -> std::io::Result<Replay> {
        let server = Server::start(recording.exchanges.clone()).await?;
        Ok(Replay {
            recording,
            server,
            turn_timeout: DEFAULT_REPLAY_TURN_TIMEOUT,
            deadline: DEFAULT_REPLAY_DEADLINE,
        })
    }

    /// The base URL to give the brain's model layer (`http://127.0.0.1:<port>`, no path: a
    /// recorded path such as `/v1/responses` matches the layer's `/responses`).
    pub fn base_url(&self) -> String {
        self.server.base_url.clone()
    }

    /// Sends each model request that matches no recorded one to `base_url` (a live provider's,
    /// such as `https://api.openai.com/v1`, or a `ModelServer`'s), with the request's own
    /// headers, and streams its answer back. Default: refused with a `400`.
    #[cfg(feature = "model")]
    #[cfg_attr(docsrs, doc(cfg(feature = "model")))]
    #[must_use]
    pub fn forward_unmatched(self, base_url: impl Into<String>) -> Self {
        *crate::lock(&self.server.shared.fallback) = Fallback::Forward(base_url.into());
        self
    }

    /// How long a turn may take to do what the recorded turn did before the replay goes on
    /// (default [`DEFAULT_REPLAY_TURN_TIMEOUT`], 5 s): a brain that does less, or nothing, is a
    /// difference in the report, not an error. A turn that does what it did, or whose task
    /// ended, is over as soon as it has, whatever this bound.
    #[must_use]
    pub fn turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = timeout;
        self
    }

    /// How long the whole replay may play (default [`DEFAULT_REPLAY_DEADLINE`], 10 minutes),
    /// from the `SessionStart` to the recorded call's end: a recording of many turns against a
    /// brain that answers none of them takes this, not a turn timeout per turn. Past it the
    /// replay hangs up, and the report says it stopped there
    /// ([`ReplayReport::stopped_at_deadline`]); the turns it did not play are missing from it.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The recording being replayed.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// Plays the recorded call against a brain from `factory`, in this process, and compares
    /// what it did with what the recorded brain did. Can be called again (with another brain):
    /// each run starts with every recorded response unused.
    ///
    /// Each turn is played until the brain has done as much as the recorded one did (as many
    /// speech units opened and ended, TurnSteps and UI commands) or its turn is over (the turn's
    /// task ended and everything it sent arrived), for at most
    /// [`turn_timeout`](Self::turn_timeout); the whole call for at most
    /// [`deadline`](Self::deadline). Past the deadline the replay hangs up and reports what it
    /// played ([`ReplayReport::stopped_at_deadline`]); it then waits at most 15 s for the
    /// brain's session to end (its teardown is bounded: `on_session_end` by the request
    /// timeout, 10 s).
    ///
    /// # Errors
    /// [`ReplayError::NoCall`] for a recording without a `SessionStart`;
    /// [`ReplayError::Driver`] when the brain closed the connection or sent bytes that do not
    /// decode; [`ReplayError::Unfinished`] when the brain's session did not end within 15 s of
    /// the hang-up.
    pub async fn run<M: MakeBrain>(&mut self, factory: M) -> Result<ReplayReport, ReplayError> {
        let Some(start) = self.start_of() else {
            return Err(ReplayError::NoCall);
        };
        let deadline = Instant::now() + self.deadline;
        self.server.reset();
        // The replay's own recording, far above any recorder's default: a cut one would read as
        // missing turns (the report says when it was cut).
        let recorder = Recorder::in_memory().max_bytes(REPLAY_RECORDING_BYTES);
        let options = HostOptions::builder()
            .allow_unverified()
            .record(recorder.clone())
            .build()?;
        let upgrade = Upgrade {
            session_id: start.session_id.clone(),
            authorization: None,
        };
        let mut voqalize = Voqalize::in_process_with(factory, options, upgrade);
        voqalize.timeout = self.turn_timeout;
        let mut stopped = None;
        let started = tokio::time::timeout_at(deadline, voqalize.start_with(start)).await;
        let mut played = match started {
            Ok(sent) => sent.map(drop),
            Err(_) => {
                stopped = Some(self.deadline);
                Ok(())
            }
        };
        let mut steps = script::steps(&self.recording).into_iter();
        while stopped.is_none() {
            match played {
                // The brain ending the call early is a difference the report shows.
                Err(DriverError::Closed { .. } | DriverError::Timeout { .. }) => break,
                Err(e) => return Err(e.into()),
                Ok(()) if voqalize.brain_ended() => break,
                Ok(()) => {}
            }
            let Some(step) = steps.next() else { break };
            let step = self.play(&mut voqalize, step);
            played = match tokio::time::timeout_at(deadline, step).await {
                Ok(played) => played,
                Err(_) => {
                    stopped = Some(self.deadline);
                    Ok(())
                }
            };
        }
        voqalize.hang_up().await;
        // The session's recording is handed over as its run ends.
        voqalize.timeout = TEARDOWN;
        if let Err(DriverError::Timeout { after, .. }) = voqalize.brain_result().await {
            return Err(ReplayError::Unfinished { after });
        }
        let replayed = recorder.take()?.pop().ok_or(ReplayError::NoCall)?;
        Ok(ReplayReport::new(
            &self.recording,
            &replayed,
            self.server.requests(),
            stopped,
        ))
    }

    /// Plays one step of the script.
    async fn play(&self, voqalize: &mut Voqalize, step: Step) -> Result<(), DriverError> {
        let within = self.turn_timeout;
        // Before the first unit: at once. Else once the cut unit has text.
        let at = |unit: Option<usize>| match unit {
            None => BargeAt::After(Duration::ZERO),
            Some(_) => BargeAt::FirstText,
        };
        let hearing = |heard: usize| move |all: &str| all.chars().take(heard).collect::<String>();
        match step {
            Step::Greet {
                barged: None,
                outcome,
            } => voqalize.greeting_until(outcome, within).await.map(drop),
            Step::Greet {
                barged: Some(Barge { unit, heard }),
                ..
            } => voqalize
                .barge_on(1, at(unit), unit, hearing(heard))
                .await
                .map(drop),
            Step::Say {
                text,
                barged: None,
                outcome,
            } => voqalize
                .user_says_until(&text, outcome, within)
                .await
                .map(drop),
            Step::Say {
                text,
                barged: Some(Barge { unit, heard }),
                ..
            } => voqalize
                .barge_in_hearing(&text, at(unit), unit, hearing(heard))
                .await
                .map(drop),
            Step::Idle {
                level,
                idle_ms,
                outcome,
            } => voqalize
                .user_idle_until(level, idle_ms, outcome, within)
                .await
                .map(drop),
            Step::Send(frame) => voqalize.send(frame).await,
            Step::End => voqalize.end().await.map(drop),
            Step::Cancel(reason) => voqalize
                .cancel(reason.as_deref().unwrap_or(""))
                .await
                .map(drop),
        }
    }

    /// The recorded `SessionStart`, as the driver sends it (the greeting is the script's first
    /// step).
    fn start_of(&self) -> Option<Start> {
        let start = self.recording.frames.iter().find_map(|f| match &f.frame {
            Frame::SessionStart(s) if f.direction == Direction::In => Some(s),
            _ => None,
        })?;
        Some(Start {
            session_id: Some(start.session_id.clone()),
            wire_version: start.wire_version,
            capabilities: start.capabilities.clone(),
            init: start.init.clone(),
            expect_greeting: false,
        })
    }
}

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
//! whatever the recorded call answered; a turn that says nothing waits
//! [`turn_timeout`](Replay::turn_timeout) before the replay goes on. A run keeps every model
//! request the brain makes, body included, for its report (each body at most 64 MiB): a replay
//! is a test of a call, not a server.

mod report;
mod script;
mod server;

use std::time::Duration;

use crate::brain::MakeBrain;
use crate::host::{HostOptions, Upgrade};
use crate::record::{Direction, RecordError, Recorder, Recording};
use crate::wire::Frame;

use super::driver::{BargeAt, DriverError, Start, Voqalize};
pub use report::{Answered, ReplayReport, RequestMatch, ToolCalled, TurnDiff, TurnOutput};
use script::{Barge, Step};
#[cfg(feature = "model")]
use server::Fallback;
use server::Server;

/// The bound on the replay's own recording of the brain under test: 1 GiB.
const REPLAY_RECORDING_BYTES: usize = 1 << 30;

/// Why a replay could not run to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
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
}

/// A recorded call, ready to be replayed: the recording and the stand-in model provider that
/// answers from it.
///
/// ```no_run
/// use voqalize::record::Recording;
/// use voqalize::testing::Replay;
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
            turn_timeout: Duration::from_secs(5),
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
    #[must_use]
    pub fn forward_unmatched(self, base_url: impl Into<String>) -> Self {
        *crate::recover::lock(&self.server.shared.fallback) = Fallback::Forward(base_url.into());
        self
    }

    /// How long each turn may take before the replay goes on (default 5 s): a brain that does
    /// not answer a turn is a difference in the report, not an error.
    #[must_use]
    pub fn turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = timeout;
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
    /// # Errors
    /// [`ReplayError::NoCall`] for a recording without a `SessionStart`;
    /// [`ReplayError::Driver`] when the brain closed the connection or sent bytes that do not
    /// decode.
    pub async fn run<M: MakeBrain>(&mut self, factory: M) -> Result<ReplayReport, ReplayError> {
        let Some(start) = self.start_of() else {
            return Err(ReplayError::NoCall);
        };
        self.server.reset();
        // The replay's own recording, far above any recorder's default: a cut one would read as
        // missing turns (the report says when it was cut).
        let recorder = Recorder::in_memory().max_bytes(REPLAY_RECORDING_BYTES);
        let options = HostOptions::allow_unverified().record(recorder.clone());
        let upgrade = Upgrade {
            session_id: start.session_id.clone(),
            authorization: None,
        };
        let mut voqalize = Voqalize::in_process_with(factory, options, upgrade);
        voqalize.timeout = self.turn_timeout;
        voqalize.start_with(start).await?;
        for step in script::steps(&self.recording) {
            let played = match step {
                Step::Say { text, barged: None } => voqalize
                    .user_says_within(&text, self.turn_timeout)
                    .await
                    .map(drop),
                Step::Say {
                    text,
                    barged: Some(Barge { unit, heard }),
                } => {
                    // Before the first unit: at once. Else once the cut unit has text.
                    let at = match unit {
                        None => BargeAt::After(Duration::ZERO),
                        Some(_) => BargeAt::FirstText,
                    };
                    voqalize
                        .barge_in_hearing(&text, at, unit, |all| all.chars().take(heard).collect())
                        .await
                        .map(drop)
                }
                Step::Idle { level, idle_ms } => voqalize
                    .user_idle_within(level, idle_ms, self.turn_timeout)
                    .await
                    .map(drop),
                Step::Send(frame) => voqalize.send(frame).await,
                Step::End => voqalize.end().await.map(drop),
                Step::Cancel(reason) => voqalize
                    .cancel(reason.as_deref().unwrap_or(""))
                    .await
                    .map(drop),
            };
            match played {
                // The brain ending the call early is a difference the report shows.
                Err(DriverError::Closed { .. } | DriverError::Timeout { .. }) => break,
                Err(e) => return Err(e.into()),
                Ok(()) if voqalize.brain_ended() => break,
                Ok(()) => {}
            }
        }
        voqalize.hang_up().await;
        // The session's recording is handed over as its run ends.
        let _ = voqalize.brain_result().await;
        let replayed = recorder.take()?.pop().ok_or(ReplayError::NoCall)?;
        Ok(ReplayReport::new(
            &self.recording,
            &replayed,
            self.server.requests(),
        ))
    }

    /// The recorded `SessionStart`, as the driver sends it.
    fn start_of(&self) -> Option<Start> {
        let (turn_id, start) = self.recording.frames.iter().find_map(|f| match &f.frame {
            Frame::SessionStart(s) if f.direction == Direction::In => Some((s.turn_id, s)),
            _ => None,
        })?;
        let greeted = self.recording.frames.iter().any(|f| {
            f.direction == Direction::Out
                && matches!(f.frame, Frame::SpeechStart { turn_id: t, .. } if t == turn_id)
        });
        Some(Start {
            session_id: Some(start.session_id.clone()),
            wire_version: start.wire_version,
            capabilities: start.capabilities.clone(),
            init: start.init.clone(),
            expect_greeting: greeted,
        })
    }
}

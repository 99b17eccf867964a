//! The [`Brain`] trait (what a brain does at each moment of a call) and [`MakeBrain`] (how a fresh
//! brain is made for each call).

use std::future::Future;

use crate::session::{EndReason, Finalized, Session, Turn};
use crate::wire::{ErrorFrame, Rtvi, UserIdle, UserMessage};

/// An error a brain callback returns: any error type. It is logged with the callback's name and
/// handled as docs/protocol.md §4 describes (a failed turn closes its open unit; a failed start ends the
/// call with a fatal `Error`).
pub type BrainError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a brain callback returns.
pub type BrainResult<T = ()> = Result<T, BrainError>;

/// A brain: the customer side of one call. Only [`on_user_message`](Self::on_user_message) is
/// required.
///
/// One brain value serves one session (a factory makes one per call), but its callbacks run
/// concurrently: turns, [`on_rtvi`](Self::on_rtvi) handlers and the rest overlap, so callbacks take
/// `&self` and state lives behind interior mutability (`Mutex`, atomics).
///
/// | callback | runs | blocks later inbound frames |
/// |---|---|---|
/// | `on_session_start`, `greet` | in order, before anything else | yes |
/// | `on_user_message`, `on_user_idle` | in the turn's own task; cancelled by barge-in | no |
/// | `on_finalize`, `on_error` (wire `Error`) | in order with inbound frames | yes |
/// | `on_error` (local congestion) | beside whatever callback runs in order, as soon as the congestion happens | no |
/// | `on_rtvi` | the session's RTVI task, one message at a time in arrival order; not cancelled by barge-in | no |
/// | `on_session_end` | once, at teardown | — |
///
/// The callbacks that run in order share the call's task with the reading and writing of its
/// frames. Awaiting in them is fine: frames are still read and sent while one awaits. Blocking the
/// thread is not: a callback that computes for long without an `.await` holds up its call's
/// frames until it returns, so put such work in `tokio::task::spawn_blocking`.
///
/// A panic in any callback is caught at the task boundary and handled like a returned error; it
/// never reaches another session.
///
/// The smallest brain:
/// ```
/// use voqalize::prelude::*;
///
/// struct Echo;
///
/// impl Brain for Echo {
///     async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
///         turn.say(&message.text);
///         Ok(())
///     }
/// }
/// ```
pub trait Brain: Send + Sync + 'static {
    /// The call started (`SessionStart`, wire version checked). `await session.configure(...)` works
    /// here, and its Request goes out before the greeting. An error ends the call:
    /// `Error{INTERNAL, "on_session_start failed: ..", fatal}` then `End`.
    fn on_session_start(&self, session: &Session) -> impl Future<Output = BrainResult> + Send {
        let _ = session;
        async { Ok(()) }
    }

    /// What to say first. `Some(text)` (non-empty) is spoken as one unit on the `SessionStart`'s
    /// turn; `None` or `""` opens the call silently. An error ends the call like
    /// `on_session_start`'s.
    fn greet(&self, session: &Session) -> impl Future<Output = BrainResult<Option<String>>> + Send {
        let _ = session;
        async { Ok(None) }
    }

    /// The user said something (`UserMessage`). Speak through `turn`.
    ///
    /// An error or panic is logged as "turn failed"; an open unit still gets its `SpeechEnd`, and
    /// the session goes on.
    fn on_user_message(
        &self,
        turn: &mut Turn,
        message: UserMessage,
    ) -> impl Future<Output = BrainResult> + Send;

    /// The user has been silent (`UserIdle`); `idle.level` counts consecutive nudges from 1. The
    /// default says nothing.
    fn on_user_idle(
        &self,
        turn: &mut Turn,
        idle: UserIdle,
    ) -> impl Future<Output = BrainResult> + Send {
        let _ = (turn, idle);
        async { Ok(()) }
    }

    /// Voqalize reports what the user heard of a unit (`Finalize`). The unit is settled before this
    /// runs. Keep it short: later inbound frames wait for it (an `Interruption` does not).
    fn on_finalize(
        &self,
        session: &Session,
        finalized: Finalized,
    ) -> impl Future<Output = BrainResult> + Send {
        let _ = (session, finalized);
        async { Ok(()) }
    }

    /// The app sent an RTVI message (only app-originated types arrive: client-message, send-text,
    /// ui-event, ui-snapshot, ui-cancel-job-group). Runs beside turns in the session's RTVI task,
    /// one message at a time in arrival order, so app events apply in the order the app sent them;
    /// a slow handler delays the next app message, never a turn. Cannot speak. Read typed
    /// app events with [`parse_app_event`](crate::actions::parse_app_event).
    fn on_rtvi(
        &self,
        session: &Session,
        message: Rtvi,
    ) -> impl Future<Output = BrainResult> + Send {
        let _ = (session, message);
        async { Ok(()) }
    }

    /// Voqalize sent an `Error` (not terminal, even when fatal: the call ends with `End`, `Cancel`
    /// or a close), or a local queue shed frames (`ErrorCode::Overload`, non-fatal, once per
    /// congestion episode; never sent on the wire).
    fn on_error(
        &self,
        session: &Session,
        error: ErrorFrame,
    ) -> impl Future<Output = BrainResult> + Send {
        let _ = (session, error);
        async { Ok(()) }
    }

    /// The call is over; `reason` says what ended it (Voqalize's `End` or `Cancel`, this
    /// brain's own [`Session::end`], a lost connection, a bound, shutdown). Runs exactly once for
    /// a session whose `SessionStart` was handled, after every turn and handler was stopped, and
    /// within the request timeout (10 s by default; past it, it is abandoned). A panic is caught
    /// and logged.
    fn on_session_end(
        &self,
        session: &Session,
        reason: EndReason,
    ) -> impl Future<Output = ()> + Send {
        let _ = (session, reason);
        async {}
    }
}

/// Makes one brain per call. Implemented for every `Fn() -> B` where `B: Brain`, so `|| Echo` or a
/// constructor function works; wrap a constructor that can fail in [`fallible`]. A factory that
/// fails or panics fails that call only (`Error{INTERNAL, fatal}` then `End`), never the server.
pub trait MakeBrain: Send + Sync + 'static {
    /// The brain it makes.
    type Brain: Brain;
    /// Makes a fresh brain for a new call.
    ///
    /// # Errors
    /// Whatever the constructor reports; the call is refused with a fatal `Error`.
    fn make(&self) -> Result<Self::Brain, BrainError>;
}

impl<F, B> MakeBrain for F
where
    F: Fn() -> B + Send + Sync + 'static,
    B: Brain,
{
    type Brain = B;
    fn make(&self) -> Result<B, BrainError> {
        Ok(self())
    }
}

/// A factory whose constructor can fail: `fallible(|| OrderBot::connect(&pool))`.
pub fn fallible<F, B, E>(constructor: F) -> Fallible<F>
where
    F: Fn() -> Result<B, E> + Send + Sync + 'static,
    B: Brain,
    E: Into<BrainError>,
{
    Fallible(constructor)
}

/// See [`fallible`].
#[derive(Debug, Clone, Copy)]
pub struct Fallible<F>(F);

impl<F, B, E> MakeBrain for Fallible<F>
where
    F: Fn() -> Result<B, E> + Send + Sync + 'static,
    B: Brain,
    E: Into<BrainError>,
{
    type Brain = B;
    fn make(&self) -> Result<B, BrainError> {
        (self.0)().map_err(Into::into)
    }
}

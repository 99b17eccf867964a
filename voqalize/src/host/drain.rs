//! Graceful drain on the direct leg: a [`Shutdown`] stops a server taking calls, lets the running
//! ones finish for a while, then ends the rest with `End`.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::channel::{ChannelError, ChannelReceiver, Incoming};
use crate::session::EndReason;

/// Where a server is in its shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Serving,
    /// No new call; the running ones may finish.
    Draining,
    /// The running calls end now.
    Ending,
}

/// A shutdown for the servers given it through [`HostBuilder::shutdown`](crate::host::HostBuilder::shutdown):
/// the first [`trigger`](Self::trigger) starts a graceful drain, and a second one (or the end of
/// the drain timeout) ends the running calls at once.
///
/// During the drain no call is taken: the upgrade is answered `503` with `Retry-After` (so a load
/// balancer sends the call to another process), while the running calls go on to their end. When
/// `drain_timeout` passes, every call still running is ended: its brain's turns stop, it sends
/// `End`, `on_session_end` is told [`EndReason::Shutdown`], and the socket closes.
/// [`drained`](Self::drained) resolves once no call is left, with a [`DrainReport`];
/// [`serve`](super::serve) returns then.
///
/// Clones share the one shutdown.
///
/// ```no_run
/// use std::time::Duration;
/// use voqalize::host::Shutdown;
/// use voqalize::prelude::*;
/// # struct Echo;
/// # impl Brain for Echo {
/// #     async fn on_user_message(&self, t: &mut Turn, m: UserMessage) -> BrainResult { t.say(&m.text); Ok(()) }
/// # }
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // SIGTERM or Ctrl-C drains for 30 s; a second one ends the calls at once.
/// let shutdown = Shutdown::new(Duration::from_secs(30)).on_signals();
/// let options = HostOptions::builder().shutdown(&shutdown).build()?;
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:8787").await?;
/// let report = voqalize::host::serve(listener, || Echo, options).await?;
/// println!("{} calls finished, {} ended by the shutdown", report.drained, report.ended);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    phase: watch::Sender<Phase>,
    drain_timeout: Duration,
    live: AtomicUsize,
    drained: AtomicUsize,
    ended: AtomicUsize,
    /// Bumped when a call ends, for [`Shutdown::drained`].
    gone: watch::Sender<()>,
}

/// What a drain did: how many calls finished on their own while it ran, and how many the
/// shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DrainReport {
    /// Calls that ended on their own during the drain (Voqalize or the brain ended them).
    pub drained: usize,
    /// Calls still running when the drain timed out (or was cut short), ended with `End`.
    pub ended: usize,
}

impl Shutdown {
    /// A shutdown whose drain lets running calls go on for at most `drain_timeout`.
    pub fn new(drain_timeout: Duration) -> Self {
        Shutdown(Arc::new(Inner {
            phase: watch::channel(Phase::Serving).0,
            drain_timeout,
            live: AtomicUsize::new(0),
            drained: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            gone: watch::channel(()).0,
        }))
    }

    /// Also triggers on SIGTERM and SIGINT (Ctrl-C), each signal once: the first drains, the
    /// second ends the calls at once. Needs a tokio runtime (it spawns a task); where signals
    /// cannot be watched, a warning is logged and only [`trigger`](Self::trigger) works.
    #[must_use]
    pub fn on_signals(self) -> Self {
        let shutdown = self.clone();
        tokio::spawn(async move {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{SignalKind, signal};
                let (Ok(mut term), Ok(mut int)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                ) else {
                    tracing::warn!("shutdown: SIGTERM and SIGINT cannot be watched here");
                    return;
                };
                loop {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                    shutdown.trigger();
                }
            }
            #[cfg(not(unix))]
            loop {
                if tokio::signal::ctrl_c().await.is_err() {
                    tracing::warn!("shutdown: Ctrl-C cannot be watched here");
                    return;
                }
                shutdown.trigger();
            }
        });
        self
    }

    /// Starts the drain; called while it runs, ends the running calls at once. Works from any
    /// thread, inside a tokio runtime or not.
    pub fn trigger(&self) {
        let inner = &self.0;
        let mut started = false;
        inner.phase.send_if_modified(|phase| match *phase {
            Phase::Serving => {
                *phase = Phase::Draining;
                started = true;
                true
            }
            Phase::Draining => {
                *phase = Phase::Ending;
                true
            }
            Phase::Ending => false,
        });
        if started {
            tracing::info!(
                "shutdown: draining {} for up to {:?}; no new call is taken",
                crate::logline::count(inner.live.load(Ordering::Acquire), "call"),
                inner.drain_timeout
            );
            let inner = self.0.clone();
            let end = move || {
                inner.phase.send_if_modified(|phase| {
                    std::mem::replace(phase, Phase::Ending) != Phase::Ending
                });
            };
            let timeout = self.0.drain_timeout;
            // Triggered from outside a runtime (a std thread, a signal crate's handler), the
            // drain still ends on time.
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        tokio::time::sleep(timeout).await;
                        end();
                    });
                }
                Err(_) => {
                    std::thread::spawn(move || {
                        std::thread::sleep(timeout);
                        end();
                    });
                }
            }
        }
    }

    /// Starts the drain unless it has started: what a future given to a relay's
    /// [`serve`](crate::relay::Relay::serve) does when it completes (a second call never ends the
    /// calls at once, as [`trigger`](Self::trigger) would).
    #[cfg(feature = "relay")]
    pub(crate) fn start_drain(&self) {
        if !self.is_draining() {
            self.trigger();
        }
    }

    /// Whether the running calls are being ended now (the drain timed out, or a second trigger).
    #[cfg(any(feature = "relay", test))]
    pub(crate) fn is_ending(&self) -> bool {
        *self.0.phase.borrow() == Phase::Ending
    }

    /// Resolves once the shutdown is triggered: the future a relay's
    /// [`serve`](crate::relay::Relay::serve) takes, or the start of your own clean-up.
    pub async fn triggered(&self) {
        let mut phase = self.0.phase.subscribe();
        let _ = phase.wait_for(|p| *p != Phase::Serving).await;
    }

    /// Whether a drain has started: new calls are refused.
    pub fn is_draining(&self) -> bool {
        *self.0.phase.borrow() != Phase::Serving
    }

    /// The calls running now under this shutdown.
    pub fn open(&self) -> usize {
        self.0.live.load(Ordering::Acquire)
    }

    /// What the drain did so far.
    pub(crate) fn report(&self) -> DrainReport {
        DrainReport {
            drained: self.0.drained.load(Ordering::Acquire),
            ended: self.0.ended.load(Ordering::Acquire),
        }
    }

    /// Resolves once a drain has started and no call is left: what it did.
    pub async fn drained(&self) -> DrainReport {
        let mut phase = self.0.phase.subscribe();
        let mut gone = self.0.gone.subscribe();
        loop {
            if *phase.borrow_and_update() != Phase::Serving
                && self.0.live.load(Ordering::Acquire) == 0
            {
                return self.report();
            }
            tokio::select! {
                _ = phase.changed() => {}
                _ = gone.changed() => {}
            }
        }
    }

    /// Counts a call hosted under this shutdown, until the returned guard drops.
    pub(crate) fn hosting(&self) -> Hosted {
        self.0.live.fetch_add(1, Ordering::AcqRel);
        Hosted(self.clone())
    }

    /// Where the shutdown is: what a hosted call's receiver watches.
    pub(crate) fn ending(&self) -> watch::Receiver<Phase> {
        self.0.phase.subscribe()
    }
}

/// One hosted call's place in its shutdown's count; counted as drained or ended when it drops.
pub(crate) struct Hosted(Shutdown);

impl Drop for Hosted {
    fn drop(&mut self) {
        let inner = &(self.0).0;
        match *inner.phase.borrow() {
            Phase::Serving => {}
            Phase::Draining => {
                inner.drained.fetch_add(1, Ordering::AcqRel);
            }
            Phase::Ending => {
                inner.ended.fetch_add(1, Ordering::AcqRel);
            }
        }
        inner.live.fetch_sub(1, Ordering::AcqRel);
        inner.gone.send_replace(());
    }
}

/// A hosted call's receiving half: what the peer sends, until its shutdown (if it follows one)
/// ends the calls. Then it reports [`EndReason::Shutdown`], and the session sends `End` and tears
/// down.
pub(crate) struct Watched<R> {
    inner: R,
    /// Completes when the shutdown ends the calls (or is gone). Made once a call and kept
    /// waiting: one made per frame received would join the shutdown's waiters and leave them
    /// again for every frame.
    ending: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// The shutdown has ended the calls.
    ended: bool,
}

impl<R> Watched<R> {
    /// `inner`, ended by the phase `ending` watches when it reaches [`Phase::Ending`].
    pub(crate) fn new(inner: R, ending: Option<watch::Receiver<Phase>>) -> Self {
        let ending = ending.map(|mut phase| {
            let wait: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
                // A shutdown that is gone ends its calls too.
                let _ = phase.wait_for(|p| *p == Phase::Ending).await;
            });
            wait
        });
        Watched {
            inner,
            ending,
            ended: false,
        }
    }
}

impl<R: ChannelReceiver> ChannelReceiver for Watched<R> {
    async fn recv(&mut self) -> Option<Result<Incoming, ChannelError>> {
        if self.ended {
            return Some(Err(ChannelError::ending(EndReason::Shutdown)));
        }
        let Some(ending) = self.ending.as_mut() else {
            return self.inner.recv().await;
        };
        tokio::select! {
            biased;
            () = ending.as_mut() => {
                self.ending = None;
                self.ended = true;
                Some(Err(ChannelError::ending(EndReason::Shutdown)))
            }
            next = self.inner.recv() => next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A shutdown triggered from a plain thread (a signal crate's handler) still ends the calls
    // when its drain times out.
    #[test]
    fn a_trigger_outside_a_runtime_still_ends_the_drain_on_time() {
        let shutdown = Shutdown::new(Duration::from_millis(20));
        shutdown.trigger();
        assert!(shutdown.is_draining());
        let mut phase = shutdown.ending();
        let ended = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map(|rt| {
                rt.block_on(async {
                    tokio::time::timeout(
                        Duration::from_secs(10),
                        phase.wait_for(|p| *p == Phase::Ending),
                    )
                    .await
                    .is_ok()
                })
            });
        assert!(matches!(ended, Ok(true)), "the drain ended on time");
        assert!(shutdown.is_ending());
    }
}

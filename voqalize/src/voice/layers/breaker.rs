//! The circuit breakers of a process's fallback chains: one per layer (provider, model and base
//! URL), shared by every call through a registry, told each request's verdict by a [`Ticket`].
//!
//! A breaker is closed (every request may go), open (none may, until its cooling ends), or
//! half-open (one request, the probe, may; the others skip the layer until the probe's verdict).
//! Each change is logged once and exported as `voqalize_model_breaker_state`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::Breaker;
use crate::model::layer::Layer;
use crate::recover::lock;

/// Registered breakers past which the dead ones are pruned at the next registration.
const PRUNE_AT: usize = 256;
/// The most breakers the registry holds: a process that builds chains over more distinct layers
/// than this (a model name per tenant) gets breakers that are not shared past it.
const MAX_REGISTERED: usize = 4096;
/// How long an open breaker skips its layer when its wait is past what an `Instant` can be
/// moved by (100 years).
const FOR_EVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Where a breaker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open,
    HalfOpen,
}

impl Phase {
    /// The value of `voqalize_model_breaker_state`.
    fn gauge(self) -> f64 {
        match self {
            Phase::Closed => 0.0,
            Phase::HalfOpen => 1.0,
            Phase::Open => 2.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::HalfOpen => "half_open",
            Phase::Open => "open",
        }
    }
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Failed requests in a row.
    failures: u32,
    /// Until when an open breaker skips its layer.
    until: Instant,
    /// A probe is out (half-open).
    probing: bool,
}

/// One layer's breaker, shared by every chain over that layer.
#[derive(Debug)]
pub(crate) struct BreakerState {
    provider: String,
    model: String,
    state: Mutex<State>,
}

/// The breaker of `layer`: the one every chain over the same provider, model and base URL shares.
pub(super) fn registered(layer: &dyn Layer) -> Arc<BreakerState> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Weak<BreakerState>>>> = OnceLock::new();
    let key = format!(
        "{}\n{}\n{}",
        layer.provider(),
        layer.model(),
        layer.base_url()
    );
    let mut map = lock(REGISTRY.get_or_init(Mutex::default));
    if let Some(state) = map.get(&key).and_then(Weak::upgrade) {
        return state;
    }
    let state = Arc::new(BreakerState {
        provider: layer.provider().to_owned(),
        model: layer.model().to_owned(),
        state: Mutex::new(State {
            phase: Phase::Closed,
            failures: 0,
            until: Instant::now(),
            probing: false,
        }),
    });
    if map.len() >= PRUNE_AT {
        map.retain(|_, state| state.strong_count() > 0);
    }
    if map.len() < MAX_REGISTERED {
        map.insert(key, Arc::downgrade(&state));
    }
    state
}

/// A request's leave to ask a layer, or `None` while its breaker is open or being probed.
pub(super) fn admit(state: &Arc<BreakerState>) -> Option<Ticket> {
    let mut s = lock(&state.state);
    let probe = match s.phase {
        Phase::Closed => false,
        Phase::Open if Instant::now() < s.until => return None,
        Phase::Open => {
            s.probing = true;
            state.moved(
                &mut s,
                Phase::HalfOpen,
                "its cooling ended: one request probes it",
            );
            true
        }
        Phase::HalfOpen if s.probing => return None,
        Phase::HalfOpen => {
            s.probing = true;
            true
        }
    };
    Some(Ticket {
        state: state.clone(),
        probe,
        told: false,
    })
}

impl BreakerState {
    /// Moves to `phase`: logged once, and exported.
    fn moved(&self, s: &mut State, phase: Phase, why: &str) {
        if s.phase == phase {
            return;
        }
        s.phase = phase;
        let (provider, model) = (&self.provider, &self.model);
        match phase {
            Phase::Open => tracing::warn!(
                "model: provider={provider} model={model} breaker open: {why}; every call skips it meanwhile"
            ),
            _ => tracing::info!(
                "model: provider={provider} model={model} breaker {}: {why}",
                phase.name()
            ),
        }
        crate::metrics::breaker_state(provider, model, phase.name(), phase.gauge());
    }
}

/// A request's leave to ask a layer: tell it how the request went ([`succeeded`](Self::succeeded)
/// or [`failed`](Self::failed)); dropped untold (a barge-in, a hedge lost, an answer that says
/// nothing of the provider being up), it leaves the breaker as it was, a probe given back.
#[derive(Debug)]
pub(crate) struct Ticket {
    state: Arc<BreakerState>,
    /// This request probes a half-open breaker.
    probe: bool,
    told: bool,
}

impl Ticket {
    /// Whether this is a half-open breaker's one probe.
    pub(crate) fn probe(&self) -> bool {
        self.probe
    }

    /// The layer brought the model's first words: its breaker closes.
    pub(crate) fn succeeded(mut self) {
        self.told = true;
        let state = &self.state;
        let mut s = lock(&state.state);
        s.failures = 0;
        s.probing = false;
        state.moved(&mut s, Phase::Closed, "a request was answered");
    }

    /// The layer failed as an outage does: the breaker counts it, and opens at `breaker`'s
    /// count (at once for a probe) for its cooling, or for the provider's `retry_after` (at most
    /// `max_retry_after`) when that is longer.
    pub(crate) fn failed(
        mut self,
        breaker: &Breaker,
        retry_after: Option<Duration>,
        max_retry_after: Duration,
    ) {
        self.told = true;
        let state = &self.state;
        let mut s = lock(&state.state);
        s.failures = s.failures.saturating_add(1);
        let asked = retry_after.map(|after| after.min(max_retry_after));
        let why = if self.probe || s.phase == Phase::HalfOpen {
            Some(format!(
                "its probe failed; skipped for {:?}",
                breaker.cooling
            ))
        } else if s.failures >= breaker.failures {
            Some(format!(
                "{} failures in a row; skipped for {:?}",
                s.failures, breaker.cooling
            ))
        } else {
            None
        };
        let now = Instant::now();
        let mut until = now;
        if why.is_some() {
            until = later(now, breaker.cooling);
        }
        if let Some(asked) = asked {
            until = until.max(later(now, asked));
        }
        if until <= now {
            return;
        }
        s.until = s.until.max(until);
        s.probing = false;
        let why = why.unwrap_or_else(|| {
            format!(
                "the provider asked to be left for {:?} (Retry-After)",
                asked.unwrap_or_default()
            )
        });
        state.moved(&mut s, Phase::Open, &why);
    }
}

/// `wait` after `now`, or as far as an `Instant` reaches (a cooling of `Duration::MAX`, a
/// `Retry-After` taken uncapped): an open breaker that never cools, never a panic.
fn later(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait)
        .or_else(|| now.checked_add(FOR_EVER))
        .unwrap_or(now)
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.probe && !self.told {
            lock(&self.state.state).probing = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Chat;

    fn layer(url: &str) -> Chat {
        Chat::builder(url, "m")
            .build()
            .expect("a chat layer builds")
    }

    #[test]
    fn it_opens_after_its_failures_then_lets_one_probe_through() {
        let state = registered(&layer("http://127.0.0.1:1/breaker-a"));
        let breaker = Breaker::new().failures(2).cooling(Duration::from_millis(1));
        admit(&state)
            .expect("closed")
            .failed(&breaker, None, Duration::ZERO);
        assert!(
            admit(&state).is_some(),
            "one failure of two keeps it closed"
        );
        admit(&state)
            .expect("closed")
            .failed(&breaker, None, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        let probe = admit(&state).expect("the cooling ended: a probe");
        assert!(admit(&state).is_none(), "one probe at a time");
        drop(probe);
        let probe = admit(&state).expect("a probe given back untold is taken again");
        probe.succeeded();
        assert!(admit(&state).is_some() && admit(&state).is_some(), "closed");
    }

    #[test]
    fn retry_after_opens_it_for_as_long_as_asked_within_the_cap() {
        let state = registered(&layer("http://127.0.0.1:1/breaker-b"));
        let breaker = Breaker::new();
        let ticket = admit(&state).expect("closed");
        ticket.failed(
            &breaker,
            Some(Duration::from_secs(3600)),
            Duration::from_secs(60),
        );
        assert!(admit(&state).is_none(), "skipped while the provider asked");
        let until = lock(&state.state).until;
        assert!(until <= Instant::now() + Duration::from_secs(60));
    }

    #[test]
    fn chains_over_the_same_layer_share_one_breaker() {
        let a = registered(&layer("http://127.0.0.1:1/breaker-c"));
        let b = registered(&layer("http://127.0.0.1:1/breaker-c"));
        let c = registered(&layer("http://127.0.0.1:1/breaker-d"));
        assert!(Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
    }
}

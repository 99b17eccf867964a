//! What a [`Model`](super::Model) answers from: one layer ([`ModelLayer`]), or a fallback chain
//! over an ordered list of them (docs/protocol.md §6.18). A request that fails before the model's first words moves on to the next layer within
//! the same turn; a circuit breaker per layer, shared by every call of the process, skips a layer
//! that keeps failing until it has cooled down, then lets one request probe it; and, opt-in, a
//! request whose first words are late is hedged on the next layer.
//!
//! By job: this file holds the layer a `Model` is given, the chain the brain builds ([`Fallback`],
//! [`Breaker`]) and what the voice core reads of it (`Chain`); `breaker.rs` the breakers' shared state, their registry
//! and what each request tells them.

mod breaker;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use breaker::Ticket;
use breaker::{BreakerState, registered};

use crate::model::layer::Layer;

/// A provider a [`Model`](super::Model) talks to: [`Gemini`](crate::model::Gemini),
/// [`OpenAi`](crate::model::OpenAi), [`Chat`](crate::model::Chat), or any
/// [`Layer`] of your own; each converts into it. It may also be a [`Fallback`] chain of several,
/// asked in order. Cloning shares the layer (and a chain's breakers).
#[derive(Clone)]
pub struct ModelLayer {
    /// The layer asked first.
    first: Arc<dyn Layer>,
    /// The chain it heads, when it is one.
    chain: Option<Arc<Chain>>,
}

impl ModelLayer {
    /// The layer, shared.
    pub fn new(layer: impl Layer) -> ModelLayer {
        ModelLayer::shared(Arc::new(layer))
    }

    /// A layer already shared (one layer for many `Model`s).
    pub fn shared(layer: Arc<dyn Layer>) -> ModelLayer {
        ModelLayer {
            first: layer,
            chain: None,
        }
    }

    /// A built fallback chain.
    fn chain(chain: Chain) -> ModelLayer {
        ModelLayer {
            first: chain.layer(0).clone(),
            chain: Some(Arc::new(chain)),
        }
    }

    /// The layer asked first: the only one, or a chain's first (`__kit::layer_of`, a one-shot
    /// request such as a handoff summary).
    pub(crate) fn layer(&self) -> &Arc<dyn Layer> {
        &self.first
    }

    /// The chain, when this is one.
    pub(crate) fn fallback(&self) -> Option<&Arc<Chain>> {
        self.chain.as_ref()
    }

    /// Every layer, in the order they are asked.
    pub(crate) fn layers(&self) -> Box<dyn Iterator<Item = &Arc<dyn Layer>> + Send + '_> {
        match &self.chain {
            Some(chain) => Box::new(chain.layers()),
            None => Box::new(std::iter::once(&self.first)),
        }
    }
}

impl std::fmt::Debug for ModelLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("ModelLayer");
        s.field("provider", &self.first.provider())
            .field("model", &self.first.model());
        if let Some(chain) = &self.chain {
            s.field("fallback", chain);
        }
        s.finish()
    }
}

impl<L: Layer> From<L> for ModelLayer {
    fn from(layer: L) -> Self {
        ModelLayer::new(layer)
    }
}

/// The most layers one chain holds (8): a turn that walked more before speaking would keep the
/// caller waiting past any first-byte timeout worth having.
pub const MAX_FALLBACK_LAYERS: usize = 8;

/// How long a layer is skipped after its breaker opens, unless [`Breaker::cooling`] says: 30 s.
pub const BREAKER_COOLING: Duration = Duration::from_secs(30);

/// How many failures in a row open a layer's breaker, unless [`Breaker::failures`] says: 3.
pub const BREAKER_FAILURES: u32 = 3;

/// The longest a provider's `Retry-After` keeps its layer skipped, unless
/// [`Fallback::max_retry_after`] says: 60 s.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// When a layer's circuit breaker opens and for how long: after `failures` failed requests in a
/// row, the layer is skipped by every call of the process for `cooling`; then one request
/// probes it (half-open): its success closes the breaker, its failure opens it for another
/// `cooling`. What counts as a failure: no connection, a timeout before the first words, an HTTP
/// 408, 429 or 5xx (529 included), a broken stream or a provider's error event before the first
/// words. Other answers (a 400 for a request the provider refuses, a 401) move the turn on to the
/// next layer but do not count: they say nothing of the provider being up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    failures: u32,
    cooling: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            failures: BREAKER_FAILURES,
            cooling: BREAKER_COOLING,
        }
    }
}

impl Breaker {
    /// [`BREAKER_FAILURES`] (3) failures in a row open it for [`BREAKER_COOLING`] (30 s).
    pub fn new() -> Breaker {
        Breaker::default()
    }

    /// How many failed requests in a row open the breaker (1 at least: [`Fallback::build`]
    /// refuses 0).
    #[must_use]
    pub fn failures(mut self, failures: u32) -> Breaker {
        self.failures = failures;
        self
    }

    /// How long an open breaker skips its layer before one request probes it (more than zero:
    /// [`Fallback::build`] refuses a zero cooling, which would probe a dead provider on every
    /// request).
    #[must_use]
    pub fn cooling(mut self, cooling: Duration) -> Breaker {
        self.cooling = cooling;
        self
    }
}

/// A fallback chain is refused at [`Fallback::build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FallbackError {
    /// No layer was given ([`Fallback::of`] an empty list).
    #[error("a fallback chain needs at least one layer")]
    Empty,
    /// More than [`MAX_FALLBACK_LAYERS`] layers.
    #[error("a fallback chain holds at most {max} layers, not {given}")]
    TooLong {
        /// How many were given.
        given: usize,
        /// The most a chain holds.
        max: usize,
    },
    /// [`Breaker::failures`] was 0: the breaker would open before any request.
    #[error("a breaker opens after 1 failure at least, not 0")]
    ZeroFailures,
    /// [`Breaker::cooling`] was zero: an open breaker would probe on every request.
    #[error("a breaker's cooling period must be more than zero")]
    ZeroCooling,
    /// [`Fallback::hedge_after`] was given with a chain of one layer: there is nothing to hedge on.
    #[error("hedging needs a second layer to send the request to")]
    NothingToHedgeOn,
}

/// Builds a fallback chain: a [`ModelLayer`] that a [`Model`](super::Model) (or a workflow
/// stage) answers from, trying each layer in order.
///
/// ```
/// use std::time::Duration;
/// use voqalize::model::{Anthropic, Gemini};
/// use voqalize::voice::{Breaker, Fallback, Model};
///
/// # fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let gemini = Gemini::builder("key").model("gemini-2.5-flash").build()?;
/// let claude = Anthropic::builder("key", "claude-sonnet-4-5").build()?;
/// let layers = Fallback::new(gemini)
///     .then(claude)
///     .breaker(Breaker::new().failures(3).cooling(Duration::from_secs(30)))
///     .build()?; // build once, share it: the breakers are the process's
/// let model = Model::new(layers.clone()).instruction("You are a concierge.");
/// # let _ = model; Ok(()) }
/// ```
///
/// What a turn does with it, request by request:
/// * It asks the first layer whose breaker is closed (or which it may probe). A request that
///   fails before the model's first words (no connection, an HTTP error, the layer's first-byte
///   timeout, a stream that breaks or carries an error event before any text or call) moves on
///   to the next layer at once, in the same turn: the caller hears only the answer. The layer
///   that answered keeps the rest of the turn's requests (a tool's follow-up asks it first).
/// * Once the model's first words (or a call) came, a failure is handled as with one layer:
///   what was said stays, the turn ends, and nothing is asked again.
/// * When every layer failed or is cooling down, the turn fails as with one layer (its fallback
///   line, if any, is spoken): at once when every breaker is open, never waiting on a layer the
///   process knows is down.
/// * Before the last layer, a failed request is not retried on its own layer: the next layer
///   is faster than a retry. The last layer keeps the transport's one retry.
/// * A provider's `Retry-After` (a 429, 503 or 529) keeps its layer skipped by every call for
///   that long, at most [`max_retry_after`](Self::max_retry_after).
///
/// A breaker belongs to the layer, not to the chain: two chains (or two calls' chains built
/// apart) over the same provider, model and base URL share it. Each request's history is rendered
/// for the layer that answers it (what one provider keeps for itself is not sent to another).
#[derive(Debug, Clone)]
#[must_use]
pub struct Fallback {
    layers: Vec<ModelLayer>,
    breaker: Breaker,
    hedge_after: Option<Duration>,
    max_retry_after: Duration,
}

impl Fallback {
    /// A chain that asks `first` first.
    pub fn new(first: impl Into<ModelLayer>) -> Fallback {
        Fallback::of([first])
    }

    /// A chain over `layers`, in order (from a configuration; [`build`](Self::build) refuses an
    /// empty list).
    pub fn of<L: Into<ModelLayer>>(layers: impl IntoIterator<Item = L>) -> Fallback {
        Fallback {
            layers: layers.into_iter().map(Into::into).collect(),
            breaker: Breaker::default(),
            hedge_after: None,
            max_retry_after: MAX_RETRY_AFTER,
        }
    }

    /// Asks `layer` when those before it failed or are cooling down. A chain given as a layer
    /// adds its layers.
    pub fn then(mut self, layer: impl Into<ModelLayer>) -> Fallback {
        self.layers.push(layer.into());
        self
    }

    /// The breakers' settings (default [`Breaker::new`]: 3 failures, 30 s).
    pub fn breaker(mut self, breaker: Breaker) -> Fallback {
        self.breaker = breaker;
        self
    }

    /// The longest a provider's `Retry-After` keeps its layer skipped (default
    /// [`MAX_RETRY_AFTER`], 60 s): a provider asking for an hour is asked again after this.
    pub fn max_retry_after(mut self, max: Duration) -> Fallback {
        self.max_retry_after = max;
        self
    }

    /// Hedges the first words (off by default): when a request has not brought the model's first
    /// words (text or a call) `after` it was sent, the same request goes to the next layer too,
    /// and the turn takes whichever answers first; the other request is cancelled (its
    /// connection closed). The cost: every hedged request is paid twice for its input tokens
    /// (a provider bills a cancelled request's prompt), and its output until it is cancelled. Set
    /// `after` near the p95 of your first layer's time to first token, so one request in twenty
    /// is hedged; a zero `after` sends every request to both at once.
    pub fn hedge_after(mut self, after: Duration) -> Fallback {
        self.hedge_after = Some(after);
        self
    }

    /// The chain, as a layer for [`Model::new`](super::Model::new) or a workflow stage. Build
    /// it once and clone it into each call's `Model`: cloning shares it.
    ///
    /// # Errors
    /// No layer, more than [`MAX_FALLBACK_LAYERS`], a breaker that opens after 0 failures or
    /// cools for no time, or hedging with one layer ([`FallbackError`]).
    pub fn build(self) -> Result<ModelLayer, FallbackError> {
        let layers: Vec<Arc<dyn Layer>> = self
            .layers
            .iter()
            .flat_map(|l| l.layers().map(Arc::clone).collect::<Vec<_>>())
            .collect();
        match layers.len() {
            0 => return Err(FallbackError::Empty),
            n if n > MAX_FALLBACK_LAYERS => {
                return Err(FallbackError::TooLong {
                    given: n,
                    max: MAX_FALLBACK_LAYERS,
                });
            }
            1 if self.hedge_after.is_some() => return Err(FallbackError::NothingToHedgeOn),
            _ => {}
        }
        if self.breaker.failures == 0 {
            return Err(FallbackError::ZeroFailures);
        }
        if self.breaker.cooling.is_zero() {
            return Err(FallbackError::ZeroCooling);
        }
        let links = layers
            .into_iter()
            .map(|layer| Link {
                state: registered(&*layer),
                layer,
            })
            .collect();
        Ok(ModelLayer::chain(Chain {
            links,
            breaker: self.breaker,
            hedge_after: self.hedge_after,
            max_retry_after: self.max_retry_after,
        }))
    }
}

/// A built chain: its layers with their breakers, and how it is walked.
pub(crate) struct Chain {
    links: Vec<Link>,
    pub(crate) breaker: Breaker,
    pub(crate) hedge_after: Option<Duration>,
    pub(crate) max_retry_after: Duration,
}

/// One layer of a chain and its breaker (shared with every chain over the same layer).
struct Link {
    layer: Arc<dyn Layer>,
    state: Arc<BreakerState>,
}

impl Chain {
    /// How many layers the chain holds.
    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    /// Layer `i`.
    pub(crate) fn layer(&self, i: usize) -> &Arc<dyn Layer> {
        &self.links[i].layer
    }

    /// Every layer, in order.
    pub(crate) fn layers(&self) -> impl Iterator<Item = &Arc<dyn Layer>> {
        self.links.iter().map(|l| &l.layer)
    }

    /// Whether layer `i` may be asked now: a ticket that takes the request's verdict to its
    /// breaker, or `None` while the breaker is open (or another request is probing it).
    pub(crate) fn admit(&self, i: usize) -> Option<Ticket> {
        breaker::admit(&self.links[i].state)
    }
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for link in &self.links {
            list.entry(&format_args!(
                "{}/{}",
                link.layer.provider(),
                link.layer.model()
            ));
        }
        list.finish()
    }
}

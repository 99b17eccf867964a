//! A request that fails (docs/protocol.md §6.12): why, as the metrics and the request's span say
//! it, its one log line (then a count), and the fallback line that keeps the caller from silence.

use std::time::Duration;

use super::{TurnState, allowed};
use crate::logline::{chain, outside_n};
use crate::model::ModelError;
use crate::model::layer::StreamError;
use crate::voice::bounds::Tripped;

/// How many characters of a failed request's error its log line keeps (the error holds the
/// provider's own words).
const ERROR_CHARS: usize = 500;

/// Why a request failed: the transport, the provider's stream, or the turn's deadline.
#[derive(Debug, thiserror::Error)]
pub(super) enum RequestError {
    #[error(transparent)]
    Http(#[from] ModelError),
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error("the turn passed its {0:?} deadline")]
    Deadline(Duration),
    /// Every layer of a fallback chain is cooling down: no request was sent.
    #[error("every layer of the fallback chain is cooling down after failures; none was asked")]
    Unavailable,
}

impl RequestError {
    /// The request's outcome in the `voqalize_model_requests_total` metric.
    pub(super) fn outcome(&self) -> &'static str {
        match self {
            RequestError::Http(ModelError::Status { status: 429, .. }) => "rate_limited",
            RequestError::Http(ModelError::Status { status, .. }) if *status < 500 => "status_4xx",
            RequestError::Http(ModelError::Status { .. }) => "status_5xx",
            RequestError::Http(ModelError::FirstByteTimeout(_)) | RequestError::Deadline(_) => {
                "timeout"
            }
            RequestError::Http(_) => "http",
            RequestError::Stream(StreamError::Unbuildable { .. }) => "unbuildable",
            RequestError::Stream(_) => "stream",
            RequestError::Unavailable => "breaker_open",
        }
    }

    /// Whether this failure says the provider is down or overloaded, so a fallback chain's
    /// breaker counts it: no connection, a timeout before the first words, an HTTP 408, 429 or
    /// 5xx, a broken stream, or the provider's own error (or garbage) in the stream. A request the
    /// provider refuses (another 4xx) or that could not be built says nothing of that.
    pub(super) fn outage(&self) -> bool {
        match self {
            RequestError::Http(ModelError::Status { status, .. }) => {
                *status == 408 || *status == 429 || *status >= 500
            }
            RequestError::Http(e) => e.is_retryable(),
            RequestError::Stream(StreamError::Unbuildable { .. }) => false,
            RequestError::Stream(_) => true,
            RequestError::Deadline(_) | RequestError::Unavailable => false,
        }
    }

    /// The provider's `Retry-After`, when it answered with one.
    pub(super) fn retry_after(&self) -> Option<Duration> {
        match self {
            RequestError::Http(e) => e.retry_after(),
            _ => None,
        }
    }

    /// The `error.type` of the request's span: the HTTP status, or a kind of failure.
    pub(super) fn kind(&self) -> String {
        match self {
            RequestError::Http(ModelError::Status { status, .. }) => status.to_string(),
            RequestError::Http(ModelError::FirstByteTimeout(_)) | RequestError::Deadline(_) => {
                "timeout".into()
            }
            RequestError::Http(_) => "http".into(),
            RequestError::Stream(_) => "stream".into(),
            RequestError::Unavailable => "breaker_open".into(),
        }
    }
}

impl TurnState<'_> {
    /// A request failed: log it with the provider and status, close what was speaking (it stays in
    /// the history with its partial text and is finalized like any unit), and speak the fallback line
    /// when the turn had said nothing yet, so the caller is not left in silence.
    pub(super) fn failed(&mut self, e: &RequestError) {
        if let Some(hop) = &mut self.hop {
            hop.span.record("error.type", e.kind());
            hop.outcome = e.outcome();
        }
        if let RequestError::Http(ModelError::Status {
            request_id: Some(id),
            ..
        }) = e
        {
            self.request_id = Some(id.clone());
        }
        if let RequestError::Deadline(after) = e {
            self.trip(Tripped::Deadline(*after));
        } else if allowed(self.model, |log| &mut log.failed_requests) {
            let layer = self.layer();
            tracing::error!(
                "turn: model={} provider={} request failed: {}",
                layer.model(),
                layer.provider(),
                outside_n(&chain(e), ERROR_CHARS)
            );
        }
        self.end_request();
        if let Some(r) = self.response.as_mut() {
            r.fall_silent();
        }
        if self.clock.speak.is_none()
            && let Some(line) = &self.model.fallback_now()
        {
            self.model.say_aside(self.turn, line);
            self.clock.mark_speak();
        }
        self.finish();
    }
}

/// Runs a layer's own code (a layer of the user's, a bearer token source): a panic in it fails
/// the request, logged and covered by the fallback line like any failed request, instead of
/// ending the turn with nothing said.
pub(super) fn layer_code<T>(
    provider: &str,
    doing: &str,
    f: impl FnOnce() -> Result<T, StreamError>,
) -> Result<T, StreamError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(StreamError::unbuildable(
            provider,
            format!(
                "the layer {} {doing}",
                crate::recover::panic_text(panic.as_ref())
            ),
        ))
    })
}

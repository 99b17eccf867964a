//! [`offline_model`]: a [`Model`] for tests that never reach a model, so a model-backed brain
//! can be built in a test of one of its tools ([`ToolHarness`](super::ToolHarness)) without a
//! stand-in provider or a key.

use voqalize::model::layer::{DecodeLimits, Decoder, HttpRequest, Layer, RequestSpec, StreamError};
use voqalize::voice::Model;

/// The layer behind [`offline_model`]: every request is refused before it is sent.
struct Offline;

/// What a request through it fails with (the turn then says the model's fallback line).
const WHY: &str = "this brain was built with testing::offline_model(): it has no model to ask";

impl Layer for Offline {
    fn provider(&self) -> &str {
        "offline"
    }

    fn model(&self) -> &str {
        "offline"
    }

    fn base_url(&self) -> &str {
        "http://offline.invalid"
    }

    fn build(&self, _spec: &RequestSpec<'_>) -> Result<HttpRequest, StreamError> {
        Err(StreamError::unbuildable("offline", WHY))
    }

    fn decoder(&self, _limits: DecodeLimits) -> Box<dyn Decoder> {
        Box::new(Never)
    }
}

/// Never used: no request is ever sent.
struct Never;

impl Decoder for Never {
    fn item(
        &mut self,
        _item: voqalize::model::layer::SseItem,
    ) -> Result<Vec<voqalize::model::layer::Chunk>, StreamError> {
        Err(StreamError::unbuildable("offline", WHY))
    }

    fn end(&mut self) -> Result<Vec<voqalize::model::layer::Chunk>, StreamError> {
        Ok(Vec::new())
    }

    fn done(&self) -> bool {
        true
    }
}

/// A [`Model`] that never reaches a model: building the brain needs no provider and no key,
/// warming it opens no connection, and a turn handed to it fails as a refused request would
/// (logged; the fallback line is spoken). For tests of a model-backed brain's tools.
///
/// # Examples
/// ```
/// use voqalize::prelude::*;
/// use voqalize_testing::{ToolHarness, Voqalize, offline_model};
///
/// struct Coach {
///     model: Model,
/// }
///
/// #[brain]
/// impl Coach {
///     /// The user's average glucose this week, in mmol/L.
///     #[tool]
///     async fn weekly_average(&self) -> f64 {
///         5.4
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), voqalize_testing::DriverError> {
/// let mut v = Voqalize::in_process(|| ToolHarness(Coach { model: offline_model() }));
/// v.start_silent().await?;
/// let call = v.call_tool("weekly_average", voqalize::json!({})).await?;
/// assert_eq!(call.response, voqalize::json!({"result": 5.4}));
/// # Ok(()) }
/// ```
pub fn offline_model() -> Model {
    Model::new(Offline)
}

//! Reading one item of a model's stream, for the request's first words (`attempt.rs`) and on
//! from there (`stream.rs`): decoded by the layer (a panic in its decoder fails the request),
//! within the turn's deadline.

use std::time::Duration;

use super::failure::{RequestError, layer_code};
use crate::model::ModelError;
use crate::model::history::Chunk;
use crate::model::layer::{Decoder, Layer};
use crate::model::sse::SseItem;
use crate::voice::bounds::Tripped;

/// What one read from the stream gave.
pub(super) enum Read {
    /// The chunks of one event; the stream goes on.
    Chunks(Vec<Chunk>),
    /// The chunks the decoder still held when the stream ended: the last.
    Last(Vec<Chunk>),
    /// The response passed the bytes a response may take: it is cut there.
    Cut(Tripped),
}

/// Decodes what one read from the stream gave (a panic in the layer's decoder fails the request).
///
/// # Errors
/// A failed read, or an event (or the stream's end) the decoder cannot read.
pub(super) fn decode(
    layer: &dyn Layer,
    decoder: &mut dyn Decoder,
    next: Option<Result<SseItem, ModelError>>,
) -> Result<Read, RequestError> {
    let provider = layer.provider();
    match next {
        Some(Ok(item)) => Ok(Read::Chunks(layer_code(
            provider,
            "decoding the stream",
            || decoder.item(item),
        )?)),
        Some(Err(ModelError::ResponseTooLarge { limit })) => {
            Ok(Read::Cut(Tripped::ResponseBytes(limit)))
        }
        Some(Err(e)) => Err(e.into()),
        None => Ok(Read::Last(layer_code(
            provider,
            "ending the stream",
            || decoder.end(),
        )?)),
    }
}

/// Waits for `future` until the turn's `deadline`.
pub(super) async fn before<T>(
    deadline: tokio::time::Instant,
    limit: Duration,
    future: impl Future<Output = T>,
) -> Result<T, RequestError> {
    if tokio::time::Instant::now() >= deadline {
        return Err(RequestError::Deadline(limit));
    }
    tokio::time::timeout_at(deadline, future)
        .await
        .map_err(|_| RequestError::Deadline(limit))
}

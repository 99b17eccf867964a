//! What goes wrong inside a provider's stream ([`StreamError`]), and the constructors every layer
//! builds one with: a provider's reported error (its message bounded in bytes), a malformed event,
//! a request that cannot be built. The bottom of `model`: it uses none of its other files.

use serde_json::Value;

/// What went wrong inside a provider's stream (a failure at the HTTP level, such as a refused
/// connection, an error status, a timeout or a response past its size limit, is the transport's
/// and none of these).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The provider reported an error inside the stream (an `error` event, `response.failed`, a
    /// Gemini `{"error": ..}` chunk or bare body).
    #[error("{provider} reported an error: {message}")]
    Provider {
        /// `google`, `openai`, or the chat route's company.
        provider: String,
        /// The provider's message (status and code included when given), at most 1 KiB of it.
        message: String,
    },
    /// An event that is not the JSON the provider documents.
    #[error("malformed {provider} event")]
    Malformed {
        /// The provider.
        provider: String,
        /// Why it did not parse.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The stream ended before the provider's terminal event.
    #[error("the {provider} stream ended before its {expected}")]
    Truncated {
        /// The provider.
        provider: String,
        /// The event that never came, such as `finishReason` or `[DONE]`.
        expected: &'static str,
    },
    /// The request could not be built (the history or the tool choice is one the provider
    /// cannot express).
    #[error("could not build the {provider} request: {why}")]
    Unbuildable {
        /// The provider.
        provider: String,
        /// Why.
        why: String,
    },
}

impl StreamError {
    /// [`StreamError::Provider`]: `provider` reported `message` (cut to 1 KiB).
    pub fn provider(provider: &str, message: impl Into<String>) -> StreamError {
        provider_error(provider, message.into())
    }

    /// [`StreamError::Malformed`], from why the event did not parse.
    pub fn malformed(
        provider: &str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StreamError {
        StreamError::Malformed {
            provider: provider.to_owned(),
            source: source.into(),
        }
    }

    /// [`StreamError::Truncated`]: the stream ended before `expected`, its terminal event.
    pub fn truncated(provider: &str, expected: &'static str) -> StreamError {
        StreamError::Truncated {
            provider: provider.to_owned(),
            expected,
        }
    }

    /// [`StreamError::Unbuildable`]: the request cannot be built, because `why`.
    pub fn unbuildable(provider: &str, why: impl Into<String>) -> StreamError {
        build_error(provider, why)
    }
}

/// A [`StreamError::Unbuildable`].
pub(crate) fn build_error(provider: &str, why: impl Into<String>) -> StreamError {
    StreamError::Unbuildable {
        provider: provider.to_owned(),
        why: why.into(),
    }
}

/// A [`StreamError::Malformed`] from a parse error.
pub(crate) fn malformed(provider: &str, source: serde_json::Error) -> StreamError {
    StreamError::malformed(provider, source)
}

/// A [`StreamError::Malformed`] for JSON that parsed but is not the documented shape.
pub(crate) fn malformed_shape(provider: &str, why: &str) -> StreamError {
    malformed(
        provider,
        <serde_json::Error as serde::de::Error>::custom(why),
    )
}

/// A provider error object (`{"code", "message", "status"|"type"}`) as one line:
/// `message (status, code)`, leaving out what is absent.
pub(crate) fn error_message(error: &Value) -> String {
    let Some(obj) = error.as_object() else {
        return match error {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    };
    let field = |k: &str| match obj.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let message = field("message").unwrap_or_else(|| error.to_string());
    let tags: Vec<String> = ["status", "type", "code"]
        .into_iter()
        .filter_map(field)
        .collect();
    if tags.is_empty() {
        message
    } else {
        format!("{message} ({})", tags.join(", "))
    }
}

/// How much of a provider's error message a [`StreamError::Provider`] keeps, in bytes (1 KiB):
/// enough for any real message, bounded whatever a provider sends.
pub(crate) const ERROR_MESSAGE_BYTES: usize = 1024;

/// A [`StreamError::Provider`], its message cut to [`ERROR_MESSAGE_BYTES`].
pub(crate) fn provider_error(provider: &str, message: String) -> StreamError {
    let message = if message.len() > ERROR_MESSAGE_BYTES {
        crate::tools::shortened_to(&message, ERROR_MESSAGE_BYTES)
    } else {
        message
    };
    StreamError::Provider {
        provider: provider.to_owned(),
        message,
    }
}

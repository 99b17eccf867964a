//! Where a layer's requests go and how they are let in: the URL and fixed headers, a bearer token
//! asked for before each request (rotating credentials: Vertex AI, Azure Entra ID), and
//! [`HttpOptions`] (an HTTP proxy, extra root certificates, extra headers).

use std::sync::Arc;

use super::body::body_bytes;
use super::http::HttpRequest;
use super::http_options::HttpOptions;
use super::layer::StreamError;
use super::render::{LayerError, build_error, check_header};

/// The setters every layer builder shares, on fields of the same names: `timeouts` and `http`,
/// and with `bearer` the bearer token source too.
macro_rules! reach_setters {
    () => {
        /// Connect, first-byte and between-event timeouts.
        #[must_use]
        pub fn timeouts(mut self, timeouts: $crate::model::Timeouts) -> Self {
            self.timeouts = timeouts;
            self
        }

        /// A proxy, extra root certificates, extra headers ([`HttpOptions`](crate::model::HttpOptions)).
        #[must_use]
        pub fn http(mut self, options: $crate::model::HttpOptions) -> Self {
            self.http = options;
            self
        }
    };
    (bearer) => {
        $crate::model::endpoint::reach_setters!();

        /// A bearer token source, called before each request and sent as `Authorization:
        /// Bearer` (Vertex AI, Azure Entra ID, a gateway); it replaces the API key. Keep it fast:
        /// return the current token, refreshed by a task of your own. A token a header cannot
        /// carry fails that request, which is never sent.
        #[must_use]
        pub fn bearer(mut self, token: impl Fn() -> String + Send + Sync + 'static) -> Self {
            self.bearer = Some(std::sync::Arc::new(token));
            self
        }
    };
}
pub(crate) use reach_setters;

/// A bearer token asked for before each request.
pub(crate) type TokenFn = Arc<dyn Fn() -> String + Send + Sync>;

/// Where one layer's requests go: built and checked by its builder, used on every request.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// What the session warms, and errors name.
    pub base_url: String,
    /// The full URL of a model request. Set only by [`new`](Self::new), which parses it into
    /// `parsed`: the two must not part.
    pub url: String,
    /// `url` parsed once (`None` if it does not parse: the request then fails as it is sent):
    /// the HTTP client would parse the text again on every request.
    parsed: Option<reqwest::Url>,
    /// Fixed headers: content type, a fixed key, the layer's own, then the options' extra ones.
    pub headers: Arc<[(String, String)]>,
    /// Sent as `Authorization: Bearer <token>`, asked for per request.
    pub bearer: Option<TokenFn>,
    /// The options the transport uses (a proxy, extra roots), when any.
    pub http: Option<HttpOptions>,
}

impl Endpoint {
    /// An endpoint at `url` (under `base_url`) with `headers` and then the options' headers.
    ///
    /// # Errors
    /// An option that does not check ([`HttpOptions::check`]).
    pub(crate) fn new(
        base_url: String,
        url: String,
        mut headers: Vec<(String, String)>,
        bearer: Option<TokenFn>,
        http: HttpOptions,
    ) -> Result<Endpoint, LayerError> {
        http.check()?;
        for (name, _) in http.headers() {
            let taken = headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(name))
                || (bearer.is_some() && name.eq_ignore_ascii_case("authorization"));
            if taken {
                return Err(LayerError::BadHttpOption {
                    what: "header",
                    why: format!("{name} is set by the layer itself"),
                });
            }
        }
        headers.extend(http.headers().iter().cloned());
        Ok(Endpoint {
            base_url,
            parsed: reqwest::Url::parse(&url).ok(),
            url,
            headers: headers.into(),
            bearer,
            http: (http != HttpOptions::default()).then_some(http),
        })
    }

    /// The request of `body` (a `Value`, or a [`Json`](super::body::Json) borrowing the
    /// history), with a fresh bearer token when the endpoint has a source.
    ///
    /// # Errors
    /// A token a header cannot carry, or a body that does not serialise (neither can happen to
    /// JSON, whose keys are strings) ([`StreamError::Unbuildable`]): the request is not sent.
    pub(crate) fn request(
        &self,
        provider: &str,
        body: &impl serde::Serialize,
    ) -> Result<HttpRequest, StreamError> {
        let body = body_bytes(body)
            .map_err(|e| build_error(provider, format!("the body did not serialise: {e}")))?;
        self.request_of(provider, body)
    }

    /// The request of a body already serialised, as [`request`](Self::request).
    ///
    /// # Errors
    /// A token a header cannot carry ([`StreamError::Unbuildable`]): the request is not sent.
    pub(crate) fn request_of(
        &self,
        provider: &str,
        body: bytes::Bytes,
    ) -> Result<HttpRequest, StreamError> {
        let mut headers = Arc::clone(&self.headers);
        if let Some(token) = &self.bearer {
            let token = token();
            // A bearer token is one word (RFC 6750's token68): no spaces either.
            if check_header("the layer", "bearer token", &token).is_err() || token.contains(' ') {
                return Err(build_error(
                    provider,
                    "the bearer token source gave a token a header cannot carry (empty, or \
                     with spaces or control characters)",
                ));
            }
            let mut with_token = Vec::with_capacity(self.headers.len() + 1);
            with_token.extend(self.headers.iter().cloned());
            with_token.push(("authorization".to_owned(), format!("Bearer {token}")));
            headers = with_token.into();
        }
        Ok(HttpRequest {
            url: self.url.clone(),
            parsed: self.parsed.clone(),
            headers,
            body,
        })
    }
}

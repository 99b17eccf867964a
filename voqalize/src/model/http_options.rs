//! [`HttpOptions`]: what a company's network needs of a layer's HTTP (an HTTP proxy, extra root
//! certificates, extra headers), checked when the layer is built and read by the HTTP client.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::render::{LayerError, check_header};

/// What a company's network needs of a layer's HTTP, without naming the HTTP crate: a proxy,
/// root certificates beyond the platform's (a TLS-inspecting proxy, a private gateway), and
/// headers sent with every request (a gateway's routing or tenant header). Checked when the
/// layer is built.
///
/// # Examples
/// ```
/// use voqalize::model::{Gemini, HttpOptions};
///
/// let http = HttpOptions::new()
///     .proxy("http://proxy.internal:3128")
///     .header("x-tenant", "voice");
/// let gemini = Gemini::builder("key").http(http).build()?;
/// # let _ = gemini;
/// # Ok::<(), voqalize::model::LayerError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HttpOptions {
    proxy: Option<String>,
    roots: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A proxy's credentials are not for logs.
        let proxy = self
            .proxy
            .as_deref()
            .map(|url| match url.split_once("://") {
                Some((scheme, rest)) if rest.split('/').next().is_some_and(|a| a.contains('@')) => {
                    let after = rest.split_once('@').map_or("", |(_, host)| host);
                    format!("{scheme}://<credentials>@{after}")
                }
                _ => url.to_owned(),
            });
        f.debug_struct("HttpOptions")
            .field("proxy", &proxy)
            .field("root_certificate_bytes", &self.roots.len())
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl HttpOptions {
    /// No proxy, the platform's roots, no extra header.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request of the layer goes through the proxy at `url` (`http://host:port`, with
    /// `user:password@` for basic auth); HTTPS is tunnelled through it with `CONNECT`.
    #[must_use]
    pub fn proxy(mut self, url: impl Into<String>) -> Self {
        self.proxy = Some(url.into());
        self
    }

    /// Trusts the certificates in `pem` (one or more `-----BEGIN CERTIFICATE-----` blocks) as
    /// roots, beside the platform's. Call again to add more.
    #[must_use]
    pub fn root_certificates_pem(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.roots.extend_from_slice(pem.as_ref());
        self.roots.push(b'\n');
        self
    }

    /// Sends `name: value` with every request, after the layer's own headers. A header the
    /// layer sets itself (its key, `content-type`, `authorization` beside a bearer source) or one
    /// the transport owns (`content-length`, `host`, `transfer-encoding`, `connection`...) is
    /// refused when the layer is built.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The extra headers, in order: what a layer of your own sends after its own.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Whether the transport needs a client of its own (a proxy or extra roots).
    pub(crate) fn custom_transport(&self) -> bool {
        self.proxy.is_some() || !self.roots.is_empty()
    }

    /// What tells two transports apart, for the client cache.
    pub(crate) fn transport_key(&self) -> u64 {
        let mut h = DefaultHasher::new();
        (&self.proxy, &self.roots).hash(&mut h);
        h.finish()
    }

    /// The proxy's URL, if any.
    pub(crate) fn proxy_url(&self) -> Option<&str> {
        self.proxy.as_deref()
    }

    /// The extra roots, parsed.
    ///
    /// # Errors
    /// PEM without a certificate, or a block that does not parse.
    pub(crate) fn root_certificates(
        &self,
    ) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        if self.roots.is_empty() {
            return Ok(Vec::new());
        }
        let certs = CertificateDer::pem_slice_iter(&self.roots)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the PEM does not parse: {e}"))?;
        if certs.is_empty() {
            return Err("the PEM holds no certificate".into());
        }
        Ok(certs)
    }

    /// Checks everything, once, when a layer is built (the built-in layers call it from their
    /// `build`; a layer of your own should too).
    ///
    /// # Errors
    /// [`LayerError::BadHttpOption`] naming the option and why: a proxy that is not
    /// `http(s)://[user:password@]host[:port]`, PEM without a certificate, a header name that is
    /// not a token, a value a header cannot carry, or a header the transport owns.
    pub fn check(&self) -> Result<(), LayerError> {
        let bad = |what: &'static str, why: String| LayerError::BadHttpOption { what, why };
        if let Some(url) = &self.proxy {
            check_proxy(url).map_err(|why| bad("proxy", why.to_owned()))?;
        }
        self.root_certificates()
            .map_err(|why| bad("root certificates", why))?;
        for (name, value) in &self.headers {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(bad("header", format!("{name:?} is not a header name")));
            }
            if TRANSPORT_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(bad(
                    "header",
                    format!("{name} is the transport's to send, not an option"),
                ));
            }
            check_header("the layer", "header value", value)
                .map_err(|e| bad("header", e.to_string()))?;
        }
        Ok(())
    }
}

/// Headers the HTTP transport writes itself: one given as an option would contradict it (a
/// `content-length` that cuts the body, leaving the rest on a pooled connection).
const TRANSPORT_HEADERS: [&str; 9] = [
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// A proxy URL: `http://` or `https://`, a host, an optional port and `user:password@`; no path
/// beyond `/`, no query.
fn check_proxy(url: &str) -> Result<(), &'static str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("it must start with http:// or https://")?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it holds whitespace");
    }
    let authority = rest.trim_end_matches('/');
    if authority.contains(['/', '?', '#']) {
        return Err("it must be a host and port, with no path or query");
    }
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() || host.starts_with(':') {
        return Err("it has no host");
    }
    Ok(())
}

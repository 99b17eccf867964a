//! Token verification for the direct leg (docs/protocol.md §5.1): RS256 only, `iss = "pygato"`, `aud`
//! containing `"brain"`, `exp` required and in the future, `iat`/`nbf` not in the future, zero leeway,
//! then `sub == session_id`. Keys are tried in order; the first key that validates decides.

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::HostError;

/// The production brain-token signer's public key (2048-bit RSA, e = 65537), trusted by default.
pub const PRODUCTION_PUBLIC_KEY: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAnZqkG9xDlyjo9ONJruEt
assF7hCeNeS42hGs4U1Z6mht/hWFQoCgK6/DlsRTo1aXvrpFvw7K0WlGZgVXgwm2
iLOeiL1TioqAPt/AW8vta/1coKPLHiRl7UrPL+t8sOgAT9PFhT7THq+G/NWJ6Pog
va/+edcyOsYsvUYTeWxOoVf2sI95NNgIzzvTPMcORAq7/FrlZdAChN6RjrT4Uzjj
t7YGwisdUH/pr52PTiXAEoGwQkut+KzK+prQ+FzLd7vxA4+CBdPNu0FQgs4Rir00
kHs+GpZL175nsEJJ01k+M2hl/atxfFgrFucrLPqEk2Tyydtl9j4aQsNCaUKXUZfw
2QIDAQAB
-----END PUBLIC KEY-----
";

/// Who may open sessions: a trust bundle of RSA public keys, or nobody checked at all.
#[derive(Clone)]
pub(crate) enum Verifier {
    Keys(Vec<DecodingKey>),
    Unverified,
}

/// Claims of a verified token; empty for an unverified (development) session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claims(pub Map<String, Value>);

impl Claims {
    fn text(&self, key: &str) -> Option<String> {
        match self.0.get(key)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::String(_) | Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// `tenant_id`, as text, when present and non-empty.
    pub fn tenant_id(&self) -> Option<String> {
        self.text("tenant_id")
    }

    /// `agent_id`, as text, when present and non-empty.
    pub fn agent_id(&self) -> Option<String> {
        self.text("agent_id")
    }
}

pub(crate) fn parse_key(pem: &str) -> Result<DecodingKey, HostError> {
    DecodingKey::from_rsa_pem(pem.as_bytes()).map_err(|e| HostError::BadKey(Box::new(e)))
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

impl Verifier {
    /// Checks `authorization` (a bare JWT or an `Authorization` header value with a
    /// case-insensitive `Bearer ` prefix) for `session_id`.
    ///
    /// # Errors
    /// [`HostError::Rejected`] on any failure; the reason is logged, never sent.
    pub(crate) fn verify(
        &self,
        authorization: Option<&str>,
        session_id: &str,
    ) -> Result<Claims, HostError> {
        let keys = match self {
            Verifier::Unverified => return Ok(Claims::default()),
            Verifier::Keys(keys) => keys,
        };
        let rejected = || HostError::Rejected {
            session_id: session_id.to_owned(),
        };
        let raw = authorization.unwrap_or("");
        let token = match raw.get(..7) {
            Some(p) if p.eq_ignore_ascii_case("bearer ") => raw[7..].trim(),
            _ => raw,
        };
        if token.is_empty() {
            tracing::warn!(
                "session: no token for {}",
                crate::logline::outside_n(session_id, 64)
            );
            return Err(rejected());
        }
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = 0;
        validation.validate_nbf = true;
        validation.set_issuer(&["pygato"]);
        validation.set_audience(&["brain"]);
        validation.set_required_spec_claims(&["exp", "aud", "iss"]);
        for key in keys {
            let Ok(data) = jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation)
            else {
                continue;
            };
            let claims = data.claims;
            // jsonwebtoken accepts `exp == now` (it rejects only `exp < now - leeway`); docs/protocol.md §5.1 wants
            // `exp` strictly in the future, as PyJWT checks (`int(exp) <= now` is expired).
            let now = now() as f64;
            if claims
                .get("exp")
                .and_then(Value::as_f64)
                .is_none_or(|exp| exp.trunc() <= now)
            {
                continue;
            }
            // `iat`, when present, must be a number not in the future (PyJWT rejects a non-numeric
            // `iat` too).
            if claims
                .get("iat")
                .is_some_and(|iat| iat.as_f64().is_none_or(|iat| iat.trunc() > now))
            {
                continue;
            }
            if claims.get("sub").and_then(Value::as_str) != Some(session_id) {
                tracing::warn!(
                    "session: token sub != session id for {}",
                    crate::logline::outside_n(session_id, 64)
                );
                return Err(rejected());
            }
            return Ok(Claims(claims));
        }
        tracing::warn!(
            "session: token for {} did not verify against any trusted key",
            crate::logline::outside_n(session_id, 64)
        );
        Err(rejected())
    }
}

#[cfg(test)]
mod tests {
    use crate::HostError;

    #[test]
    fn the_embedded_production_key_parses() {
        assert!(super::parse_key(super::PRODUCTION_PUBLIC_KEY).is_ok());
    }

    #[test]
    fn a_rejected_session_id_is_shown_clipped_and_escaped() {
        let id = format!("sess\n\u{202e}{}", "x".repeat(5_000));
        let shown = HostError::Rejected {
            session_id: id.clone(),
        }
        .to_string();
        assert!(
            !shown.contains('\n') && !shown.contains('\u{202e}'),
            "{shown}"
        );
        assert!(shown.len() < 400, "{} bytes", shown.len());
    }
}

//! [`TokenSigner`]: mints the RS256 tokens Voqalize sends on the upgrade, for tests.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Map, Value, json};

use voqalize::host::HostError;

/// Signs tokens with a test private key, with the claims Voqalize mints: `iss=pygato`,
/// `aud=brain`, `sub=<session id>`, `kind=pygato`, `agent_id`, `tenant_id`, `iat`, `exp = iat + 60 s`.
pub struct TokenSigner {
    key: EncodingKey,
}

impl TokenSigner {
    /// Reads an RSA private key (PKCS#8 `BEGIN PRIVATE KEY` or PKCS#1 `BEGIN RSA PRIVATE KEY`).
    ///
    /// # Errors
    /// [`HostError::BadKey`] when the PEM is not an RSA private key.
    pub fn from_pem(pem: &str) -> Result<Self, HostError> {
        let key = EncodingKey::from_rsa_pem(pem.as_bytes())
            .map_err(|e| HostError::BadKey(Box::new(e)))?;
        Ok(TokenSigner { key })
    }

    /// A token for `session_id`, valid for 60 s.
    ///
    /// # Panics
    /// If RSA signing fails with a key that parsed, which a test wants to hear about loudly.
    pub fn mint(&self, session_id: &str) -> String {
        let now = jsonwebtoken::get_current_timestamp();
        let claims = json!({
            "iss": "pygato",
            "aud": "brain",
            "sub": session_id,
            "kind": "pygato",
            "agent_id": "agent_test",
            "tenant_id": "tenant_test",
            "iat": now,
            "exp": now + 60,
        });
        let Value::Object(claims) = claims else {
            unreachable!("json!({{..}}) is an object")
        };
        self.sign(&claims)
            .unwrap_or_else(|e| panic!("signing with a parsed RSA key failed: {e}"))
    }

    /// A token with exactly these claims (to test rejections).
    ///
    /// # Errors
    /// [`SignError`] when the signature could not be made (not expected once the key parsed).
    pub fn sign(&self, claims: &Map<String, Value>) -> Result<String, SignError> {
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), claims, &self.key)
            .map_err(|e| SignError(Box::new(e)))
    }
}

/// Why [`TokenSigner::sign`] could not sign: the JWT library's error is its
/// [`source`](std::error::Error::source) (not named here, so its major version is not this
/// crate's).
#[derive(Debug, thiserror::Error)]
#[error("the token could not be signed")]
pub struct SignError(#[source] Box<dyn std::error::Error + Send + Sync>);

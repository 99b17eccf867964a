//! [`TokenSigner`]: mints the RS256 tokens Voqalize sends on the upgrade, for tests.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Map, Value, json};

use crate::host::HostError;

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
            .map_err(|e| HostError::BadKey(e.to_string()))?;
        Ok(TokenSigner { key })
    }

    /// A token for `session_id`, valid for 60 s.
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
        self.sign(claims.as_object().cloned().unwrap_or_default())
    }

    /// A token with exactly these claims (to test rejections).
    pub fn sign(&self, claims: Map<String, Value>) -> String {
        // Signing a JSON object with an RSA key cannot fail once the key parsed.
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key).unwrap_or_default()
    }
}

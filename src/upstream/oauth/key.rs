//! The private key of `private_key_jwt`: read, and tried by signing a test assertion with the
//! algorithm it will use (the configured one, else the one its type implies), so that a key
//! that cannot sign is found by `toolbroker check` and at start, not at the first token request.

use std::fs;

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use crate::domain::config::{
    Client, ClientAuth, ConfigError, Grant, PrivateKey, ServerSpec, SigningAlgorithm,
};

/// A key that signs, as PEM bytes, with its algorithm.
pub struct SigningKey {
    /// The PEM, as rmcp takes it.
    pub pem: Vec<u8>,
    /// The algorithm it signs with.
    pub algorithm: SigningAlgorithm,
}

/// Reads `key` and checks it signs; the error says why not.
pub fn load(key: &PrivateKey) -> Result<SigningKey, String> {
    let pem =
        fs::read(&key.file).map_err(|e| format!("cannot read {}: {e}", key.file.display()))?;
    let algorithm = match key.algorithm {
        Some(algorithm) => {
            signs(&pem, algorithm).map_err(|why| {
                format!(
                    "the key in {} cannot sign {algorithm}: {why}",
                    key.file.display()
                )
            })?;
            algorithm
        }
        None => [
            SigningAlgorithm::RS256,
            SigningAlgorithm::ES256,
            SigningAlgorithm::ES384,
        ]
        .into_iter()
        .find(|algorithm| signs(&pem, *algorithm).is_ok())
        .ok_or_else(|| {
            format!(
                "{} holds no RSA or EC (P-256, P-384) private key in PEM (PKCS#8, or PKCS#1 \
                 for RSA)",
                key.file.display()
            )
        })?,
    };
    Ok(SigningKey { pem, algorithm })
}

/// Whether `pem` signs a JWT with `algorithm`.
fn signs(pem: &[u8], algorithm: SigningAlgorithm) -> Result<(), String> {
    let key = if algorithm.is_rsa() {
        EncodingKey::from_rsa_pem(pem)
    } else {
        EncodingKey::from_ec_pem(pem)
    }
    .map_err(|e| e.to_string())?;
    let header = Header::new(jwt_algorithm(algorithm));
    jsonwebtoken::encode(&header, &serde_json::json!({"sub": "check"}), &key)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn jwt_algorithm(algorithm: SigningAlgorithm) -> Algorithm {
    match algorithm {
        SigningAlgorithm::RS256 => Algorithm::RS256,
        SigningAlgorithm::RS384 => Algorithm::RS384,
        SigningAlgorithm::RS512 => Algorithm::RS512,
        SigningAlgorithm::ES256 => Algorithm::ES256,
        SigningAlgorithm::ES384 => Algorithm::ES384,
    }
}

/// The same algorithm, as rmcp names it.
pub fn rmcp_algorithm(algorithm: SigningAlgorithm) -> rmcp::transport::auth::JwtSigningAlgorithm {
    use rmcp::transport::auth::JwtSigningAlgorithm as J;
    match algorithm {
        SigningAlgorithm::RS256 => J::RS256,
        SigningAlgorithm::RS384 => J::RS384,
        SigningAlgorithm::RS512 => J::RS512,
        SigningAlgorithm::ES256 => J::ES256,
        SigningAlgorithm::ES384 => J::ES384,
    }
}

/// Every `private_key_file` of `servers` that cannot be read or sign, as an error at the field
/// that names it.
pub fn check_all(servers: &[ServerSpec]) -> Vec<ConfigError> {
    servers
        .iter()
        .filter_map(|spec| match &spec.oauth.as_ref()?.grant {
            Grant::ClientCredentials(Client {
                auth: ClientAuth::PrivateKey(key),
                ..
            }) => load(key).err().map(|why| ConfigError::new(&key.at, why)),
            _ => None,
        })
        .collect()
}

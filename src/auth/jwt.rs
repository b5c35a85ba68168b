//! JWT callers: a bearer token verified locally against the issuer's JWKS (signature, `exp`
//! and `nbf` with 60 s of leeway, `iss`, `aud`; `alg: none` and HMAC refused), naming its
//! caller by a claim and granted tools by another. The JWKS comes from a file, or from a URL
//! fetched at start and again for a key id it does not know, at most once per
//! `jwks_refetch_interval`. The verification itself is jsonwebtoken's.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use base64::Engine as _;
use jsonwebtoken::{
    Algorithm, DecodingKey, Validation, decode, decode_header, errors::ErrorKind, jwk::JwkSet,
};
use serde_json::{Map, Value};

use crate::domain::{
    config::{ConfigError, JwksSource, JwtSpec},
    grants::Access,
    request_error::JwtFailure,
};

/// How late `exp` and how early `nbf` may be, for clocks that disagree.
const LEEWAY_SECS: u64 = 60;
/// How long a JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// What a verified JWT says.
pub struct Verified {
    /// The caller claim's value.
    pub id: String,
    /// Every claim.
    pub claims: Arc<Map<String, Value>>,
    /// The tools it is granted.
    pub access: Access,
}

/// Verifies JWTs as `auth.jwt` says.
pub struct JwtVerifier {
    spec: JwtSpec,
    keys: Keys,
}

/// The issuer's signing keys.
enum Keys {
    /// Read from a file (again on reload).
    File(Arc<JwkSet>),
    /// Fetched from a URL.
    Url(UrlKeys),
}

/// A JWKS fetched from a URL, and when it was last fetched (or tried).
struct UrlKeys {
    url: String,
    min_interval: Duration,
    client: reqwest::Client,
    current: Mutex<(Option<Arc<JwkSet>>, Option<Instant>)>,
    /// One fetch at a time: concurrent requests with an unknown key wait for it.
    fetching: tokio::sync::Mutex<()>,
}

impl JwtVerifier {
    /// The issuer tokens must name.
    pub fn issuer(&self) -> &str {
        &self.spec.issuer
    }

    /// A verifier for `spec`; a `jwks_file` is read now, and a problem with it is an error at
    /// `auth.jwt.jwks_file`.
    pub fn load(spec: &JwtSpec) -> Result<Self, ConfigError> {
        let keys = match &spec.keys {
            JwksSource::File(path) => {
                let field = "auth.jwt.jwks_file";
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::new(field, format!("cannot read {}: {e}", path.display()))
                })?;
                let set: JwkSet = serde_json::from_str(&text).map_err(|e| {
                    let reason = format!(
                        "{} is not a JWKS ({{\"keys\": [...]}}): {e}",
                        path.display()
                    );
                    ConfigError::new(field, reason)
                })?;
                Keys::File(Arc::new(set))
            }
            JwksSource::Url(url) => {
                crate::tls_provider::install();
                let client = reqwest::Client::builder()
                    .timeout(FETCH_TIMEOUT)
                    .build()
                    .map_err(|e| ConfigError::new("auth.jwt.jwks_url", e.to_string()))?;
                Keys::Url(UrlKeys {
                    url: url.clone(),
                    min_interval: spec.jwks_refetch_interval,
                    client,
                    current: Mutex::new((None, None)),
                    fetching: tokio::sync::Mutex::new(()),
                })
            }
        };
        Ok(Self {
            spec: spec.clone(),
            keys,
        })
    }

    /// Fetches a URL's JWKS now (at start), so that the first caller does not wait for it.
    pub async fn prefetch(&self) {
        if let Keys::Url(keys) = &self.keys
            && let Err(error) = keys.refetch().await
        {
            tracing::warn!(url = %keys.url, %error,
                "cannot fetch the JWKS; JWTs are refused until a fetch succeeds");
        }
    }

    /// Checks `token` and says whom it names and what it may use.
    pub async fn verify(&self, token: &str) -> Result<Verified, JwtFailure> {
        let alg = accepted_algorithm(token)?;
        let header = decode_header(token).map_err(|e| JwtFailure::Malformed(e.to_string()))?;
        let key = self.key(header.kid.as_deref()).await?;
        let mut validation = Validation::new(alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.spec.issuer]);
        validation.set_audience(&[&self.spec.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = decode::<Map<String, Value>>(token, &key, &validation).map_err(failure)?;
        let claims = data.claims;
        let id = match claims.get(&self.spec.caller_claim) {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            _ => return Err(JwtFailure::Claim(self.spec.caller_claim.clone())),
        };
        let values = self
            .spec
            .grants_claim
            .as_ref()
            .map(|claim| claim_values(claims.get(claim)))
            .unwrap_or_default();
        let access = Access::of_grants(self.spec.grants.as_deref(), &values);
        Ok(Verified {
            id,
            claims: Arc::new(claims),
            access,
        })
    }

    /// The key named `kid` (or the only key, when none is named); a URL's JWKS is fetched
    /// again for a key it does not have, at most once per interval.
    async fn key(&self, kid: Option<&str>) -> Result<DecodingKey, JwtFailure> {
        match &self.keys {
            Keys::File(set) => find(set, kid),
            Keys::Url(keys) => {
                if let Some(set) = keys.current()
                    && let Ok(key) = find(&set, kid)
                {
                    return Ok(key);
                }
                match keys.refetch_unless_recent().await {
                    Ok(set) => find(&set, kid),
                    Err(why) => Err(JwtFailure::KeysUnavailable(why)),
                }
            }
        }
    }
}

impl UrlKeys {
    fn current(&self) -> Option<Arc<JwkSet>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// A fresh JWKS, unless one was fetched (or tried) less than `min_interval` ago: then the
    /// one there is.
    async fn refetch_unless_recent(&self) -> Result<Arc<JwkSet>, String> {
        let _one_at_a_time = self.fetching.lock().await;
        let (set, last) = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if last.is_some_and(|at| at.elapsed() < self.min_interval) {
            return set.ok_or_else(|| {
                "the last fetch failed; the next is allowed after jwks_refetch_interval".into()
            });
        }
        self.refetch_locked().await
    }

    async fn refetch(&self) -> Result<Arc<JwkSet>, String> {
        let _one_at_a_time = self.fetching.lock().await;
        self.refetch_locked().await
    }

    async fn refetch_locked(&self) -> Result<Arc<JwkSet>, String> {
        let fetched = self.fetch().await;
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.1 = Some(Instant::now());
        let set = Arc::new(fetched?);
        tracing::info!(url = %self.url, keys = set.keys.len(), "JWKS fetched");
        current.0 = Some(set.clone());
        Ok(set)
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let response = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| format!("GET {}: {e}", self.url))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET {} answered HTTP {status}", self.url));
        }
        response
            .json::<JwkSet>()
            .await
            .map_err(|e| format!("{} is not a JWKS: {e}", self.url))
    }
}

/// The token's algorithm, if it is an accepted one: asymmetric signatures only. Read before
/// anything else, so that `none` and HMAC (with the public key as its secret) are refused as
/// such.
fn accepted_algorithm(token: &str) -> Result<Algorithm, JwtFailure> {
    let malformed = |why: &str| JwtFailure::Malformed(why.to_owned());
    let header = token
        .split('.')
        .next()
        .ok_or_else(|| malformed("no header"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .map_err(|_| malformed("the header is not base64url"))?;
    let header: Value =
        serde_json::from_slice(&bytes).map_err(|_| malformed("the header is not JSON"))?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("the header has no alg"))?;
    match alg {
        "RS256" => Ok(Algorithm::RS256),
        "RS384" => Ok(Algorithm::RS384),
        "RS512" => Ok(Algorithm::RS512),
        "PS256" => Ok(Algorithm::PS256),
        "PS384" => Ok(Algorithm::PS384),
        "PS512" => Ok(Algorithm::PS512),
        "ES256" => Ok(Algorithm::ES256),
        "ES384" => Ok(Algorithm::ES384),
        "EdDSA" => Ok(Algorithm::EdDSA),
        other => Err(JwtFailure::Algorithm(other.to_owned())),
    }
}

/// The key named `kid` in `set`, or its only key when `kid` is absent.
fn find(set: &JwkSet, kid: Option<&str>) -> Result<DecodingKey, JwtFailure> {
    let jwk = match kid {
        Some(kid) => set.find(kid),
        None if set.keys.len() == 1 => set.keys.first(),
        None => None,
    };
    let jwk = jwk.ok_or_else(|| JwtFailure::UnknownKey(kid.map(str::to_owned)))?;
    DecodingKey::from_jwk(jwk)
        .map_err(|e| JwtFailure::KeysUnavailable(format!("unusable key: {e}")))
}

/// Which check a jsonwebtoken error says failed.
fn failure(error: jsonwebtoken::errors::Error) -> JwtFailure {
    match error.kind() {
        ErrorKind::ExpiredSignature => JwtFailure::Expired,
        ErrorKind::ImmatureSignature => JwtFailure::NotYetValid,
        ErrorKind::InvalidIssuer => JwtFailure::Issuer,
        ErrorKind::InvalidAudience => JwtFailure::Audience,
        ErrorKind::InvalidSignature => JwtFailure::Signature,
        ErrorKind::InvalidAlgorithm => JwtFailure::Algorithm("not the key's".into()),
        ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => {
            JwtFailure::Claim(claim.clone())
        }
        _ => JwtFailure::Malformed(error.to_string()),
    }
}

/// A grants claim's values: a space-separated string (OAuth `scope`) or an array of strings.
fn claim_values(claim: Option<&Value>) -> Vec<String> {
    match claim {
        Some(Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether a bearer token has a JWT's shape (three base64url parts): only then is it verified
/// as one; anything else is looked up among the static tokens.
pub fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

//! RFC 8693 token exchange: a caller's token traded at the authorization server's token endpoint
//! for one meant for this server (client authentication by HTTP Basic), cached per caller and
//! subject token until 30 s before it expires (a day at most). The request and answer are typed structs sent
//! with reqwest.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::{
    caller::{CallerKey, CallerValues},
    config::TokenExchange,
    names::ServerName,
    request_error::RequestError,
    token_lifetime,
};

/// How long before its expiry an exchanged token is exchanged again.
const REFRESH_BEFORE: Duration = Duration::from_secs(30);
/// How long an exchange may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most cached tokens per server: expired ones are dropped when it is reached.
const MAX_CACHED: usize = 10_000;

const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The form of the exchange request (RFC 8693 §2.1).
#[derive(Serialize)]
struct ExchangeRequest<'a> {
    grant_type: &'static str,
    subject_token: &'a str,
    subject_token_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    audience: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<&'a str>,
}

/// A successful answer (RFC 8693 §2.2.1).
#[derive(Deserialize)]
struct ExchangeResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// An error answer (RFC 6749 §5.2).
#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Which caller's token, which subject token: a new subject token is exchanged anew.
#[derive(PartialEq, Eq, Hash)]
struct CacheKey {
    caller: CallerKey,
    subject: [u8; 32],
}

struct Cached {
    token: SecretString,
    until: Instant,
}

/// Exchanges callers' tokens for one server.
pub struct Exchanger {
    server: ServerName,
    spec: TokenExchange,
    client: reqwest::Client,
    cache: Mutex<HashMap<CacheKey, Cached>>,
}

impl Exchanger {
    /// An exchanger for `server` as `spec` says.
    pub fn new(server: ServerName, spec: TokenExchange) -> Self {
        crate::tls_provider::install();
        let client = reqwest::Client::builder()
            .timeout(EXCHANGE_TIMEOUT)
            // A 307 elsewhere would send the caller's token there again.
            .redirect(crate::upstream::transport::http::redirect_policy())
            .build()
            .expect("an HTTP client with ring as its TLS provider builds");
        Self {
            server,
            spec,
            client,
            cache: Mutex::default(),
        }
    }

    /// A token for this server on behalf of `caller`: cached, or exchanged now.
    pub async fn token(&self, caller: &dyn CallerValues) -> Result<SecretString, RequestError> {
        let subject = caller
            .token()
            .ok_or_else(|| RequestError::MissingCallerValue {
                server: self.server.clone(),
                missing: crate::domain::caller::MissingValue(
                    crate::domain::caller::CallerRef::Token,
                ),
            })?;
        let key = CacheKey {
            caller: caller.key().clone(),
            subject: Sha256::digest(subject.as_bytes()).into(),
        };
        if let Some(token) = self.cached(&key) {
            return Ok(token);
        }
        let (token, expires_in) = self.exchange(subject).await?;
        // A day at most, whatever the endpoint says: 2^64−1 seconds would overflow the clock.
        if let Some(lifetime) = expires_in
            .map(token_lifetime::from_expires_in)
            .and_then(|lifetime| lifetime.checked_sub(REFRESH_BEFORE))
        {
            self.remember(key, token.clone(), lifetime);
        }
        Ok(token)
    }

    fn cached(&self, key: &CacheKey) -> Option<SecretString> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = cache.get(key)?;
        (cached.until > Instant::now()).then(|| cached.token.clone())
    }

    fn remember(&self, key: CacheKey, token: SecretString, lifetime: Duration) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, cached| cached.until > now);
        }
        if cache.len() < MAX_CACHED {
            let until = Instant::now() + lifetime;
            cache.insert(key, Cached { token, until });
        }
    }

    /// One exchange: the token and its lifetime in seconds, if the server gave one.
    async fn exchange(&self, subject: &str) -> Result<(SecretString, Option<u64>), RequestError> {
        let unavailable = |reason: String| RequestError::ExchangeUnavailable {
            server: self.server.clone(),
            reason,
        };
        let form = ExchangeRequest {
            grant_type: GRANT_TYPE,
            subject_token: subject,
            subject_token_type: ACCESS_TOKEN_TYPE,
            audience: self.spec.audience.as_deref(),
            scope: self.spec.scope.as_deref(),
        };
        let response = self
            .client
            .post(&self.spec.token_url)
            .basic_auth(&self.spec.client_id, Some(self.spec.client_secret.expose()))
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                unavailable(crate::upstream::transport::explain::explain(&e).to_string())
            })?;
        let status = response.status();
        if status.is_client_error() {
            let refusal = response.json::<ErrorResponse>().await.ok();
            return Err(RequestError::ExchangeRefused {
                server: self.server.clone(),
                error: refusal
                    .as_ref()
                    .map_or_else(|| format!("HTTP {status}"), |r| r.error.clone()),
                description: refusal.and_then(|r| r.error_description),
            });
        }
        if !status.is_success() {
            return Err(unavailable(format!(
                "the token endpoint answered HTTP {status}"
            )));
        }
        let answer = response
            .json::<ExchangeResponse>()
            .await
            .map_err(|e| unavailable(format!("the token endpoint's answer is unusable: {e}")))?;
        if answer.access_token.is_empty() {
            return Err(unavailable(
                "the token endpoint gave an empty access_token".into(),
            ));
        }
        Ok((answer.access_token.into(), answer.expires_in))
    }
}

/// `Bearer <token>`, as a secret.
pub fn bearer(token: &SecretString) -> SecretString {
    format!("Bearer {}", token.expose_secret()).into()
}

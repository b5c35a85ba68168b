//! Who is calling: a static bearer token (compared in constant time, several at once for
//! rotation), a JWT verified against the issuer's JWKS, or a client certificate's identity
//! (its first URI SAN, DNS SAN or email SAN, else its subject CN); `anonymous` when auth is
//! off. Each caller comes with the tools it may use. The gate is
//! checked for every ToolBroker and reflection request (see `grpc::authenticate`); health
//! stays open for probes.

mod certificate;
mod jwt;
mod tokens;

use std::{
    borrow::Cow,
    sync::{Arc, PoisonError, RwLock},
};

use rustls::pki_types::CertificateDer;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use self::{jwt::JwtVerifier, tokens::StaticTokens};
use crate::domain::{
    caller::{CallerKey, CallerKind},
    config::{Auth, ConfigError},
    grants::Access,
    request_error::{AuthFailure, RequestError},
    views::Views,
};

/// A caller the gate let in: who it is, what it may use, and what it proved it with.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Who it is.
    pub key: CallerKey,
    /// The tools it may see and call.
    pub access: Access,
    /// The bearer token as received (for `${caller.token}` and token exchange).
    token: Option<SecretString>,
    /// Its JWT's claims.
    claims: Option<Arc<Map<String, Value>>>,
    /// The first kind of caller the config accepts (whose plain ids `${caller.id}` writes as
    /// they are).
    first_kind: CallerKind,
}

impl Caller {
    /// Anyone, when no auth is configured.
    pub fn anyone() -> Self {
        Self {
            key: CallerKey::anonymous(),
            access: Access::ALL,
            token: None,
            claims: None,
            first_kind: CallerKind::Anonymous,
        }
    }

    /// The first kind of caller the config accepts: see [`CallerValues::first_kind`].
    ///
    /// [`CallerValues::first_kind`]: crate::domain::caller::CallerValues::first_kind
    pub fn first_kind(&self) -> CallerKind {
        self.first_kind
    }

    /// A caller of `kind` named `id`, with `access`, no token and no claims (the gate sets
    /// its first kind).
    fn new(kind: CallerKind, id: String, access: Access) -> Self {
        Self {
            key: CallerKey { kind, id },
            access,
            token: None,
            claims: None,
            first_kind: CallerKind::Anonymous,
        }
    }

    /// Whether this caller may see and call the tool exposed as `name`.
    pub fn may_use(&self, name: &str) -> bool {
        self.access.may_use(name)
    }

    /// Whether this caller may see and get the prompt exposed as `name`.
    pub fn may_prompt(&self, name: &str) -> bool {
        self.access.may_prompt(name)
    }

    /// Whether this caller may list and read `server`'s resources.
    pub fn may_read(&self, server: &str) -> bool {
        self.access.may_read(server)
    }

    /// Whether it sees every tool.
    pub fn sees_all(&self) -> bool {
        self.access.sees_all()
    }

    /// The bearer token it sent.
    pub fn token(&self) -> Option<&str> {
        self.token.as_ref().map(ExposeSecret::expose_secret)
    }

    /// A claim of its JWT, as text: strings as they are, other values as JSON.
    pub fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.claims.as_ref()?.get(name)? {
            Value::String(text) => Some(Cow::Borrowed(text)),
            Value::Null => None,
            other => Some(Cow::Owned(other.to_string())),
        }
    }
}

/// What the gate checks, as loaded from the config (token files and a JWKS file read).
pub struct Credentials {
    tokens: StaticTokens,
    jwt: Option<JwtVerifier>,
    require_client_cert: bool,
    first_kind: CallerKind,
}

impl Credentials {
    /// Reads the token files and the JWKS file; every problem is an error at its field.
    pub fn load(auth: &Auth, views: &Views) -> Result<Self, Vec<ConfigError>> {
        let tokens = StaticTokens::load(&auth.tokens, views);
        let jwt = auth.jwt.as_ref().map(JwtVerifier::load).transpose();
        match (tokens, jwt) {
            (Ok(tokens), Ok(jwt)) => Ok(Self {
                tokens,
                jwt,
                require_client_cert: auth.client_ca.is_some(),
                first_kind: auth.first_kind(),
            }),
            (tokens, jwt) => {
                let mut errors = tokens.err().unwrap_or_default();
                errors.extend(jwt.err());
                Err(errors)
            }
        }
    }

    fn enabled(&self) -> bool {
        !self.tokens.is_empty() || self.jwt.is_some() || self.require_client_cert
    }
}

/// The current credentials; swapped whole on reload.
#[derive(Clone)]
pub struct Gate {
    current: Arc<RwLock<Arc<Credentials>>>,
}

impl Gate {
    /// A gate checking `credentials`.
    pub fn new(credentials: Credentials) -> Self {
        Self {
            current: Arc::new(RwLock::new(Arc::new(credentials))),
        }
    }

    /// Replaces the credentials (config reload).
    pub fn replace(&self, credentials: Credentials) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(credentials);
    }

    fn credentials(&self) -> Arc<Credentials> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The issuer of the JWTs callers present, when JWTs are configured (the MCP face names it
    /// as the authorization server in its protected-resource metadata).
    pub fn issuer(&self) -> Option<String> {
        Some(self.credentials().jwt.as_ref()?.issuer().to_owned())
    }

    /// Fetches a JWKS URL's keys now, so that the first caller does not wait for them.
    pub async fn prefetch(&self) {
        if let Some(jwt) = &self.credentials().jwt {
            jwt.prefetch().await;
        }
    }

    /// Who sends a request with these headers over a connection with these client
    /// certificates, or why it is refused.
    pub async fn admit(
        &self,
        headers: &http::HeaderMap,
        certs: Option<&[CertificateDer<'static>]>,
    ) -> Result<Caller, RequestError> {
        let credentials = self.credentials();
        if !credentials.enabled() {
            return Ok(Caller::anyone());
        }
        let mut caller = admit(&credentials, headers, certs)
            .await
            .map_err(RequestError::Unauthenticated)?;
        caller.first_kind = credentials.first_kind;
        Ok(caller)
    }
}

/// Checks a request's certificate, then its bearer token: a JWT when it looks like one and JWTs
/// are configured, else one of the static tokens. With only a client CA configured, the
/// certificate names the caller (and one that names no identity is refused).
async fn admit(
    credentials: &Credentials,
    headers: &http::HeaderMap,
    certs: Option<&[CertificateDer<'static>]>,
) -> Result<Caller, AuthFailure> {
    let cert = certs.and_then(|certs| certs.first());
    if credentials.require_client_cert && cert.is_none() {
        return Err(AuthFailure::ClientCertificateRequired);
    }
    if credentials.tokens.is_empty() && credentials.jwt.is_none() {
        let id = cert
            .and_then(certificate::identity)
            .ok_or(AuthFailure::NoCertificateIdentity)?;
        return Ok(Caller::new(CallerKind::Certificate, id, Access::ALL));
    }
    let presented = bearer(headers)?;
    if let Some(verifier) = &credentials.jwt
        && jwt::looks_like_jwt(presented)
    {
        let verified = verifier.verify(presented).await.map_err(AuthFailure::Jwt)?;
        return Ok(Caller {
            token: Some(presented.to_owned().into()),
            claims: Some(verified.claims),
            ..Caller::new(CallerKind::Jwt, verified.id, verified.access)
        });
    }
    let (name, access) = credentials
        .tokens
        .find(presented)
        .ok_or(AuthFailure::InvalidToken)?;
    Ok(Caller {
        token: Some(presented.to_owned().into()),
        ..Caller::new(CallerKind::Token, name.to_owned(), access.clone())
    })
}

/// The token of an `authorization: Bearer <token>` header.
fn bearer(headers: &http::HeaderMap) -> Result<&str, AuthFailure> {
    let value = headers
        .get(http::header::AUTHORIZATION)
        .ok_or(AuthFailure::MissingToken)?;
    value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or(AuthFailure::NotBearer)
}

/// The caller recorded by the gate (anyone when the request did not pass through it).
pub fn caller(extensions: &tonic::Extensions) -> Caller {
    extensions
        .get::<Caller>()
        .cloned()
        .unwrap_or_else(Caller::anyone)
}

#[cfg(test)]
mod tests;

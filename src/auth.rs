//! Who may call: bearer tokens (compared in constant time, several at once for rotation, each
//! optionally limited to some tools) and client certificates. The gate is checked by an
//! interceptor on the ToolBroker service; health stays open for probes.

use std::sync::{Arc, RwLock};

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::Request;
use wildmatch::WildMatch;

use crate::domain::{
    config::{Auth, ConfigError, TokenSource},
    request_error::{AuthFailure, RequestError},
};

/// A caller the gate let in, with the tools it may see and call.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name, or "anonymous" when auth is off.
    pub name: String,
    /// Exposed-name patterns it may use; empty = all.
    patterns: Arc<[WildMatch]>,
}

impl Caller {
    /// Anyone, when no auth is configured.
    pub fn anyone() -> Self {
        Self {
            name: "anonymous".into(),
            patterns: Arc::from([]),
        }
    }

    /// Whether this caller may see and call the tool exposed as `name`.
    pub fn may_use(&self, name: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches(name))
    }

    /// Whether it sees every tool (no per-token allow-list).
    pub fn sees_all(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// One accepted token: its SHA-256 (equal lengths, so comparing leaks no length), and whom it
/// stands for.
struct Token {
    digest: [u8; 32],
    caller: Caller,
}

/// What the gate checks, as loaded from the config (token files read).
pub struct Credentials {
    tokens: Vec<Token>,
    require_client_cert: bool,
}

impl Credentials {
    /// Reads token files; every unreadable or empty file is an error at its field.
    pub fn load(auth: &Auth) -> Result<Self, Vec<ConfigError>> {
        let mut tokens = Vec::with_capacity(auth.tokens.len());
        let mut errors = Vec::new();
        for (i, spec) in auth.tokens.iter().enumerate() {
            let value = match &spec.source {
                TokenSource::Value(value) => value.expose_secret().to_owned(),
                TokenSource::File(path) => match std::fs::read_to_string(path) {
                    Ok(text) if text.trim().is_empty() => {
                        let reason = format!("the token file {} is empty", path.display());
                        errors.push(ConfigError::new(token_file_field(i), reason));
                        continue;
                    }
                    Ok(text) => text.trim().to_owned(),
                    Err(e) => {
                        let reason = format!("cannot read token file {}: {e}", path.display());
                        errors.push(ConfigError::new(token_file_field(i), reason));
                        continue;
                    }
                },
            };
            let patterns: Vec<WildMatch> = spec.tools.iter().map(|p| WildMatch::new(p)).collect();
            tokens.push(Token {
                digest: Sha256::digest(value.as_bytes()).into(),
                caller: Caller {
                    name: spec.name.clone(),
                    patterns: patterns.into(),
                },
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Self {
            tokens,
            require_client_cert: auth.client_ca.is_some(),
        })
    }

    fn enabled(&self) -> bool {
        !self.tokens.is_empty() || self.require_client_cert
    }
}

/// Where token `i`'s file is configured.
fn token_file_field(i: usize) -> String {
    format!("auth.tokens[{i}].value_file")
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
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(credentials);
    }

    /// Lets a request in, recording who called in its extensions, or refuses it.
    pub fn check<T>(&self, mut request: Request<T>) -> Result<Request<T>, RequestError> {
        let credentials = self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let caller = if credentials.enabled() {
            admit(&credentials, &request)?
        } else {
            Caller::anyone()
        };
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

/// Checks a request's certificate and token.
fn admit<T>(credentials: &Credentials, request: &Request<T>) -> Result<Caller, RequestError> {
    let refuse = |failure| Err(RequestError::Unauthenticated(failure));
    if credentials.require_client_cert && !has_client_cert(request) {
        return refuse(AuthFailure::ClientCertificateRequired);
    }
    if credentials.tokens.is_empty() {
        return Ok(Caller {
            name: "client certificate".into(),
            patterns: Arc::from([]),
        });
    }
    let Some(value) = request.metadata().get("authorization") else {
        return refuse(AuthFailure::MissingToken);
    };
    let Some(presented) = value.to_str().ok().and_then(|v| {
        v.strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
    }) else {
        return refuse(AuthFailure::NotBearer);
    };
    let digest: [u8; 32] = Sha256::digest(presented.trim().as_bytes()).into();
    // Every token is compared, matched or not, so timing says nothing about which one matched.
    let mut found = None;
    for token in &credentials.tokens {
        if bool::from(token.digest.ct_eq(&digest)) && found.is_none() {
            found = Some(&token.caller);
        }
    }
    match found {
        Some(caller) => Ok(caller.clone()),
        None => refuse(AuthFailure::InvalidToken),
    }
}

/// Whether the TLS handshake verified a client certificate (rustls checked it against the CA;
/// clients without one may still connect, for health probes).
fn has_client_cert<T>(request: &Request<T>) -> bool {
    request.peer_certs().is_some_and(|certs| !certs.is_empty())
}

/// The caller recorded by the gate (anyone when the request did not pass through it).
pub fn caller<T>(request: &Request<T>) -> Caller {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or_else(Caller::anyone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::parse;

    fn gate(yaml: &str) -> Gate {
        let config = parse(yaml, &|name| (name == "T").then(|| "s3cret".to_owned())).unwrap();
        Gate::new(Credentials::load(&config.auth).unwrap())
    }

    fn with_token(token: Option<&str>) -> Request<()> {
        let mut request = Request::new(());
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("authorization", token.parse().unwrap());
        }
        request
    }

    #[test]
    fn tokens_are_checked() {
        let gate = gate("auth: {tokens: [{name: agent, value_env: T, tools: ['fs_*']}]}");
        let refused = |token| gate.check(with_token(token)).unwrap_err();
        let unauthenticated = RequestError::Unauthenticated;
        assert_eq!(refused(None), unauthenticated(AuthFailure::MissingToken));
        assert_eq!(
            refused(Some("Bearer wrong")),
            unauthenticated(AuthFailure::InvalidToken)
        );
        assert_eq!(
            refused(Some("Basic s3cret")),
            unauthenticated(AuthFailure::NotBearer)
        );
        let admitted = gate.check(with_token(Some("Bearer s3cret"))).unwrap();
        let caller = caller(&admitted);
        assert_eq!(caller.name, "agent");
        assert!(caller.may_use("fs_read") && !caller.may_use("shell_exec"));
    }

    #[test]
    fn without_auth_anyone_may_use_anything() {
        let gate = gate("servers: []");
        let caller = caller(&gate.check(with_token(None)).unwrap());
        assert!(caller.sees_all() && caller.may_use("anything"));
    }

    #[test]
    fn a_client_certificate_is_required_when_a_ca_is_configured() {
        let gate = gate("tls: {cert: c, key: k}\nauth: {client_ca: ca.pem}");
        let refused = gate.check(with_token(None)).unwrap_err();
        assert_eq!(
            refused,
            RequestError::Unauthenticated(AuthFailure::ClientCertificateRequired)
        );
    }
}

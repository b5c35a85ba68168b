//! What both HTTP transports share: the HTTP client (rustls with the system's root
//! certificates, no OpenSSL) and the configured headers.

use std::sync::{Arc, Once, PoisonError, RwLock};

use http::{HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;

use super::explain::explain;
use secrecy::SecretString;

use crate::domain::outcome::StartFailure;

/// Makes ring the process's TLS provider (reqwest and the OTLP exporter use the default one).
pub fn install_tls_provider() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Fails only if another provider was installed first, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The HTTP client for one server. TLS uses ring and the platform's root certificates.
pub fn client() -> Result<reqwest::Client, StartFailure> {
    install_tls_provider();
    reqwest::Client::builder()
        .build()
        .map_err(|e| StartFailure::HttpClient(explain(&e)))
}

/// The configured headers, their values marked sensitive so that no Debug output shows them.
pub fn headers(configured: &[(String, SecretString)]) -> Result<HeaderMap, StartFailure> {
    let mut map = HeaderMap::with_capacity(configured.len());
    for (name, value) in configured {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| StartFailure::BadHeaderName(name.clone()))?;
        let mut value = HeaderValue::try_from(value.expose_secret())
            .map_err(|_| StartFailure::BadHeaderValue(name.to_string()))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// The headers of one session, read for every request it sends: a per-caller session's are
/// replaced when its caller's values change (a new token), without a new session.
#[derive(Debug, Clone, Default)]
pub struct SharedHeaders(Arc<RwLock<HeaderMap>>);

impl SharedHeaders {
    /// Headers that start as `headers`.
    pub fn new(headers: HeaderMap) -> Self {
        Self(Arc::new(RwLock::new(headers)))
    }

    /// The headers now.
    pub fn get(&self) -> HeaderMap {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the headers when they differ; later requests send the new ones.
    pub fn set(&self, headers: HeaderMap) {
        if *self.0.read().unwrap_or_else(PoisonError::into_inner) != headers {
            *self.0.write().unwrap_or_else(PoisonError::into_inner) = headers;
        }
    }
}

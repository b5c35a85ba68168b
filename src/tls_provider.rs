//! The process's TLS provider: ring, installed once, before anything that uses rustls's default
//! (reqwest, the OTLP exporter, JWKS fetches). Its own module so that those places depend on it
//! rather than on each other.

use std::sync::Once;

/// Makes ring the process's TLS provider; later calls do nothing.
pub fn install() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Fails only if another provider was installed first, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

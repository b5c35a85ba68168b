//! The face's one `Origin` check, a layer around every route: a request from a browser page
//! (one with an `Origin` header) is served only if its origin is allowed, the loopback ones
//! or those of `mcp_allowed_origins`; any other gets 403 before anything else runs (the gate,
//! the calls answered directly, rmcp). On every address, as the MCP transport spec requires:
//! a page whose name was rebound to the face's address cannot use it. A request without
//! `Origin` (not from a browser) goes on.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse as _, Response},
};

use crate::domain::origin::{AllowedOrigin, is_allowed};

/// Browser origins always accepted: pages served from this machine.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// The origins the face accepts.
#[derive(Clone)]
pub struct Origins(Arc<Vec<AllowedOrigin>>);

impl Origins {
    /// The loopback origins and `configured`.
    pub fn new(configured: &[AllowedOrigin]) -> Self {
        let loopback = LOOPBACK_ORIGINS
            .iter()
            .map(|text| AllowedOrigin::parse(text).expect("the loopback origins are well-formed"));
        Self(Arc::new(
            loopback.chain(configured.iter().cloned()).collect(),
        ))
    }
}

/// Refuses a request whose `Origin` headers are not all allowed (403); passes the rest on.
pub async fn check(State(origins): State<Origins>, request: Request, next: Next) -> Response {
    let refused = request
        .headers()
        .get_all(header::ORIGIN)
        .iter()
        .find(|value| {
            !value
                .to_str()
                .is_ok_and(|text| is_allowed(&origins.0, text))
        });
    match refused {
        None => next.run(request).await,
        Some(origin) => {
            tracing::debug!(?origin, "MCP face request refused: origin not allowed");
            (
                StatusCode::FORBIDDEN,
                "Forbidden: Origin header is not allowed",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_origins_are_always_allowed_and_others_only_when_configured() {
        let configured = [AllowedOrigin::parse("https://app.example.com").unwrap()];
        let origins = Origins::new(&configured);
        for (origin, want) in [
            ("http://localhost:6274", true),
            ("https://127.0.0.1:8443", true),
            ("http://[::1]:3000", true),
            ("https://app.example.com", true),
            ("http://evil.example", false),
            ("http://localhost.evil.example", false),
            ("null", false),
        ] {
            assert_eq!(is_allowed(&origins.0, origin), want, "{origin}");
        }
    }
}

//! Finding a server's authorization server as the MCP authorization spec says: an
//! unauthenticated `initialize` draws the server's challenge (`WWW-Authenticate`, with its
//! `resource_metadata` and `scope`), and rmcp's discovery follows it — protected resource metadata
//! (RFC 9728, advertised or at the well-known paths), then authorization server metadata
//! (RFC 8414 and OpenID discovery, with the fallbacks of 2025-03-26).

use http::{HeaderMap, StatusCode, header::WWW_AUTHENTICATE};
use rmcp::{
    ClientHandler as _,
    transport::auth::{AuthorizationManager, AuthorizationMetadata},
};
use url::Url;

use super::failures::with_causes;
use crate::{
    domain::{names::ServerName, outcome::OAuthFailure},
    upstream::{
        session::client_handler::Handler, session::interactions::Interactions,
        transport::http::detect,
    },
};

/// What discovery found.
pub struct Discovered {
    /// A manager that knows the metadata (and the challenge's scope, for scope selection).
    pub manager: AuthorizationManager,
    /// The authorization server's metadata.
    pub metadata: AuthorizationMetadata,
}

/// The server's answer to an unauthenticated `initialize`: its challenge when it refused with
/// 401 (or 403), `None` when it let the request in (authorization is then asked for later).
pub async fn challenge(
    client: &reqwest::Client,
    url: &Url,
    headers: HeaderMap,
    server: &ServerName,
) -> Result<Option<String>, OAuthFailure> {
    let info = Handler::new(
        server.clone(),
        Default::default(),
        Interactions::new(false),
        Default::default(),
    )
    .get_info();
    let response = detect::probe(client, url, headers.clone(), info)
        .await
        .map_err(|e| OAuthFailure::Discovery(format!("POST {url}: {}", with_causes(&e))))?;
    let status = response.status();
    if status.is_success() {
        detect::end_probe_session(client, url, &headers, response.headers()).await;
        return Ok(None);
    }
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return Ok(None);
    }
    Ok(response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("bearer")
        })
        .map(str::to_owned))
}

/// Discovers the authorization server of the MCP server at `url`, seeded with `challenge`.
pub async fn discover(url: &Url, challenge: Option<String>) -> Result<Discovered, OAuthFailure> {
    let fail = |e: rmcp::transport::auth::AuthError| OAuthFailure::Discovery(with_causes(&e));
    let mut manager = manager(url).await.map_err(fail)?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(fail)?;
    if !resolution.source.is_discovered() {
        tracing::info!(%url, "no OAuth metadata found; using the 2025-03-26 default endpoints");
    }
    manager.set_metadata(resolution.metadata.clone());
    Ok(Discovered {
        manager,
        metadata: resolution.metadata,
    })
}

/// A manager for the server at `url`. The broker runs beside its servers: their authorization
/// servers may well have private addresses (loopback ones still need a loopback server URL).
pub async fn manager(url: &Url) -> Result<AuthorizationManager, rmcp::transport::auth::AuthError> {
    // rmcp builds its own reqwest client, which needs the process's TLS provider.
    crate::tls_provider::install();
    AuthorizationManager::new_allowing_private_addresses(url.as_str()).await
}

//! Who may use the MCP face: the broker's gate on every request to `/mcp` (401 with
//! `WWW-Authenticate: Bearer` naming the protected-resource metadata, as the MCP
//! authorization spec asks), and that metadata itself (RFC 9728), pointing at the JWT issuer
//! when one is configured.

use axum::{
    Json,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::json;

use crate::{auth::Gate, domain::request_error::RequestError};

/// The well-known name RFC 9728 §3.1 inserts before a resource's path to name where its
/// metadata is served: `/mcp`'s is at `/.well-known/oauth-protected-resource/mcp`.
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// The gate: a caller it admits goes on with its [`Caller`](crate::auth::Caller) in the
/// request's extensions; anyone else gets 401 and where to learn how to get a token.
pub async fn admit(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    match gate.admit(request.headers(), None).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => refused(request.headers(), request.uri().path(), &error),
    }
}

/// 401, with the challenge and the reason.
fn refused(headers: &HeaderMap, resource: &str, error: &RequestError) -> Response {
    let mut challenge = format!(
        r#"Bearer resource_metadata="{}{METADATA_PREFIX}{resource}""#,
        origin(headers)
    );
    if headers.contains_key(header::AUTHORIZATION) {
        challenge.push_str(r#", error="invalid_token""#);
    }
    let mut response = (StatusCode::UNAUTHORIZED, error.to_string()).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The protected-resource metadata of `/mcp` (or of a view's `/mcp/<view>`): the resource,
/// its authorization server (the JWT issuer, when JWTs are configured) and how tokens are sent.
pub async fn metadata(
    State(gate): State<Gate>,
    uri: Uri,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    let resource = match uri.path().strip_prefix(METADATA_PREFIX) {
        Some(path) if path.starts_with("/mcp") => path,
        _ => "/mcp",
    };
    let mut document = json!({
        "resource": format!("{}{resource}", origin(&headers)),
        "bearer_methods_supported": ["header"],
        "resource_name": "toolbroker",
    });
    if let Some(issuer) = gate.issuer() {
        document["authorization_servers"] = json!([issuer]);
    }
    Json(document)
}

/// `http://` and the host the client reached us by (the face serves plain HTTP; behind a
/// TLS-terminating proxy, `X-Forwarded-Proto` says so).
fn origin(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("localhost");
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
    {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}")
}

//! Who may use the MCP face: the broker's gate on every request to `/mcp` (401 with
//! `WWW-Authenticate: Bearer` naming the protected-resource metadata, as the MCP
//! authorization spec asks), and that metadata itself (RFC 9728), pointing at the JWT issuer
//! when one is configured.

use axum::{
    Json,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::json;

use crate::{auth::Gate, domain::request_error::RequestError};

/// Where the metadata of the resource at `/mcp` is served (RFC 9728 §3.1: the well-known
/// name inserted before the resource's path).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// The gate: a caller it admits goes on with its [`Caller`](crate::auth::Caller) in the
/// request's extensions; anyone else gets 401 and where to learn how to get a token.
pub async fn admit(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    match gate.admit(request.headers(), None).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => refused(request.headers(), &error),
    }
}

/// 401, with the challenge and the reason.
fn refused(headers: &HeaderMap, error: &RequestError) -> Response {
    let mut challenge = format!(
        r#"Bearer resource_metadata="{}{METADATA_PATH}""#,
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

/// The protected-resource metadata of `/mcp`: the resource, its authorization server (the
/// JWT issuer, when JWTs are configured) and how tokens are sent.
pub async fn metadata(State(gate): State<Gate>, headers: HeaderMap) -> Json<serde_json::Value> {
    let mut document = json!({
        "resource": format!("{}/mcp", origin(&headers)),
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

//! Who may use the MCP face: the broker's gate on every request to `/mcp` (401 with
//! `WWW-Authenticate: Bearer` naming the protected-resource metadata, as the MCP
//! authorization spec asks, and one audit line for the `tools/call`s of each request it
//! refuses), and that metadata itself (RFC 9728), pointing at the JWT issuer when one is
//! configured.

use std::time::Duration;

use axum::{
    Json,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::refused_calls;
use crate::{
    auth::Gate,
    core::audit::AuditLog,
    core::{
        broker::Broker,
        call_audit::{Draft, Pending},
    },
    domain::request_error::RequestError,
    telemetry::context::TraceHeaders,
};

/// The largest refused body read for its calls' audit lines: a larger one gets its 401 unread.
const MAX_REFUSED_BODY: usize = 1024 * 1024;

/// How long a refused body may take to arrive: a slower one gets its 401 with no audit line,
/// so that a client without credentials cannot hold the gate by sending slowly.
const REFUSED_BODY_DEADLINE: Duration = Duration::from_secs(5);

/// The gate's state: the credentials it checks, and where the calls it refuses are audited.
#[derive(Clone)]
pub struct Gatekeeper {
    /// Who is admitted.
    pub gate: Gate,
    /// The audit log, with the broker that names a refused tool's server; `None` without one.
    pub audit: Option<(AuditLog, Broker)>,
}

/// The well-known name RFC 9728 §3.1 inserts before a resource's path to name where its
/// metadata is served: `/mcp`'s is at `/.well-known/oauth-protected-resource/mcp`.
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// The gate: a caller it admits goes on with its [`Caller`](crate::auth::Caller) in the
/// request's extensions; anyone else gets 401 and where to learn how to get a token.
pub async fn admit(State(access): State<Gatekeeper>, mut request: Request, next: Next) -> Response {
    match access.gate.admit(request.headers(), None).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => {
            let response = refused(request.headers(), request.uri().path(), &error);
            if let Some((log, broker)) = &access.audit
                && request.method() == Method::POST
            {
                audit_refused(request, &error, log, broker).await;
            }
            response
        }
    }
}

/// One audit line for the `tools/call`s of a refused POST, written before the refusal is sent:
/// no caller, the gate's refusal as its code, the first call's tool and the trace of its
/// `_meta` or else of its `traceparent` header, and how many calls there were. Timed from when
/// its body has been read, as a refused `CallTool` is timed from when tonic has decoded it.
async fn audit_refused(request: Request, error: &RequestError, log: &AuditLog, broker: &Broker) {
    let headers = TraceHeaders::from_headers(request.headers());
    let Some(body) = refused_body(request.into_body()).await else {
        return;
    };
    let Some(calls) = refused_calls::tool_calls(&body) else {
        return;
    };
    drop(body);
    let call = calls.first;
    let trace_id = call
        .trace_id
        .or_else(|| headers.trace_id().map(str::to_owned));
    let arguments = log.with_arguments().then_some(call.arguments);
    let draft = Draft::of(None, call.tool, trace_id, arguments).times(calls.count);
    let pending = Pending {
        draft: Some(draft),
        audit: log,
        broker,
    };
    // A refusal stays a refusal, whether its line was written or not.
    let _ = pending.commit(Err(error)).settle(Ok(())).await;
}

/// A refused request's body, if it is small enough and arrives in time.
async fn refused_body(body: Body) -> Option<axum::body::Bytes> {
    let reading = axum::body::to_bytes(body, MAX_REFUSED_BODY);
    match tokio::time::timeout(REFUSED_BODY_DEADLINE, reading).await {
        Ok(Ok(body)) => Some(body),
        Ok(Err(error)) => {
            tracing::debug!(%error, "a refused request's body was not audited");
            None
        }
        Err(_) => {
            tracing::debug!("a refused request's body took too long; not audited");
            None
        }
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

//! The face's layer for sessions, after the gate: a request naming another caller's session
//! gets 404, as for one that does not exist; a POST that may open a session (it names none)
//! gets a place for it first (see [`session_caps`](super::session_caps)), or the refusal of
//! the cap that is full: 429 for the caller's, 503 for the face's, with a JSON-RPC error
//! naming the setting.

use std::sync::Arc;

use axum::{
    Json,
    extract::{Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use serde_json::json;

use super::{face_sessions::FaceSessions, session_caps::Full};
use crate::auth::Caller;

/// The header that names a request's session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Answers a request naming another caller's session 404, reserves a place for the session a
/// POST may open, and passes the rest on.
pub async fn bound(
    State(sessions): State<Arc<FaceSessions>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(caller) = request.extensions().get::<Caller>() else {
        return next.run(request).await;
    };
    let named = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok());
    match named {
        Some(id) if sessions.owners().of_another(id, &caller.key) => not_found(),
        Some(_) => next.run(request).await,
        None if request.method() == Method::POST => {
            let caller = caller.key.clone();
            match sessions.make_room(&caller).await {
                Ok(reservation) => reservation.serve(next, request).await,
                Err(full) => refused(full),
            }
        }
        None => next.run(request).await,
    }
}

/// What rmcp answers for a session it does not know.
fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// A new session refused: 429 when the caller's cap is full, 503 when the face's is, with a
/// JSON-RPC error that names the setting.
fn refused(full: Full) -> Response {
    let (status, setting, max, message) = match full {
        Full::Caller(max) => (
            StatusCode::TOO_MANY_REQUESTS,
            "mcp_sessions_per_caller",
            max,
            format!(
                "this caller has {max} MCP sessions open (mcp_sessions_per_caller) and none is \
                 idle; close one (DELETE) before opening another"
            ),
        ),
        Full::Face(max) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "mcp_max_sessions",
            max,
            format!(
                "the MCP face has {max} sessions open (mcp_max_sessions) and none is idle; try \
                 again later"
            ),
        ),
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": message, "data": {"limit": setting, "max": max}},
    });
    (status, Json(body)).into_response()
}

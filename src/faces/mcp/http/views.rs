//! `/mcp/<view>`: the face serving one view of the catalog. The view is checked on every
//! request (a reload may add or remove it) and rides the request to the server_handler, which binds
//! the caller to it.

use axum::{
    extract::{Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::request::FaceView;
use crate::core::broker::Broker;

/// Lets a request to `/mcp` through as it is, and one to `/mcp/<view>` with its view, if the
/// view exists; 404 naming the views there are if it does not.
pub async fn select(State(broker): State<Broker>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let view = path
        .strip_prefix("/mcp/")
        .map(|view| view.trim_end_matches('/'))
        .filter(|view| !view.is_empty());
    if let Some(view) = view {
        if let Err(error) = broker.snapshot().views.get(view) {
            return (StatusCode::NOT_FOUND, error.to_string()).into_response();
        }
        let view = FaceView(view.to_owned());
        request.extensions_mut().insert(view);
    }
    next.run(request).await
}

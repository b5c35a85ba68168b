//! The MCP face (issue 18, work in progress): the broker's catalog served as one MCP server over
//! streamable HTTP at `/mcp` (rmcp's server side), to MCP-native clients, behind the same auth
//! gate as the gRPC port. Tools, resources and prompts come from the broker; a `tools/call`
//! runs as a streaming broker call whose progress and questions are relayed to the client that
//! made it.

mod handler;

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{auth::Gate, broker::Broker};

pub use handler::Face;

/// Serves the MCP face on `addr` until `shutdown`; the address it listens on.
pub async fn start(
    addr: SocketAddr,
    broker: Broker,
    gate: Gate,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("mcp_listen: cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    // Host checks against DNS rebinding stay on for loopback; other addresses are reached by
    // other names.
    if !addr.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let face = Face::new(broker);
    let service = StreamableHttpService::new(
        move || Ok(face.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    let router = Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(gate, admit));
    tracing::info!(addr = %local, "MCP face listening at /mcp");
    tokio::spawn(async move {
        let serving =
            axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned());
        if let Err(error) = serving.await {
            tracing::error!(%error, "the MCP face failed");
        }
    });
    Ok(local)
}

/// The gate: a caller it admits goes on with its [`Caller`](crate::auth::Caller) in the
/// request's extensions; anyone else gets 401 with `WWW-Authenticate: Bearer`.
async fn admit(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    match gate.admit(request.headers(), None).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => {
            let mut refused = (StatusCode::UNAUTHORIZED, error.to_string()).into_response();
            refused
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            refused
        }
    }
}

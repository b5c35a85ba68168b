//! The demo server over HTTP: streamable HTTP at `/mcp` (rmcp's server transport) or legacy
//! HTTP+SSE at `/sse` + `/message` (ours), optionally behind a bearer token, until SIGINT or
//! SIGTERM.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context as _;
use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    serve::ListenerExt as _,
};
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{DemoOptions, DemoServer, legacy_sse};

/// How long open connections get to close after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The HTTP transports the demo server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpTransport {
    /// Streamable HTTP, at `/mcp`.
    StreamableHttp,
    /// Legacy HTTP+SSE (MCP 2024-11-05), at `/sse` with messages POSTed to `/message`.
    Sse,
}

/// Serves the demo server over HTTP on `listen` until SIGINT or SIGTERM. With `bearer`, every
/// request must carry `Authorization: Bearer <bearer>` or is refused with 401.
pub async fn serve_http(
    options: DemoOptions,
    transport: HttpTransport,
    listen: SocketAddr,
    bearer: Option<String>,
) -> anyhow::Result<()> {
    let server = DemoServer::new(options);
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    // Cancelled on SIGINT/SIGTERM: ends sessions and event streams, which graceful shutdown
    // would otherwise wait for forever.
    let stop = CancellationToken::new();
    let (router, path) = match transport {
        HttpTransport::StreamableHttp => (streamable(server.clone(), listen, &stop), "/mcp"),
        HttpTransport::Sse => (legacy_sse::router(server.clone(), stop.clone()), "/sse"),
    };
    let router = match bearer {
        Some(token) => router.layer(middleware::from_fn_with_state(token, require_bearer)),
        None => router,
    };
    // Tests and users read this line for the URL.
    tracing::info!(url = %format!("http://{addr}{path}"), "listening");
    // As the MCP face: an answer goes out in a few small writes, and without TCP_NODELAY the
    // client's delayed ACK holds the last one back ~40 ms on a kept-alive connection.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
    });
    let serving =
        axum::serve(listener, router).with_graceful_shutdown(stop.clone().cancelled_owned());
    let stopping = async {
        shutdown_signal().await;
        stop.cancel();
        server.stop_running_tools();
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = serving => served.context("the HTTP server failed")?,
        () = stopping => tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}; exiting"),
    }
    tracing::info!("demo server stopped");
    Ok(())
}

/// rmcp's streamable HTTP service with one session per client. Host checks (against DNS
/// rebinding) stay on for loopback listeners; a server listening on other addresses is meant to
/// be reached by other names.
fn streamable(server: DemoServer, listen: SocketAddr, stop: &CancellationToken) -> Router {
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    if !listen.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    Router::new().nest_service("/mcp", service)
}

/// Refuses requests without the expected bearer token, as an OAuth-protected server would.
async fn require_bearer(State(token): State<String>, request: Request, next: Next) -> Response {
    let expected = format!("Bearer {token}");
    let given = request.headers().get(header::AUTHORIZATION);
    if given.is_some_and(|value| value.as_bytes() == expected.as_bytes()) {
        return next.run(request).await;
    }
    let mut refused = (StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
    refused
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    refused
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

//! The MCP face: the broker's catalog served as one MCP server over streamable HTTP at `/mcp`
//! (rmcp's server side), and each view's subset at `/mcp/<view>`, to MCP-native clients,
//! behind the same auth gate as the gRPC port, to browser pages only from allowed origins,
//! with the sessions each caller and the face keep capped.
//! Tools, resources and prompts come from the broker; a `tools/call` runs as a streaming
//! broker call whose progress and questions are relayed to the client that made it.

mod access;
mod call;
mod changes;
mod direct_calls;
mod directory;
mod face_sessions;
mod listen_filter;
mod origins;
mod plain_request;
mod refused_calls;
mod relay;
mod request;
mod server_handler;
mod serving;
mod session;
mod session_access;
mod session_caps;
mod tasks;
mod tool_list;
mod views;

use std::{
    convert::Infallible,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use anyhow::Context as _;
use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::Method,
    middleware::{self, Next},
    response::Response,
    routing::get,
    serve::ListenerExt as _,
};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{
    auth::Gate,
    core::call_path::CallPath,
    core::in_flight::{Held, InFlight},
    domain::config::McpFace,
    net::{Admitted, ConnectionBudget, ListenerKind},
};

use direct_calls::DirectCalls;
use face_sessions::FaceSessions;
pub use server_handler::Face;

/// What the face serves from.
pub struct Parts {
    /// The path of every call: the broker, the calls in flight (which shutdown waits for)
    /// and the audit log.
    pub calls: CallPath,
    /// Who may call.
    pub gate: Gate,
    /// Cancelled when shutdown begins: new calls are refused.
    pub shutdown: CancellationToken,
    /// Cancelled when the calls in flight had their grace: the face and every client's
    /// session end.
    pub closing: CancellationToken,
    /// Allowed origins and session caps.
    pub settings: McpFace,
    /// Whether any auth is configured (without it, a face off loopback is open to its network).
    pub auth: bool,
    /// Open connections, shared with the gRPC listeners.
    pub budget: ConnectionBudget,
    /// A connection that has not sent a complete request head this long is closed.
    pub header_timeout: Duration,
}

/// Counts a request to `/mcp` as in flight until its response has been sent: shutdown waits
/// for those, and a `tools/call`'s answer rides its POST's response stream to the end.
async fn counted(State(in_flight): State<InFlight>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        // GET is the client's standing stream: it lasts as long as the session.
        return next.run(request).await;
    }
    let held = in_flight.hold();
    let response = next.run(request).await;
    response.map(|body| Body::new(HeldBody { body, _held: held }))
}

/// A response body that keeps its call counted in flight until it is dropped, with its length
/// as it was: hyper sends a body of known length with its headers in one write, where a
/// chunked one (a stream's) takes a second for its end.
struct HeldBody {
    body: Body,
    _held: Held,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// rmcp's config for a face listening on `local`: Host checks against DNS rebinding on
/// loopback (a face on another address is reached by names only its operator knows), and no
/// `Origin` check of rmcp's: the face's own layer checks it, on every address and every
/// request, those it answers itself included. A face beyond loopback without `auth` is
/// warned of.
fn rmcp_config(
    local: SocketAddr,
    auth: bool,
    closing: &CancellationToken,
) -> StreamableHttpServerConfig {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(closing.child_token())
        .disable_allowed_origins();
    if local.ip().is_loopback() {
        return config;
    }
    if !auth {
        tracing::warn!(addr = %local, "the MCP face listens beyond loopback WITHOUT auth: \
            anyone who can reach this address can call every tool; configure auth or listen \
            on 127.0.0.1");
    }
    config.disable_allowed_hosts()
}

/// Serves the MCP face on `addr` until `parts.closing`; the address it listens on.
pub async fn start(addr: SocketAddr, parts: Parts) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("mcp_listen: cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let closing = parts.closing.clone();
    let config = rmcp_config(local, parts.auth, &closing);
    let (budget, header_timeout) = (parts.budget.clone(), parts.header_timeout);
    let broker = parts.calls.broker().clone();
    let in_flight = parts.calls.in_flight().clone();
    let access = access::Gatekeeper {
        gate: parts.gate.clone(),
        audit: parts
            .calls
            .audit()
            .cloned()
            .map(|log| (log, broker.clone())),
    };
    let face = Face::new(parts.calls, parts.shutdown);
    let caps = session_caps::Caps {
        per_caller: parts.settings.sessions_per_caller,
        total: parts.settings.max_sessions,
    };
    let sessions = FaceSessions::new(face.directory.clone(), caps, closing.clone());
    let origins = origins::Origins::new(&parts.settings.allowed_origins);
    let listening = face.clone();
    let direct = DirectCalls {
        face: face.clone(),
        closing: closing.clone(),
        loopback: addr.ip().is_loopback(),
    };
    let rmcp_service =
        StreamableHttpService::new(move || Ok(face.for_session()), sessions.clone(), config);
    // Shared: axum clones a route's service for every request, and rmcp's clone copies its
    // whole config (host and origin lists) each time, even for the calls answered directly.
    let rmcp_service = Arc::new(rmcp_service);
    let service = tower::service_fn(move |request: Request| {
        let rmcp_service = rmcp_service.clone();
        async move { Ok::<_, Infallible>(rmcp_service.handle(request).await) }
    });
    let gate = parts.gate;
    // Layers run outside in: the origin (every route), counted, the gate, the session's
    // caller and caps, the view, the direct calls, then listens narrowed to their caller.
    let router = Router::new()
        .route_service("/mcp", service.clone())
        .route_service("/mcp/{view}", service)
        .layer(middleware::from_fn_with_state(
            listening,
            listen_filter::narrow,
        ))
        .layer(middleware::from_fn_with_state(
            direct,
            direct_calls::answer_directly,
        ))
        .layer(middleware::from_fn_with_state(broker, views::select))
        .layer(middleware::from_fn_with_state(
            sessions,
            session_access::bound,
        ))
        .layer(middleware::from_fn_with_state(access, access::admit))
        .layer(middleware::from_fn_with_state(in_flight, counted))
        .merge(
            Router::new()
                .route(access::METADATA_PREFIX, get(access::metadata))
                .route(
                    &format!("{}/mcp", access::METADATA_PREFIX),
                    get(access::metadata),
                )
                .route(
                    &format!("{}/mcp/{{view}}", access::METADATA_PREFIX),
                    get(access::metadata),
                )
                .with_state(gate),
        )
        .layer(middleware::from_fn_with_state(origins, origins::check));
    tracing::info!(addr = %local, "MCP face listening at /mcp");
    // An answer goes out in a few small writes (SSE events): without TCP_NODELAY, Nagle and
    // the client's delayed ACK hold the last one back ~40 ms on a kept-alive connection.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
    });
    let listener = Admitted::new(listener, budget, ListenerKind::McpFace);
    tokio::spawn(serving::serve(listener, router, header_timeout, closing));
    Ok(local)
}

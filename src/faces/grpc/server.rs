//! The assembled gRPC server: ToolBroker and the long-running Operations behind the auth gate, health (always open, for
//! probes), reflection (optional, behind the gate), message-size limits, and plaintext or TLS;
//! served on the TCP port and, when configured, on a Unix socket as well. Connections on both
//! come through the shared connection budget, with a deadline on their first request head.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use axum::serve::ListenerExt as _;
use futures::TryStreamExt as _;
use http::HeaderValue;
use tokio::{
    net::{TcpListener, UnixListener},
    time::Instant,
};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic_health::pb::health_server::{Health, HealthServer};

use super::{
    authenticate::Authenticated, broker_service::BrokerService, first_message::FirstMessage,
    observe, operations::OperationsService, pre_encoded::PassThrough, status::to_status,
};
use crate::{
    auth::Gate,
    domain::{config::Limits, request_error::RequestError},
    foreign_errors,
    http2::{
        batched_writes::BatchedWrites,
        socket_authority::{self, LocalAuthority},
    },
    net::{Admitted, ConnectionBudget, ListenerKind},
    proto,
    proto::google::longrunning::operations_server::OperationsServer,
    proto::tool_broker_server::ToolBrokerServer,
    tls,
};

/// What the server is built from.
pub struct Parts<H: Health> {
    /// The ToolBroker service.
    pub service: Arc<BrokerService>,
    /// The health service.
    pub health: HealthServer<H>,
    /// Who may call.
    pub gate: Gate,
    /// Whether reflection is served.
    pub reflection: bool,
    /// Message size limits, and the connections' (streams, the time to a first head).
    pub limits: Limits,
    /// Open connections, shared with the MCP face.
    pub budget: ConnectionBudget,
    /// TLS, when configured.
    pub tls: Option<TlsAcceptor>,
    /// Connections older than this are closed gracefully (GOAWAY), so that clients behind an
    /// L4 load balancer reconnect and spread over the replicas; `None` = never.
    pub max_connection_age: Option<Duration>,
    /// How long calls and streams may run on after that; `None` = until they end.
    pub max_connection_age_grace: Option<Duration>,
}

/// Serves on `listener` (and on `unix`, plaintext, with the same services and gate) until
/// `closing` (which shutdown cancels once calls in flight are done, so that calls arriving
/// while draining get an explicit UNAVAILABLE rather than a closed connection).
pub async fn serve<H: Health>(
    parts: Parts<H>,
    listener: TcpListener,
    unix: Option<UnixListener>,
    closing: CancellationToken,
) -> anyhow::Result<()> {
    let gate = parts.gate.clone();
    let operations = OperationsServer::new(OperationsService(parts.service.clone()))
        .max_decoding_message_size(parts.limits.max_request_bytes);
    let broker = ToolBrokerServer::new(parts.service)
        .max_decoding_message_size(parts.limits.max_request_bytes)
        // Our own check (with a clear message) runs first; this is a backstop.
        .max_encoding_message_size(parts.limits.max_response_bytes.saturating_mul(2));
    let (v1, v1alpha) = if parts.reflection {
        (
            Some(reflection().build_v1()?),
            Some(reflection().build_v1alpha()?),
        )
    } else {
        (None, None)
    };
    // hyper's default, said here because the socket's authority mender holds clients to it too.
    let list = socket_authority::MAX_HEADER_LIST_SIZE;
    let connections = parts.limits.connections;
    let head_within = connections.header_timeout;
    let mut builder = Server::builder()
        .http2_max_header_list_size(list)
        .max_concurrent_streams(connections.max_concurrent_streams);
    if let Some(age) = parts.max_connection_age {
        builder = builder.max_connection_age(age);
    }
    if let Some(grace) = parts.max_connection_age_grace {
        builder = builder.max_connection_age_grace(grace);
    }
    let router = builder
        .trace_fn(observe::server_span)
        .layer(tower::util::MapResponseLayer::new(too_large_is_exhaustion))
        .layer(tower::layer::layer_fn(move |inner| {
            FirstMessage::new(inner, head_within)
        }))
        .add_service(Authenticated::new(PassThrough::new(broker), gate.clone()))
        .add_service(Authenticated::new(operations, gate.clone()))
        .add_service(parts.health)
        .add_optional_service(v1.map(|s| Authenticated::new(s, gate.clone())))
        .add_optional_service(v1alpha.map(|s| Authenticated::new(s, gate)));
    let on_socket = async {
        let Some(unix) = unix else {
            return Ok(());
        };
        let incoming = Admitted::new(unix, parts.budget.clone(), ListenerKind::UnixSocket)
            .incoming()
            // The deadline watches the bytes as the client sent them, before any mending.
            .map_ok(|stream| {
                let watched = stream.head_by(Instant::now() + head_within);
                BatchedWrites::new(LocalAuthority::new(watched))
            });
        let stop = closing.clone().cancelled_owned();
        let served = router.clone().serve_with_incoming_shutdown(incoming, stop);
        served
            .await
            .context("the gRPC server failed on its Unix socket")
    };
    let stop = closing.clone().cancelled_owned();
    let on_port = async {
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "TCP_NODELAY not set");
            }
        });
        let admitted = Admitted::new(listener, parts.budget.clone(), ListenerKind::Grpc);
        let served = match parts.tls {
            Some(acceptor) => {
                let incoming = tls::incoming(admitted, acceptor, head_within, closing.clone())
                    .map_ok(BatchedWrites::new);
                router
                    .clone()
                    .serve_with_incoming_shutdown(incoming, stop)
                    .await
            }
            None => {
                let incoming = admitted
                    .incoming()
                    .map_ok(|tcp| BatchedWrites::new(tcp.head_by(Instant::now() + head_within)));
                router
                    .clone()
                    .serve_with_incoming_shutdown(incoming, stop)
                    .await
            }
        };
        served.context("the gRPC server failed")
    };
    tokio::try_join!(on_port, on_socket).map(|_| ())
}

/// Reflection describes our service and health (grpcurl needs both to be describable).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// tonic refuses an over-large request with OUT_OF_RANGE; the gRPC spec (and our contract)
/// says RESOURCE_EXHAUSTED. The refusal is a trailers-only response, so its status is in the
/// headers, where this rewrites it.
fn too_large_is_exhaustion<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let out_of_range = headers.get("grpc-status") == Some(&HeaderValue::from_static("11"));
    let too_large = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .is_some_and(foreign_errors::is_message_too_large);
    if out_of_range && too_large {
        let status = to_status(&RequestError::RequestTooLarge);
        headers.remove("grpc-message");
        let _ = status.add_header(headers);
    }
    response
}

//! Each RPC's span and duration: the server span (a child of the caller's trace context, read
//! from the request headers), its gRPC status, and the `rpc.server.call.duration` histogram.

use std::{future::Future, time::Instant};

use opentelemetry::trace::TraceContextExt as _;
use tonic::{Code, Response, Status};
use tracing::{Span, field};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::telemetry::{context::TraceHeaders, semconv};

/// The server span of one request: named `{service}/{method}` with the RPC semantic
/// conventions' attributes, parented on the caller's `traceparent`. Health checks and
/// reflection get none: probes every few seconds would bury the calls that matter.
pub fn server_span(request: &http::Request<()>) -> Span {
    let path = request.uri().path().trim_start_matches('/');
    let Some((service, method)) = path.split_once('/') else {
        return Span::none();
    };
    if !service.starts_with("toolbroker.") {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: "toolbroker::rpc",
        "rpc",
        otel.name = path,
        otel.kind = "server",
        otel.status_code = field::Empty,
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = field::Empty,
        trace_id = field::Empty,
        tool = field::Empty,
        server = field::Empty,
    );
    let caller = TraceHeaders::from_headers(request.headers());
    if caller.traceparent.is_some() {
        let _ = span.set_parent(caller.context());
    }
    let trace_id = span.context().span().span_context().trace_id();
    if trace_id != opentelemetry::trace::TraceId::INVALID {
        span.record("trace_id", field::display(trace_id));
    } else if let Some(id) = caller.trace_id() {
        span.record("trace_id", id);
    }
    span
}

/// Runs a handler, then records its status on the current (server) span and its duration.
pub async fn observe<T>(
    method: &'static str,
    handler: impl Future<Output = Result<Response<T>, Status>>,
) -> Result<Response<T>, Status> {
    let started = Instant::now();
    let result = handler.await;
    let code = match &result {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    };
    record(method, code, started);
    result
}

/// Records how an RPC that began at `started` ended: its status on the current (server) span
/// and its duration (for streams, whose end is not their handler's).
pub fn record(method: &'static str, code: Code, started: Instant) {
    let span = Span::current();
    span.record("rpc.grpc.status_code", code as i32);
    // The conventions count only these as server-side errors; the rest are the caller's.
    if matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    ) {
        span.record("otel.status_code", "ERROR");
    }
    metrics::histogram!(
        semconv::RPC_SERVER_CALL_DURATION,
        semconv::RPC_METHOD => method,
        semconv::RPC_GRPC_STATUS_CODE => format!("{code:?}"),
    )
    .record(started.elapsed().as_secs_f64());
}

//! The handle calls go through: one `tools/call` on a server's shared session, traced as an MCP
//! client span, measured, given up after its timeout, and cancelled on the server when the
//! caller goes away.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
        ClientRequest, RequestId, RequestMetaObject, ServerResult,
    },
    service::{Peer, PeerRequestOptions},
};
use serde_json::{Map, Value};
use tokio::sync::{Semaphore, SemaphorePermit};
use tracing::{Instrument as _, Span, field};

use super::{
    balance::{Replica, least_busy},
    classify,
    stdout_guard::{Fault, Verdict},
};
use crate::{
    domain::{
        call::CallError,
        config::Concurrency,
        names::{ServerName, ToolName},
    },
    telemetry::{self, context::TraceHeaders, semconv},
};

/// How much of the arguments and result a span records (with `record_arguments`).
const RECORDED_CHARS: usize = 1024;

/// A cheap, cloneable handle for calling the tools of one connected server. Calls share the
/// sessions of its ready replicas (one, unless `replicas` says more), multiplexed by request id.
#[derive(Clone, Debug)]
pub struct Upstream {
    pub(super) server: ServerName,
    /// The ready replicas' sessions (never empty); each call goes to the least busy.
    pub(super) replicas: Arc<[Replica]>,
    pub(super) timeout: Duration,
    /// What the client span says about the connection; replicas run the same program, so one
    /// replica's link describes them all.
    pub(super) link: Link,
    /// The server's call slots and queue, shared by its replicas.
    pub(super) slots: Arc<Slots>,
    /// `limits.max_result_bytes`, for messages.
    pub(super) max_result_bytes: usize,
}

/// Calls running on a server and calls waiting for a slot.
#[derive(Debug)]
pub struct Slots {
    running: Semaphore,
    waiting: AtomicUsize,
    limits: Concurrency,
}

impl Slots {
    /// Slots as the server's `concurrency` says.
    pub fn new(limits: Concurrency) -> Self {
        Self {
            running: Semaphore::new(limits.max_calls),
            waiting: AtomicUsize::new(0),
            limits,
        }
    }

    /// A slot at once, or after waiting in the queue; refused when the queue is full or the
    /// wait too long.
    async fn take(&self, server: &ServerName) -> Result<SemaphorePermit<'_>, CallError> {
        if let Ok(permit) = self.running.try_acquire() {
            return Ok(permit);
        }
        let limits = self.limits;
        let overloaded = |reason: String| CallError::Overloaded {
            server: server.clone(),
            reason,
        };
        let _waiting = Waiting::join(&self.waiting);
        if self.waiting.load(Ordering::Relaxed) > limits.max_queued {
            return Err(overloaded(format!(
                "the queue is full: {} running and {} waiting calls (max_concurrent_calls, max_queued_calls); retry later",
                limits.max_calls, limits.max_queued
            )));
        }
        match tokio::time::timeout(limits.queue_timeout, self.running.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => unreachable!("the semaphore is never closed"),
            Err(_) => Err(overloaded(format!(
                "no call slot freed up within {} (max_concurrent_calls {}, queue_timeout); retry later",
                humantime::format_duration(limits.queue_timeout),
                limits.max_calls
            ))),
        }
    }
}

/// Counts a call in the queue while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn join(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connection, as the MCP semantic conventions describe it.
#[derive(Clone, Debug)]
pub struct Link {
    /// `network.transport`: `pipe` for stdio, `tcp` for HTTP.
    pub network: &'static str,
    /// `server.address` and `server.port`, for HTTP.
    pub address: Option<(String, u16)>,
    /// `mcp.protocol.version`, as negotiated.
    pub protocol: String,
}

impl Upstream {
    /// The server's configured call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Calls `tool` and waits at most `timeout`. When the timeout passes or this future is
    /// dropped (the caller went away), the server is sent `notifications/cancelled`. The
    /// request carries the trace context of its client span (or the caller's, see
    /// [`TraceHeaders::for_request`]).
    pub async fn call(
        &self,
        tool: &ToolName,
        arguments: Map<String, Value>,
        timeout: Duration,
        trace: &TraceHeaders,
    ) -> Result<CallToolResult, CallError> {
        let span = self.client_span(tool);
        if telemetry::recording_arguments() {
            span.record(
                "gen_ai.tool.call.arguments",
                truncated(&Value::Object(arguments.clone())),
            );
        }
        let mut meta = RequestMetaObject::default();
        TraceHeaders::for_request(trace, &span).write_to(&mut meta);
        let params = CallToolRequestParams::new(tool.as_str().to_owned()).with_arguments(arguments);
        let started = Instant::now();
        let result = async {
            let _slot = self.slots.take(&self.server).await?;
            // The replica is chosen once a slot is free, so queued calls count nowhere.
            let replica = least_busy(&self.replicas).expect("a ready server has a replica");
            let _in_flight = InFlight::new(&self.server);
            let result = self.send(&replica, params, meta, timeout, &span).await;
            if let Err(CallError::SessionLost { .. }) = &result {
                replica.suspect.notify_one();
            }
            result.map_err(|error| self.blame_size(&replica, error))
        }
        .instrument(span.clone())
        .await;
        let error_type = match &result {
            Ok(result) if result.is_error == Some(true) => Some("tool_error"),
            Ok(_) => None,
            Err(error) => Some(error_kind(error)),
        };
        self.record(&span, tool, &result, error_type, started.elapsed());
        result
    }

    /// A session lost because the server's stream carried a result over the limit is the
    /// result's fault: say so (RESOURCE_EXHAUSTED), not just that the connection went.
    fn blame_size(&self, replica: &Replica, error: CallError) -> CallError {
        let too_long = replica
            .fault
            .as_ref()
            .and_then(Verdict::fault)
            .is_some_and(|fault| matches!(fault, Fault::TooLong(_)));
        match error {
            CallError::SessionLost { server, .. } if too_long => CallError::ResultTooLarge {
                server,
                limit: self.max_result_bytes,
                consequence: "the session was dropped and is being restarted",
            },
            other => other,
        }
    }

    /// The MCP client span, named `{mcp.method.name} {target}` as the MCP semantic conventions
    /// say (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/), with their attributes.
    fn client_span(&self, tool: &ToolName) -> Span {
        let span = tracing::info_span!(
            target: "toolbroker::mcp",
            "mcp",
            otel.name = format!("tools/call {tool}"),
            otel.kind = "client",
            otel.status_code = field::Empty,
            mcp.method.name = "tools/call",
            mcp.protocol.version = self.link.protocol.as_str(),
            jsonrpc.request.id = field::Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool.as_str(),
            gen_ai.tool.call.arguments = field::Empty,
            gen_ai.tool.call.result = field::Empty,
            network.transport = self.link.network,
            server.address = field::Empty,
            server.port = field::Empty,
            error.type = field::Empty,
            toolbroker.server = self.server.as_str(),
        );
        if let Some((host, port)) = &self.link.address {
            span.record("server.address", host.as_str());
            span.record("server.port", port);
        }
        span
    }

    /// Sends the request and waits for its answer; a guard cancels it on the server if this
    /// future is dropped or times out first.
    async fn send(
        &self,
        replica: &Replica,
        params: CallToolRequestParams,
        meta: RequestMetaObject,
        timeout: Duration,
        span: &Span,
    ) -> Result<CallToolResult, CallError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // Given as the request's meta (not the params'), rmcp merges it with its own keys.
        let options = PeerRequestOptions::no_options().with_meta(meta);
        let handle = replica
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| classify(&self.server, self.max_result_bytes, e))?;
        span.record("jsonrpc.request.id", field::display(&handle.id));
        let mut guard = CancelOnDrop::new(&replica.peer, handle.id.clone());
        let answer = match tokio::time::timeout(timeout, handle.await_response()).await {
            Ok(answer) => answer,
            Err(_) => {
                return Err(CallError::Timeout {
                    server: self.server.clone(),
                    after: timeout,
                });
            }
        };
        guard.disarm();
        match answer.map_err(|e| classify(&self.server, self.max_result_bytes, e))? {
            ServerResult::CallToolResult(result) => Ok(result),
            // Some servers answer a tool with no output with `{}`.
            ServerResult::EmptyResult(_) => Ok(CallToolResult::default()),
            _ => Err(CallError::BadResult {
                server: self.server.clone(),
                reason: "it answered tools/call with something other than a tool result".into(),
            }),
        }
    }

    /// Finishes the span and the `mcp.client.operation.duration` histogram.
    fn record(
        &self,
        span: &Span,
        tool: &ToolName,
        result: &Result<CallToolResult, CallError>,
        error_type: Option<&'static str>,
        elapsed: Duration,
    ) {
        if let Some(kind) = error_type {
            span.record("error.type", kind);
            span.record("otel.status_code", "ERROR");
        }
        if telemetry::recording_arguments()
            && let Ok(result) = result
            && let Ok(json) = serde_json::to_value(result)
        {
            span.record("gen_ai.tool.call.result", truncated(&json));
        }
        let mut labels = vec![
            (semconv::MCP_METHOD_NAME, "tools/call".to_owned()),
            (semconv::GEN_AI_TOOL_NAME, tool.to_string()),
            (semconv::SERVER, self.server.to_string()),
        ];
        if let Some(kind) = error_type {
            labels.push((semconv::ERROR_TYPE, kind.to_owned()));
        }
        metrics::histogram!(semconv::MCP_CLIENT_OPERATION_DURATION, &labels)
            .record(elapsed.as_secs_f64());
    }
}

/// `error.type` for a failed call: a low-cardinality class, as the conventions ask.
fn error_kind(error: &CallError) -> &'static str {
    match error {
        CallError::UnknownTool { .. } => "unknown_tool",
        CallError::InvalidArguments(_) => "invalid_arguments",
        CallError::NotReady { .. } => "not_ready",
        CallError::SessionLost { .. } => "session_lost",
        CallError::Timeout { .. } => "timeout",
        CallError::ServerError { .. } => "jsonrpc_error",
        CallError::BadResult { .. } => "bad_result",
        CallError::Overloaded { .. } => "overloaded",
        CallError::ResultTooLarge { .. } => "result_too_large",
    }
}

/// JSON text cut to `RECORDED_CHARS` characters.
fn truncated(value: &Value) -> String {
    let mut text = value.to_string();
    if let Some((cut, _)) = text.char_indices().nth(RECORDED_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Counts a call in `toolbroker_calls_in_flight` while it lives.
struct InFlight(metrics::Gauge);

impl InFlight {
    fn new(server: &ServerName) -> Self {
        let gauge =
            metrics::gauge!("toolbroker_calls_in_flight", semconv::SERVER => server.to_string());
        gauge.increment(1.0);
        Self(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Sends `notifications/cancelled` for a request whose answer nobody will read.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl CancelOnDrop {
    fn new(peer: &Peer<RoleClient>, id: RequestId) -> Self {
        Self {
            peer: peer.clone(),
            id: Some(id),
        }
    }

    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let reason = Some("the caller gave up (deadline or cancellation)".to_owned());
        // Drop cannot await; the notification goes out from a short task of its own.
        tokio::spawn(async move {
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                .await;
        });
    }
}

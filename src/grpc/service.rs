//! The `toolbroker.v1.ToolBroker` service: thin handlers that decode, ask the broker, encode.

use std::{
    pin::Pin,
    sync::Arc,
    time::{Instant, SystemTime},
};

use futures::{Stream, StreamExt as _};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::{
    authenticate::Refused,
    call_context::CallContext,
    convert, deadline,
    limit::ResponseLimit,
    observe::observe,
    status::to_status,
    tool_cache::ToolCache,
    visibility::Visibility,
    watch::{Feed, Watcher},
};
use crate::{
    audit::AuditLog,
    auth::{self, Caller},
    broker::Broker,
    domain::{
        audit::{AuditEntry, audited_arguments, milliseconds, timestamp},
        call::RawArguments,
        request_error::{Level, RequestError},
    },
    proto::{self, tool_broker_server::ToolBroker},
    telemetry::context::TraceHeaders,
};

/// The gRPC face of the broker.
pub struct BrokerService {
    broker: Broker,
    /// Cancelled at shutdown: new calls are refused and Watch streams end.
    shutdown: CancellationToken,
    limit: ResponseLimit,
    tools: Arc<ToolCache>,
    calls_in_flight: watch::Sender<usize>,
    audit: Option<AuditLog>,
}

/// What an audit line knows before the call runs.
struct Draft {
    ts: SystemTime,
    started: Instant,
    caller: Option<String>,
    tool: String,
    trace_id: Option<String>,
    arguments: Option<serde_json::Value>,
}

impl Draft {
    fn of(request: &Request<proto::CallToolRequest>, with_arguments: bool) -> Self {
        let call = request.get_ref();
        let extensions = request.extensions();
        let caller = match (extensions.get::<Refused>(), extensions.get::<Caller>()) {
            (Some(_), _) => None,
            (None, Some(caller)) => Some(caller.key.id.clone()),
            (None, None) => Some(Caller::anyone().key.id),
        };
        let arguments = with_arguments.then(|| {
            let sent = match &call.arguments {
                Some(structured) => convert::struct_to_json(structured.clone())
                    .map_or_else(|e| serde_json::Value::String(e.to_string()), Into::into),
                None if call.arguments_json.trim().is_empty() => serde_json::json!({}),
                None => serde_json::from_str(&call.arguments_json)
                    .unwrap_or_else(|_| serde_json::Value::String(call.arguments_json.clone())),
            };
            audited_arguments(sent)
        });
        Self {
            ts: SystemTime::now(),
            started: Instant::now(),
            caller,
            tool: call.name.clone(),
            trace_id: crate::telemetry::current_trace_id(request.metadata()),
            arguments,
        }
    }

    fn finish(
        self,
        result: Option<&Result<proto::CallToolResponse, RequestError>>,
        owner: impl FnOnce(&str) -> Option<String>,
    ) -> AuditEntry {
        let (code, is_error, server) = match result {
            Some(Ok(response)) => ("OK", response.is_error, Some(response.server.clone())),
            Some(Err(error)) => (code_name(error), false, owner(&self.tool)),
            // The caller went away (cancelled, or its deadline passed) before the answer.
            None => ("CANCELLED", false, owner(&self.tool)),
        };
        AuditEntry {
            ts: timestamp(self.ts),
            caller: self.caller,
            tool: self.tool,
            server,
            code,
            is_error,
            duration_ms: milliseconds(self.started.elapsed()),
            trace_id: self.trace_id,
            arguments: self.arguments,
        }
    }
}

/// An audit line still to be written: by [`Pending::finish`], or when dropped unfinished (the
/// caller went away and tonic dropped the call), as `CANCELLED`.
struct Pending<'a> {
    draft: Option<Draft>,
    audit: &'a AuditLog,
    broker: &'a Broker,
}

impl Pending<'_> {
    fn finish(mut self, result: &Result<proto::CallToolResponse, RequestError>) {
        if let Some(draft) = self.draft.take() {
            self.audit
                .record(draft.finish(Some(result), |tool| self.broker.owner(tool)));
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(draft) = self.draft.take() {
            self.audit
                .record(draft.finish(None, |tool| self.broker.owner(tool)));
        }
    }
}

/// The gRPC status name a refusal is answered with.
fn code_name(error: &RequestError) -> &'static str {
    use tonic::Code;
    match to_status(error).code() {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Counts a CallTool while it runs, so that shutdown can wait for the calls in flight.
struct CallInFlight<'a>(&'a watch::Sender<usize>);

impl<'a> CallInFlight<'a> {
    fn start(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count)
    }
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl BrokerService {
    /// A service over `broker`; `shutdown` refuses new calls and ends Watch streams; no
    /// response may exceed `max_response_bytes`; every call is recorded in `audit`, if on.
    pub fn new(
        broker: Broker,
        shutdown: CancellationToken,
        max_response_bytes: usize,
        audit: Option<AuditLog>,
    ) -> Self {
        Self {
            broker,
            shutdown,
            limit: ResponseLimit(max_response_bytes),
            tools: Arc::default(),
            calls_in_flight: watch::channel(0).0,
            audit,
        }
    }

    /// Resolves once no CallTool is running (new ones are refused once shutdown began).
    pub async fn idle(&self) {
        let mut count = self.calls_in_flight.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }

    /// CallTool: decode, ask the broker, encode.
    async fn call(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<proto::CallToolResponse, RequestError> {
        let _counted = CallInFlight::start(&self.calls_in_flight);
        if self.shutdown.is_cancelled() {
            return Err(RequestError::ShuttingDown);
        }
        let (metadata, mut extensions, request) = request.into_parts();
        // Refused at the gate, let through to be audited with its tool's name.
        if let Some(Refused(error)) = extensions.remove::<Refused>() {
            return Err(error);
        }
        let caller = extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_else(Caller::anyone);
        let deadline = deadline::from_metadata(&metadata);
        let trace =
            TraceHeaders::from_lookup(|name| metadata.get(name)?.to_str().ok().map(str::to_owned));
        tracing::Span::current().record("tool", request.name.as_str());
        if !caller.may_use(&request.name) {
            return Err(RequestError::PermissionDenied {
                caller: caller.key.id,
                tool: request.name,
            });
        }
        let context = CallContext { caller, metadata };
        let arguments = RawArguments {
            structured: request.arguments.map(convert::struct_to_json).transpose()?,
            json: request.arguments_json,
        };
        let timeout = request.timeout.map(convert::duration).transpose()?;
        let called = self
            .broker
            .call(
                &request.name,
                arguments,
                timeout,
                deadline,
                &trace,
                &context,
            )
            .await?;
        self.limit
            .check(convert::call_response(&called.server, called.result)?)
    }

    /// What Watch streams read from.
    fn feed(&self) -> Feed {
        Feed {
            broker: self.broker.clone(),
            shutdown: self.shutdown.clone(),
            tools: self.tools.clone(),
            limit: self.limit,
        }
    }
}

/// The status a handler answers with, the error logged here, once, at its table's level.
fn refused(error: RequestError) -> Status {
    match error.class().level {
        Level::Debug => tracing::debug!(%error, "request refused"),
        Level::Warn => tracing::warn!(%error, "request failed"),
    }
    to_status(&error)
}

/// The stream type of Watch.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<proto::WatchEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ToolBroker for Arc<BrokerService> {
    async fn list_tools(
        &self,
        request: Request<proto::ListToolsRequest>,
    ) -> Result<Response<proto::ListToolsResponse>, Status> {
        observe("ListTools", async {
            let snapshot = self.broker.snapshot();
            let caller = auth::caller(&request);
            let visibility = Visibility::new(request.into_inner().servers, caller, &snapshot)
                .map_err(refused)?;
            let cached = self.tools.tools(&snapshot);
            let everything = visibility.everything();
            let response = cached
                .encoded
                .response(|i| everything || visibility.tool(&cached.tools[i]));
            Ok(Response::new(self.limit.check(response).map_err(refused)?))
        })
        .await
    }

    async fn call_tool(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<Response<proto::CallToolResponse>, Status> {
        observe("CallTool", async {
            let Some(audit) = &self.audit else {
                return self.call(request).await.map(Response::new).map_err(refused);
            };
            let pending = Pending {
                draft: Some(Draft::of(&request, audit.with_arguments())),
                audit,
                broker: &self.broker,
            };
            let result = self.call(request).await;
            // Before the answer is sent.
            pending.finish(&result);
            result.map(Response::new).map_err(refused)
        })
        .await
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<proto::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let caller = auth::caller(&request);
        let (first, watcher) =
            Watcher::open(self.feed(), request.into_inner().servers, caller).map_err(refused)?;
        let rest = futures::stream::unfold(watcher, Watcher::next);
        let stream = futures::stream::once(async { Ok(first) }).chain(rest);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_servers(
        &self,
        _request: Request<proto::ListServersRequest>,
    ) -> Result<Response<proto::ListServersResponse>, Status> {
        observe("ListServers", async {
            let snapshot = self.broker.snapshot();
            let servers = snapshot
                .catalog
                .servers()
                .map(|view| convert::server_status(view, snapshot.caller_sessions(&view.name)))
                .collect();
            Ok(Response::new(proto::ListServersResponse { servers }))
        })
        .await
    }
}

//! The state behind the `ToolBroker` handlers ([`BrokerService`]) and what unary and streaming
//! calls share: the checks and decoding of a call, the calls in flight, and how a
//! refusal becomes a status.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;
use tonic::{Extensions, Request, Status, metadata::MetadataMap};

use super::{
    authenticate::Refused, call_context::CallContext, deadline, limit::ResponseLimit, messages,
    status::to_status, tool_cache::ToolCache, watch::Feed,
};
use crate::{
    auth,
    conversation::Conversation,
    core::{
        audit::AuditLog,
        broker::{Broker, Called},
        call_path::CallPath,
        in_flight::InFlight,
        tasks::Tasks,
        tool_call::ToolCall,
    },
    domain::{
        call::RawArguments,
        config::DEFAULT_HEADER_TIMEOUT,
        request_error::{Level, RequestError},
    },
    proto,
    telemetry::context::TraceHeaders,
};

/// The gRPC face of the broker.
pub struct BrokerService {
    pub(super) limit: ResponseLimit,
    pub(super) tools: Arc<ToolCache>,
    /// The path of every call (counted with the MCP face's, audited).
    pub(super) calls: CallPath,
    /// How long a CallToolStream's first message may take (`limits.header_timeout`).
    pub(super) first_message_timeout: Duration,
}

/// A call decoded, ready for the call path.
pub(super) struct PreparedCall {
    pub name: String,
    pub view: String,
    pub arguments: RawArguments,
    pub timeout: Option<Duration>,
    pub deadline: Option<Duration>,
    pub trace: TraceHeaders,
    pub context: CallContext,
}

impl PreparedCall {
    /// The call as the core takes it (its arguments moved out); a streaming one with its
    /// `conversation`.
    pub fn tool_call(&mut self, conversation: Option<Conversation>) -> ToolCall<'_> {
        ToolCall {
            name: &self.name,
            arguments: std::mem::take(&mut self.arguments),
            view: (!self.view.is_empty()).then_some(self.view.as_str()),
            caller: &self.context.caller,
            values: &self.context,
            timeout: self.timeout,
            deadline: self.deadline,
            trace: &self.trace,
            conversation,
        }
    }
}

impl BrokerService {
    /// A service over `broker`; `shutdown` refuses new calls and ends Watch streams; no
    /// response may exceed `max_response_bytes`; every call is recorded in `audit`, if on;
    /// long calls are kept in `tasks`.
    pub fn new(
        broker: Broker,
        shutdown: CancellationToken,
        max_response_bytes: usize,
        audit: Option<AuditLog>,
        tasks: Tasks,
    ) -> Self {
        let calls = CallPath::new(broker, shutdown, InFlight::default(), audit, tasks);
        Self {
            limit: ResponseLimit(max_response_bytes),
            tools: Arc::default(),
            calls,
            first_message_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }

    /// A CallToolStream whose first message has not come within `timeout` ends with
    /// DEADLINE_EXCEEDED.
    pub fn first_message_within(mut self, timeout: Duration) -> Self {
        self.first_message_timeout = timeout;
        self
    }

    /// Encodes each new catalog revision's tools once the catalog settles, so that no caller
    /// waits for it; ends at shutdown. To be spawned.
    pub fn keep_tools_warm(&self) -> impl Future<Output = ()> + Send + 'static {
        let tools = Arc::downgrade(&self.tools);
        super::warm_tools::keep_warm(
            self.broker().snapshots(),
            tools,
            self.calls.shutdown().clone(),
        )
    }

    /// Resolves once no call is running (new ones are refused once shutdown began).
    pub async fn idle(&self) {
        self.calls.in_flight().idle().await;
    }

    /// The broker behind the calls, lists and Watch streams.
    pub(super) fn broker(&self) -> &Broker {
        self.calls.broker()
    }

    /// The path of calls, to share with the MCP face.
    pub fn calls(&self) -> CallPath {
        self.calls.clone()
    }

    /// CallTool: decode, run on the call path, encode.
    pub(super) async fn call(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<proto::CallToolResponse, RequestError> {
        let (metadata, extensions, request) = request.into_parts();
        let mut call = self.prepare(metadata, extensions, request)?;
        let called: Called = self.calls.run(call.tool_call(None)).await?;
        self.limit
            .check(messages::call_response(&called.server, called.result)?)
    }

    /// Decodes a call (a refusal at the gate stays one); the call path checks it.
    pub(super) fn prepare(
        &self,
        metadata: MetadataMap,
        mut extensions: Extensions,
        request: proto::CallToolRequest,
    ) -> Result<PreparedCall, RequestError> {
        // Refused at the gate, let through to be audited with its tool's name.
        if let Some(Refused(error)) = extensions.remove::<Refused>() {
            return Err(error);
        }
        let caller = auth::caller(&extensions);
        let deadline = deadline::from_metadata(&metadata);
        let trace =
            TraceHeaders::from_lookup(|name| metadata.get(name)?.to_str().ok().map(str::to_owned));
        tracing::Span::current().record("tool", request.name.as_str());
        let arguments = RawArguments {
            structured: request
                .arguments
                .map(proto::json::struct_to_json)
                .transpose()?,
            json: request.arguments_json,
        };
        let timeout = request.timeout.map(messages::duration).transpose()?;
        Ok(PreparedCall {
            name: request.name,
            view: request.view,
            arguments,
            timeout,
            deadline,
            trace,
            context: CallContext { caller, metadata },
        })
    }

    /// What Watch streams read from.
    pub(super) fn feed(&self) -> Feed {
        Feed {
            broker: self.broker().clone(),
            shutdown: self.calls.shutdown().clone(),
            tools: self.tools.clone(),
            limit: self.limit,
        }
    }
}

/// The status a handler answers with, the error logged here, once, at its table's level.
pub(super) fn refused(error: RequestError) -> Status {
    match error.class().level {
        Level::Debug => tracing::debug!(%error, "request refused"),
        Level::Warn => tracing::warn!(%error, "request failed"),
    }
    to_status(&error)
}

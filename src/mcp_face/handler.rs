//! The MCP face's server handler: the broker's catalog as MCP tools, resources and prompts, and
//! calls through the broker with what the upstream server sends during them relayed to the
//! MCP client (progress with the client's token; elicitation and sampling as requests of ours).

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what clients before MCP 2026-07-28 use"
)]

use std::{borrow::Cow, time::Duration};

use opentelemetry::trace::TraceContextExt as _;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
        CreateMessageRequest, ElicitRequest, ElicitResult, ElicitationAction,
        GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
        ServerCapabilities, ServerConfig, ServerRequest, SubscriptionFilter,
    },
    service::{NotificationContext, Peer, RequestContext, SubscriptionContext},
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, field};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::{changes, convert};
use crate::{
    audit::AuditLog,
    auth::Caller,
    broker::{Broker, Called},
    conversation::{Conversation, Interaction},
    domain::{
        call::RawArguments,
        caller::{CallerKey, CallerValues},
        request_error::RequestError,
        uri_template,
    },
    grpc::call_audit::{Answered, Draft, Pending},
    telemetry::context::TraceHeaders,
};

/// The MCP face's handler, one per client session; clones share the broker.
#[derive(Clone)]
pub struct Face {
    broker: Broker,
    audit: Option<AuditLog>,
    shutdown: CancellationToken,
}

impl Face {
    /// A face on `broker`, auditing calls to `audit`, until `shutdown`.
    pub fn new(broker: Broker, audit: Option<AuditLog>, shutdown: CancellationToken) -> Self {
        Self {
            broker,
            audit,
            shutdown,
        }
    }

    /// Follows the catalog for `caller`, telling `peer` which lists changed, until the
    /// session ends.
    fn follow_for(&self, caller: Caller, peer: Peer<RoleServer>) {
        let broker = self.broker.clone();
        let stop = self.shutdown.child_token();
        tokio::spawn(async move {
            let gone = || peer.is_transport_closed();
            changes::follow(&broker, &caller, stop, gone, |stale| {
                let peer = peer.clone();
                async move {
                    (!stale.tools || peer.notify_tool_list_changed().await.is_ok())
                        && (!stale.resources || peer.notify_resource_list_changed().await.is_ok())
                        && (!stale.prompts || peer.notify_prompt_list_changed().await.is_ok())
                }
            })
            .await;
        });
    }
}

/// The HTTP request an MCP request came in (rmcp puts its parts in the extensions).
fn http_parts(extensions: &rmcp::model::Extensions) -> Option<&http::request::Parts> {
    extensions.get::<http::request::Parts>()
}

/// The caller the gate admitted for this request (anyone without auth).
fn caller(extensions: &rmcp::model::Extensions) -> Caller {
    http_parts(extensions)
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .unwrap_or_else(Caller::anyone)
}

/// A caller's values for per-caller servers: the caller, and the HTTP headers it sent.
struct FaceCaller<'a> {
    caller: &'a Caller,
    headers: Option<&'a http::HeaderMap>,
}

impl CallerValues for FaceCaller<'_> {
    fn key(&self) -> &CallerKey {
        &self.caller.key
    }

    fn token(&self) -> Option<&str> {
        self.caller.token()
    }

    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.headers?.get(name)?.to_str().ok()?))
    }

    fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        self.caller.claim(name)
    }
}

/// The trace a request continues: its `params._meta`, else its HTTP headers.
fn incoming_trace(context: &RequestContext<RoleServer>) -> TraceHeaders {
    let from_meta = TraceHeaders::from_meta(&context.meta);
    match http_parts(&context.extensions) {
        Some(parts) if from_meta.traceparent.is_none() => {
            TraceHeaders::from_headers(&parts.headers)
        }
        _ => from_meta,
    }
}

/// The server span of one MCP request, continuing `incoming`, and its trace id.
fn server_span(method: &'static str, incoming: &TraceHeaders) -> (tracing::Span, Option<String>) {
    let span = tracing::info_span!(
        target: "toolbroker::rpc",
        "mcp",
        otel.name = method,
        otel.kind = "server",
        rpc.system = "mcp",
        rpc.method = method,
        trace_id = field::Empty,
        tool = field::Empty,
        server = field::Empty,
    );
    if incoming.traceparent.is_some() {
        let _ = span.set_parent(incoming.context());
    }
    let id = span.context().span().span_context().trace_id();
    let trace_id = if id != opentelemetry::trace::TraceId::INVALID {
        Some(id.to_string())
    } else {
        incoming.trace_id().map(str::to_owned)
    };
    if let Some(id) = &trace_id {
        span.record("trace_id", id.as_str());
    }
    (span, trace_id)
}

/// How a refused call reaches the client: a protocol error when the tool cannot be called
/// by this name (unknown, not this caller's) or the server rejected the request itself;
/// otherwise a tool result with `isError`, so that the model reads why and may adapt
/// (arguments to fix, a rate to wait out, a server that is down).
fn refused_call(error: RequestError) -> Result<CallToolResponse, ErrorData> {
    match error {
        RequestError::UnknownTool { .. } | RequestError::PermissionDenied { .. } => {
            Err(ErrorData::invalid_params(error.to_string(), None))
        }
        RequestError::ServerError { code, message, .. } => {
            Err(ErrorData::new(rmcp::model::ErrorCode(code), message, None))
        }
        RequestError::ShuttingDown | RequestError::Unauthenticated(_) => {
            Err(ErrorData::internal_error(error.to_string(), None))
        }
        other => Ok(CallToolResult::error(vec![ContentBlock::text(other.to_string())]).into()),
    }
}

/// A refused read or get as the JSON-RPC error an MCP client reads.
fn refused_request(error: RequestError) -> ErrorData {
    match error {
        RequestError::UnknownResource { .. } => {
            ErrorData::resource_not_found(error.to_string(), None)
        }
        RequestError::ServerError { code, message, .. } => {
            ErrorData::new(rmcp::model::ErrorCode(code), message, None)
        }
        RequestError::UnknownPrompt { .. }
        | RequestError::PromptDenied { .. }
        | RequestError::InvalidArguments(_) => ErrorData::invalid_params(error.to_string(), None),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

impl ServerHandler for Face {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolbroker", env!("CARGO_PKG_VERSION")))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.follow_for(caller(&context.extensions), context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    /// Protocol 2026-07-28: list changes ride the client's `subscriptions/listen` stream.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let caller = caller(&subscription.request_context().extensions);
        let stop = self.shutdown.child_token();
        let watching = changes::follow(
            &self.broker,
            &caller,
            stop,
            || false,
            |stale| {
                let sink = subscription.sink();
                async move {
                    (!stale.tools || sink.notify_tool_list_changed().await.is_ok())
                        && (!stale.resources || sink.notify_resource_list_changed().await.is_ok())
                        && (!stale.prompts || sink.notify_prompt_list_changed().await.is_ok())
                }
            },
        );
        tokio::select! {
            () = watching => {}
            () = subscription.cancelled() => {}
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context.extensions);
        let snapshot = self.broker.snapshot();
        let tools = snapshot
            .catalog
            .tools()
            .values()
            .filter(|exposed| caller.may_use(exposed.name.as_str()))
            .map(|exposed| convert::tool(exposed))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let incoming = incoming_trace(&context);
        let (span, trace_id) = server_span("tools/call", &incoming);
        span.record("tool", &*request.name);
        let call = self.call(request, &context, &incoming, trace_id);
        tokio::select! {
            // The client cancelled: the call is dropped, which cancels it upstream.
            () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the client", None)),
            answer = call.instrument(span) => answer,
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = caller(&context.extensions);
        let snapshot = self.broker.snapshot();
        let resources = snapshot
            .catalog
            .resources()
            .filter(|(server, _)| caller.may_read(server.as_str()))
            .flat_map(|(_, offered)| offered.resources.iter().map(convert::resource))
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let caller = caller(&context.extensions);
        let snapshot = self.broker.snapshot();
        let templates = snapshot
            .catalog
            .resources()
            .filter(|(server, _)| caller.may_read(server.as_str()))
            .flat_map(|(_, offered)| offered.templates.iter().map(convert::template))
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = caller(&context.extensions);
        let not_found = || {
            ErrorData::resource_not_found(
                format!(
                    "no resource {:?}: resources/list and resources/templates/list show what can be read",
                    request.uri
                ),
                None,
            )
        };
        // A listed URI's server reads it; else the first server with a template it fits.
        let server = {
            let snapshot = self.broker.snapshot();
            let readable = || {
                snapshot
                    .catalog
                    .resources()
                    .filter(|(server, _)| caller.may_read(server.as_str()))
            };
            let listed = readable()
                .find(|(_, offered)| offered.resources.iter().any(|r| r.uri == request.uri));
            let templated = || {
                readable().find(|(_, offered)| {
                    offered
                        .templates
                        .iter()
                        .any(|t| uri_template::matches(&t.uri_template, &request.uri))
                })
            };
            listed
                .or_else(templated)
                .map(|(server, _)| server.to_string())
                .ok_or_else(not_found)?
        };
        let values = FaceCaller {
            caller: &caller,
            headers: http_parts(&context.extensions).map(|parts| &parts.headers),
        };
        let (_, result) = self
            .broker
            .read_resource(&server, &request.uri, &values)
            .await
            .map_err(refused_request)?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let caller = caller(&context.extensions);
        let snapshot = self.broker.snapshot();
        let prompts = snapshot
            .catalog
            .prompts()
            .values()
            .filter(|prompt| caller.may_prompt(&prompt.name))
            .map(|prompt| convert::prompt(prompt))
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = caller(&context.extensions);
        if !caller.may_prompt(&request.name) {
            return Err(refused_request(RequestError::PromptDenied {
                caller: caller.key.id,
                prompt: request.name,
            }));
        }
        let values = FaceCaller {
            caller: &caller,
            headers: http_parts(&context.extensions).map(|parts| &parts.headers),
        };
        let (_, result) = self
            .broker
            .get_prompt(
                &request.name,
                request.arguments.unwrap_or_default(),
                &values,
            )
            .await
            .map_err(refused_request)?;
        Ok(result.into())
    }
}

impl Face {
    /// One `tools/call`: checked, audited, run as a streaming broker call with what the
    /// server sends meanwhile relayed to the client.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        incoming: &TraceHeaders,
        trace_id: Option<String>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context.extensions);
        let arguments = request.arguments.unwrap_or_default();
        let pending = self.audit.as_ref().map(|audit| Pending {
            draft: Some(Draft::of(
                Some(caller.key.id.clone()),
                request.name.to_string(),
                trace_id,
                audit
                    .with_arguments()
                    .then(|| Value::Object(arguments.clone())),
            )),
            audit,
            broker: &self.broker,
        });
        let result = self
            .run(&request.name, arguments, &caller, context, incoming)
            .await;
        if let Some(pending) = pending {
            pending.finish_with(result.as_ref().map(|called| Answered {
                is_error: called.result.is_error == Some(true),
                server: called.server.as_str(),
            }));
        }
        match result {
            Ok(called) => Ok(called.result.into()),
            Err(error) => refused_call(error),
        }
    }

    async fn run(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
        incoming: &TraceHeaders,
    ) -> Result<Called, RequestError> {
        if self.shutdown.is_cancelled() {
            return Err(RequestError::ShuttingDown);
        }
        if !caller.may_use(name) {
            return Err(RequestError::PermissionDenied {
                caller: caller.key.id.clone(),
                tool: name.to_owned(),
            });
        }
        let values = FaceCaller {
            caller,
            headers: http_parts(&context.extensions).map(|parts| &parts.headers),
        };
        let arguments = RawArguments {
            structured: Some(arguments),
            json: String::new(),
        };
        let (conversation, mut events) = Conversation::new();
        let token = context.meta.get_progress_token();
        let call = self.broker.call(
            name,
            arguments,
            None,
            None,
            incoming,
            &values,
            Some(conversation),
        );
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut call => break result,
                Some(event) = events.recv() => relay(context, token.as_ref(), event).await,
            }
        };
        // Progress sent just before the answer still goes first.
        while let Ok(event @ Interaction::Progress(_)) = events.try_recv() {
            relay(context, token.as_ref(), event).await;
        }
        result
    }
}

/// How long a question to the client may wait for its answer before it is declined; the
/// call's own timeout is paused meanwhile, its `max_timeout` still holds.
const QUESTION_TIMEOUT: Duration = Duration::from_secs(600);

/// What the upstream server sent during a call, passed on to the MCP client that made it.
async fn relay(
    context: &RequestContext<RoleServer>,
    token: Option<&ProgressToken>,
    event: Interaction,
) {
    match event {
        Interaction::Progress(progress) => {
            if let Some(token) = token {
                let mut forwarded =
                    ProgressNotificationParam::new(token.clone(), progress.progress);
                forwarded.total = progress.total;
                forwarded.message = progress.message;
                let _ = context.peer.notify_progress(forwarded).await;
            }
        }
        Interaction::Elicit { params, answer } => {
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            let result = match ask(context, request).await {
                Some(ClientResult::ElicitResult(result)) => result,
                _ => ElicitResult::new(ElicitationAction::Decline),
            };
            let _ = answer.send(result);
        }
        Interaction::Sample { params, answer } => {
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
            let result = match ask(context, request).await {
                Some(ClientResult::CreateMessageResult(result)) => Ok(*result),
                Some(other) => Err(format!("the client answered sampling with {other:?}")),
                None => Err("the client did not answer the sampling request".to_owned()),
            };
            let _ = answer.send(result);
        }
    }
}

/// A request to the client, on the call's own answer stream; `None` if it could not be sent
/// or was not answered in time.
async fn ask(context: &RequestContext<RoleServer>, request: ServerRequest) -> Option<ClientResult> {
    let sent = context.peer.send_request(request);
    match tokio::time::timeout(QUESTION_TIMEOUT, sent).await {
        Ok(Ok(result)) => Some(result),
        Ok(Err(error)) => {
            tracing::debug!(%error, "the MCP client did not take the question");
            None
        }
        Err(_) => None,
    }
}

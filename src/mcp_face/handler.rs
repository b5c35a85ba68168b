//! The MCP face's server handler: the broker's catalog as MCP tools, resources and prompts, and
//! calls through the broker with what the upstream server sends during them relayed to the
//! MCP client (progress with the client's token; elicitation and sampling as requests of ours).

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what clients before MCP 2026-07-28 use"
)]

use std::{borrow::Cow, sync::Arc};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, ClientResult, CreateMessageRequest, ElicitRequest,
        ElicitResult, ElicitationAction, GetPromptRequestParams, GetPromptResponse, Implementation,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument,
        ReadResourceRequestParams, ReadResourceResponse, Resource, ServerCapabilities,
        ServerConfig, ServerRequest, Tool, ToolAnnotations,
    },
    service::RequestContext,
};
use serde_json::Value;

use crate::{
    auth::Caller,
    broker::Broker,
    conversation::{Conversation, Interaction},
    domain::{
        call::RawArguments,
        caller::{CallerKey, CallerValues},
        request_error::RequestError,
        tool::ExposedTool,
    },
    telemetry::context::TraceHeaders,
};

/// The MCP face's handler; clones share the broker.
#[derive(Clone)]
pub struct Face {
    broker: Broker,
}

impl Face {
    /// A face on `broker`.
    pub fn new(broker: Broker) -> Self {
        Self { broker }
    }
}

/// The caller the gate admitted for this request (anyone without auth).
fn caller(context: &RequestContext<RoleServer>) -> Caller {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .unwrap_or_else(Caller::anyone)
}

/// A caller's values for per-caller servers: the caller, and the HTTP headers it sent.
struct FaceCaller {
    caller: Caller,
    headers: http::HeaderMap,
}

impl FaceCaller {
    fn of(caller: Caller, context: &RequestContext<RoleServer>) -> Self {
        let headers = context
            .extensions
            .get::<http::request::Parts>()
            .map(|parts| parts.headers.clone())
            .unwrap_or_default();
        Self { caller, headers }
    }
}

impl CallerValues for FaceCaller {
    fn key(&self) -> &CallerKey {
        &self.caller.key
    }

    fn token(&self) -> Option<&str> {
        self.caller.token()
    }

    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.headers.get(name)?.to_str().ok()?))
    }

    fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        self.caller.claim(name)
    }
}

/// A refusal as the JSON-RPC error an MCP client reads.
fn to_error(error: RequestError) -> ErrorData {
    use crate::domain::request_error::Code;
    let message = error.to_string();
    match error.class().code {
        Code::NotFound | Code::InvalidArgument => ErrorData::invalid_params(message, None),
        _ => ErrorData::internal_error(message, None),
    }
}

/// An exposed tool as MCP declares it: exposed name, raw schemas, annotations.
fn tool(exposed: &ExposedTool) -> Tool {
    let spec = &exposed.spec;
    let schema = match spec.input_schema.as_ref() {
        Value::Object(object) => object.clone(),
        _ => Default::default(),
    };
    let mut tool = Tool::new(
        exposed.name.to_string(),
        spec.description.clone(),
        Arc::new(schema),
    );
    if let Some(Ok(Value::Object(output))) = spec
        .output_schema_json
        .as_deref()
        .map(serde_json::from_str::<Value>)
    {
        tool.output_schema = Some(Arc::new(output));
    }
    let hints = &spec.annotations;
    let mut annotations = ToolAnnotations::default();
    annotations.title = hints.title.clone();
    annotations.read_only_hint = hints.read_only;
    annotations.destructive_hint = hints.destructive;
    annotations.idempotent_hint = hints.idempotent;
    annotations.open_world_hint = hints.open_world;
    tool.annotations = Some(annotations);
    tool
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

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context);
        let snapshot = self.broker.snapshot();
        let tools = snapshot
            .catalog
            .tools()
            .values()
            .filter(|exposed| caller.may_use(exposed.name.as_str()))
            .map(|exposed| tool(exposed))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context);
        if !caller.may_use(&request.name) {
            return Err(to_error(RequestError::PermissionDenied {
                caller: caller.key.id,
                tool: request.name.to_string(),
            }));
        }
        let trace = TraceHeaders::from_meta(&context.meta);
        let arguments = RawArguments {
            structured: Some(request.arguments.unwrap_or_default()),
            json: String::new(),
        };
        let context_values = FaceCaller::of(caller, &context);
        let (conversation, mut events) = Conversation::new();
        let progress_token = context.meta.get_progress_token();
        let call = self.broker.call(
            &request.name,
            arguments,
            None,
            None,
            &trace,
            &context_values,
            Some(conversation),
        );
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut call => break result,
                Some(event) = events.recv() => relay(&context, progress_token.as_ref(), event).await,
            }
        };
        while let Ok(Interaction::Progress(progress)) = events.try_recv() {
            relay(
                &context,
                progress_token.as_ref(),
                Interaction::Progress(progress),
            )
            .await;
        }
        result.map(|called| called.result.into()).map_err(to_error)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = caller(&context);
        let snapshot = self.broker.snapshot();
        let resources = snapshot
            .catalog
            .resources()
            .filter(|(server, _)| caller.may_read(server.as_str()))
            .flat_map(|(_, offered)| offered.resources.iter())
            .map(|spec| {
                let mut raw = Resource::new(spec.uri.clone(), spec.name.clone());
                raw.title = spec.title.clone();
                raw.description = spec.description.clone();
                raw.mime_type = spec.mime_type.clone();
                raw.size = spec.size;
                raw
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        // TODO(issue 18): templates, and which server a URI belongs to when reading.
        Ok(ListResourceTemplatesResult::default())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // A URI is found among the listed resources; its server reads it.
        let caller = caller(&context);
        let snapshot = self.broker.snapshot();
        let server = snapshot
            .catalog
            .resources()
            .find(|(_, offered)| offered.resources.iter().any(|r| r.uri == request.uri))
            .map(|(server, _)| server.to_string())
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
            })?;
        if !caller.may_read(&server) {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let context_values = FaceCaller::of(caller, &context);
        let (_, result) = self
            .broker
            .read_resource(&server, &request.uri, &context_values)
            .await
            .map_err(to_error)?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let caller = caller(&context);
        let snapshot = self.broker.snapshot();
        let prompts = snapshot
            .catalog
            .prompts()
            .values()
            .filter(|prompt| caller.may_prompt(&prompt.name))
            .map(|prompt| {
                let arguments = prompt
                    .spec
                    .arguments
                    .iter()
                    .map(|argument| {
                        let mut out = PromptArgument::new(argument.name.clone())
                            .with_required(argument.required);
                        out.description = argument.description.clone();
                        out
                    })
                    .collect();
                Prompt::new(
                    prompt.name.clone(),
                    prompt.spec.description.clone(),
                    Some(arguments),
                )
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = caller(&context);
        if !caller.may_prompt(&request.name) {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", request.name),
                None,
            ));
        }
        let context_values = FaceCaller::of(caller, &context);
        let (_, result) = self
            .broker
            .get_prompt(
                &request.name,
                request.arguments.unwrap_or_default(),
                &context_values,
            )
            .await
            .map_err(to_error)?;
        Ok(result.into())
    }
}

/// What the upstream server sent during a call, passed on to the MCP client that made it.
async fn relay(
    context: &RequestContext<RoleServer>,
    token: Option<&rmcp::model::ProgressToken>,
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
            let result = match context.peer.send_request(request).await {
                Ok(ClientResult::ElicitResult(result)) => result,
                _ => ElicitResult::new(ElicitationAction::Decline),
            };
            let _ = answer.send(result);
        }
        Interaction::Sample { params, answer } => {
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
            let result = match context.peer.send_request(request).await {
                Ok(ClientResult::CreateMessageResult(result)) => Ok(*result),
                Ok(other) => Err(format!("the client answered sampling with {other:?}")),
                Err(error) => Err(error.to_string()),
            };
            let _ = answer.send(result);
        }
    }
}

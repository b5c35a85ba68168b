//! The stdio MCP server's handler: every MCP request answered by one gRPC call to the broker,
//! and a `tools/call` run over CallToolStream with what happens during it relayed to the MCP
//! client (progress under its token; elicitation and sampling as requests of ours, or to a
//! 2026-07-28 client in rounds, answered back on the stream).

// Sampling and logging are deprecated by MCP 2026-07-28 (SEP-2577) but are what servers use
// today.
#![expect(
    deprecated,
    reason = "sampling and logging are what clients before MCP 2026-07-28 use"
)]

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU8, Ordering},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, DiscoverResult, GetPromptRequestParams,
        GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressToken,
        ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
        SetLevelRequestParams, SubscriptionFilter,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::faces::mcp::stdio::{asking::Asking, from_proto, watch};
use crate::{
    client::Client,
    domain::caller::CallerKey,
    faces::mcp::lists,
    faces::mcp::model::{
        cache::{self, Cacheable},
        refusal::{self, Asked},
    },
    faces::mcp::rounds::{self, Rounds, Running, Turn},
    proto::{self, call_tool_stream_request::Message, call_tool_stream_response::Event},
};

/// What this bridge shows depends on its caller: it serves one token, whose grants it cannot
/// see (see [`cache`]).
const ONE_CALLER: bool = true;

/// `list` with the hints a 2026-07-28 client is owed (none for an older one).
fn hinted<L: Cacheable>(mut list: L, context: &RequestContext<RoleServer>) -> L {
    if cache::owed(context.protocol_version().as_ref()) {
        list.hint(cache::list_hints(ONE_CALLER));
    }
    list
}

/// The handler; clones share the broker connection.
#[derive(Clone)]
pub struct StdioFace {
    broker: Client,
    /// The view served (`--view`); empty for the whole catalog.
    view: String,
    /// Cancelled when the MCP client has gone (stdin closed): ends the Watch relay.
    closed: CancellationToken,
    /// Whether the Watch relay was started (once per process: stdio has one session).
    watching: Arc<AtomicBool>,
    /// The least severity of the log messages relayed (`logging/setLevel`; all until set).
    log_level: Arc<AtomicU8>,
    /// A 2026-07-28 client's calls waiting on its answers.
    rounds: Arc<Rounds>,
}

impl StdioFace {
    /// A handler answering from `broker` (its `view`, if not empty) until `closed` is cancelled.
    pub(crate) fn new(broker: Client, view: String, closed: CancellationToken) -> Self {
        Self {
            broker,
            view,
            closed,
            watching: Arc::default(),
            log_level: Arc::default(),
            rounds: Arc::default(),
        }
    }

    /// Lists the broker's resources and templates.
    async fn listed_resources(&self) -> Result<proto::ListResourcesResponse, ErrorData> {
        self.broker
            .clone()
            .list_resources(proto::ListResourcesRequest::default())
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| refused(Asked::Other, &status))
    }

    /// Runs the call over CallToolStream until its result, relaying its events to the client
    /// (`to`): progress under the client's `token`, log messages, and the questions.
    async fn call(
        &self,
        call: proto::CallToolRequest,
        to: &Asking<'_>,
        token: Option<&ProgressToken>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The sender lives as long as the call: the broker declines questions once we stop
        // sending.
        let (sender, receiver) = mpsc::channel(4);
        let send = |message| proto::CallToolStreamRequest {
            message: Some(message),
        };
        let _ = sender.send(send(Message::Call(call))).await;
        let mut events = match self
            .broker
            .clone()
            .call_tool_stream(ReceiverStream::new(receiver))
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) => return failed(&status),
        };
        loop {
            let event = match events.message().await {
                Ok(Some(message)) => message.event,
                Ok(None) => {
                    return Err(ErrorData::internal_error(
                        "the broker ended the call without a result",
                        None,
                    ));
                }
                Err(status) => return failed(&status),
            };
            match event {
                Some(Event::Progress(progress)) => to.progress(token, progress).await,
                Some(Event::Log(log)) => {
                    let log = from_proto::log_message(log);
                    if from_proto::severity(log.level) >= self.log_level.load(Ordering::Relaxed) {
                        to.log(log).await;
                    }
                }
                Some(Event::Elicitation(question)) => {
                    let answer = to.elicit(question).await;
                    let _ = sender
                        .send(send(Message::ElicitationResponse(answer)))
                        .await;
                }
                Some(Event::Sampling(request)) => {
                    let answer = to.sample(request).await;
                    let _ = sender.send(send(Message::SamplingResponse(answer))).await;
                }
                Some(Event::Result(result)) => {
                    return from_proto::call_result(result)
                        .map(Into::into)
                        .map_err(|reason| ErrorData::internal_error(reason, None));
                }
                None => {}
            }
        }
    }

    /// Starts `call` in a task of its own whose questions go to a 2026-07-28 client in rounds.
    fn start_in_rounds(
        &self,
        call: proto::CallToolRequest,
        context: &RequestContext<RoleServer>,
    ) -> Running {
        let (turns, receiver) = mpsc::channel(64);
        let face = self.clone();
        let capabilities = context.client_capabilities();
        let token = context.meta.get_progress_token();
        let task = tokio::spawn(async move {
            let to = Asking::Rounds(&turns, Box::new(capabilities));
            let answer = face.call(call, &to, token.as_ref()).await;
            let _ = turns.send(Turn::Done(answer)).await;
        });
        Running::new(receiver, task.abort_handle())
    }
}

/// A failed call as the one table says.
fn failed(status: &tonic::Status) -> Result<CallToolResponse, ErrorData> {
    refusal::refused_call(from_proto::refusal(status)).map(Into::into)
}

/// A failed request other than a call as the one table says.
fn refused(asked: Asked, status: &tonic::Status) -> ErrorData {
    refusal::refused_request(asked, from_proto::refusal(status))
}

impl ServerHandler for StdioFace {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolbroker", env!("CARGO_PKG_VERSION")))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let severity = from_proto::severity(request.level);
        self.log_level.store(severity, Ordering::Relaxed);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let (broker, closed, peer) = (self.broker.clone(), self.closed.clone(), context.peer);
        let view = self.view.clone();
        tokio::spawn(async move {
            let following = watch::follow(broker, &view, |stale| lists::announce(&peer, stale));
            tokio::select! {
                () = following => {}
                () = closed.cancelled() => {}
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .resources_list_changed()
                .prompts_list_changed()
                .build(),
        )
    }

    /// Protocol 2026-07-28 has no session to notify: list changes ride the client's
    /// `subscriptions/listen` request instead.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = subscription.sink();
        let following = watch::follow(self.broker.clone(), &self.view, |stale| {
            lists::announce(sink, stale)
        });
        tokio::select! {
            () = following => {}
            () = subscription.cancelled() => {}
            () = self.closed.cancelled() => {}
        }
        Ok(())
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Ok(cache::discovered(self))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let response = self
            .broker
            .clone()
            .list_tools(proto::ListToolsRequest {
                view: self.view.clone(),
                ..Default::default()
            })
            .await
            .map_err(|status| refused(Asked::Other, &status))?;
        let tools = response.into_inner().tools;
        Ok(hinted(
            ListToolsResult::with_all_items(tools.iter().map(from_proto::tool).collect()),
            &context,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let call = proto::CallToolRequest {
            name: request.name.to_string(),
            arguments_json: arguments.to_string(),
            view: self.view.clone(),
            ..Default::default()
        };
        if cache::owed(context.protocol_version().as_ref()) {
            // One client per bridge: its calls are all one caller's.
            let owner = CallerKey::anonymous();
            let start = |_| self.start_in_rounds(call, &context);
            return rounds::call_in_rounds(&self.rounds, &owner, request, &context, start).await;
        }
        // Cancelled by the client: the stream is dropped with the call's future, which the
        // broker takes as cancellation and passes upstream.
        let to = Asking::Peer(&context.peer);
        let token = context.meta.get_progress_token();
        tokio::select! {
            result = self.call(call, &to, token.as_ref()) => result,
            () = context.ct.cancelled() => {
                Err(ErrorData::internal_error("the call was cancelled", None))
            }
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let listed = self.listed_resources().await?;
        Ok(hinted(
            ListResourcesResult::with_all_items(
                listed
                    .resources
                    .into_iter()
                    .map(from_proto::resource)
                    .collect(),
            ),
            &context,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let listed = self.listed_resources().await?;
        Ok(hinted(
            ListResourceTemplatesResult::with_all_items(
                listed
                    .templates
                    .into_iter()
                    .map(from_proto::template)
                    .collect(),
            ),
            &context,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // MCP names no server; the broker needs one, found where the URI is listed.
        let listed = self.listed_resources().await?;
        let server = from_proto::owner(&listed, &request.uri)
            .ok_or_else(|| refusal::unlisted_resource(&request.uri))?;
        let read = proto::ReadResourceRequest {
            server: server.to_owned(),
            uri: request.uri.clone(),
        };
        match self.broker.clone().read_resource(read).await {
            Ok(response) => {
                let mut result = from_proto::read_result(response.into_inner());
                if cache::owed(context.protocol_version().as_ref()) {
                    result.hint(cache::read_hints(None, None, ONE_CALLER));
                }
                Ok(result.into())
            }
            Err(status) => Err(refused(Asked::Resource, &status)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let response = self
            .broker
            .clone()
            .list_prompts(proto::ListPromptsRequest::default())
            .await
            .map_err(|status| refused(Asked::Other, &status))?;
        let prompts = response.into_inner().prompts;
        Ok(hinted(
            ListPromptsResult::with_all_items(
                prompts.into_iter().map(from_proto::prompt).collect(),
            ),
            &context,
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let get = proto::GetPromptRequest {
            name: request.name,
            arguments: from_proto::prompt_arguments(request.arguments),
        };
        let response = self
            .broker
            .clone()
            .get_prompt(get)
            .await
            .map_err(|status| refused(Asked::Other, &status))?;
        from_proto::prompt_result(response.into_inner())
            .map(Into::into)
            .map_err(|reason| ErrorData::internal_error(reason, None))
    }
}

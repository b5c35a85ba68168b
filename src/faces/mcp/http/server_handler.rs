//! The MCP face's server handler: the broker's catalog as MCP tools, resources and prompts,
//! calls (see [`call`](crate::faces::mcp::http::call)), resource subscriptions, completions and log levels, each
//! as the requesting caller may see them.

// Logging is deprecated by MCP 2026-07-28 (SEP-2577) but is what clients use today.
#![expect(
    deprecated,
    reason = "logging/setLevel is what clients before MCP 2026-07-28 use"
)]

use std::{
    collections::HashSet,
    sync::{Arc, atomic::Ordering},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
        CompleteResult, DiscoverResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams,
        GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
        ReadResourceResponse, Reference, ServerCapabilities, ServerConfig, SetLevelRequestParams,
        SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams, UpdateTaskParams,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};
use tokio_util::sync::CancellationToken;

use crate::faces::mcp::http::{
    changes,
    directory::Directory,
    face_sessions::SessionKey,
    relay::Relay,
    request::{Asker, FaceCaller},
    session::Session,
    tool_list::{self, ToolList},
};
use crate::{
    core::{broker::Broker, call_path::CallPath},
    domain::request_error::{METHOD_NOT_FOUND, RequestError},
    faces::mcp::lists,
    faces::mcp::model::{
        cache::{self, Cacheable},
        prompt,
        refusal::{self, Asked, Refusal},
        resource,
    },
    faces::mcp::rounds::Rounds,
};

/// A refused request other than a call, as the one table says.
fn refused_request(asked: Asked, error: &RequestError) -> ErrorData {
    refusal::refused_request(asked, Refusal::from(error))
}

/// The MCP face's server_handler, one per client session; clones share the broker.
#[derive(Clone)]
pub struct Face {
    /// What every session shares, behind one pointer: the face is cloned for each request,
    /// and cloning (then dropping) two cancellation tokens and seven `Arc`s was 5 % of its CPU
    /// (perf, issue 42).
    shared: Arc<Shared>,
    pub(in crate::faces::mcp::http) session: Arc<Session>,
}

/// What every session of the face shares (a [`Face`] derefs to it).
pub struct Shared {
    /// The path of every call (and the broker behind it), shared with the gRPC face.
    pub(in crate::faces::mcp::http) calls: CallPath,
    pub(in crate::faces::mcp::http) shutdown: CancellationToken,
    /// The tools/list of the current revision, shared by every session.
    tool_list: Arc<ToolList>,
    /// Every session, for the calls the face answers directly.
    pub(in crate::faces::mcp::http) directory: Arc<Directory>,
    /// The calls of 2026-07-28 clients waiting on their answers.
    pub(in crate::faces::mcp::http) rounds: Arc<Rounds>,
}

impl std::ops::Deref for Face {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl Face {
    /// A face whose calls go through `calls`, whose sessions end after `shutdown`.
    pub fn new(calls: CallPath, shutdown: CancellationToken) -> Self {
        Self {
            shared: Arc::new(Shared {
                calls,
                shutdown,
                tool_list: Arc::default(),
                directory: Arc::default(),
                rounds: Arc::default(),
            }),
            session: Arc::default(),
        }
    }

    /// The broker behind the face's calls, lists and subscriptions.
    pub(in crate::faces::mcp::http) fn broker(&self) -> &Broker {
        self.calls.broker()
    }

    /// The handler of a new client session.
    pub fn for_session(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            session: Arc::default(),
        }
    }

    /// The handler of the session whose state is `session`.
    pub(in crate::faces::mcp::http) fn with_session(&self, session: Arc<Session>) -> Self {
        Self {
            shared: self.shared.clone(),
            session,
        }
    }
}

impl ServerHandler for Face {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_logging()
            .enable_completions()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolbroker", env!("CARGO_PKG_VERSION")))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(SessionKey(id)) = context.extensions.get::<SessionKey>() {
            self.directory.initialized(id, &self.session);
        }
        self.follow_for(Asker::of(&context.extensions), context.peer);
    }

    /// Every list, and updates of the resources asked for that some server lists (or has a
    /// template for): which of them the caller may read is decided in [`Self::listen`].
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let known = (requested.resource_subscriptions.iter().flatten())
            .filter(|uri| self.is_known_resource(uri))
            .cloned()
            .collect::<Vec<_>>();
        let lists = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed();
        Some(match known.is_empty() {
            true => lists.build(),
            false => lists.resource_subscriptions(known).build(),
        })
    }

    /// Protocol 2026-07-28: list changes and updates of the resources it asked for (of those
    /// its caller may read; subscribed upstream for as long as it listens) ride the client's
    /// `subscriptions/listen` stream.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let extensions = &subscription.request_context().extensions;
        let asker = Asker::of(extensions);
        let caller = self.caller(extensions);
        let values = FaceCaller::of(&caller, extensions);
        let asked = subscription
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten();
        let mut watched = HashSet::new();
        for uri in asked {
            let Some(server) = self.server_of(&caller, uri) else {
                continue;
            };
            match self
                .broker()
                .subscribe_resource(&server, uri, &values)
                .await
            {
                Ok(()) => {
                    watched.insert((server, uri.clone()));
                }
                Err(error) => tracing::debug!(%error, uri, "not subscribed for a listener"),
            }
        }
        let stop = self.shutdown.child_token();
        let sink = subscription.sink();
        let watching = changes::follow(
            self.broker(),
            &asker,
            stop,
            || false,
            |stale| lists::announce(sink, stale),
        );
        let updates = self.relay_updates(
            |key| watched.contains(key),
            |uri| async { sink.notify_resource_updated(uri).await.is_ok() },
        );
        tokio::select! {
            () = watching => {}
            () = updates => {}
            () = subscription.cancelled() => {}
        }
        for (server, uri) in &watched {
            self.broker()
                .unsubscribe_resource(server, uri, &values)
                .await;
        }
        Ok(())
    }

    /// A tool by its exposed name, for rmcp to check a 2026-07-28 call's `Mcp-Param-*` headers
    /// against the parameters its schema maps to headers (`x-mcp-header`). Whether the caller
    /// may call it is the call's to check, as for any other.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let tools = self.tool_list.tools(&self.broker().snapshot());
        // Sorted by exposed name.
        let found = tools.binary_search_by(|tool| (*tool.name).cmp(name)).ok()?;
        Some(tools[found].clone())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&context.extensions);
        let snapshot = self.broker().snapshot();
        let cursor = request
            .as_ref()
            .and_then(|request| request.cursor.as_deref());
        let page = tool_list::page(
            snapshot.catalog.tools(),
            &caller,
            cursor,
            tool_list::PAGE_BYTES,
        )
        .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?;
        // The page's tools, from the converted ones: the same names, in the same order.
        let listed = page.tools.first().zip(page.tools.last());
        let tools = match listed {
            Some((first, last)) => {
                let range = first.name.as_str()..=last.name.as_str();
                let tools = self.tool_list.tools(&snapshot);
                tools
                    .iter()
                    .filter(|tool| range.contains(&&*tool.name) && caller.may_use(&tool.name))
                    .cloned()
                    .collect()
            }
            None => Vec::new(),
        };
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = page.next;
        Ok(self.list_hinted(result, &context))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.takes_tasks(&request, &context) {
            return self.call_as_task(request, &context).await;
        }
        if cache::owed(context.protocol_version().as_ref()) {
            return self.call_in_rounds(request, &context).await;
        }
        let relay = Relay::Peer(&context.peer);
        let answers = crate::faces::mcp::rounds::answers(context.client_capabilities().as_ref());
        let call = self.traced_call(request, &context.meta, &context.extensions, relay, answers);
        tokio::select! {
            // The client cancelled: the call is dropped, which cancels it upstream.
            () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the client", None)),
            answer = call => answer,
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&context.extensions);
        let snapshot = self.broker().snapshot();
        let resources = snapshot
            .catalog
            .resources()
            .filter(|(server, _)| caller.may_read(server.as_str()))
            .flat_map(|(_, offered)| offered.resources.iter().map(resource::resource))
            .collect();
        Ok(self.list_hinted(ListResourcesResult::with_all_items(resources), &context))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let caller = self.caller(&context.extensions);
        let snapshot = self.broker().snapshot();
        let templates = snapshot
            .catalog
            .resources()
            .filter(|(server, _)| caller.may_read(server.as_str()))
            .flat_map(|(_, offered)| offered.templates.iter().map(resource::template))
            .collect();
        Ok(self.list_hinted(
            ListResourceTemplatesResult::with_all_items(templates),
            &context,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context.extensions);
        let server = self
            .server_of(&caller, &request.uri)
            .ok_or_else(|| refusal::unlisted_resource(&request.uri))?;
        let values = FaceCaller::of(&caller, &context.extensions);
        let (_, mut result) = self
            .broker()
            .read_resource(&server, &request.uri, &values)
            .await
            .map_err(|error| refused_request(Asked::Resource, &error))?;
        cache::complete(&mut result.result_type, &mut result.meta);
        if cache::owed(context.protocol_version().as_ref()) {
            let hints = cache::read_hints(
                result.ttl_ms,
                result.cache_scope.as_ref(),
                self.depends_on_caller(&context.extensions),
            );
            result.hint(hints);
        } else {
            // An older client is told nothing of reuse, whatever the server said.
            (result.ttl_ms, result.cache_scope) = (None, None);
        }
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context.extensions);
        let server = self
            .server_of(&caller, &request.uri)
            .ok_or_else(|| refusal::unlisted_resource(&request.uri))?;
        let key = (server.clone(), request.uri.clone());
        if !self.session.subscribed().insert(key.clone()) {
            return Ok(());
        }
        let values = FaceCaller::of(&caller, &context.extensions);
        let subscribed = self
            .broker()
            .subscribe_resource(&server, &request.uri, &values)
            .await;
        if let Err(error) = subscribed {
            self.session.subscribed().remove(&key);
            return Err(refused_request(Asked::Resource, &error));
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context.extensions);
        let ours = {
            let mut subscribed = self.session.subscribed();
            let key = subscribed
                .iter()
                .find(|(_, uri)| *uri == request.uri)
                .cloned();
            key.filter(|key| subscribed.remove(key))
        };
        if let Some((server, uri)) = ours {
            let values = FaceCaller::of(&caller, &context.extensions);
            self.broker()
                .unsubscribe_resource(&server, &uri, &values)
                .await;
        }
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session
            .level
            .store(request.level as u8, Ordering::Relaxed);
        Ok(())
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = self.caller(&context.extensions);
        // The reference as its server knows it: a prompt by its original name, a template as
        // it is.
        let server = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let snapshot = self.broker().snapshot();
                let exposed = snapshot
                    .catalog
                    .prompt(&prompt.name)
                    .filter(|_| caller.may_prompt(&prompt.name))
                    .ok_or_else(|| {
                        ErrorData::invalid_params(format!("unknown prompt {:?}", prompt.name), None)
                    })?;
                let server = exposed.server.to_string();
                prompt.name = exposed.spec.original.clone();
                server
            }
            Reference::Resource(template) => {
                self.server_of(&caller, &template.uri).ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("unknown resource template {:?}", template.uri),
                        None,
                    )
                })?
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("cannot complete {other:?}"),
                    None,
                ));
            }
        };
        let values = FaceCaller::of(&caller, &context.extensions);
        match self.broker().complete(&server, request, &values).await {
            Ok(mut result) => {
                cache::complete(&mut result.result_type, &mut result.meta);
                Ok(result)
            }
            // A server that completes nothing offers no values, as the spec allows.
            Err(RequestError::ServerError { code, .. }) if code == METHOD_NOT_FOUND => {
                Ok(CompleteResult::default())
            }
            Err(error) => Err(refused_request(Asked::Other, &error)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let caller = self.caller(&context.extensions);
        let snapshot = self.broker().snapshot();
        let prompts = snapshot
            .catalog
            .prompts()
            .values()
            .filter(|prompt| caller.may_prompt(&prompt.name))
            .map(|exposed| prompt::prompt(&exposed.name, &exposed.spec))
            .collect();
        Ok(self.list_hinted(ListPromptsResult::with_all_items(prompts), &context))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = self.caller(&context.extensions);
        if !caller.may_prompt(&request.name) {
            let denied = RequestError::PromptDenied {
                caller: caller.key.id,
                prompt: request.name,
            };
            return Err(refused_request(Asked::Other, &denied));
        }
        let values = FaceCaller::of(&caller, &context.extensions);
        let (_, mut result) = self
            .broker()
            .get_prompt(
                &request.name,
                request.arguments.unwrap_or_default(),
                &values,
            )
            .await
            .map_err(|error| refused_request(Asked::Other, &error))?;
        cache::complete(&mut result.result_type, &mut result.meta);
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self.task_status(&request.task_id, &context).await?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.answer_task(&request.task_id, &request.input_responses, &context)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel_task_of(&request.task_id, &context).await
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Ok(cache::discovered(self))
    }
}

impl Face {
    /// `list` with the hints a 2026-07-28 client is owed (none for an older one).
    fn list_hinted<L: Cacheable>(&self, mut list: L, context: &RequestContext<RoleServer>) -> L {
        if cache::owed(context.protocol_version().as_ref()) {
            list.hint(cache::list_hints(
                self.depends_on_caller(&context.extensions),
            ));
        }
        list
    }
}

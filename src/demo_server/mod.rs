//! The built-in demo MCP server (`toolbroker demo-server`): a [`DemoServer`] handler whose tools
//! exercise the protocol (text, integers, structured output, every content kind, tool errors,
//! progress and cancellation, `_meta` echo, run-time tool changes with `list_changed`, a crash),
//! and [`serve_stdio`] / [`serve_http`], which serve it over stdin/stdout or HTTP (streamable, or
//! legacy SSE).
//!
//! Shell module: it talks to peers and the clock. Its parts: `catalog` (the tool set and paging,
//! pure), `tools` (definitions and schemas, pure), `handlers` (what each tool does), `content`
//! (media, pure), and the transports `stdio`, `http` and `legacy_sse`. The handler is cheap to clone and all clones share
//! one tool set, so an HTTP transport can hand a clone to each session.

mod catalog;
mod content;
mod handlers;
mod http;
mod legacy_sse;
mod offers;
mod stdio;
mod tasks;
mod tools;

pub use self::{
    http::{HttpTransport, serve_http},
    stdio::serve_stdio,
};

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::{
    ErrorData, Peer, RoleServer, ServerHandler,
    model::{
        CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult,
        GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams,
        InitializeResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
        ReadResourceResponse, RequestMetaObject, ServerCapabilities, ServerConfig,
        SubscriptionFilter,
    },
    service::{RequestContext, SubscriptionContext},
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use self::{
    catalog::{Catalog, ToolKind},
    handlers::parse_args,
    tools::Builtin,
};

/// The name this server gives in `serverInfo`.
pub const SERVER_NAME: &str = "toolbroker-demo";

/// The `tools/list` page size the `demo-server` command uses unless told otherwise; large enough
/// for one page normally, small enough that `--extra-tools` exercises pagination.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// The process exit status of the `crash` tool.
pub const CRASH_EXIT_CODE: i32 = 3;

const INSTRUCTIONS: &str = "Demo tools for testing MCP clients and the toolbroker: echo, arithmetic, structured output, media, errors, progress, cancellation and run-time tool changes.";

/// Options of the demo server.
#[derive(Debug, Clone, Default)]
pub struct DemoOptions {
    /// How many synthetic tools (`synthetic_0001`, ...) to serve besides the built-in ones.
    pub extra_tools: usize,
    /// Tools per `tools/list` page; 0 lists every tool in one page.
    pub page_size: usize,
    /// Run one tool call at a time, as many real servers do (for replica tests and benchmarks).
    pub serial: bool,
    /// Answer `sleep` and `ask` as tasks to a 2026-07-28 client that declares the Tasks
    /// extension.
    pub tasks: bool,
}

/// The demo MCP server handler. Clones share one tool set and one set of listeners.
#[derive(Clone)]
pub struct DemoServer {
    shared: Arc<Shared>,
}

/// State shared by every clone and session.
struct Shared {
    options: DemoOptions,
    catalog: Mutex<Catalog>,
    /// Sessions that started with `initialize`: they are sent `tools/list_changed` directly.
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Wakes `subscriptions/listen` streams (protocol 2026-07-28 sessions) on every tool change.
    tools_changed: broadcast::Sender<()>,
    /// Cancelled by [`DemoServer::stop_running_tools`]: long calls and listens return at once.
    stop: CancellationToken,
    /// Held around each tool call with `serial`, so calls wait for the one running.
    one_at_a_time: tokio::sync::Mutex<()>,
    /// The tasks of `--tasks`.
    tasks: rmcp::task_manager::TaskManager,
}

impl std::fmt::Debug for DemoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoServer")
            .field("options", &self.shared.options)
            .field("tools", &self.catalog().snapshot().len())
            .finish_non_exhaustive()
    }
}

impl DemoServer {
    /// A server with the built-in tools plus `options.extra_tools` synthetic ones.
    pub fn new(options: DemoOptions) -> Self {
        // Capacity 1 is enough: a listener that lags still wakes once and tells its client to
        // re-list, which is all a list_changed says.
        let (tools_changed, _) = broadcast::channel(1);
        let shared = Shared {
            catalog: Mutex::new(Catalog::new(options.extra_tools)),
            options,
            legacy_peers: Mutex::new(Vec::new()),
            tools_changed,
            stop: CancellationToken::new(),
            one_at_a_time: tokio::sync::Mutex::new(()),
            tasks: rmcp::task_manager::TaskManager::new(),
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Makes running and future `sleep` calls and `subscriptions/listen` streams return at once,
    /// so that a closing transport need not wait for them (rmcp waits up to 5 s for in-flight
    /// responses after stdin closes).
    pub fn stop_running_tools(&self) {
        self.shared.stop.cancel();
    }

    /// The tool set. Poisoning is ignored: every critical section leaves the catalog whole.
    fn catalog(&self) -> MutexGuard<'_, Catalog> {
        self.shared
            .catalog
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn legacy_peers(&self) -> MutexGuard<'_, Vec<Peer<RoleServer>>> {
        self.shared
            .legacy_peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one tool call whose tool exists.
    async fn dispatch(
        &self,
        kind: ToolKind,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let CallToolRequestParams {
            name,
            arguments,
            meta,
            ..
        } = request;
        let args = arguments.unwrap_or_default();
        match kind {
            ToolKind::Builtin(builtin) => self.call_builtin(builtin, args, meta, context).await,
            ToolKind::Synthetic => handlers::echo_arguments::<tools::SyntheticArgs>(&name, args),
            ToolKind::Runtime => handlers::echo_arguments::<tools::RuntimeArgs>(&name, args),
        }
    }

    async fn call_builtin(
        &self,
        builtin: Builtin,
        args: JsonObject,
        params_meta: Option<RequestMetaObject>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = builtin.name();
        Ok(match builtin {
            Builtin::Echo => handlers::echo(parse_args(name, args)?),
            Builtin::Add => handlers::add(parse_args(name, args)?),
            Builtin::Stats => handlers::stats(parse_args(name, args)?),
            Builtin::Fail => handlers::fail(parse_args(name, args)?),
            Builtin::Sleep => {
                handlers::sleep(parse_args(name, args)?, &context, &self.shared.stop).await
            }
            Builtin::Ask => handlers::ask(parse_args(name, args)?, &context).await,
            Builtin::AddTool => self.add_tool(parse_args(name, args)?).await,
            Builtin::RemoveTool => self.remove_tool(parse_args(name, args)?).await,
            Builtin::TinyImage => {
                handlers::no_args(name, args)?;
                CallToolResult::success(vec![content::png_block()])
            }
            Builtin::AllContent => {
                handlers::no_args(name, args)?;
                CallToolResult::success(content::all_content_blocks())
            }
            Builtin::EchoMeta => {
                handlers::no_args(name, args)?;
                let http = context.extensions.get::<::http::request::Parts>();
                handlers::echo_meta(params_meta, &context.meta, http.map(|parts| &parts.headers))
            }
            Builtin::Whoami => {
                let http = context.extensions.get::<::http::request::Parts>();
                handlers::whoami(parse_args(name, args)?, http.map(|parts| &parts.headers))
            }
            Builtin::Crash => {
                handlers::no_args(name, args)?;
                crash()
            }
        })
    }

    /// `add_tool`: adds the tool, then tells every client before answering the caller.
    async fn add_tool(&self, args: tools::AddToolArgs) -> CallToolResult {
        let tool = tools::runtime_definition(&args.name, args.description);
        if let Err(error) = self.catalog().add_runtime(tool) {
            return handlers::tool_error(error.to_string());
        }
        tracing::info!(tool = %args.name, "tool added");
        self.announce_tools_changed().await;
        handlers::text_result(format!("added tool {}", args.name))
    }

    /// `remove_tool`: removes a run-time tool, then tells every client before answering.
    async fn remove_tool(&self, args: tools::RemoveToolArgs) -> CallToolResult {
        if let Err(error) = self.catalog().remove_runtime(&args.name) {
            return handlers::tool_error(error.to_string());
        }
        tracing::info!(tool = %args.name, "tool removed");
        self.announce_tools_changed().await;
        handlers::text_result(format!("removed tool {}", args.name))
    }

    /// Sends `notifications/tools/list_changed` to every session. Legacy sessions get it here,
    /// awaited, so the caller's own notification is written before its tool result; modern ones
    /// through their `subscriptions/listen` stream.
    async fn announce_tools_changed(&self) {
        // An error only means that no stream is listening right now.
        let _ = self.shared.tools_changed.send(());
        // Clone the peers out: the lock must not be held across the sends.
        let peers = self.legacy_peers().clone();
        for peer in peers {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "tools/list_changed not delivered to a closed session");
            }
        }
        self.legacy_peers()
            .retain(|peer| !peer.is_transport_closed());
    }

    /// Remembers a session that started with `initialize`, forgetting closed ones.
    fn register_legacy_peer(&self, peer: Peer<RoleServer>) {
        let mut peers = self.legacy_peers();
        peers.retain(|known| !known.is_transport_closed());
        peers.push(peer);
    }
}

/// The server span of one tool call, a child of the trace context the client sent in `_meta`
/// (exported when the demo server is given an OTLP endpoint), so a trace shows all three hops:
/// agent, broker, server.
fn tool_span(tool: &str, meta: &RequestMetaObject) -> tracing::Span {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let span = tracing::info_span!(
        target: "toolbroker::demo_server",
        "tool",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
    );
    let trace = crate::telemetry::context::TraceHeaders::from_meta(meta);
    if trace.traceparent.is_some() {
        let _ = span.set_parent(trace.context());
    }
    span
}

/// `crash`: the supervision test wants the pipe to close as if the server died.
fn crash() -> ! {
    tracing::warn!(
        status = CRASH_EXIT_CODE,
        "crash tool called, exiting at once"
    );
    std::process::exit(CRASH_EXIT_CODE)
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        let builder = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_prompts();
        let capabilities = if self.shared.options.tasks {
            builder.enable_tasks().build()
        } else {
            builder.build()
        };
        let mut info = Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"));
        info.icons = Some(vec![content::logo_icon()]);
        ServerConfig::new(capabilities)
            .with_server_info(info)
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Same as rmcp's default, plus registering the session for list_changed. Registering here
        // rather than on `notifications/initialized` also covers clients that skip that message.
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        self.register_legacy_peer(context.peer);
        Ok(result)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let snapshot = self.catalog().snapshot();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let page =
            catalog::page(&snapshot, cursor, self.shared.options.page_size).map_err(|bad| {
                ErrorData::invalid_params(format!("invalid cursor {:?}", bad.0), None)
            })?;
        let mut result = ListToolsResult::with_all_items(page.tools);
        result.next_cursor = page.next_cursor;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Copy the kind out so the lock is released before the tool runs.
        let kind = self.catalog().kind(&request.name);
        let Some(kind) = kind else {
            // MCP's error-handling section answers unknown tools with -32602.
            let message = format!("unknown tool: {}", request.name);
            return Err(ErrorData::invalid_params(message, None));
        };
        let span = tool_span(&request.name, &context.meta);
        if self.shared.options.tasks && tasks::taken(&context) {
            let args = request.arguments.clone().unwrap_or_default();
            let _entered = span.enter();
            match kind {
                ToolKind::Builtin(Builtin::Sleep) => {
                    let args = parse_args("sleep", args)?;
                    let stop = self.shared.stop.clone();
                    return Ok(tasks::sleep(&self.shared.tasks, args, stop));
                }
                ToolKind::Builtin(Builtin::Ask) => {
                    return tasks::ask(&self.shared.tasks, parse_args("ask", args)?);
                }
                _ => {}
            }
        }
        if kind == ToolKind::Builtin(Builtin::Ask)
            && context
                .protocol_version()
                .is_some_and(|version| !version.has_initialize())
        {
            let args = parse_args("ask", request.arguments.clone().unwrap_or_default())?;
            let _entered = span.enter();
            return Ok(handlers::ask_in_rounds(
                args,
                request.input_responses.as_ref(),
                &context,
            ));
        }
        let _turn = if self.shared.options.serial {
            Some(self.shared.one_at_a_time.lock().await)
        } else {
            None
        };
        let result = self
            .dispatch(kind, request, context)
            .instrument(span)
            .await?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(offers::resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            offers::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let mut result = offers::read(&request.uri)?;
        if context
            .protocol_version()
            .is_some_and(|version| !version.has_initialize())
        {
            // Its resources never change and are the same for everyone.
            result = result
                .with_ttl_ms(offers::READ_TTL_MS)
                .with_cache_scope(CacheScope::Public);
        }
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(offers::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        offers::get_prompt(&request.name, request.arguments.unwrap_or_default()).map(Into::into)
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let task = self.shared.tasks.get_task(&request.task_id)?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel_task(&request.task_id)
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let snapshot = self.catalog().snapshot();
        snapshot.iter().find(|tool| tool.name == name).cloned()
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    /// Forwards tool changes to one `subscriptions/listen` stream until the client cancels it or
    /// the server stops; returning ends the stream with its final result.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let stop = &self.shared.stop;
        if context.accepted().tools_list_changed != Some(true) {
            tokio::select! {
                () = context.cancelled() => {}
                () = stop.cancelled() => {}
            }
            return Ok(());
        }
        let mut changes = self.shared.tools_changed.subscribe();
        loop {
            tokio::select! {
                biased;
                () = context.cancelled() => return Ok(()),
                () = stop.cancelled() => return Ok(()),
                change = changes.recv() => {
                    // Lagged still means "changed"; Closed cannot happen while `self` lives.
                    if let Err(broadcast::error::RecvError::Closed) = change {
                        return Ok(());
                    }
                    if context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

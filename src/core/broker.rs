//! The broker: the single writer of the catalog. Supervisors report to it (it is their
//! [`Reporter`]); gRPC handlers read its snapshots, follow its events and route calls through it.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use rmcp::model::{
    CallToolResult, ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult,
    GetPromptRequest, GetPromptRequestParams, GetPromptResult, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResult, ServerResult,
};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};

use super::{rate_limits::RateLimits, tool_call::ToolCall};
use crate::{
    domain::{
        call::{Timing, effective_timeout, prepare_arguments},
        caller::CallerValues,
        catalog::{Catalog, Event, Outcome, ServerPolicy, ServerView, Update},
        config::{Config, kept_note},
        names::ServerName,
        offer::{PromptSpec, Resources},
        overrides,
        request_error::{INVALID_PARAMS, METHOD_NOT_FOUND, RequestError},
        state::ServerCondition,
        tool::{ExposedTool, ToolSpec},
        views::Views,
    },
    shared_state::Shared,
    upstream::{Reporter, Upstream},
};

/// MCP's "resource not found" error code.
const RESOURCE_NOT_FOUND: i32 = -32002;

/// Events a watcher may fall behind by before it is sent a fresh snapshot instead.
const EVENT_BUFFER: usize = 1024;

/// What readers see: the catalog and the live sessions, as of one revision.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Servers and exposed tools.
    pub catalog: Catalog,
    /// A call handle for every READY server.
    pub sessions: HashMap<ServerName, Upstream>,
    /// The call rates in force (replaced on reload): read with the snapshot each call takes
    /// anyway, so checking them costs no lock.
    pub rates: Arc<RateLimits>,
    /// The views in force (replaced on reload).
    pub views: Arc<Views>,
    /// Where each server's rates and OAuth tokens are kept, for people (servers with neither
    /// are absent).
    pub kept: Arc<HashMap<ServerName, String>>,
}

impl Snapshot {
    /// How many per-caller sessions `server` has open (0 for a shared or unready server).
    pub fn caller_sessions(&self, server: &ServerName) -> usize {
        self.sessions
            .get(server)
            .and_then(Upstream::caller_sessions)
            .unwrap_or(0)
    }

    /// Whether a READY server opens a session per caller (what it offers may differ by caller).
    pub fn has_per_caller_server(&self) -> bool {
        self.sessions
            .values()
            .any(|upstream| upstream.caller_sessions().is_some())
    }
}

/// A finished call: the tool's result and the server that ran it.
#[derive(Clone, Debug)]
pub struct Called {
    /// The server that ran the tool.
    pub server: ServerName,
    /// What the tool returned.
    pub result: CallToolResult,
}

/// Shared handle to the broker.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

struct Inner {
    /// The one writable copy; the lock is held only to apply an update and publish it.
    state: Mutex<Snapshot>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    events: broadcast::Sender<Arc<Event>>,
    watchers: AtomicUsize,
    /// `notifications/resources/updated` of every server, for the MCP face's subscribers.
    updates: broadcast::Sender<Arc<ResourceUpdated>>,
    /// How many subscribers each (server, URI) has: subscribed upstream from the first,
    /// unsubscribed after the last.
    subscribers: Mutex<HashMap<(ServerName, String), usize>>,
    /// The Redis replicas share (`state.redis`), where rates are kept.
    shared: Option<Shared>,
}

/// A server said one of its resources changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUpdated {
    /// The server.
    pub server: ServerName,
    /// The resource.
    pub uri: String,
}

/// Held by each Watch stream; counts it while it lives.
pub struct WatcherGuard {
    inner: Arc<Inner>,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        let left = self.inner.watchers.fetch_sub(1, Ordering::Relaxed) - 1;
        tracing::debug!(watchers = left, "a watcher left");
    }
}

impl Broker {
    /// A broker for these servers (in configuration order), each in its initial condition,
    /// keeping its rate budgets in `shared` when given.
    pub fn new(servers: Vec<(ServerPolicy, ServerCondition)>, shared: Option<Shared>) -> Self {
        let state = Snapshot {
            catalog: Catalog::new(servers),
            sessions: HashMap::new(),
            rates: Arc::default(),
            views: Arc::default(),
            kept: Arc::default(),
        };
        let (snapshots, _) = watch::channel(Arc::new(state.clone()));
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (updates, _) = broadcast::channel(EVENT_BUFFER);
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                snapshots,
                events,
                watchers: AtomicUsize::new(0),
                updates,
                subscribers: Mutex::default(),
                shared,
            }),
        }
    }

    /// Applies a change under the lock, then publishes the snapshot and the events in order.
    fn update(&self, change: impl FnOnce(&mut Snapshot) -> Outcome) {
        let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = change(&mut state);
        for (server, warning) in &outcome.warnings {
            tracing::warn!(%server, "{warning}");
        }
        self.inner.snapshots.send_replace(Arc::new(state.clone()));
        for event in outcome.events {
            // No receivers is fine: nobody is watching.
            let _ = self.inner.events.send(Arc::new(event));
        }
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snapshots.borrow().clone()
    }

    /// A receiver that sees every new snapshot (for health reporting).
    pub fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.inner.snapshots.subscribe()
    }

    /// The current snapshot and the events that follow it, with nothing lost in between, and a
    /// guard that counts the watcher while it lives.
    pub fn subscribe(&self) -> (Arc<Snapshot>, broadcast::Receiver<Arc<Event>>, WatcherGuard) {
        let _state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let watchers = self.inner.watchers.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(watchers, "a watcher joined");
        let guard = WatcherGuard {
            inner: self.inner.clone(),
        };
        (self.snapshot(), self.inner.events.subscribe(), guard)
    }

    /// The catalog's events from now on (for the MCP face's list changes: not a Watch stream,
    /// so not counted as one).
    pub fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.inner.events.subscribe()
    }

    /// Enforces `config`'s call rates and serves its views from now on; a rate that did not
    /// change keeps its state, and new views are announced with a `Views` event.
    pub fn set_rules(&self, config: &Config) {
        self.update(|state| {
            state.rates = Arc::new(RateLimits::new(
                config,
                Some(&state.rates),
                self.inner.shared.as_ref(),
            ));
            let kept = config
                .servers
                .iter()
                .filter_map(|spec| {
                    let note = kept_note(
                        spec,
                        config.limits.caller_rate.is_some(),
                        self.inner.shared.as_ref().map(Shared::place),
                    )?;
                    Some((spec.name.clone(), note))
                })
                .collect();
            state.kept = Arc::new(kept);
            let views = Views::new(&config.views);
            if *state.views == views {
                return Outcome::default();
            }
            state.views = Arc::new(views);
            state.catalog.views_changed()
        });
    }

    /// How many Watch streams are open.
    pub fn watchers(&self) -> usize {
        self.inner.watchers.load(Ordering::Relaxed)
    }

    /// Calls the tool exposed as `name` for `caller` (a per-caller server runs it in that
    /// caller's session), carrying the caller's trace context. A streaming call's
    /// `conversation` receives what the server sends during the call, and progress keeps the
    /// call alive up to the server's `max_timeout`.
    pub async fn call(&self, call: ToolCall<'_>) -> Result<Called, RequestError> {
        let ToolCall {
            name,
            arguments,
            timeout: requested_timeout,
            deadline,
            trace,
            values: caller,
            conversation,
            ..
        } = call;
        let snapshot = self.snapshot();
        let (tool, upstream) = route(&snapshot, name)?;
        // The RPC's span (and so every log line of this call) names the server.
        tracing::Span::current().record("server", tool.server.as_str());
        snapshot.rates.admit(caller.key(), &tool.server).await?;
        let mut arguments = prepare_arguments(arguments, tool.spec.input_schema())?;
        // The caller's arguments are checked against the schema it was shown (fixed ones
        // removed); the fixed ones are added after.
        let fixed_sent = overrides::fixed_sent(&arguments, &tool.fixed);
        if !fixed_sent.is_empty() {
            return Err(RequestError::InvalidArguments(fixed_sent));
        }
        let unusable = |why: &str| {
            tracing::warn!(server = %tool.server, tool = %tool.name, %why,
                "the tool's input schema cannot be compiled; its arguments pass unchecked");
        };
        tool.spec
            .check_arguments(&arguments, unusable)
            .map_err(RequestError::InvalidArguments)?;
        arguments.extend(tool.fixed.iter().map(|(k, v)| (k.clone(), v.clone())));
        let timing = match &conversation {
            None => Timing::unary(effective_timeout(
                requested_timeout,
                upstream.timeout(),
                deadline,
            )?),
            Some(_) => Timing::streaming(
                requested_timeout,
                upstream.timeout(),
                upstream.max_timeout(),
                deadline,
            )?,
        };
        // Boxed: the call's future is kilobytes, and every future above this one (the RPC's,
        // the MCP face's) would otherwise hold it and be copied with it.
        let result = Box::pin(upstream.call(
            &tool.spec.original,
            arguments,
            timing,
            trace,
            caller,
            conversation,
        ))
        .await?;
        Ok(Called {
            server: tool.server.clone(),
            result,
        })
    }

    /// Reads the resource `uri` of `server` for `caller` (in the caller's own session for a
    /// per-caller server), within the server's timeout.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        caller: &dyn CallerValues,
    ) -> Result<(ServerName, ReadResourceResult), RequestError> {
        let upstream = self.with_resources(server)?;
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        match upstream.request(caller, request, upstream.timeout()).await {
            Ok(ServerResult::ReadResourceResult(result)) => Ok((upstream.server().clone(), result)),
            Ok(_) => Err(RequestError::BadResult {
                server: upstream.server().clone(),
                reason: "it answered resources/read with something else".into(),
            }),
            Err(RequestError::ServerError {
                server,
                code,
                message,
            }) if code == RESOURCE_NOT_FOUND || code == INVALID_PARAMS => {
                Err(RequestError::UnknownResource {
                    server,
                    uri: uri.into(),
                    message,
                })
            }
            // A server whose session did not say what it offers, and that has no resources.
            Err(RequestError::ServerError { server, code, .. }) if code == METHOD_NOT_FOUND => {
                Err(RequestError::NoResources { server })
            }
            Err(error) => Err(error),
        }
    }

    /// Gets the prompt exposed as `name`, filled in with `arguments`, for `caller`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        caller: &dyn CallerValues,
    ) -> Result<(ServerName, GetPromptResult), RequestError> {
        let prompt = self
            .snapshot()
            .catalog
            .prompt(name)
            .cloned()
            .ok_or_else(|| RequestError::UnknownPrompt { name: name.into() })?;
        let upstream = self.ready(prompt.server.as_str())?;
        let mut params = GetPromptRequestParams::new(prompt.spec.original.clone());
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match upstream
            .request(caller, request, upstream.timeout())
            .await?
        {
            ServerResult::GetPromptResult(result) => Ok((prompt.server.clone(), result)),
            _ => Err(RequestError::BadResult {
                server: prompt.server.clone(),
                reason: "it answered prompts/get with something else".into(),
            }),
        }
    }

    /// Every `notifications/resources/updated` from now on.
    pub fn resource_updates(&self) -> broadcast::Receiver<Arc<ResourceUpdated>> {
        self.inner.updates.subscribe()
    }

    /// Subscribes to `server`'s resource `uri` (upstream, for its first subscriber).
    pub async fn subscribe_resource(
        &self,
        server: &str,
        uri: &str,
        caller: &dyn CallerValues,
    ) -> Result<(), RequestError> {
        let upstream = self.with_resources(server)?;
        let key = (upstream.server().clone(), uri.to_owned());
        let first = {
            let mut subscribers = self.subscribers();
            let count = subscribers.entry(key.clone()).or_default();
            *count += 1;
            *count == 1
        };
        if !first {
            return Ok(());
        }
        let subscribed = upstream.follow_resource(caller, uri, true).await;
        if subscribed.is_err() {
            self.forget(&key);
        }
        subscribed.map(|_| ())
    }

    /// Drops one subscriber of `server`'s `uri` (and the upstream subscription after the last).
    pub async fn unsubscribe_resource(&self, server: &str, uri: &str, caller: &dyn CallerValues) {
        let Ok(upstream) = self.ready(server) else {
            return;
        };
        if !self.forget(&(upstream.server().clone(), uri.to_owned())) {
            return;
        }
        if let Err(error) = upstream.follow_resource(caller, uri, false).await {
            tracing::debug!(%server, uri, %error, "unsubscribing failed");
        }
    }

    /// One subscriber fewer; whether it was the last.
    fn forget(&self, key: &(ServerName, String)) -> bool {
        let mut subscribers = self.subscribers();
        match subscribers.get_mut(key) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                subscribers.remove(key);
                true
            }
            None => false,
        }
    }

    fn subscribers(&self) -> std::sync::MutexGuard<'_, HashMap<(ServerName, String), usize>> {
        self.inner
            .subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Asks `server` for completions of an argument of one of its prompts or resource
    /// templates (`params.ref` already names it as the server knows it).
    pub async fn complete(
        &self,
        server: &str,
        params: CompleteRequestParams,
        caller: &dyn CallerValues,
    ) -> Result<CompleteResult, RequestError> {
        let upstream = self.ready(server)?;
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        match upstream
            .request(caller, request, upstream.timeout())
            .await?
        {
            ServerResult::CompleteResult(result) => Ok(result),
            _ => Err(RequestError::BadResult {
                server: upstream.server().clone(),
                reason: "it answered completion/complete with something else".into(),
            }),
        }
    }

    /// The call handle of a READY server; why not, otherwise.
    fn ready(&self, server: &str) -> Result<Upstream, RequestError> {
        let snapshot = self.snapshot();
        if let Some(upstream) = snapshot.sessions.get(server) {
            return Ok(upstream.clone());
        }
        match snapshot.catalog.server(server) {
            Some(view) => Err(not_ready(view)),
            None => Err(RequestError::UnknownServer {
                name: server.into(),
            }),
        }
    }

    /// The call handle of `server` if it is ready and serves resources: a server that
    /// announced none is not asked (it would answer "method not found").
    fn with_resources(&self, server: &str) -> Result<Upstream, RequestError> {
        let upstream = self.ready(server)?;
        match upstream.offers_resources() {
            Some(false) => Err(RequestError::NoResources {
                server: upstream.server().clone(),
            }),
            Some(true) | None => Ok(upstream),
        }
    }

    /// The server a tool exposed as `name` belongs to (ready or not), if any.
    pub fn owner(&self, name: &str) -> Option<String> {
        match route(&self.snapshot(), name) {
            Ok((tool, _)) => Some(tool.server.to_string()),
            Err(RequestError::NotReady { server, .. }) => Some(server.to_string()),
            Err(_) => None,
        }
    }
}

/// The tool exposed as `name` and its server's call handle; why not, otherwise.
fn route<'a>(
    snapshot: &'a Snapshot,
    name: &str,
) -> Result<(&'a Arc<ExposedTool>, &'a Upstream), RequestError> {
    let catalog = &snapshot.catalog;
    let owner = match catalog.tool(name) {
        Some(tool) => match snapshot.sessions.get(&tool.server) {
            Some(upstream) => return Ok((tool, upstream)),
            None => catalog.server(tool.server.as_str()),
        },
        None => catalog.unready_owner(name),
    };
    match owner {
        Some(view) => Err(not_ready(view)),
        None => Err(RequestError::UnknownTool { name: name.into() }),
    }
}

/// A server without a call handle: not READY, as its status says.
fn not_ready(view: &ServerView) -> RequestError {
    RequestError::NotReady {
        server: view.name.clone(),
        state: view.condition.state,
        message: view.message.clone(),
    }
}

impl Reporter for Broker {
    fn condition(
        &self,
        server: &ServerName,
        condition: ServerCondition,
        upstream: Option<Upstream>,
    ) {
        self.update(|state| {
            match upstream {
                Some(upstream) => state.sessions.insert(server.clone(), upstream),
                None => state.sessions.remove(server),
            };
            state
                .catalog
                .apply(Update::Condition(server.clone(), condition))
        });
    }

    fn tools(&self, server: &ServerName, tools: Vec<ToolSpec>) {
        self.update(|state| state.catalog.apply(Update::Tools(server.clone(), tools)));
    }

    fn resources(&self, server: &ServerName, resources: Resources) {
        self.update(|state| {
            state
                .catalog
                .apply(Update::Resources(server.clone(), resources))
        });
    }

    fn resource_updated(&self, server: &ServerName, uri: String) {
        // No receivers is fine: nobody subscribed through the face.
        let _ = self.inner.updates.send(Arc::new(ResourceUpdated {
            server: server.clone(),
            uri,
        }));
    }

    fn prompts(&self, server: &ServerName, prompts: Vec<PromptSpec>) {
        self.update(|state| {
            state
                .catalog
                .apply(Update::Prompts(server.clone(), prompts))
        });
    }

    /// Servers no longer configured are dropped from the catalog (after a last status) and
    /// their sessions forgotten (see [`Catalog::configure`]).
    fn configure(&self, servers: Vec<(ServerPolicy, ServerCondition)>) {
        self.update(|state| {
            state
                .sessions
                .retain(|name, _| servers.iter().any(|(policy, _)| &policy.name == name));
            state.catalog.configure(servers)
        });
    }
}

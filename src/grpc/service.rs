//! The `toolbroker.v1.ToolBroker` service: thin handlers that decode, ask the broker, encode.

use std::{
    pin::Pin,
    sync::{Arc, Mutex},
};

use futures::{Stream, StreamExt as _};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::{
    convert, deadline, listing::EncodedTools, observe::observe, status, visibility::Visibility,
    watch::Watcher,
};
use crate::{
    auth,
    broker::{Broker, Snapshot},
    domain::call::RawArguments,
    proto::{self, tool_broker_server::ToolBroker},
    telemetry::context::TraceHeaders,
};

/// The gRPC face of the broker.
pub struct BrokerService {
    broker: Broker,
    stop: CancellationToken,
    max_response_bytes: usize,
    tools: Mutex<Option<ToolCache>>,
    in_flight: watch::Sender<usize>,
}

/// Counts a CallTool while it runs, so that shutdown can wait for the calls in flight.
struct Running<'a>(&'a watch::Sender<usize>);

impl<'a> Running<'a> {
    fn start(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The proto form of every tool, built once per catalog revision.
#[derive(Clone)]
struct ToolCache {
    revision: u64,
    tools: Arc<Vec<proto::Tool>>,
    /// The same tools, encoded for ListTools.
    encoded: Arc<EncodedTools>,
}

impl BrokerService {
    /// A service over `broker`; `stop` ends Watch streams at shutdown; no response may exceed
    /// `max_response_bytes`.
    pub fn new(broker: Broker, stop: CancellationToken, max_response_bytes: usize) -> Self {
        Self {
            broker,
            stop,
            max_response_bytes,
            tools: Mutex::new(None),
            in_flight: watch::channel(0).0,
        }
    }

    /// Resolves once no CallTool is running (new ones are refused once `stop` is cancelled).
    pub async fn idle(&self) {
        let mut count = self.in_flight.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }

    pub(super) fn broker(&self) -> &Broker {
        &self.broker
    }

    /// Resolves when the broker starts shutting down.
    pub(super) async fn stopping(&self) {
        self.stop.cancelled().await
    }

    /// The message, or RESOURCE_EXHAUSTED when it is over `limits.max_response_bytes`.
    pub(super) fn within_limit<M: prost::Message>(&self, message: M) -> Result<M, Status> {
        let size = message.encoded_len();
        if size > self.max_response_bytes {
            return Err(Status::resource_exhausted(format!(
                "the response would be {size} bytes, over limits.max_response_bytes ({}); \
                 ask for fewer servers or raise the limit",
                self.max_response_bytes
            )));
        }
        Ok(message)
    }

    /// Every tool in proto form for this snapshot's revision, converted and encoded at most
    /// once.
    fn cached_tools(&self, snapshot: &Snapshot) -> ToolCache {
        let revision = snapshot.catalog.revision();
        let mut cache = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        match &*cache {
            Some(cached) if cached.revision == revision => cached.clone(),
            _ => {
                let tools: Vec<_> = snapshot
                    .catalog
                    .tools()
                    .values()
                    .map(|t| convert::tool(t))
                    .collect();
                let cached = ToolCache {
                    revision,
                    encoded: Arc::new(EncodedTools::new(&tools, revision)),
                    tools: Arc::new(tools),
                };
                *cache = Some(cached.clone());
                cached
            }
        }
    }

    pub(super) fn snapshot_event(
        &self,
        snapshot: &Snapshot,
        visibility: &Visibility,
    ) -> proto::WatchEvent {
        let snapshot_message = proto::Snapshot {
            tools: self.visible_tools(snapshot, visibility),
            servers: snapshot
                .catalog
                .servers()
                .filter(|view| visibility.server(view.name.as_str()))
                .map(convert::server_status)
                .collect(),
        };
        proto::WatchEvent {
            revision: snapshot.catalog.revision(),
            event: Some(proto::watch_event::Event::Snapshot(snapshot_message)),
        }
    }

    fn visible_tools(&self, snapshot: &Snapshot, visibility: &Visibility) -> Vec<proto::Tool> {
        let tools = self.cached_tools(snapshot).tools;
        if visibility.everything() {
            return tools.as_ref().clone();
        }
        tools
            .iter()
            .filter(|t| visibility.tool(t))
            .cloned()
            .collect()
    }

    /// CallTool: decode, ask the broker, encode; the error logged where it is handled.
    async fn call(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<Response<proto::CallToolResponse>, Status> {
        let _running = Running::start(&self.in_flight);
        if self.stop.is_cancelled() {
            return Err(Status::unavailable(
                "the broker is shutting down; retry on another instance",
            ));
        }
        let caller = auth::caller(&request);
        let deadline = deadline::from_metadata(request.metadata());
        let trace = TraceHeaders::from_lookup(|name| {
            request
                .metadata()
                .get(name)?
                .to_str()
                .ok()
                .map(str::to_owned)
        });
        let request = request.into_inner();
        tracing::Span::current().record("tool", request.name.as_str());
        if !caller.may_use(&request.name) {
            tracing::debug!(tool = %request.name, caller = %caller.name, "call denied");
            return Err(Status::permission_denied(format!(
                "the token {:?} may not call {:?} (auth.tokens[].tools)",
                caller.name, request.name
            )));
        }
        let outcome = async {
            let arguments = RawArguments {
                structured: request.arguments.map(convert::struct_to_json).transpose()?,
                json: request.arguments_json,
            };
            let timeout = request.timeout.map(convert::duration).transpose()?;
            let called = self
                .broker
                .call(&request.name, arguments, timeout, deadline, &trace)
                .await?;
            convert::call_response(&called.server, called.result)
        };
        match outcome.await {
            Ok(response) => Ok(Response::new(self.within_limit(response)?)),
            Err(error) => {
                if status::is_caller_mistake(&error) {
                    tracing::debug!(tool = %request.name, %error, "call refused");
                } else {
                    tracing::warn!(tool = %request.name, %error, "call failed");
                }
                Err(status::from_call_error(&error))
            }
        }
    }
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
            let visibility = Visibility::new(request.into_inner().servers, caller, &snapshot)?;
            let cached = self.cached_tools(&snapshot);
            let everything = visibility.everything();
            let response = cached
                .encoded
                .response(|i| everything || visibility.tool(&cached.tools[i]));
            Ok(Response::new(self.within_limit(response)?))
        })
        .await
    }

    async fn call_tool(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<Response<proto::CallToolResponse>, Status> {
        observe("CallTool", self.call(request)).await
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<proto::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let caller = auth::caller(&request);
        let (snapshot, events, guard) = self.broker.subscribe();
        let visibility = Visibility::new(request.into_inner().servers, caller, &snapshot)?;
        let first = self.within_limit(self.snapshot_event(&snapshot, &visibility))?;
        let watcher = Watcher {
            service: self.clone(),
            events,
            visibility,
            seen: snapshot.catalog.revision(),
            _guard: guard,
        };
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
                .map(convert::server_status)
                .collect();
            Ok(Response::new(proto::ListServersResponse { servers }))
        })
        .await
    }
}

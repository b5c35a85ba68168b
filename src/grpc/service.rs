//! The `toolbroker.v1.ToolBroker` service: thin handlers that decode, ask the broker, encode.

use std::{
    pin::Pin,
    sync::{Arc, Mutex},
};

use futures::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::{convert, deadline, observe::observe, status};
use crate::{
    broker::{Broker, Snapshot, WatcherGuard},
    domain::{call::RawArguments, catalog::Event},
    proto::{self, tool_broker_server::ToolBroker},
    telemetry::context::TraceHeaders,
};

/// The gRPC face of the broker.
pub struct BrokerService {
    broker: Broker,
    stop: CancellationToken,
    tools: Mutex<Option<ToolCache>>,
}

/// The proto form of every tool, built once per catalog revision.
#[derive(Clone)]
struct ToolCache {
    revision: u64,
    tools: Arc<Vec<proto::Tool>>,
}

/// Only the servers a request names; all when it names none.
struct ServerFilter(Vec<String>);

impl ServerFilter {
    /// Checks that every named server exists.
    fn new(servers: Vec<String>, snapshot: &Snapshot) -> Result<Self, Status> {
        if let Some(unknown) = servers
            .iter()
            .find(|name| snapshot.catalog.server(name).is_none())
        {
            return Err(Status::not_found(format!(
                "unknown server {unknown:?}; ListServers shows the configured servers"
            )));
        }
        Ok(Self(servers))
    }

    fn allows(&self, server: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|s| s == server)
    }
}

impl BrokerService {
    /// A service over `broker`; `stop` ends Watch streams at shutdown.
    pub fn new(broker: Broker, stop: CancellationToken) -> Self {
        Self {
            broker,
            stop,
            tools: Mutex::new(None),
        }
    }

    /// Every tool in proto form for this snapshot's revision, converted at most once.
    fn proto_tools(&self, snapshot: &Snapshot) -> Arc<Vec<proto::Tool>> {
        let revision = snapshot.catalog.revision();
        let mut cache = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        match &*cache {
            Some(cached) if cached.revision == revision => cached.tools.clone(),
            _ => {
                let tools: Vec<_> = snapshot
                    .catalog
                    .tools()
                    .values()
                    .map(|t| convert::tool(t))
                    .collect();
                let tools = Arc::new(tools);
                *cache = Some(ToolCache {
                    revision,
                    tools: tools.clone(),
                });
                tools
            }
        }
    }

    /// CallTool: decode, ask the broker, encode; the error logged where it is handled.
    async fn call(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<Response<proto::CallToolResponse>, Status> {
        if self.stop.is_cancelled() {
            return Err(Status::unavailable(
                "the broker is shutting down; retry on another instance",
            ));
        }
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
        let span = tracing::Span::current();
        span.record("tool", request.name.as_str());
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
            Ok(response) => Ok(Response::new(response)),
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

    fn snapshot_event(&self, snapshot: &Snapshot, filter: &ServerFilter) -> proto::WatchEvent {
        let snapshot_message = proto::Snapshot {
            tools: self.filtered_tools(snapshot, filter),
            servers: snapshot
                .catalog
                .servers()
                .filter(|view| filter.allows(view.name.as_str()))
                .map(convert::server_status)
                .collect(),
        };
        proto::WatchEvent {
            revision: snapshot.catalog.revision(),
            event: Some(proto::watch_event::Event::Snapshot(snapshot_message)),
        }
    }

    fn filtered_tools(&self, snapshot: &Snapshot, filter: &ServerFilter) -> Vec<proto::Tool> {
        let tools = self.proto_tools(snapshot);
        if filter.0.is_empty() {
            return tools.as_ref().clone();
        }
        tools
            .iter()
            .filter(|t| filter.allows(&t.server))
            .cloned()
            .collect()
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
            let filter = ServerFilter::new(request.into_inner().servers, &snapshot)?;
            Ok(Response::new(proto::ListToolsResponse {
                tools: self.filtered_tools(&snapshot, &filter),
                revision: snapshot.catalog.revision(),
            }))
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
        let (snapshot, events, guard) = self.broker.subscribe();
        let filter = ServerFilter::new(request.into_inner().servers, &snapshot)?;
        let first = self.snapshot_event(&snapshot, &filter);
        let watcher = Watcher {
            service: self.clone(),
            events,
            filter,
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

use futures::StreamExt as _;

/// One Watch stream's position: it has seen everything up to revision `seen`.
struct Watcher {
    service: Arc<BrokerService>,
    events: broadcast::Receiver<Arc<Event>>,
    filter: ServerFilter,
    seen: u64,
    /// Counts this stream while tonic holds it: a client that goes away drops it.
    _guard: WatcherGuard,
}

impl Watcher {
    /// The next event for this watcher; a fresh snapshot if it fell behind; none at shutdown.
    async fn next(mut self) -> Option<(Result<proto::WatchEvent, Status>, Self)> {
        loop {
            let received = tokio::select! {
                biased;
                _ = self.service.stop.cancelled() => return None,
                received = self.events.recv() => received,
            };
            match received {
                Ok(event) if event.revision <= self.seen => continue,
                Ok(event) => {
                    self.seen = event.revision;
                    if self.filter.allows(event.server().as_str()) {
                        return Some((Ok(convert::watch_event(&event)), self));
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a watcher fell behind; sending a fresh snapshot");
                    let snapshot = self.service.broker.snapshot();
                    self.seen = snapshot.catalog.revision();
                    let event = self.service.snapshot_event(&snapshot, &self.filter);
                    return Some((Ok(event), self));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

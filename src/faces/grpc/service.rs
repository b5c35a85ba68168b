//! The `toolbroker.v1.ToolBroker` service: thin handlers that decode, ask the broker, encode.

use std::{pin::Pin, sync::Arc};

use futures::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};

use super::{
    audit_draft,
    broker_service::{BrokerService, refused},
    call_stream, messages,
    observe::observe,
    offers, operations,
    pre_encoded::PreEncoded,
    search,
    visibility::Visibility,
    watch::Watcher,
};
use crate::{
    auth,
    proto::{self, tool_broker_server::ToolBroker},
};

/// The stream type of Watch.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<proto::WatchEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ToolBroker for Arc<BrokerService> {
    async fn list_tools(
        &self,
        request: Request<proto::ListToolsRequest>,
    ) -> Result<Response<proto::ListToolsResponse>, Status> {
        observe("ListTools", async {
            let snapshot = self.broker().snapshot();
            let caller = auth::caller(request.extensions());
            let request = request.into_inner();
            let visibility = Visibility::new(request.servers, request.view, caller, &snapshot)
                .map_err(refused)?;
            let cached = self.tools.tools(&snapshot);
            let response = cached.encoded.response(visibility.keep(&cached.exposed));
            let response = self.limit.check(response).map_err(refused)?;
            let chunks = response.encoded_chunks().map(<[_]>::to_vec);
            let mut response = Response::new(response);
            if let Some(chunks) = chunks {
                response.extensions_mut().insert(PreEncoded(chunks));
            }
            Ok(response)
        })
        .await
    }

    async fn start_tool_call(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<Response<proto::google::longrunning::Operation>, Status> {
        observe("StartToolCall", async {
            let started = operations::start(self, request).await;
            started.map(Response::new).map_err(refused)
        })
        .await
    }

    async fn answer_tool_call(
        &self,
        request: Request<proto::AnswerToolCallRequest>,
    ) -> Result<Response<()>, Status> {
        observe("AnswerToolCall", async {
            let answered = operations::answer(self, request).await;
            answered.map(Response::new).map_err(refused)
        })
        .await
    }

    async fn call_tool(
        &self,
        request: Request<proto::CallToolRequest>,
    ) -> Result<Response<proto::CallToolResponse>, Status> {
        observe("CallTool", async {
            let pending = self.calls.audited(|with_arguments| {
                audit_draft::draft(
                    request.get_ref(),
                    request.metadata(),
                    request.extensions(),
                    with_arguments,
                )
            });
            // One await of the call, not one per branch: each would take its own room in
            // this future, which is copied as it is boxed and polled.
            let mut result = self.call(request).await;
            if let Some(pending) = pending {
                // Written before the answer is sent.
                result = audit_draft::finish(pending, result).await;
            }
            result.map(Response::new).map_err(refused)
        })
        .await
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<proto::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let caller = auth::caller(request.extensions());
        let request = request.into_inner();
        let (first, watcher) =
            Watcher::open(self.feed(), request.servers, request.view, caller).map_err(refused)?;
        let rest = futures::stream::unfold(watcher, Watcher::next);
        let stream = futures::stream::once(async { Ok(first) }).chain(rest);
        Ok(Response::new(Box::pin(stream)))
    }

    type CallToolStreamStream = call_stream::CallStream;

    async fn call_tool_stream(
        &self,
        request: Request<Streaming<proto::CallToolStreamRequest>>,
    ) -> Result<Response<Self::CallToolStreamStream>, Status> {
        call_stream::open(self.clone(), request).await
    }

    async fn list_resources(
        &self,
        request: Request<proto::ListResourcesRequest>,
    ) -> Result<Response<proto::ListResourcesResponse>, Status> {
        observe("ListResources", async {
            let response = offers::list_resources(self.broker(), request).map_err(refused)?;
            Ok(Response::new(self.limit.check(response).map_err(refused)?))
        })
        .await
    }

    async fn read_resource(
        &self,
        request: Request<proto::ReadResourceRequest>,
    ) -> Result<Response<proto::ReadResourceResponse>, Status> {
        observe("ReadResource", async {
            let response = offers::read_resource(self.broker(), request)
                .await
                .map_err(refused)?;
            Ok(Response::new(self.limit.check(response).map_err(refused)?))
        })
        .await
    }

    async fn list_prompts(
        &self,
        request: Request<proto::ListPromptsRequest>,
    ) -> Result<Response<proto::ListPromptsResponse>, Status> {
        observe("ListPrompts", async {
            let response = offers::list_prompts(self.broker(), request).map_err(refused)?;
            Ok(Response::new(self.limit.check(response).map_err(refused)?))
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: Request<proto::GetPromptRequest>,
    ) -> Result<Response<proto::GetPromptResponse>, Status> {
        observe("GetPrompt", async {
            let response = offers::get_prompt(self.broker(), request)
                .await
                .map_err(refused)?;
            Ok(Response::new(self.limit.check(response).map_err(refused)?))
        })
        .await
    }

    async fn search_tools(
        &self,
        request: Request<proto::SearchToolsRequest>,
    ) -> Result<Response<proto::SearchToolsResponse>, Status> {
        observe("SearchTools", async {
            let snapshot = self.broker().snapshot();
            let caller = auth::caller(request.extensions());
            let request = request.into_inner();
            let visibility = Visibility::new(request.servers, request.view, caller, &snapshot)
                .map_err(refused)?;
            let cached = self.tools.tools(&snapshot);
            let (query, limit) = (&request.query, request.limit);
            let response = search::search(query, limit, &visibility, &cached, snapshot.clone())
                .await
                .map_err(refused)?;
            Ok(Response::new(self.limit.check(response).map_err(refused)?))
        })
        .await
    }

    async fn list_servers(
        &self,
        request: Request<proto::ListServersRequest>,
    ) -> Result<Response<proto::ListServersResponse>, Status> {
        observe("ListServers", async {
            let caller = auth::caller(request.extensions());
            let snapshot = self.broker().snapshot();
            let visibility =
                Visibility::new(Vec::new(), String::new(), caller, &snapshot).map_err(refused)?;
            let servers = snapshot
                .catalog
                .servers()
                .filter(|view| visibility.server_status(view.name.as_str(), &snapshot.catalog))
                .map(|view| {
                    messages::server_status(
                        view,
                        snapshot.caller_sessions(&view.name),
                        snapshot.kept.get(&view.name),
                    )
                })
                .collect();
            Ok(Response::new(proto::ListServersResponse { servers }))
        })
        .await
    }
}

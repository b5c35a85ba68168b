//! The floor's gRPC half: a tonic server of the broker's own service whose `CallTool` does
//! nothing but answer what the broker answers to `echo {"message": "hello"}` (one text block,
//! "hello"). Same service, same messages, same client as a broker call; no MCP behind it.
//! Every other method is unimplemented.

use std::pin::Pin;

use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};
use toolbroker::proto::{
    self as pb, CallToolRequest, CallToolResponse, Content, content, tool_broker_server::ToolBroker,
};

/// The no-op broker.
pub struct NullBroker;

type Reply<T> = Result<Response<T>, Status>;
type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn none<T>() -> Reply<T> {
    Err(Status::unimplemented(
        "the no-op broker answers CallTool only",
    ))
}

#[tonic::async_trait]
impl ToolBroker for NullBroker {
    async fn call_tool(&self, request: Request<CallToolRequest>) -> Reply<CallToolResponse> {
        let request = request.into_inner();
        if request.name != "echo" {
            return Err(Status::not_found(format!("no tool {:?}", request.name)));
        }
        let text = "hello".to_owned();
        Ok(Response::new(CallToolResponse {
            content: vec![Content {
                kind: Some(content::Kind::Text(pb::TextContent { text: text.clone() })),
            }],
            is_error: false,
            text,
            structured_content_json: String::new(),
            server: "demo".into(),
        }))
    }

    async fn list_tools(&self, _: Request<pb::ListToolsRequest>) -> Reply<pb::ListToolsResponse> {
        none()
    }

    type WatchStream = Boxed<pb::WatchEvent>;

    async fn watch(&self, _: Request<pb::WatchRequest>) -> Reply<Self::WatchStream> {
        none()
    }

    async fn list_servers(
        &self,
        _: Request<pb::ListServersRequest>,
    ) -> Reply<pb::ListServersResponse> {
        none()
    }

    type CallToolStreamStream = Boxed<pb::CallToolStreamResponse>;

    async fn call_tool_stream(
        &self,
        _: Request<Streaming<pb::CallToolStreamRequest>>,
    ) -> Reply<Self::CallToolStreamStream> {
        none()
    }

    async fn list_resources(
        &self,
        _: Request<pb::ListResourcesRequest>,
    ) -> Reply<pb::ListResourcesResponse> {
        none()
    }

    async fn read_resource(
        &self,
        _: Request<pb::ReadResourceRequest>,
    ) -> Reply<pb::ReadResourceResponse> {
        none()
    }

    async fn list_prompts(
        &self,
        _: Request<pb::ListPromptsRequest>,
    ) -> Reply<pb::ListPromptsResponse> {
        none()
    }

    async fn get_prompt(&self, _: Request<pb::GetPromptRequest>) -> Reply<pb::GetPromptResponse> {
        none()
    }

    async fn search_tools(
        &self,
        _: Request<pb::SearchToolsRequest>,
    ) -> Reply<pb::SearchToolsResponse> {
        none()
    }

    async fn start_tool_call(
        &self,
        _: Request<CallToolRequest>,
    ) -> Reply<pb::google::longrunning::Operation> {
        none()
    }

    async fn answer_tool_call(&self, _: Request<pb::AnswerToolCallRequest>) -> Reply<()> {
        none()
    }
}

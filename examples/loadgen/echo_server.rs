//! The benchmark's own fast MCP server: one `echo` tool, nothing else, over stdio with rmcp's
//! async pipes (`loadgen echo-server`, started as a child). With the demo server's work out of
//! the way, the broker's own cost per call shows more plainly against the direct path.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt as _,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        Tool,
    },
    service::RequestContext,
};
use serde_json::json;

/// The echo server's handler.
#[derive(Clone)]
struct Echo {
    tool: Tool,
}

impl Echo {
    fn new() -> Self {
        let schema = json!({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"]
        });
        let schema: JsonObject = serde_json::from_value(schema).expect("an object");
        Self {
            tool: Tool::new("echo", "Returns the message.", Arc::new(schema)),
        }
    }
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new("loadgen-echo", "1"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let message = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("message"))
            .and_then(|message| message.as_str())
            .ok_or_else(|| ErrorData::invalid_params("echo needs a string \"message\"", None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(message.to_owned())]).into())
    }
}

/// Serves the echo server on stdin/stdout until the client closes stdin.
pub async fn serve() -> anyhow::Result<()> {
    let running = Echo::new().serve(rmcp::transport::stdio_pipes()).await?;
    running.waiting().await?;
    Ok(())
}

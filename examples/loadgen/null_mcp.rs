//! `loadgen null-mcp-server`: the bare floor under an MCP call over streamable HTTP. It answers
//! `initialize`, notifications and `tools/call echo` with plain JSON built from the request, and
//! nothing else: no SDK, no session state, no SSE. What it costs per call is what any server
//! here pays for reading and answering one JSON-RPC request over HTTP/1.1.

use axum::{
    Json, Router,
    body::Bytes,
    http::{HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    serve::ListenerExt as _,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// Serves on a free loopback port, printed first, until killed.
pub async fn serve() -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    // As the face and the demo server: no Nagle wait on a kept-alive connection.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // No GET stream (405 is how a server says it offers none) and nothing to delete.
    let refuse = || async { StatusCode::METHOD_NOT_ALLOWED };
    let app = Router::new().route("/mcp", post(answer).get(refuse).delete(refuse));
    axum::serve(listener, app).await?;
    Ok(())
}

/// The answer to one JSON-RPC message: 202 for a notification, else a result.
async fn answer(body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = message.get("id") else {
        return StatusCode::ACCEPTED.into_response();
    };
    let params = &message["params"];
    let (result, session) = match message["method"].as_str() {
        Some("initialize") => (
            json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "null", "version": "0"},
            }),
            true,
        ),
        Some("tools/call") => (
            json!({
                "content": [{"type": "text", "text": params["arguments"]["message"]}],
                "isError": false,
            }),
            false,
        ),
        _ => (json!({}), false),
    };
    let mut response = Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
    if session {
        let headers = response.headers_mut();
        headers.insert("mcp-session-id", HeaderValue::from_static("null"));
    }
    response
}

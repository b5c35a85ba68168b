//! Raw requests to the broker's MCP face (streamable HTTP), for tests that speak it byte by
//! byte rather than through an MCP client.

use reqwest::{Method, header::HeaderMap};
use serde_json::Value;

/// One JSON-RPC request to the face; the HTTP status and the answer (from JSON or SSE).
pub async fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Option<Value>, HeaderMap) {
    send(Method::POST, url, headers, Some(body)).await
}

/// One request to the face (any method, a body or none): its status, its JSON-RPC answer (from
/// JSON or SSE) and its headers.
pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Option<Value>, HeaderMap) {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    (status, jsonrpc_answer(&text), headers)
}

/// The JSON-RPC message (one with an `id`) in an MCP face's response body: the body itself
/// (JSON) or the `data:` of one of its SSE events.
pub fn jsonrpc_answer(text: &str) -> Option<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(text.trim()))
        .find_map(|data| {
            serde_json::from_str::<Value>(data)
                .ok()
                .filter(|v| v.get("id").is_some())
        })
}

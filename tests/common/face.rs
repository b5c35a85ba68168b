//! Raw requests to the broker's MCP face (streamable HTTP), for tests that speak it byte by
//! byte rather than through an MCP client.

use serde_json::Value;

/// One JSON-RPC request to the face; the HTTP status and the answer (from JSON or SSE).
pub async fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Option<Value>, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let answer = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(text.trim()))
        .find_map(|data| {
            serde_json::from_str::<Value>(data)
                .ok()
                .filter(|v| v.get("id").is_some())
        });
    (status, answer, headers)
}

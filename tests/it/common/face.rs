//! Raw requests to the broker's MCP face (streamable HTTP), for tests that speak it byte by
//! byte rather than through an MCP client.

use std::net::SocketAddr;

use reqwest::{Method, header::HeaderMap};
use serde_json::{Value, json};

use super::Broker;

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

/// An `initialize` request of a 2025-11-25 client.
pub fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }})
}

/// One 2026-07-28 request to the face (no session: the version and capabilities in its own
/// `_meta`, the headers that protocol requires) with `auth` headers: its status and answer.
pub async fn stateless(
    url: &str,
    auth: &[(&str, &str)],
    method: &str,
    params: Value,
) -> (u16, Option<Value>) {
    stateless_declaring(url, auth, method, params, json!({})).await
}

/// [`stateless`] from a client that declares `capabilities`.
pub async fn stateless_declaring(
    url: &str,
    auth: &[(&str, &str)],
    method: &str,
    params: Value,
    capabilities: Value,
) -> (u16, Option<Value>) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    headers.extend_from_slice(auth);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, answer, _) = send(Method::POST, url, &headers, Some(body)).await;
    (status, answer)
}

/// A session opened and initialized with `auth` headers: the headers its requests carry.
pub async fn open(url: &str, auth: &[(&str, &str)]) -> Vec<(String, String)> {
    let (status, answer, headers) = send(Method::POST, url, auth, Some(initialize())).await;
    assert_eq!(status, 200, "{answer:?}");
    let id = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let mut session: Vec<(String, String)> = auth
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    session.push(("mcp-session-id".into(), id));
    session.push(("mcp-protocol-version".into(), "2025-11-25".into()));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = send(Method::POST, url, &borrow(&session), Some(initialized)).await;
    assert_eq!(status, 202);
    session
}

/// Owned headers as the pairs [`send`] takes.
pub fn borrow(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

impl Broker {
    /// A ready broker with the demo server (prefix `d_`) and the MCP face on a port of its own.
    pub async fn demo_with_face() -> Broker {
        toolbroker::tls_provider::install();
        let broker = Broker::builder()
            .server(super::demo("demo").prefix("d_"))
            .top("mcp_listen", "127.0.0.1:0")
            .start()
            .await;
        broker.wait_ready().await;
        broker
    }

    /// The address the MCP face listens on (`mcp_listen`), from the broker's log.
    pub async fn face_addr(&self) -> SocketAddr {
        let line = self
            .wait_for_log("the MCP face's address", |line| {
                line["message"] == "MCP face listening at /mcp"
            })
            .await;
        line["addr"].as_str().unwrap().parse().unwrap()
    }

    /// The MCP face's URL (`/mcp`) on 127.0.0.1, its port from the broker's log: a face bound to
    /// port 0 holds its port from the start.
    pub async fn face_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.face_addr().await.port())
    }
}

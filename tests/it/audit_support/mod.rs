//! What the audit tests share: a broker with the demo server, alice's token, the MCP face and
//! metrics; the audit file read as it is now or once it holds enough lines; raw requests to the
//! face.

use std::{path::Path, time::Duration};

use serde_json::{Value, json};

use crate::common::{Broker, demo};

pub const ALICE: Option<&str> = Some("alice-token");

/// A broker with the demo server (`demo_*`), alice's token, the MCP face and metrics, writing
/// its audit log as `audit` says; and the face's URL.
pub async fn broker(audit: Value) -> (Broker, String) {
    toolbroker::tls_provider::install();
    let broker = Broker::builder()
        .server(demo("demo").prefix("demo_"))
        .top(
            "auth",
            json!({"tokens": [{"name": "alice", "value_env": "ALICE"}]}),
        )
        .top("audit", audit)
        .top("metrics_listen", "127.0.0.1:0")
        .top("mcp_listen", "127.0.0.1:0")
        .env("ALICE", "alice-token")
        .start()
        .await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    (broker, url)
}

/// The audit file's lines now: no waiting.
pub fn lines_now(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// The audit file's lines, once it holds `count`.
pub async fn lines(path: &Path, count: usize) -> Vec<Value> {
    let what = format!("{count} lines in {}", path.display());
    crate::common::poll(&what, Duration::from_millis(20), || async {
        Some(lines_now(path)).filter(|lines| lines.len() >= count)
    })
    .await
}

/// `{"message": message}`.
pub fn echo(message: &str) -> String {
    json!({ "message": message }).to_string()
}

/// One JSON-RPC POST to the face: the HTTP status and the JSON-RPC answer.
pub async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Option<Value>) {
    let (status, answer, _) = crate::common::face::post(url, headers, body.clone()).await;
    (status, answer)
}

/// A face session of alice's: the headers its requests carry.
pub async fn face_session(url: &str) -> Vec<(&'static str, String)> {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "audit-test", "version": "1"},
    }});
    let token = ("authorization", "Bearer alice-token");
    let (_, _, headers) = crate::common::face::post(url, &[token], initialize).await;
    let headers = vec![
        (token.0, token.1.to_owned()),
        (
            "mcp-session-id",
            headers["mcp-session-id"].to_str().unwrap().to_owned(),
        ),
        ("mcp-protocol-version", "2025-11-25".to_owned()),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(url, &borrowed(&headers), &initialized).await.0, 202);
    headers
}

/// `headers` as `post` takes them.
pub fn borrowed<'a>(headers: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    headers.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

/// A `tools/call` request.
pub fn tools_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// The sum of the samples of `name` whose labels hold every one of `labels`.
pub async fn metric(broker: &Broker, name: &str, labels: &[&str]) -> f64 {
    let text = reqwest::get(broker.metrics_url().await)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|line| {
            line.starts_with(&format!("{name} ")) || line.starts_with(&format!("{name}{{"))
        })
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

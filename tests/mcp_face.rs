//! The MCP face (work in progress): the catalog served over streamable HTTP at `/mcp`, used by
//! rmcp's client: tools listed and called through the broker, and the gate's 401.

mod common;

use common::{Broker, WAIT, demo, servers::free_port};
use rmcp::{
    ServiceExt as _,
    model::CallToolRequestParams,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};

async fn face(auth: Option<serde_json::Value>) -> (Broker, String) {
    let port = free_port();
    let mut builder = Broker::builder()
        .server(demo("demo").prefix("d_"))
        .top("mcp_listen", format!("127.0.0.1:{port}"));
    if let Some(auth) = auth {
        builder = builder.top("auth", auth).env("ALICE", "alice-token");
    }
    let broker = builder.start().await;
    broker.wait_ready().await;
    (broker, format!("http://127.0.0.1:{port}/mcp"))
}

#[tokio::test]
async fn tools_are_listed_and_called_through_the_face() {
    let (_broker, url) = face(None).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialized in time")
        .expect("initialized");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "d_echo"), "{tools:?}");
    let params = CallToolRequestParams::new("d_echo").with_arguments(
        serde_json::json!({"message": "through the face"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(
        result.content[0].as_text().unwrap().text,
        "through the face"
    );
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    assert!(
        prompts.iter().any(|p| p.name == "d_summarize"),
        "{prompts:?}"
    );
}

#[tokio::test]
async fn without_a_valid_token_the_face_answers_401() {
    let auth = serde_json::json!({"tokens": [{"name": "alice", "value_env": "ALICE"}]});
    let (_broker, url) = face(Some(auth)).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header("alice-token");
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    assert!(!client.list_all_tools().await.unwrap().is_empty());
}

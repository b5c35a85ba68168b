//! `token_exchange` (RFC 8693): a per-caller HTTP server gets each caller's token traded at the
//! token endpoint for one meant for it, cached; a refused exchange is PERMISSION_DENIED with the
//! endpoint's words, an unreachable endpoint UNAVAILABLE, and no token reaches the log.

use crate::common::{
    self, Broker,
    servers::HttpServer,
    token_endpoint::{CLIENT_ID, CLIENT_SECRET, TokenEndpoint},
    url_server,
};
use serde_json::{Value, json};
use tonic::Code;

/// A per-caller server at `url` whose callers' tokens are exchanged at `token_url`.
fn exchanging(name: &str, url: &str, token_url: &str, discovery: Value) -> common::Server {
    url_server(name, url)
        .prefix(&format!("{name}_"))
        .set("isolation", "per-caller")
        .set(
            "token_exchange",
            json!({
                "token_url": token_url,
                "client_id": CLIENT_ID,
                "client_secret_env": "EXCHANGE_SECRET",
                "audience": "demo-mcp",
            }),
        )
        .set("discovery", discovery)
}

async fn broker(servers: Vec<common::Server>) -> Broker {
    let tokens = ["alice", "mallory"]
        .iter()
        .map(|name| json!({"name": name, "value_env": format!("TOKEN_{}", name.to_uppercase())}))
        .collect::<Vec<_>>();
    let broker = Broker::builder()
        .top("auth", json!({"tokens": tokens}))
        .servers(servers)
        .env("TOKEN_ALICE", "token-alice")
        .env("TOKEN_MALLORY", "token-mallory")
        .env("EXCHANGE_SECRET", CLIENT_SECRET)
        .start()
        .await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    broker
}

async fn authorization_seen(
    broker: &Broker,
    caller: &str,
    tool: &str,
) -> Result<String, tonic::Status> {
    let answer = broker
        .call_as(Some(&format!("token-{caller}")), &[], tool, "{}")
        .await?;
    let report: Value = serde_json::from_str(&answer.text).unwrap();
    Ok(report["headers"]["authorization"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// A broker with one per-caller server whose tokens (the discovery one `token-discovery`
/// included) are exchanged at `endpoint`, and that server.
async fn discovering(endpoint: &TokenEndpoint) -> (Broker, HttpServer) {
    let http = HttpServer::demo("streamable-http", None).await;
    let server = exchanging(
        "remote",
        &http.url,
        &endpoint.url,
        json!({"token": "token-discovery"}),
    );
    (broker(vec![server]).await, http)
}

/// Alice calls `calls` times: the server sees her exchanged token each time, exchanged once.
async fn alice_exchanged_once(broker: &Broker, endpoint: &TokenEndpoint, calls: usize) {
    for _ in 0..calls {
        let seen = authorization_seen(broker, "alice", "remote_whoami")
            .await
            .unwrap();
        assert_eq!(seen, "Bearer exchanged-token-alice");
    }
    assert_eq!(endpoint.exchanges("token-alice"), 1, "exchanged once");
}

#[tokio::test]
async fn each_callers_token_is_exchanged_once_and_sent_to_the_server() {
    let endpoint = TokenEndpoint::start().await;
    let (broker, _http) = discovering(&endpoint).await;
    // The session that lists the tools went with the discovery token, exchanged too.
    assert_eq!(endpoint.exchanges("token-discovery"), 1);

    // Cached until it nears expiry.
    alice_exchanged_once(&broker, &endpoint, 3).await;

    let refused = authorization_seen(&broker, "mallory", "remote_whoami")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("invalid_grant")
            && refused.message().contains("subject not allowed here"),
        "{}",
        refused.message()
    );
    let logs = broker.dump();
    for secret in ["token-alice", "exchanged-token-alice", CLIENT_SECRET] {
        assert!(!logs.contains(secret), "{secret} reached the log");
    }
}

#[tokio::test]
async fn an_unreachable_token_endpoint_is_unavailable() {
    let http = HttpServer::demo("streamable-http", None).await;
    let (refusing, _held) = common::servers::refusing();
    let down = format!("http://{refusing}/token");
    // No discovery token: the listing session goes without one (this demo asks for none).
    let broker = broker(vec![exchanging("remote", &http.url, &down, json!({}))]).await;
    let status = authorization_seen(&broker, "alice", "remote_whoami")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("token endpoint is unavailable"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn an_overflowing_expires_in_is_clamped_and_calls_go_on() {
    // 2^64−1 seconds: added to the clock as it was, it panicked the task that exchanged it
    // (the server's supervision for the discovery token, the call for a caller's).
    let endpoint = TokenEndpoint::answering_expires_in(json!(u64::MAX)).await;
    let (broker, _http) = discovering(&endpoint).await;
    // Cached, a day at most.
    alice_exchanged_once(&broker, &endpoint, 2).await;
    let logs = broker.dump();
    assert!(!logs.contains("panicked"), "a task panicked:\n{logs}");
}

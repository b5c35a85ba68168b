//! `token_exchange` (RFC 8693): a per-caller HTTP server gets each caller's token traded at the
//! token endpoint for one meant for it, cached; a refused exchange is PERMISSION_DENIED with the
//! endpoint's words, an unreachable endpoint UNAVAILABLE, and no token reaches the log.

mod common;

use common::{
    Broker,
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

#[tokio::test]
async fn each_callers_token_is_exchanged_once_and_sent_to_the_server() {
    let endpoint = TokenEndpoint::start().await;
    let http = HttpServer::demo("streamable-http", None).await;
    let server = exchanging(
        "remote",
        &http.url,
        &endpoint.url,
        json!({"token": "token-discovery"}),
    );
    let broker = broker(vec![server]).await;
    // The session that lists the tools went with the discovery token, exchanged too.
    assert_eq!(endpoint.exchanges("token-discovery"), 1);

    for _ in 0..3 {
        let seen = authorization_seen(&broker, "alice", "remote_whoami")
            .await
            .unwrap();
        assert_eq!(seen, "Bearer exchanged-token-alice");
    }
    assert_eq!(
        endpoint.exchanges("token-alice"),
        1,
        "cached until it nears expiry"
    );

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
    let down = format!("http://127.0.0.1:{}/token", common::servers::free_port());
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

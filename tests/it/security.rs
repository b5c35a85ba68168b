//! Callers without the right credentials (tokens, client certificates, both reloaded on
//! SIGHUP), and secrets that must stay out of logs and out of third-party servers'
//! environments. Oversized and malformed input is in limits.rs.

use crate::common::{self, Broker, Builder, Watch, certs::Ca, demo, demo_after, url_server};
use nix::sys::signal::Signal;
use serde_json::json;
use tonic::{
    Code, Request,
    transport::{Certificate, ClientTlsConfig, Identity},
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use toolbroker::proto::{self, tool_broker_client::ToolBrokerClient};

const AGENT: &str = "agent-secret-7f3a";
const READER: &str = "reader-secret-91bc";

fn bearer<T>(token: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {token}");
    request
        .metadata_mut()
        .insert("authorization", value.parse().unwrap());
    request
}

fn echo() -> proto::CallToolRequest {
    proto::CallToolRequest {
        name: "echo".into(),
        arguments_json: r#"{"message": "hi"}"#.into(),
        ..Default::default()
    }
}

/// A broker with the demo server and two tokens: `agent` may do anything, `reader` only sees and
/// calls `echo` and `ad?`. `more` adds to the builder.
async fn authed_broker(more: impl FnOnce(Builder) -> Builder) -> Broker {
    let tokens = json!([
        {"name": "agent", "value_env": "AGENT_TOKEN"},
        {"name": "reader", "value_env": "READER_TOKEN", "tools": ["echo", "ad?"]},
    ]);
    let builder = Broker::builder()
        .top("auth", json!({"tokens": tokens}))
        .server(demo("demo"))
        .env("AGENT_TOKEN", AGENT)
        .env("READER_TOKEN", READER);
    let broker = more(builder).start().await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    broker
}

#[tokio::test]
async fn calls_need_a_valid_token_and_health_stays_open() {
    let broker = authed_broker(|b| b).await;
    let mut client = broker.client.clone();
    let none = client.call_tool(echo()).await.unwrap_err();
    assert_eq!(none.code(), Code::Unauthenticated);
    assert!(
        none.message().contains("missing bearer token"),
        "{}",
        none.message()
    );
    let wrong = client.call_tool(bearer("guess", echo())).await.unwrap_err();
    assert_eq!(wrong.code(), Code::Unauthenticated);
    let listed = client
        .list_tools(proto::ListToolsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(listed.code(), Code::Unauthenticated);

    // Both tokens work (rotation: old and new side by side).
    for token in [AGENT, READER] {
        let ok = client
            .call_tool(bearer(token, echo()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(ok.text, "hi");
    }
    // Probes need no token.
    let health = HealthClient::new(broker.channel.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status(), ServingStatus::Serving);
    assert!(
        !broker.dump().contains(AGENT) && !broker.dump().contains(READER),
        "tokens stay out of logs"
    );
}

#[tokio::test]
async fn a_token_sees_and_calls_only_its_tools() {
    let broker = authed_broker(|b| b).await;
    let mut client = broker.client.clone();
    let listed = client
        .list_tools(bearer(READER, proto::ListToolsRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "echo"], "`ad?` matches add, not add_tool");
    let denied = client
        .call_tool(bearer(
            READER,
            proto::CallToolRequest {
                name: "fail".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert!(
        denied.message().contains("\"reader\""),
        "{}",
        denied.message()
    );

    let stream = client
        .watch(bearer(READER, proto::WatchRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let mut watch = Watch::new(stream);
    assert_eq!(watch.snapshot().await.tools.len(), 2);
    // A tool outside its list appears: the reader's stream says nothing of it.
    client
        .call_tool(bearer(
            AGENT,
            proto::CallToolRequest {
                name: "add_tool".into(),
                arguments_json: r#"{"name": "secret_tool"}"#.into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    client
        .call_tool(bearer(
            AGENT,
            proto::CallToolRequest {
                name: "add_tool".into(),
                arguments_json: r#"{"name": "adz"}"#.into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    let next = watch.next_tools_change().await;
    let added: Vec<&str> = next.added.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(added, ["adz"], "secret_tool was never shown");
}

#[tokio::test]
async fn reflection_can_be_turned_off() {
    let broker = authed_broker(|b| b.top("reflection", false)).await;
    use tonic_reflection::pb::v1alpha::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let refused = ServerReflectionClient::new(broker.channel.clone())
        .server_reflection_info(bearer(AGENT, tokio_stream::iter([request])))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unimplemented);
}

#[tokio::test]
async fn token_files_are_read_again_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "first-token\n").unwrap();
    let broker = Broker::builder()
        .top("auth", json!({"tokens": [{"value_file": token_file}]}))
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let mut client = broker.client.clone();
    assert!(
        client
            .call_tool(bearer("first-token", echo()))
            .await
            .is_ok()
    );
    std::fs::write(&token_file, "second-token\n").unwrap();
    broker.signal(Signal::SIGHUP);
    broker
        .wait_for_log("the reload", |l| l["message"] == "config reloaded")
        .await;
    assert_eq!(
        client
            .call_tool(bearer("first-token", echo()))
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    assert!(
        client
            .call_tool(bearer("second-token", echo()))
            .await
            .is_ok()
    );
}

/// Writes a PEM file into `dir` and returns its path.
fn write(dir: &std::path::Path, name: &str, pem: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn tls_with_client_certificates() {
    let ca = Ca::new();
    let server = ca.issue(&["localhost"]);
    let clients = Ca::new();
    let client_cert = clients.issue(&["agent"]);
    let dir = tempfile::tempdir().unwrap();
    let tls = json!({
        "cert": write(dir.path(), "tls.crt", &server.cert),
        "key": write(dir.path(), "tls.key", &server.key),
    });
    let auth = json!({"client_ca": write(dir.path(), "clients.pem", &clients.pem)});
    let trust = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca.pem))
        .domain_name("localhost");
    let with_cert = trust
        .clone()
        .identity(Identity::from_pem(&client_cert.cert, &client_cert.key));
    let broker = Broker::builder()
        .top("tls", tls)
        .top("auth", auth)
        .server(demo("demo").args(["--extra-tools", "150"]))
        .tls(with_cert)
        .start()
        .await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    assert_eq!(
        broker.text("echo", r#"{"message": "over mTLS"}"#).await,
        "over mTLS"
    );
    // An answer of many frames, written in batches under TLS, arrives whole.
    broker.wait_ready().await;
    let listed = broker.tools().await;
    assert!(prost::Message::encoded_len(&listed) > 256 * 1024);
    assert_eq!(listed.tools.len(), 150 + 13);

    // Without a client certificate: the connection (and health) work, calls do not.
    let addr = broker.addr;
    let bare = tonic::transport::Channel::from_shared(format!("https://localhost:{}", addr.port()))
        .unwrap()
        .tls_config(trust)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let health = HealthClient::new(bare.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(health.into_inner().status(), ServingStatus::Serving);
    let refused = ToolBrokerClient::new(bare)
        .call_tool(echo())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert!(
        refused.message().contains("client certificate"),
        "{}",
        refused.message()
    );

    // A plaintext client gets nowhere.
    let plain = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await;
    if let Ok(plain) = plain {
        assert!(
            ToolBrokerClient::new(plain)
                .call_tool(echo())
                .await
                .is_err()
        );
    }
}

#[tokio::test]
async fn the_tls_certificate_is_read_again_on_sighup() {
    let old_ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let old = old_ca.issue(&["localhost"]);
    let tls = json!({
        "cert": write(dir.path(), "tls.crt", &old.cert),
        "key": write(dir.path(), "tls.key", &old.key),
    });
    let trust_old = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&old_ca.pem))
        .domain_name("localhost");
    let broker = Broker::builder()
        .top("tls", tls)
        .server(demo("demo"))
        .tls(trust_old)
        .start()
        .await;
    // The broker logs `listening` before it handles SIGHUP, whose default action ends it: a
    // SIGHUP sent at once can kill it. Ready comes later, as in the other SIGHUP tests.
    broker.wait_ready().await;

    let new_ca = Ca::new();
    let new = new_ca.issue(&["localhost"]);
    write(dir.path(), "tls.crt", &new.cert);
    write(dir.path(), "tls.key", &new.key);
    broker.signal(Signal::SIGHUP);
    broker
        .wait_for_log("the reload", |l| l["message"] == "TLS certificate reloaded")
        .await;
    let trust_new = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&new_ca.pem))
        .domain_name("localhost");
    let fresh =
        tonic::transport::Channel::from_shared(format!("https://localhost:{}", broker.addr.port()))
            .unwrap()
            .tls_config(trust_new)
            .unwrap()
            .connect()
            .await
            .expect("new connections get the new certificate");
    let listed = ToolBrokerClient::new(fresh)
        .list_tools(proto::ListToolsRequest::default())
        .await;
    assert!(listed.is_ok(), "{listed:?}");
}

#[tokio::test]
async fn secrets_stay_out_of_logs_and_out_of_servers_environments() {
    let broker = Broker::builder()
        .server(demo_after("snoop", "env >&2").set("env", json!({"API_KEY": "${API_KEY}"})))
        .server(
            demo_after("trusted", "env >&2")
                .set("inherit_env", true)
                .prefix("t_"),
        )
        .server(
            url_server("remote", "http://127.0.0.1:9/mcp")
                .set("headers", json!({"Authorization": "Bearer ${API_KEY}"})),
        )
        .env("API_KEY", "configured-secret-5d1e")
        .env("BROKER_DB_PASSWORD", "broker-secret-0c4a")
        .env("RUST_LOG", "debug")
        .start()
        .await;
    broker.wait_ready().await;
    let stderr_of = |server: &str| -> Vec<String> {
        broker
            .logs()
            .iter()
            .filter(|l| l["server"] == server && l["target"] == "toolbroker::stderr")
            .filter_map(|l| l["message"].as_str().map(str::to_owned))
            .collect()
    };
    broker
        .wait_for_log("snoop's environment", |l| {
            l["server"] == "snoop"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("PATH="))
        })
        .await;
    broker
        .wait_for_log("trusted's environment", |l| {
            l["server"] == "trusted"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("PATH="))
        })
        .await;
    let snoop = stderr_of("snoop");
    assert!(
        !snoop.iter().any(|l| l.starts_with("BROKER_DB_PASSWORD=")),
        "the broker's secret reached a server: {snoop:?}"
    );
    assert!(
        snoop.iter().any(|l| l == "API_KEY=configured-secret-5d1e"),
        "its own env is given"
    );
    let trusted = stderr_of("trusted");
    assert!(
        trusted.iter().any(|l| l.starts_with("BROKER_DB_PASSWORD=")),
        "inherit_env passes everything"
    );

    // Nothing the broker itself logs (at debug) contains a secret; the children's own stderr
    // above is theirs to print.
    let own: Vec<String> = broker
        .logs()
        .iter()
        .filter(|l| l["target"] != "toolbroker::stderr")
        .map(|l| l.to_string())
        .collect();
    let leaked: Vec<&String> = own
        .iter()
        .filter(|l| l.contains("configured-secret") || l.contains("broker-secret"))
        .collect();
    assert!(leaked.is_empty(), "secrets in the broker's log: {leaked:?}");
    let remote = broker.server("remote").await;
    assert!(
        !remote.message.contains("configured-secret"),
        "{}",
        remote.message
    );
}

//! Broken servers: each shows as FAILED with a reason, and never takes the others down.

mod common;

use common::{Broker, demo_server};
use tonic::Code;
use toolbroker::proto::ServerState;

#[tokio::test]
async fn a_missing_command_fails_with_a_reason_while_others_serve() {
    let config = format!(
        "servers:\n  - name: ghost\n    command: /nonexistent/mcp-server\n{}",
        demo_server("demo", "")
    );
    let broker = Broker::start(&config).await;
    broker.wait_ready().await;
    let ghost = broker.server("ghost").await;
    assert_eq!(ghost.state(), ServerState::Failed);
    assert!(
        ghost.message.contains("cannot start") && ghost.message.contains("/nonexistent/mcp-server"),
        "{}",
        ghost.message
    );
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
    assert_eq!(
        broker
            .call("echo", r#"{"message": "still here"}"#)
            .await
            .unwrap()
            .text,
        "still here"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_once_fails_with_its_status_and_stderr() {
    let config = format!(
        "servers:\n  - name: quitter\n    command: sh\n    args: [-c, 'echo missing API key >&2; exit 7']\n{}",
        demo_server("demo", "")
    );
    let broker = Broker::start(&config).await;
    broker.wait_ready().await;
    let quitter = broker.server("quitter").await;
    assert_eq!(quitter.state(), ServerState::Failed);
    assert!(
        quitter.message.contains("exited with status 7"),
        "{}",
        quitter.message
    );
    assert!(
        quitter.message.contains("missing API key"),
        "{}",
        quitter.message
    );
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
    // Its stderr reached the log, tagged with its name.
    broker
        .wait_for_log("quitter's stderr", |l| {
            l["server"] == "quitter" && l["message"] == "missing API key"
        })
        .await;
}

#[tokio::test]
async fn a_server_that_never_answers_fails_after_init_timeout() {
    let config = format!(
        "servers:\n  - name: mute\n    command: sleep\n    args: ['600']\n    init_timeout: 1s\n{}",
        demo_server("demo", "")
    );
    let broker = Broker::start(&config).await;
    broker.wait_ready().await;
    let mute = broker.server("mute").await;
    assert_eq!(mute.state(), ServerState::Failed);
    assert!(mute.message.contains("init_timeout"), "{}", mute.message);
}

#[tokio::test]
async fn a_crash_mid_session_fails_calls_with_unavailable() {
    let broker = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    broker.wait_ready().await;
    let in_flight = {
        let broker_client = broker.client.clone();
        tokio::spawn(async move {
            let mut client = broker_client;
            let request = toolbroker::proto::CallToolRequest {
                name: "sleep".into(),
                arguments_json: r#"{"ms": 15000}"#.into(),
                ..Default::default()
            };
            client.call_tool(request).await
        })
    };
    // Wait until the sleep is running, then crash the server.
    broker
        .wait_for_log("the sleep call reaching the demo", |l| {
            l["server"] == "demo"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("sleep started"))
        })
        .await;
    let _ = broker.call("crash", "{}").await;
    let status = tokio::time::timeout(common::WAIT, in_flight)
        .await
        .expect("the in-flight call ends promptly")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");

    let demo = broker.server("demo").await;
    assert_eq!(demo.state(), ServerState::Failed);
    assert!(
        demo.message.contains("exited with status 3"),
        "{}",
        demo.message
    );
    let later = broker
        .call("echo", r#"{"message": "x"}"#)
        .await
        .unwrap_err();
    assert_eq!(later.code(), Code::Unavailable, "{later:?}");
    assert!(later.message().contains("\"demo\""), "{}", later.message());
}

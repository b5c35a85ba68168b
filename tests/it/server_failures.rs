//! Broken servers: each shows as FAILED with a reason, and never takes the others down.
//! (What happens after, restarts with backoff, is in supervision.rs.)

use crate::common::{Broker, command, demo};
use toolbroker::proto::ServerState;

#[tokio::test]
async fn a_missing_command_fails_with_a_reason_while_others_serve() {
    let broker = Broker::builder()
        .server(command("ghost", "/nonexistent/mcp-server", &[]))
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let ghost = broker.wait_for_state("ghost", ServerState::Failed).await;
    assert_eq!(ghost.state(), ServerState::Failed);
    assert!(
        ghost.message.contains("cannot start") && ghost.message.contains("/nonexistent/mcp-server"),
        "{}",
        ghost.message
    );
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
    assert_eq!(
        broker.text("echo", r#"{"message": "still here"}"#).await,
        "still here"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_once_fails_with_its_status_and_stderr() {
    let broker = Broker::builder()
        .server(command(
            "quitter",
            "sh",
            &["-c", "echo missing API key >&2; exit 7"],
        ))
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let quitter = broker.wait_for_state("quitter", ServerState::Failed).await;
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
    let broker = Broker::builder()
        .server(command("mute", "sleep", &["600"]).set("init_timeout", "1s"))
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let mute = broker.wait_for_state("mute", ServerState::Failed).await;
    assert_eq!(mute.state(), ServerState::Failed);
    assert!(mute.message.contains("init_timeout"), "{}", mute.message);
}

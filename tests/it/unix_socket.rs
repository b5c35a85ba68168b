//! `unix_listen`: the gRPC services on a Unix socket, behind the same gate as the port; the
//! socket file's life (stale files replaced, live ones refused, removed at stop); and grpcio,
//! whose default authority over a socket h2 alone would refuse.

use std::path::{Path, PathBuf};

use crate::common::{
    self, Broker, as_caller, call_request, run_with_config,
    unix::{broker_on_socket, socket_channel},
    wait_health,
};
use prost::Message as _;
use serde_json::json;
use tonic::Code;
use toolbroker::proto::{self, tool_broker_client::ToolBrokerClient};

const TOKEN: &str = "socket-test-token";

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("grpc.sock")
}

#[tokio::test]
async fn the_services_answer_on_the_socket_behind_the_same_gate() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    let broker = broker_on_socket(&socket, TOKEN).await;
    let listening = broker
        .wait_for_log("listening", |line| line["message"] == "listening")
        .await;
    assert_eq!(listening["unix"], socket.display().to_string());

    let channel = socket_channel(&socket).await;
    wait_health(channel.clone(), "toolbroker.v1.ToolBroker").await;
    let mut client = ToolBrokerClient::new(channel);
    let echo = || call_request("echo", r#"{"message":"over the socket"}"#);
    let refused = client.call_tool(echo()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let answer = client
        .call_tool(as_caller(Some(TOKEN), &[], echo()))
        .await
        .expect("CallTool over the socket")
        .into_inner();
    assert_eq!(answer.text, "over the socket");

    let list = || as_caller(Some(TOKEN), &[], proto::ListToolsRequest::default());
    let on_socket = client.list_tools(list()).await.unwrap().into_inner();
    let on_port = tools_as(&broker, TOKEN).await;
    assert!(!on_socket.tools.is_empty());
    assert_eq!(on_socket, on_port);

    let status = broker.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the socket file outlived the broker");
}

#[tokio::test]
async fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    // What a broker killed with SIGKILL leaves: a socket file nothing accepts on.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let first = broker_on_socket(&socket, TOKEN).await;
    first
        .wait_for_log("stale file replaced", |line| {
            line["message"] == "replaced a stale socket file"
        })
        .await;

    let config = dir.path().join("second.yaml");
    let text = format!("unix_listen: {}\n", socket.display());
    std::fs::write(&config, text).unwrap();
    let second = run_with_config(&["serve", "--listen", "127.0.0.1:0", "--config"], &config);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("another process accepts connections"),
        "{stderr}"
    );

    let channel = socket_channel(&socket).await;
    // Ready (its demo server connected) before the call, which needs the demo's tool.
    wait_health(channel.clone(), "toolbroker.v1.ToolBroker").await;
    let mut client = ToolBrokerClient::new(channel);
    let request = as_caller(
        Some(TOKEN),
        &[],
        call_request("echo", r#"{"message":"still"}"#),
    );
    let answer = client
        .call_tool(request)
        .await
        .expect("the first broker still answers");
    assert_eq!(answer.into_inner().text, "still");
}

#[test]
fn check_reports_a_file_in_the_way_or_a_missing_directory_at_unix_listen() {
    let dir = tempfile::tempdir().unwrap();
    let in_the_way = dir.path().join("notes.txt");
    std::fs::write(&in_the_way, "keep me").unwrap();
    let missing = dir.path().join("missing/grpc.sock");
    for (path, says) in [
        (&in_the_way, "exists and is not a socket".to_owned()),
        (
            &missing,
            format!(
                "{} is not a directory",
                dir.path().join("missing").display()
            ),
        ),
    ] {
        let config = dir.path().join("broker.yaml");
        std::fs::write(&config, format!("unix_listen: {}\n", path.display())).unwrap();
        let output = run_with_config(&["check", "--config"], &config);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("unix_listen") && stderr.contains(&says),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&in_the_way).unwrap(), "keep me");
}

#[tokio::test]
async fn grpcio_with_its_default_authority_calls_over_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    let broker = broker_on_socket(&socket, TOKEN).await;
    wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    let call = |message: &str| {
        let request = call_request("echo", &json!({ "message": message }).to_string());
        hex(&request.encode_to_vec())
    };
    let list = hex(&proto::ListToolsRequest::default().encode_to_vec());
    let args = [
        ("/toolbroker.v1.ToolBroker/CallTool", call("first")),
        ("/toolbroker.v1.ToolBroker/ListTools", list),
        ("/toolbroker.v1.ToolBroker/CallTool", call("third")),
    ];
    let mut command = tokio::process::Command::new(common::python::python());
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/unix_socket_client.py"))
        .arg(&socket)
        .arg(TOKEN);
    for (method, request) in &args {
        command.arg(method).arg(request);
    }
    let output = tokio::time::timeout(common::STARTUP, command.output())
        .await
        .expect("grpcio answered in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = |line: &str| proto::CallToolResponse::decode(&*unhex(line)).unwrap().text;
    assert_eq!(text(lines[0]), "first", "{stdout}");
    let tools = proto::ListToolsResponse::decode(&*unhex(lines[1])).unwrap();
    assert_eq!(tools, tools_as(&broker, TOKEN).await);
    assert_eq!(text(lines[2]), "third", "{stdout}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    assert!(!text.starts_with("ERROR"), "{text}");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Every tool, listed over the port with `token`.
async fn tools_as(broker: &Broker, token: &str) -> proto::ListToolsResponse {
    let request = as_caller(Some(token), &[], proto::ListToolsRequest::default());
    broker
        .client
        .clone()
        .list_tools(request)
        .await
        .unwrap()
        .into_inner()
}

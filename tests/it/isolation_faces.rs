//! One table of who may call what, tried through every face: gRPC (with and without a `view`),
//! the MCP face at `/mcp` and `/mcp/<view>`, and `toolbroker mcp-stdio` (with and without
//! `--view`). A caller restricted to two tools tries a third, and, through a view, a tool of
//! its own that the view leaves out; it also asks for a prompt and a resource it was not
//! given. Each face must refuse exactly what the others refuse.

use crate::common::{
    Broker, as_caller, demo,
    face::{borrow, open, post},
    toolbroker_bin,
};
use rmcp::{
    ServiceExt as _,
    model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use tokio::process::Command;
use toolbroker::proto;

const TOKEN: &str = "alice-token";

/// Every face a call can come through.
#[derive(Debug, Clone, Copy)]
enum Face<'a> {
    Grpc(&'a str),
    Http(&'a str),
    Stdio(&'a str),
}

/// What Alice may do, face by face: (tool, view, allowed).
const TABLE: &[(&str, &str, bool)] = &[
    ("d_echo", "", true),
    ("d_add", "", true),
    ("d_fail", "", false),     // not granted to her
    ("d_add", "math", true),   // granted and in the view
    ("d_echo", "math", false), // granted, outside the view
    ("d_fail", "math", false),
];

async fn broker() -> (Broker, String) {
    toolbroker::tls_provider::install();
    let broker = Broker::builder()
        .top(
            "auth",
            json!({"tokens": [
                {"name": "alice", "value_env": "ALICE", "tools": ["d_echo", "d_add"]},
            ]}),
        )
        .env("ALICE", TOKEN)
        .top("views", json!({"math": ["d_add", "d_fail"]}))
        .top("mcp_listen", "127.0.0.1:0")
        .server(demo("demo").prefix("d_"))
        .start()
        .await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    (broker, url)
}

fn arguments(tool: &str) -> Value {
    match tool {
        "d_add" => json!({"a": 1, "b": 2}),
        _ => json!({"message": "hi"}),
    }
}

/// Alice's call of `tool` through `face`: whether it ran.
async fn call(broker: &Broker, url: &str, face: Face<'_>, tool: &str) -> bool {
    match face {
        Face::Grpc(view) => {
            let request = proto::CallToolRequest {
                name: tool.into(),
                arguments_json: arguments(tool).to_string(),
                view: view.into(),
                ..Default::default()
            };
            let request = as_caller(Some(TOKEN), &[], request);
            broker.client.clone().call_tool(request).await.is_ok()
        }
        Face::Http(view) => {
            let url = if view.is_empty() {
                url.to_owned()
            } else {
                format!("{url}/{view}")
            };
            let bearer = format!("Bearer {TOKEN}");
            let session = open(&url, &[("authorization", &bearer)]).await;
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments(tool)}});
            let (status, answer, _) = post(&url, &borrow(&session), body).await;
            assert_eq!(status, 200, "{answer:?}");
            let answer = answer.expect("an answer");
            answer
                .get("result")
                .is_some_and(|r| r["isError"] != json!(true))
        }
        Face::Stdio(view) => {
            let client = stdio(broker, view).await;
            let params = CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments(tool).as_object().unwrap().clone());
            let ran = client
                .call_tool(params)
                .await
                .is_ok_and(|r| r.is_error != Some(true));
            client.cancel().await.ok();
            ran
        }
    }
}

/// `toolbroker mcp-stdio` as Alice, serving `view` (the whole catalog when empty).
async fn stdio(broker: &Broker, view: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut command = Command::new(toolbroker_bin());
    command
        .args(["mcp-stdio", "--broker", &format!("http://{}", broker.addr)])
        .args(["--token-env", "BROKER_TOKEN"])
        .env("BROKER_TOKEN", TOKEN)
        .kill_on_drop(true);
    if !view.is_empty() {
        command.args(["--view", view]);
    }
    let transport = TokioChildProcess::new(command).expect("mcp-stdio starts");
    ().serve(transport).await.expect("mcp-stdio initializes")
}

#[tokio::test]
async fn every_face_refuses_the_same_calls() {
    let (broker, url) = broker().await;
    let mut differences = Vec::new();
    for &(tool, view, allowed) in TABLE {
        for face in [Face::Grpc(view), Face::Http(view), Face::Stdio(view)] {
            let ran = call(&broker, &url, face, tool).await;
            if ran != allowed {
                differences.push(format!("{face:?} {tool}: ran {ran}, should {allowed}"));
            }
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

#[tokio::test]
async fn every_face_refuses_prompts_and_resources_not_given() {
    let (broker, url) = broker().await;
    // gRPC.
    let prompt = proto::GetPromptRequest {
        name: "d_summarize".into(),
        arguments: [("topic".to_owned(), "x".to_owned())].into(),
    };
    let mut client = broker.client.clone();
    assert!(
        client
            .get_prompt(as_caller(Some(TOKEN), &[], prompt))
            .await
            .is_err()
    );
    let listed = client
        .list_resources(as_caller(
            Some(TOKEN),
            &[],
            proto::ListResourcesRequest::default(),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.resources.is_empty(), "{:?}", listed.resources);
    // The MCP face.
    let bearer = format!("Bearer {TOKEN}");
    let session = open(&url, &[("authorization", &bearer)]).await;
    let get = json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
        "params": {"name": "d_summarize", "arguments": {"topic": "x"}}});
    let (_, answer, _) = post(&url, &borrow(&session), get).await;
    assert!(
        answer.as_ref().is_some_and(|a| a.get("error").is_some()),
        "{answer:?}"
    );
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {}});
    let (_, answer, _) = post(&url, &borrow(&session), list).await;
    let resources = &answer.expect("an answer")["result"]["resources"];
    assert_eq!(resources, &json!([]), "{resources}");
    // mcp-stdio.
    let client = stdio(&broker, "").await;
    let params = GetPromptRequestParams::new("d_summarize");
    assert!(client.get_prompt(params).await.is_err());
    assert!(
        client
            .list_all_resources()
            .await
            .unwrap_or_default()
            .is_empty()
    );
    let read = ReadResourceRequestParams::new("demo://text");
    assert!(client.read_resource(read).await.is_err());
    client.cancel().await.ok();
}

//! Long calls over gRPC: `StartToolCall` and the standard `google.longrunning.Operations`
//! service, with real clients (tonic, Google's Python LRO helper, grpcurl) against the demo
//! server, and a second caller trying to reach the first one's operations.

use std::time::Duration;

use prost::Message as _;
use serde_json::json;
use tonic::{Code, transport::Channel};
use toolbroker::proto::{
    self,
    google::longrunning::{
        self as lro, operation::Result as Ended, operations_client::OperationsClient,
    },
};

use crate::common::{self, Broker, Builder, WAIT, as_caller, call_request, config::demo, python};

fn tokens() -> serde_json::Value {
    json!({"tokens": [
        {"name": "alice", "value_env": "ALICE_TOKEN"},
        {"name": "bob", "value_env": "BOB_TOKEN"},
    ]})
}

/// How to start a broker with callers alice and bob, the demo server, and `tasks` as given.
pub(crate) fn builder(tasks: serde_json::Value) -> Builder {
    Broker::builder()
        .top("auth", tokens())
        .top("tasks", tasks)
        .top("shutdown_grace", "300ms")
        .env("ALICE_TOKEN", "alice")
        .env("BOB_TOKEN", "bob")
        .server(demo("demo"))
}

/// A ready broker as [`builder`] says.
async fn broker(tasks: serde_json::Value) -> Broker {
    let broker = builder(tasks).start().await;
    broker.wait_ready().await;
    broker
}

fn operations(broker: &Broker) -> OperationsClient<Channel> {
    OperationsClient::new(broker.channel.clone())
}

async fn start(
    broker: &Broker,
    token: &str,
    tool: &str,
    arguments: &str,
) -> Result<lro::Operation, tonic::Status> {
    let request = as_caller(Some(token), &[], call_request(tool, arguments));
    broker
        .client
        .clone()
        .start_tool_call(request)
        .await
        .map(tonic::Response::into_inner)
}

fn metadata(operation: &lro::Operation) -> proto::ToolCallMetadata {
    let any = operation.metadata.as_ref().expect("metadata");
    assert_eq!(
        any.type_url,
        "type.googleapis.com/toolbroker.v1.ToolCallMetadata"
    );
    proto::ToolCallMetadata::decode(any.value.as_slice()).unwrap()
}

fn response(operation: &lro::Operation) -> proto::CallToolResponse {
    match &operation.result {
        Some(Ended::Response(any)) => {
            assert_eq!(
                any.type_url,
                "type.googleapis.com/toolbroker.v1.CallToolResponse"
            );
            proto::CallToolResponse::decode(any.value.as_slice()).unwrap()
        }
        other => panic!("no response: {other:?}"),
    }
}

async fn get(broker: &Broker, token: &str, name: &str) -> Result<lro::Operation, tonic::Status> {
    let request = lro::GetOperationRequest { name: name.into() };
    operations(broker)
        .get_operation(as_caller(Some(token), &[], request))
        .await
        .map(tonic::Response::into_inner)
}

async fn wait(
    broker: &Broker,
    token: &str,
    name: &str,
    seconds: i64,
) -> Result<lro::Operation, tonic::Status> {
    let request = lro::WaitOperationRequest {
        name: name.into(),
        timeout: Some(prost_types::Duration { seconds, nanos: 0 }),
    };
    let mut ops = operations(broker);
    let waited = ops.wait_operation(as_caller(Some(token), &[], request));
    tokio::time::timeout(WAIT, waited)
        .await
        .expect("WaitOperation answered in time")
        .map(tonic::Response::into_inner)
}

/// Polls `name` until `until` holds of its metadata.
async fn poll_until(
    broker: &Broker,
    token: &str,
    name: &str,
    until: impl Fn(&proto::ToolCallMetadata) -> bool,
) -> lro::Operation {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let operation = get(broker, token, name).await.unwrap();
        if until(&metadata(&operation)) {
            return operation;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not reached: {:?}",
            metadata(&operation)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn an_operation_outlives_its_client_and_googles_lro_helper_collects_it_elsewhere() {
    let broker = broker(json!({})).await;
    // A client of its own, dropped once the call started.
    let started = {
        let channel = Channel::from_shared(format!("http://{}", broker.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = proto::tool_broker_client::ToolBrokerClient::new(channel);
        let request = as_caller(
            Some("alice"),
            &[],
            call_request("sleep", r#"{"ms": 1500, "steps": 3}"#),
        );
        client.start_tool_call(request).await.unwrap().into_inner()
    };
    assert!(!started.done);
    assert!(started.name.starts_with("operations/"), "{}", started.name);
    let id = started.name.trim_start_matches("operations/");
    assert!(id.len() >= 30, "an unguessable id: {id}");
    let first = metadata(&started);
    assert_eq!(first.tool, "sleep");
    assert_eq!(first.server, "demo");
    assert_eq!(first.caller, "token:alice");
    assert_eq!(first.state(), proto::TaskState::Working);
    assert!(first.create_time.is_some() && first.expire_time.is_none());

    // Progress shows while it runs.
    poll_until(&broker, "alice", &started.name, |m| {
        m.progress.as_ref().is_some_and(|p| p.progress >= 1.0)
    })
    .await;

    // Another process, with the same credentials, collects it with Google's helper.
    let descriptors = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(descriptors.path(), toolbroker::proto::FILE_DESCRIPTOR_SET).unwrap();
    let address = broker.addr.to_string();
    let collected = python::run_script(
        "lro_collect.py",
        &[
            &address,
            "alice",
            &started.name,
            descriptors.path().to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(collected["text"], "slept 1500 ms", "{collected}");
    assert_eq!(collected["is_error"], false);
    assert_eq!(collected["state"], "TASK_STATE_COMPLETED");
    assert_eq!(collected["progress"], 3.0);
    assert_eq!(collected["tool"], "sleep");

    // And grpcurl, by reflection.
    let output = tokio::process::Command::new(common::grpcurl())
        .args(["-plaintext", "-H", "authorization: Bearer alice", "-d"])
        .arg(json!({"name": started.name}).to_string())
        .arg(&address)
        .arg("google.longrunning.Operations/GetOperation")
        .output()
        .await
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(shown["done"], true, "{shown}");
    assert_eq!(
        shown["response"]["@type"],
        "type.googleapis.com/toolbroker.v1.CallToolResponse"
    );
    assert_eq!(shown["response"]["text"], "slept 1500 ms", "{shown}");
    assert_eq!(shown["metadata"]["state"], "TASK_STATE_COMPLETED");
    assert!(shown["metadata"]["expireTime"].is_string(), "{shown}");
}

#[tokio::test]
async fn another_caller_finds_none_of_alices_operations() {
    let broker = broker(json!({})).await;
    let running = start(&broker, "alice", "sleep", r#"{"ms": 20000, "steps": 200}"#)
        .await
        .unwrap();
    let finished = start(&broker, "alice", "echo", r#"{"message": "mine"}"#)
        .await
        .unwrap();
    wait(&broker, "alice", &finished.name, 10).await.unwrap();
    let mut ops = operations(&broker);
    for name in [&running.name, &finished.name] {
        let not_found = |status: tonic::Status, method: &str| {
            assert_eq!(status.code(), Code::NotFound, "{method}: {status:?}");
            assert!(status.message().contains(name.as_str()), "{status:?}");
        };
        not_found(get(&broker, "bob", name).await.unwrap_err(), "Get");
        not_found(wait(&broker, "bob", name, 1).await.unwrap_err(), "Wait");
        let cancel = lro::CancelOperationRequest { name: name.clone() };
        let cancelled = ops
            .cancel_operation(as_caller(Some("bob"), &[], cancel))
            .await;
        not_found(cancelled.unwrap_err(), "Cancel");
        let delete = lro::DeleteOperationRequest { name: name.clone() };
        let deleted = ops
            .delete_operation(as_caller(Some("bob"), &[], delete))
            .await;
        not_found(deleted.unwrap_err(), "Delete");
        let answer = proto::AnswerToolCallRequest {
            name: name.clone(),
            elicitation_responses: vec![proto::ElicitationResponse {
                id: "e1".into(),
                action: "decline".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let answered = broker
            .client
            .clone()
            .answer_tool_call(as_caller(Some("bob"), &[], answer))
            .await;
        not_found(answered.unwrap_err(), "Answer");
    }
    // Bob's list is his own (empty); alice's has both, newest first, paged.
    let list = |token: &'static str, page_size: i32, page_token: String| {
        let mut ops = ops.clone();
        async move {
            let request = lro::ListOperationsRequest {
                page_size,
                page_token,
                ..Default::default()
            };
            ops.list_operations(as_caller(Some(token), &[], request))
                .await
                .unwrap()
                .into_inner()
        }
    };
    assert!(list("bob", 0, String::new()).await.operations.is_empty());
    let first = list("alice", 1, String::new()).await;
    assert_eq!(first.operations.len(), 1);
    assert_eq!(first.operations[0].name, finished.name);
    assert!(!first.next_page_token.is_empty());
    let second = list("alice", 1, first.next_page_token).await;
    assert_eq!(second.operations[0].name, running.name);
    assert!(second.next_page_token.is_empty());
    // Alice's running operation still runs: bob's cancel did nothing.
    let still = get(&broker, "alice", &running.name).await.unwrap();
    assert!(!still.done);
    // A made-up name is the same NOT_FOUND.
    let made_up = get(&broker, "alice", "operations/12345").await.unwrap_err();
    assert_eq!(made_up.code(), Code::NotFound);
}

#[tokio::test]
async fn cancel_ends_the_operation_cancelled_and_cancels_the_call_on_the_server() {
    let broker = broker(json!({})).await;
    let started = start(&broker, "alice", "sleep", r#"{"ms": 30000, "steps": 300}"#)
        .await
        .unwrap();
    poll_until(&broker, "alice", &started.name, |m| m.progress.is_some()).await;
    let cancel = lro::CancelOperationRequest {
        name: started.name.clone(),
    };
    operations(&broker)
        .cancel_operation(as_caller(Some("alice"), &[], cancel))
        .await
        .unwrap();
    let ended = get(&broker, "alice", &started.name).await.unwrap();
    assert!(ended.done);
    match &ended.result {
        Some(Ended::Error(status)) => assert_eq!(status.code, Code::Cancelled as i32),
        other => panic!("not cancelled: {other:?}"),
    }
    assert_eq!(metadata(&ended).state(), proto::TaskState::Cancelled);
    broker
        .wait_for_message("the demo server's cancellation", "sleep cancelled")
        .await;
    // A finished operation can be deleted, then it is gone.
    let delete = lro::DeleteOperationRequest {
        name: started.name.clone(),
    };
    operations(&broker)
        .delete_operation(as_caller(Some("alice"), &[], delete))
        .await
        .unwrap();
    let gone = get(&broker, "alice", &started.name).await.unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
}

#[tokio::test]
async fn running_operations_are_bounded_per_caller_and_a_running_one_cannot_be_deleted() {
    let broker = broker(json!({"max_per_caller": 1})).await;
    let first = start(&broker, "alice", "sleep", r#"{"ms": 20000, "steps": 200}"#)
        .await
        .unwrap();
    let refused = start(&broker, "alice", "echo", r#"{"message": "x"}"#)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("tasks.max_per_caller"),
        "{refused:?}"
    );
    // Bob's budget is his own.
    let bobs = start(&broker, "bob", "echo", r#"{"message": "x"}"#)
        .await
        .unwrap();
    wait(&broker, "bob", &bobs.name, 10).await.unwrap();
    let delete = lro::DeleteOperationRequest {
        name: first.name.clone(),
    };
    let running = operations(&broker)
        .delete_operation(as_caller(Some("alice"), &[], delete))
        .await
        .unwrap_err();
    assert_eq!(running.code(), Code::FailedPrecondition, "{running:?}");
    // Unknown tools and tools the caller may not use are refused at the start, as CallTool.
    let unknown = start(&broker, "alice", "nope", "{}").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

#[tokio::test]
async fn a_question_waits_in_the_metadata_until_answer_tool_call_answers_it() {
    let broker = broker(json!({})).await;
    let started = start(&broker, "alice", "ask", r#"{"question": "Colour?"}"#)
        .await
        .unwrap();
    let asking = poll_until(&broker, "alice", &started.name, |m| {
        !m.elicitations.is_empty()
    })
    .await;
    let asked = metadata(&asking);
    assert_eq!(asked.state(), proto::TaskState::InputRequired);
    assert_eq!(asked.elicitations[0].message, "Colour?");
    let id = asked.elicitations[0].id.clone();
    let answer = |id: &str| proto::AnswerToolCallRequest {
        name: started.name.clone(),
        elicitation_responses: vec![proto::ElicitationResponse {
            id: id.into(),
            action: "accept".into(),
            content: Some(proto::json::json_to_struct(
                json!({"answer": "teal"}).as_object().unwrap(),
            )),
        }],
        ..Default::default()
    };
    let mut client = broker.client.clone();
    let stray = client
        .answer_tool_call(as_caller(Some("alice"), &[], answer("e99")))
        .await
        .unwrap_err();
    assert_eq!(stray.code(), Code::FailedPrecondition, "{stray:?}");
    assert!(
        stray.message().contains(&id),
        "names the open one: {stray:?}"
    );
    client
        .answer_tool_call(as_caller(Some("alice"), &[], answer(&id)))
        .await
        .unwrap();
    let done = wait(&broker, "alice", &started.name, 20).await.unwrap();
    assert!(done.done, "{done:?}");
    let text = response(&done).text;
    assert!(text.contains("teal"), "{text}");
    assert!(metadata(&done).elicitations.is_empty());
}

#[tokio::test]
async fn a_finished_operation_is_forgotten_after_the_ttl() {
    let broker = broker(json!({"ttl": "1s"})).await;
    let started = start(&broker, "alice", "echo", r#"{"message": "brief"}"#)
        .await
        .unwrap();
    let done = wait(&broker, "alice", &started.name, 10).await.unwrap();
    assert!(done.done);
    assert_eq!(response(&done).text, "brief");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match get(&broker, "alice", &started.name).await {
            Err(status) if status.code() == Code::NotFound => break,
            Ok(_) => assert!(tokio::time::Instant::now() < deadline, "still kept"),
            Err(other) => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_broker_stopping_fails_running_operations_saying_why() {
    let broker = broker(json!({})).await;
    let started = start(&broker, "alice", "sleep", r#"{"ms": 60000, "steps": 600}"#)
        .await
        .unwrap();
    poll_until(&broker, "alice", &started.name, |m| m.progress.is_some()).await;
    let waiting = {
        let request = lro::WaitOperationRequest {
            name: started.name.clone(),
            timeout: Some(prost_types::Duration {
                seconds: 60,
                nanos: 0,
            }),
        };
        let mut ops = operations(&broker);
        tokio::spawn(async move {
            ops.wait_operation(as_caller(Some("alice"), &[], request))
                .await
                .map(tonic::Response::into_inner)
        })
    };
    // A wait that reaches the broker after the signal is still answered: the connections
    // stay open until running operations have recorded their end.
    broker.signal(nix::sys::signal::Signal::SIGTERM);
    let ended = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the wait is answered")
        .unwrap()
        .expect("answered before the connection closed");
    assert!(ended.done);
    match &ended.result {
        Some(Ended::Error(status)) => {
            assert_eq!(status.code, Code::Unavailable as i32, "{status:?}");
            assert!(
                status.message.contains("broker running it stopped"),
                "{status:?}"
            );
        }
        other => panic!("not failed: {other:?}"),
    }
    assert_eq!(metadata(&ended).state(), proto::TaskState::Failed);
}

#[tokio::test]
async fn an_operation_writes_one_audit_line_when_it_ends_a_refusal_at_once_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let broker = builder(json!({}))
        .top("audit", json!({"file": log.display().to_string()}))
        .top("metrics_listen", "127.0.0.1:0")
        .start()
        .await;
    broker.wait_ready().await;
    let unknown = start(&broker, "alice", "nope", "{}").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let echoed = start(&broker, "alice", "echo", r#"{"message": "kept"}"#)
        .await
        .unwrap();
    wait(&broker, "alice", &echoed.name, 10).await.unwrap();
    let sleeping = start(&broker, "alice", "sleep", r#"{"ms": 30000, "steps": 300}"#)
        .await
        .unwrap();
    let cancel = lro::CancelOperationRequest {
        name: sleeping.name.clone(),
    };
    operations(&broker)
        .cancel_operation(as_caller(Some("alice"), &[], cancel))
        .await
        .unwrap();
    let lines = crate::audit_support::lines(&log, 3).await;
    let mut shown: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["tool"].as_str().unwrap(),
                line["code"].as_str().unwrap(),
                line["caller"].as_str().unwrap(),
            )
        })
        .collect();
    shown.sort_unstable();
    assert_eq!(
        shown,
        [
            ("echo", "OK", "alice"),
            ("nope", "NOT_FOUND", "alice"),
            ("sleep", "CANCELLED", "alice")
        ],
        "{lines:?}"
    );
    toolbroker::tls_provider::install();
    let url = broker.metrics_url().await;
    let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
    for want in [
        r#"toolbroker_tasks_ended_total{state="completed"} 1"#,
        r#"toolbroker_tasks_ended_total{state="cancelled"} 1"#,
        "toolbroker_tasks_running 0",
    ] {
        assert!(text.contains(want), "{want} in:\n{text}");
    }
}

//! The Tasks extension (`io.modelcontextprotocol/tasks`) on the MCP face, driven by a
//! 2026-07-28 client that declares it, with its answers read by rmcp's own task types: slow
//! calls become tasks, quick ones are answered inline, questions wait in `inputRequests` for
//! `tasks/update`, `tasks/cancel` cancels upstream, a task is an operation over gRPC too, and a
//! second caller finds none of the first one's tasks.

use rmcp::model::{CreateTaskResult, GetTaskResult, TaskPayload, TaskStatus};
use serde_json::{Value, json};
use toolbroker::proto::google::longrunning::{
    GetOperationRequest, operations_client::OperationsClient,
};

use crate::common::{Broker, WAIT, as_caller, face};

/// A broker with callers alice and bob, the demo server and the MCP face, `tasks` as given.
async fn broker(tasks: Value) -> (Broker, String) {
    toolbroker::tls_provider::install();
    let broker = crate::long_calls::builder(tasks)
        .top("mcp_listen", "127.0.0.1:0")
        .start()
        .await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    (broker, url)
}

/// What a client taking tasks (and elicitation) declares.
fn taking_tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}})
}

/// One request of `token`'s client, which takes tasks: its JSON-RPC answer.
async fn ask(url: &str, token: &str, method: &str, params: Value) -> Value {
    let auth = format!("Bearer {token}");
    // 2026-07-28 mirrors a call's tool and a task request's task in `Mcp-Name`.
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = vec![("authorization", auth.as_str())];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    let (status, answer) =
        face::stateless_declaring(url, &headers, method, params, taking_tasks()).await;
    assert_eq!(status, 200, "{method}: {answer:?}");
    answer.expect("an answer")
}

async fn call(url: &str, token: &str, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    ask(url, token, "tools/call", params).await["result"].clone()
}

async fn get(url: &str, token: &str, id: &str) -> Value {
    ask(url, token, "tasks/get", json!({"taskId": id})).await
}

/// Polls task `id` until its status is `status`.
async fn until(url: &str, token: &str, id: &str, status: TaskStatus) -> GetTaskResult {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = get(url, token, id).await;
        let task: GetTaskResult = serde_json::from_value(answer["result"].clone())
            .unwrap_or_else(|e| panic!("{e}: {answer}"));
        if task.task.status() == status {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {status:?}: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn created(result: &Value) -> CreateTaskResult {
    serde_json::from_value(result.clone()).unwrap_or_else(|e| panic!("not a task ({e}): {result}"))
}

fn text(result: &serde_json::Map<String, Value>) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_slow_call_is_a_task_a_quick_one_is_answered_and_another_caller_finds_neither() {
    let (broker, url) = broker(json!({})).await;
    let quick = call(&url, "alice", "echo", json!({"message": "now"})).await;
    assert_eq!(quick["content"][0]["text"], "now", "{quick}");
    assert_ne!(quick["resultType"], "task");

    let slow = call(&url, "alice", "sleep", json!({"ms": 2500, "steps": 5})).await;
    let task = created(&slow).task;
    assert_eq!(task.status, TaskStatus::Working);
    assert!(task.poll_interval_ms.is_some() && task.ttl_ms == Some(3_600_000));
    let id = task.task_id.clone();

    // Bob: an unknown task in every method, as for a made-up one.
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/cancel", json!({"taskId": id})),
        ("tasks/update", json!({"taskId": id, "inputResponses": {}})),
        ("tasks/get", json!({"taskId": "12345"})),
    ] {
        let answer = ask(&url, "bob", method, params).await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown task"),
            "{answer}"
        );
    }
    // The same record is alice's operation over gRPC, and not bob's.
    let name = format!("operations/{id}");
    let mut ops = OperationsClient::new(broker.channel.clone());
    let request = || GetOperationRequest { name: name.clone() };
    let operation = ops
        .get_operation(as_caller(Some("alice"), &[], request()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(operation.name, name);
    let bobs = ops
        .get_operation(as_caller(Some("bob"), &[], request()))
        .await
        .unwrap_err();
    assert_eq!(bobs.code(), tonic::Code::NotFound);

    // Progress shows as the status message while it works.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = get(&url, "alice", &id).await;
        let message = answer["result"]["statusMessage"]
            .as_str()
            .unwrap_or_default();
        if message.starts_with("slept ") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{answer}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let done = until(&url, "alice", &id, TaskStatus::Completed).await;
    match &done.task.payload {
        TaskPayload::Completed { result } => assert_eq!(text(result), "slept 2500 ms"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_question_waits_in_input_requests_until_tasks_update_answers_it() {
    let (_broker, url) = broker(json!({})).await;
    let asked = call(&url, "alice", "ask", json!({"question": "Colour?"})).await;
    let id = created(&asked).task.task_id;
    let waiting = until(&url, "alice", &id, TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &waiting.task.payload else {
        panic!("{waiting:?}");
    };
    let (key, request) = input_requests.iter().next().expect("one question");
    let request = serde_json::to_value(request).unwrap();
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "Colour?");
    // Bob cannot answer it; alice can (an unknown key is ignored).
    let responses = json!({key: {"action": "accept", "content": {"answer": "teal"}}, "zz": {}});
    let bobs = ask(
        &url,
        "bob",
        "tasks/update",
        json!({"taskId": id, "inputResponses": responses}),
    )
    .await;
    assert_eq!(bobs["error"]["code"], -32602, "{bobs}");
    let ack = ask(
        &url,
        "alice",
        "tasks/update",
        json!({"taskId": id, "inputResponses": responses}),
    )
    .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = until(&url, "alice", &id, TaskStatus::Completed).await;
    match &done.task.payload {
        TaskPayload::Completed { result } => assert!(text(result).contains("teal"), "{result:?}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn tasks_cancel_cancels_the_call_upstream_and_always_makes_every_call_a_task() {
    let (broker, url) = broker(json!({"always": true})).await;
    let quick = call(&url, "alice", "echo", json!({"message": "later"})).await;
    let quick = created(&quick).task.task_id;
    let done = until(&url, "alice", &quick, TaskStatus::Completed).await;
    match &done.task.payload {
        TaskPayload::Completed { result } => assert_eq!(text(result), "later"),
        other => panic!("{other:?}"),
    }

    let slow = call(&url, "alice", "sleep", json!({"ms": 30000, "steps": 300})).await;
    let id = created(&slow).task.task_id;
    let ack = ask(&url, "alice", "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    until(&url, "alice", &id, TaskStatus::Cancelled).await;
    broker
        .wait_for_message("the demo server's cancellation", "sleep cancelled")
        .await;
}

#[tokio::test]
async fn the_extension_is_advertised_and_a_client_without_it_gets_plain_results() {
    let (_broker, url) = broker(json!({"always": true})).await;
    let discovered = ask(&url, "alice", "server/discover", json!({})).await;
    let extensions = &discovered["result"]["capabilities"]["extensions"];
    assert!(
        extensions.get("io.modelcontextprotocol/tasks").is_some(),
        "{discovered}"
    );
    let headers = [("authorization", "Bearer alice"), ("mcp-name", "echo")];
    let params = json!({"name": "echo", "arguments": {"message": "plain"}});
    let (_, answer) = face::stateless(&url, &headers, "tools/call", params).await;
    let answer = answer.unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "plain", "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_shared_state_a_task_asked_on_one_replica_is_answered_through_another() {
    toolbroker::tls_provider::install();
    let redis = crate::common::redis::RedisServer::start().await;
    let mut urls = Vec::new();
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let broker = crate::long_calls::builder(json!({}))
            .top("mcp_listen", "127.0.0.1:0")
            .top("state", json!({"redis": redis.url()}))
            .start()
            .await;
        broker.wait_ready().await;
        urls.push(broker.face_url().await);
        replicas.push(broker);
    }
    let (first, second) = (&urls[0], &urls[1]);
    let asked = call(first, "alice", "ask", json!({"question": "Colour?"})).await;
    let id = created(&asked).task.task_id;
    // The other replica shows the question, and bob finds no task there either.
    let waiting = until(second, "alice", &id, TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &waiting.task.payload else {
        panic!("{waiting:?}");
    };
    let key = input_requests.keys().next().expect("one question").clone();
    let bobs = get(second, "bob", &id).await;
    assert_eq!(bobs["error"]["code"], -32602, "{bobs}");
    // Answered through the other replica, the call running on the first goes on.
    let responses = json!({key: {"action": "accept", "content": {"answer": "teal"}}});
    let ack = ask(
        second,
        "alice",
        "tasks/update",
        json!({"taskId": id, "inputResponses": responses}),
    )
    .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = until(second, "alice", &id, TaskStatus::Completed).await;
    match &done.task.payload {
        TaskPayload::Completed { result } => assert!(text(result).contains("teal"), "{result:?}"),
        other => panic!("{other:?}"),
    }
}

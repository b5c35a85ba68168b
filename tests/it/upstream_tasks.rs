//! An upstream server that answers calls with tasks (the demo server with `--tasks`, rmcp's
//! own TaskManager, on MCP 2026-07-28): the broker follows each task for its caller, puts its
//! questions to the caller's stream, and cancels it when the caller goes away. The caller sees
//! a plain result, never the server's task.

use prost::Message as _;
use serde_json::json;
use tonic::Code;
use toolbroker::proto::{
    ToolCallMetadata,
    call_tool_stream_response::Event,
    google::longrunning::{
        CancelOperationRequest, GetOperationRequest, operations_client::OperationsClient,
    },
};

use crate::common::{Broker, WAIT, as_caller, call_request, demo};

async fn broker() -> Broker {
    let broker = Broker::builder()
        .server(demo("t").args(["--tasks"]).set("max_timeout", "60s"))
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn a_servers_task_is_followed_and_its_caller_gets_the_result() {
    let broker = broker().await;
    assert_eq!(broker.server("t").await.protocol_version, "2026-07-28");
    let result = broker
        .call("sleep", r#"{"ms": 600, "steps": 3}"#)
        .await
        .unwrap();
    assert_eq!(result.text, "slept 600 ms");
    assert!(!result.is_error);
    broker
        .wait_for_message("the server ran it as a task", "sleep task finished")
        .await;
    // A unary call has no one to ask: the server's question is declined.
    let unary = broker
        .call("ask", r#"{"question": "Colour?"}"#)
        .await
        .unwrap();
    assert_eq!(unary.text, "the user declined to answer");
}

#[tokio::test]
async fn a_tasks_question_goes_to_the_callers_stream_and_back() {
    let broker = broker().await;
    let mut stream = broker
        .stream_call(None, "ask", r#"{"question": "Which colour?"}"#)
        .await
        .unwrap();
    let asked = match stream.next().await.unwrap() {
        Some(Event::Elicitation(asked)) => asked,
        other => panic!("expected the task's question, got {other:?}"),
    };
    assert_eq!(asked.message, "Which colour?");
    stream
        .answer_elicitation(&asked.id, "accept", Some(json!({"answer": "teal"})))
        .await;
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "the user answered: teal");
}

#[tokio::test]
async fn cancelling_the_call_cancels_the_servers_task() {
    let broker = broker().await;
    let request = as_caller(
        None,
        &[],
        call_request("sleep", r#"{"ms": 30000, "steps": 300}"#),
    );
    let started = broker
        .client
        .clone()
        .start_tool_call(request)
        .await
        .unwrap()
        .into_inner();
    // The broker follows the task once the task's status shows as the operation's progress.
    let mut ops = OperationsClient::new(broker.channel.clone());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let request = GetOperationRequest {
            name: started.name.clone(),
        };
        let operation = ops.get_operation(request).await.unwrap().into_inner();
        let metadata =
            ToolCallMetadata::decode(operation.metadata.unwrap().value.as_slice()).unwrap();
        if metadata
            .progress
            .as_ref()
            .is_some_and(|progress| progress.message.starts_with("slept "))
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{metadata:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let cancel = CancelOperationRequest {
        name: started.name.clone(),
    };
    ops.cancel_operation(cancel).await.unwrap();
    broker
        .wait_for_message("the server's task cancelled", "sleep task cancelled")
        .await;
    // The session goes on.
    let after = broker
        .call("echo", r#"{"message": "still"}"#)
        .await
        .unwrap();
    assert_eq!(after.text, "still");
    let unknown = broker.call("nope", "{}").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

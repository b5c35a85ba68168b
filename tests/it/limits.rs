//! Hostile and broken input that the broker refuses without harm: oversized messages and
//! results, a full queue, and arguments that break the tool's schema.

use crate::common::{Broker, demo, servers::HttpServer, url_server};
use serde_json::json;
use tonic::Code;
use toolbroker::proto;

#[tokio::test]
async fn oversized_requests_and_responses_are_resource_exhausted() {
    let limits = json!({"max_request_bytes": "2KiB", "max_response_bytes": "1KiB"});
    let broker = Broker::builder()
        .top("limits", limits)
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let big = format!(r#"{{"message": "{}"}}"#, "x".repeat(4096));
    let request = broker.call("echo", &big).await.unwrap_err();
    assert_eq!(request.code(), Code::ResourceExhausted, "{request:?}");
    assert!(
        request.message().contains("max_request_bytes"),
        "{}",
        request.message()
    );
    let listed = broker
        .client
        .clone()
        .list_tools(proto::ListToolsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(listed.code(), Code::ResourceExhausted);
    assert!(
        listed.message().contains("max_response_bytes"),
        "{}",
        listed.message()
    );
    assert_eq!(
        broker.text("echo", r#"{"message": "small"}"#).await,
        "small"
    );
}

#[tokio::test]
async fn an_oversized_tool_result_drops_the_session_not_the_broker() {
    let http = HttpServer::demo("streamable-http", None).await;
    let limits = json!({
        "max_request_bytes": "1MiB",
        "max_response_bytes": "1MiB",
        "max_result_bytes": "64KiB",
    });
    let broker = Broker::builder()
        .top("limits", limits)
        .server(demo("demo"))
        .server(url_server("remote", &http.url).prefix("r_"))
        .start()
        .await;
    broker.wait_ready().await;
    let big = format!(r#"{{"message": "{}"}}"#, "y".repeat(200_000));
    for tool in ["echo", "r_echo"] {
        let status = broker.call(tool, &big).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{tool}: {status:?}");
        assert!(
            status.message().contains("max_result_bytes"),
            "{tool}: {}",
            status.message()
        );
    }
    // Over stdio the session was dropped and comes back; over HTTP it never went.
    let back = broker
        .call_when_ready("demo", "echo", r#"{"message": "back"}"#)
        .await;
    assert_eq!(back.text, "back");
    assert_eq!(
        broker.text("r_echo", r#"{"message": "still"}"#).await,
        "still"
    );
    assert!(broker.server("demo").await.restarts >= 1);
}

#[tokio::test]
async fn a_full_queue_refuses_calls_at_once_and_a_long_wait_gives_up() {
    let one_slot = demo("demo")
        .set("max_concurrent_calls", 1)
        .set("max_queued_calls", 1)
        .set("queue_timeout", "5s");
    let broker = Broker::builder().server(one_slot).start().await;
    broker.wait_ready().await;
    let sleep = |ms: u64| proto::CallToolRequest {
        name: "sleep".into(),
        arguments_json: format!(r#"{{"ms": {ms}}}"#),
        ..Default::default()
    };
    let call = |ms| {
        let mut client = broker.client.clone();
        let request = sleep(ms);
        tokio::spawn(async move { client.call_tool(request).await })
    };
    // One call runs (longer than the queue's timeout), one waits, the next finds the queue
    // full and is refused at once; the waiting one gives up after queue_timeout.
    let running = call(8000);
    broker
        .wait_for_log("the sleep", |l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("sleep started"))
        })
        .await;
    let waiting = call(10);
    broker
        .wait_for_log("a queued call", |l| {
            l["message"] == "a call waits for a slot"
        })
        .await;
    let refused = call(10).await.unwrap().unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("queue is full: 1 running and 1 waiting calls"),
        "{refused:?}"
    );
    let gave_up = waiting.await.unwrap().unwrap_err();
    assert_eq!(gave_up.code(), Code::ResourceExhausted, "{gave_up:?}");
    assert!(
        gave_up
            .message()
            .contains("no call slot freed up within 5s"),
        "{gave_up:?}"
    );
    assert!(running.await.unwrap().is_ok());
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_refused_before_they_are_sent() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    for (arguments, hint) in [
        (r#"{"a": 1}"#, r#"arguments: "b" is a required property"#),
        (
            r#"{"a": "one", "b": 2}"#,
            r#"arguments/a: "one" is not of type "integer""#,
        ),
        (
            r#"{"a": 1, "b": 2, "c": 3}"#,
            "Additional properties are not allowed ('c' was unexpected)",
        ),
    ] {
        let status = broker.call("add", arguments).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{arguments}");
        assert!(
            status.message().contains(hint),
            "{arguments}: {}",
            status.message()
        );
    }
    assert!(
        !broker.dump().contains("invalid arguments for tool add"),
        "the demo server never saw them (it would have said so)"
    );
}

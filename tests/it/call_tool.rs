//! CallTool through the broker against real MCP servers over stdio.

use crate::common::{Broker, Server, WAIT, demo, everything};
use prost_types::{Struct, Value, value::Kind as V};
use tonic::Code;
use toolbroker::proto::{self, content::Kind, embedded_resource::Contents};

/// A ready broker with this one server.
async fn broker_of(server: Server) -> Broker {
    let broker = Broker::builder().server(server).start().await;
    broker.wait_ready().await;
    broker
}

/// A ready broker with our demo server.
async fn demo_broker() -> Broker {
    broker_of(demo("demo")).await
}

fn number(n: f64) -> Value {
    Value {
        kind: Some(V::NumberValue(n)),
    }
}

#[tokio::test]
async fn call_echo_returns_the_text() {
    let broker = demo_broker().await;
    let response = broker
        .call("echo", r#"{"message": "hello, broker"}"#)
        .await
        .unwrap();
    assert_eq!(response.text, "hello, broker");
    assert_eq!(response.server, "demo");
    assert!(!response.is_error);
}

#[tokio::test]
async fn call_add_with_struct_arguments_sends_integers() {
    let broker = demo_broker().await;
    // Struct numbers are doubles; the demo's `add` takes i64 and would reject 2.0.
    let request = proto::CallToolRequest {
        name: "add".into(),
        arguments: Some(Struct {
            fields: [
                ("a".to_string(), number(2.0)),
                ("b".to_string(), number(40.0)),
            ]
            .into(),
        }),
        ..Default::default()
    };
    let response = broker
        .client
        .clone()
        .call_tool(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.text, "42");
}

#[tokio::test]
async fn big_integers_pass_exactly_through_arguments_json() {
    let broker = demo_broker().await;
    let response = broker
        .call("add", r#"{"a": 9007199254740993, "b": 1}"#)
        .await
        .unwrap();
    assert_eq!(response.text, "9007199254740994");
}

#[tokio::test]
async fn a_failing_tool_is_ok_with_is_error() {
    let broker = demo_broker().await;
    let response = broker
        .call("fail", r#"{"message": "disk full"}"#)
        .await
        .unwrap();
    assert!(response.is_error);
    assert!(response.text.contains("disk full"), "{}", response.text);
}

#[tokio::test]
async fn images_come_back_as_bytes_with_their_mime_type() {
    let broker = demo_broker().await;
    let response = broker.call("tiny_image", "{}").await.unwrap();
    let Some(Kind::Image(image)) = &response.content[0].kind else {
        panic!("not an image: {response:?}")
    };
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(&image.data[..4], b"\x89PNG");
}

#[tokio::test]
async fn every_content_kind_and_structured_content_arrive() {
    let broker = demo_broker().await;
    let response = broker.call("all_content", "{}").await.unwrap();
    let kinds: Vec<&str> = response
        .content
        .iter()
        .map(|c| match c.kind.as_ref().unwrap() {
            Kind::Text(_) => "text",
            Kind::Image(_) => "image",
            Kind::Audio(_) => "audio",
            Kind::Resource(r) => match r.contents {
                Some(Contents::Text(_)) => "resource-text",
                Some(Contents::Blob(_)) => "resource-blob",
                None => "resource-empty",
            },
            Kind::ResourceLink(_) => "link",
        })
        .collect();
    for kind in [
        "text",
        "image",
        "audio",
        "resource-text",
        "resource-blob",
        "link",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    let Some(Kind::Audio(audio)) = response
        .content
        .iter()
        .find_map(|c| match &c.kind {
            Some(k @ Kind::Audio(_)) => Some(Some(k)),
            _ => None,
        })
        .flatten()
    else {
        unreachable!()
    };
    assert_eq!(&audio.data[..4], b"RIFF");

    let stats = broker
        .call("stats", r#"{"numbers": [1, 2, 3, 6]}"#)
        .await
        .unwrap();
    let structured: serde_json::Value =
        serde_json::from_str(&stats.structured_content_json).unwrap();
    assert_eq!(structured["sum"], 12.0);
    assert_eq!(structured["count"], 4);
}

#[tokio::test]
async fn an_unknown_tool_is_not_found() {
    let broker = demo_broker().await;
    let status = broker.call("no_such_tool", "{}").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("\"no_such_tool\""),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn bad_arguments_are_invalid_argument() {
    let broker = demo_broker().await;
    for (arguments, hint) in [
        ("[1, 2]", "JSON object"),
        ("\"text\"", "JSON object"),
        ("{not json", "not valid JSON"),
    ] {
        let status = broker.call("echo", arguments).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{arguments}");
        assert!(
            status.message().contains(hint),
            "{arguments}: {}",
            status.message()
        );
    }
    let both = proto::CallToolRequest {
        name: "echo".into(),
        arguments: Some(Struct::default()),
        arguments_json: "{}".into(),
        ..Default::default()
    };
    let status = broker.client.clone().call_tool(both).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    // The server rejects arguments of the wrong shape with -32602: INVALID_ARGUMENT too.
    let status = broker
        .call("add", r#"{"a": "two", "b": 1}"#)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
}

#[tokio::test]
async fn a_call_longer_than_the_server_timeout_is_deadline_exceeded() {
    let broker = broker_of(demo("demo").set("timeout", "500ms")).await;
    // A sleep far longer than the test's WAIT, within which `call` must be answered: the
    // answer comes from the timeout, not the sleep's end.
    let sleep = format!(r#"{{"ms": {}}}"#, 30 * WAIT.as_millis());
    let status = broker.call("sleep", &sleep).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    // The server was told to cancel: the demo logs it on its stderr, which the broker logs.
    broker
        .wait_for_log("the demo's cancellation", |l| {
            l["server"] == "demo"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("sleep cancelled"))
        })
        .await;
}

#[tokio::test]
async fn a_per_call_timeout_is_honoured() {
    let broker = demo_broker().await;
    let request = proto::CallToolRequest {
        name: "sleep".into(),
        arguments_json: r#"{"ms": 10000}"#.into(),
        timeout: Some(prost_types::Duration {
            seconds: 0,
            nanos: 300_000_000,
        }),
        ..Default::default()
    };
    let status = broker.client.clone().call_tool(request).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(status.message().contains("300ms"), "{}", status.message());
    let quick = broker.call("sleep", r#"{"ms": 10}"#).await.unwrap();
    assert_eq!(quick.text, "slept 10 ms");
}

#[tokio::test]
async fn server_everything_tools_work_through_the_broker() {
    let broker = broker_of(everything("everything").prefix("ev_")).await;

    let echo = broker
        .call("ev_echo", r#"{"message": "hi"}"#)
        .await
        .unwrap();
    assert!(echo.text.contains("hi"), "{}", echo.text);

    let sum = broker
        .call("ev_get-sum", r#"{"a": 2, "b": 3}"#)
        .await
        .unwrap();
    assert!(sum.text.contains('5'), "{}", sum.text);

    let image = broker.call("ev_get-tiny-image", "{}").await.unwrap();
    let image = image
        .content
        .iter()
        .find_map(|c| match &c.kind {
            Some(Kind::Image(i)) => Some(i),
            _ => None,
        })
        .expect("an image block");
    assert_eq!(
        (image.mime_type.as_str(), &image.data[..4]),
        ("image/png", &b"\x89PNG"[..])
    );

    let links = broker
        .call("ev_get-resource-links", r#"{"count": 2}"#)
        .await
        .unwrap();
    let count = links
        .content
        .iter()
        .filter(|c| matches!(c.kind, Some(Kind::ResourceLink(_))))
        .count();
    assert_eq!(count, 2);

    let structured = broker
        .call("ev_get-structured-content", r#"{"location": "Chicago"}"#)
        .await
        .unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&structured.structured_content_json).unwrap();
    assert!(
        value.is_object() && !value.as_object().unwrap().is_empty(),
        "{value}"
    );

    let resource = broker
        .call(
            "ev_get-resource-reference",
            r#"{"resourceType": "Blob", "resourceId": 2}"#,
        )
        .await
        .unwrap();
    assert!(
        resource.content.iter().any(|c| matches!(&c.kind, Some(Kind::Resource(r)) if matches!(r.contents, Some(Contents::Blob(_))))),
        "{resource:?}"
    );
}

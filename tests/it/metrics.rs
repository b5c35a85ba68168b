//! Prometheus metrics on `metrics_listen` that count what was done.

use crate::common::{Broker, demo};

/// The value of one Prometheus sample, found by its name and labels.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| l[name.len()..].starts_with(['{', ' ']))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn metrics_count_what_was_done() {
    let broker = Broker::builder()
        .top("metrics_listen", "127.0.0.1:0")
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let url = broker.metrics_url().await;
    for _ in 0..3 {
        broker.text("echo", r#"{"message": "m"}"#).await;
    }
    assert!(broker.call("fail", "{}").await.unwrap().is_error);
    assert!(broker.call("nope", "{}").await.is_err());
    let mut streamed = broker
        .stream_call(None, "echo", r#"{"message": "s"}"#)
        .await
        .unwrap();
    streamed.result().await.unwrap();
    let _watch = broker.watch(&[]).await;

    toolbroker::tls_provider::install();
    let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
    let op = "mcp_client_operation_duration_seconds_count";
    assert_eq!(
        sample(&text, op, &[("gen_ai_tool_name", "echo")]),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            op,
            &[("gen_ai_tool_name", "fail"), ("error_type", "tool_error")]
        ),
        Some(1.0)
    );
    let rpc = "rpc_server_call_duration_seconds_count";
    assert_eq!(
        sample(
            &text,
            rpc,
            &[("rpc_method", "CallTool"), ("rpc_grpc_status_code", "Ok")]
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            rpc,
            &[
                ("rpc_method", "CallTool"),
                ("rpc_grpc_status_code", "NotFound")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            rpc,
            &[
                ("rpc_method", "CallToolStream"),
                ("rpc_grpc_status_code", "Ok")
            ]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "toolbroker_server_state",
            &[("toolbroker_server", "demo"), ("state", "ready")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolbroker_server_state",
            &[("toolbroker_server", "demo"), ("state", "failed")]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolbroker_server_tools",
            &[("toolbroker_server", "demo")]
        ),
        Some(broker.tools().await.tools.len() as f64),
        "the gauge counts the tools ListTools shows"
    );
    assert_eq!(
        sample(
            &text,
            "toolbroker_calls_in_flight",
            &[("toolbroker_server", "demo")]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "toolbroker_watch_subscribers", &[]),
        Some(1.0)
    );
    assert!(sample(&text, "toolbroker_catalog_revision", &[]).is_some_and(|r| r > 0.0));
    assert!(
        sample(&text, "process_resident_memory_bytes", &[]).is_some_and(|b| b > 1e6),
        "{text}"
    );
    assert!(text.contains("# TYPE mcp_client_operation_duration_seconds histogram"));
}

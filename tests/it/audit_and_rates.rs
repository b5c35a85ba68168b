//! The audit log and call rates over a real broker: one line per CallTool with its caller,
//! tool, server, code and trace, refused calls included; arguments only when enabled; no
//! secret in the file; a new file after rotation and SIGHUP. Rates: a caller over its rate is
//! RESOURCE_EXHAUSTED with `retry-after` and a RetryInfo, recovers after it, and never slows
//! another caller.

use std::time::Duration;

use crate::{
    audit_support,
    common::{self, Broker, demo},
};
use serde_json::{Value, json};
use tonic::Code;
use tonic_types::StatusExt as _;

const CANARY: &str = "canary-9f3e1d";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn tokens() -> Value {
    json!({"tokens": [
        {"name": "alice", "value_env": "ALICE_TOKEN"},
        {"name": "bob", "value_env": "BOB_TOKEN", "tools": ["demo_echo", "slow_*"]},
    ]})
}

async fn broker(audit: Value, limits: Option<Value>) -> Broker {
    let mut builder = Broker::builder()
        .server(
            demo("demo")
                .prefix("demo_")
                .set("env", json!({"API_KEY": CANARY})),
        )
        .server(demo("slow").prefix("slow_").set("caller_rate", "1/h"))
        .top("auth", tokens())
        .top("audit", audit)
        .env("ALICE_TOKEN", &format!("alice-{CANARY}"))
        .env("BOB_TOKEN", "bob-token");
    if let Some(limits) = limits {
        builder = builder.top("limits", limits);
    }
    let broker = builder.start().await;
    broker.wait_ready().await;
    broker
}

const ALICE: Option<&str> = Some("alice-canary-9f3e1d");

#[tokio::test]
async fn every_call_is_audited_with_its_outcome_and_no_secret_and_rotation_reopens_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let broker = broker(json!({"file": file.display().to_string()}), None).await;
    let traceparent = format!("00-{TRACE_ID}-00f067aa0ba902b7-01");

    let ok = broker
        .call_as(
            ALICE,
            &[("traceparent", &traceparent)],
            "demo_echo",
            r#"{"message":"hello"}"#,
        )
        .await
        .unwrap();
    assert!(!ok.is_error);
    let failed = broker
        .call_as(ALICE, &[], "demo_fail", r#"{"message":"no"}"#)
        .await
        .unwrap();
    assert!(failed.is_error);
    let refused = [
        (Some("wrong-token"), "demo_echo", r#"{"message":"x"}"#),
        (Some("bob-token"), "demo_add", r#"{"a":1,"b":2}"#),
        (ALICE, "demo_nope", "{}"),
        (ALICE, "demo_echo", r#"{"text":"wrong field"}"#),
        (Some("bob-token"), "slow_echo", r#"{"message":"1"}"#),
        (Some("bob-token"), "slow_echo", r#"{"message":"2"}"#),
    ];
    let mut codes = Vec::new();
    for (token, tool, arguments) in refused {
        let code = match broker.call_as(token, &[], tool, arguments).await {
            Ok(_) => Code::Ok,
            Err(status) => status.code(),
        };
        codes.push(code);
    }
    assert_eq!(
        codes,
        [
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::NotFound,
            Code::InvalidArgument,
            Code::Ok,
            Code::ResourceExhausted,
        ]
    );

    let lines = audit_support::lines(&file, 8).await;
    let seen: Vec<(Value, Value, Value, Value, Value)> = lines
        .iter()
        .map(|l| {
            (
                l["caller"].clone(),
                l["tool"].clone(),
                l["server"].clone(),
                l["code"].clone(),
                l["is_error"].clone(),
            )
        })
        .collect();
    let row = |caller: Value, tool: &str, server: Value, code: &str, is_error: bool| {
        (caller, json!(tool), server, json!(code), json!(is_error))
    };
    assert_eq!(
        seen,
        [
            row(json!("alice"), "demo_echo", json!("demo"), "OK", false),
            row(json!("alice"), "demo_fail", json!("demo"), "OK", true),
            row(
                Value::Null,
                "demo_echo",
                json!("demo"),
                "UNAUTHENTICATED",
                false
            ),
            row(
                json!("bob"),
                "demo_add",
                json!("demo"),
                "PERMISSION_DENIED",
                false
            ),
            row(json!("alice"), "demo_nope", Value::Null, "NOT_FOUND", false),
            row(
                json!("alice"),
                "demo_echo",
                json!("demo"),
                "INVALID_ARGUMENT",
                false
            ),
            row(json!("bob"), "slow_echo", json!("slow"), "OK", false),
            row(
                json!("bob"),
                "slow_echo",
                json!("slow"),
                "RESOURCE_EXHAUSTED",
                false
            ),
        ]
    );
    assert_eq!(lines[0]["trace_id"], TRACE_ID, "the caller's trace");
    for line in &lines {
        assert!(line.get("arguments").is_none(), "arguments are off: {line}");
        assert!(line["duration_ms"].as_f64().unwrap() >= 0.0);
        let ts = line["ts"].as_str().unwrap();
        assert!(humantime::parse_rfc3339(ts).is_ok(), "{ts}");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(CANARY), "a secret reached the audit log");
    assert!(!text.contains("bob-token"), "a token reached the audit log");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // Rotation: the file is moved away, SIGHUP reopens the path.
    let rotated = dir.path().join("audit.jsonl.1");
    std::fs::rename(&file, &rotated).unwrap();
    broker.signal(nix::sys::signal::Signal::SIGHUP);
    broker
        .wait_for_log("the audit log reopened", |line| {
            line["fields"]["message"] == "audit log reopened"
                || line["message"] == "audit log reopened"
        })
        .await;
    broker
        .call_as(ALICE, &[], "demo_echo", r#"{"message":"after"}"#)
        .await
        .unwrap();
    let after = audit_support::lines(&file, 1).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0]["tool"], "demo_echo");
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap().lines().count(),
        8
    );
}

#[tokio::test]
async fn arguments_are_recorded_only_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let broker = broker(
        json!({"file": file.display().to_string(), "arguments": true}),
        None,
    )
    .await;
    broker
        .call_as(ALICE, &[], "demo_add", r#"{"a":2,"b":3}"#)
        .await
        .unwrap();
    // Shutdown flushes what is queued.
    broker
        .call_as(ALICE, &[], "demo_echo", r#"{"message":"last"}"#)
        .await
        .unwrap();
    let status = broker.terminate().await;
    assert!(status.success(), "{status:?}");
    let lines = audit_support::lines(&file, 2).await;
    assert_eq!(lines[0]["arguments"], json!({"a": 2, "b": 3}));
    assert_eq!(lines[1]["arguments"], json!({"message": "last"}));
}

#[tokio::test]
async fn a_caller_over_its_rate_waits_retry_after_and_never_slows_another() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let broker = broker(
        json!({"file": file.display().to_string()}),
        Some(json!({"caller_rate": "2/s"})),
    )
    .await;
    let echo = r#"{"message":"hi"}"#;

    // A runaway loop of alice's and bob's ordinary calls, at the same time.
    let alice = async {
        let mut refusals = Vec::new();
        for _ in 0..20 {
            if let Err(status) = broker.call_as(ALICE, &[], "demo_echo", echo).await {
                refusals.push(status);
            }
        }
        refusals
    };
    let bob = async {
        let mut answers = Vec::new();
        // Within bob's own allowance (a burst of 2).
        for _ in 0..2 {
            answers.push(
                broker
                    .call_as(Some("bob-token"), &[], "demo_echo", echo)
                    .await,
            );
        }
        answers
    };
    let (refusals, answers) = tokio::join!(alice, bob);
    for answer in answers {
        assert!(answer.is_ok(), "bob is never slowed by alice: {answer:?}");
    }
    assert!(
        refusals.len() >= 10,
        "{} of alice's 20 refused",
        refusals.len()
    );
    let status = &refusals[0];
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("limits.caller_rate: 2/s"),
        "{}",
        status.message()
    );
    let retry_after: u64 = status
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry_after, 1, "whole seconds, at least 1");
    let retry = status.get_details_retry_info().expect("a RetryInfo detail");
    assert_eq!(retry.retry_delay, Some(Duration::from_secs(1)));

    // After retry-after, alice may call again: waiting as long as it says is what is tested.
    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    broker.call_as(ALICE, &[], "demo_echo", echo).await.unwrap();
}

/// The value of the first `name` sample in a Prometheus text exposition, if any.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find(|line| line.starts_with(name))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn with_on_failure_drop_a_failing_audit_disk_never_fails_a_call_and_drops_are_counted() {
    // Every write to /dev/full fails (ENOSPC): the worst disk there is.
    let broker = Broker::builder()
        .server(demo("demo").prefix("demo_"))
        .top("audit", json!({"file": "/dev/full", "on_failure": "drop"}))
        .top("limits", json!({"caller_rate": "1000/s"}))
        .top("metrics_listen", "127.0.0.1:0")
        .start()
        .await;
    broker.wait_ready().await;
    let url = broker.metrics_url().await;
    for _ in 0..5 {
        broker.text("demo_echo", r#"{"message":"m"}"#).await;
    }
    broker
        .wait_for_log("the warning about dropped lines", |l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("audit lines dropped"))
        })
        .await;
    toolbroker::tls_provider::install();
    let dropped = common::poll(
        "the 5 lines counted as dropped",
        Duration::from_millis(50),
        || async {
            let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
            sample(&text, "toolbroker_audit_dropped_total").filter(|count| *count >= 5.0)
        },
    )
    .await;
    assert_eq!(dropped, 5.0);
}

#[tokio::test]
async fn a_call_its_caller_gives_up_on_is_audited_as_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let broker = broker(json!({"file": file.display().to_string()}), None).await;
    let call = broker.call_as(ALICE, &[], "demo_sleep", r#"{"ms":5000}"#);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), call)
            .await
            .is_err(),
        "the sleep outlasts the caller's patience"
    );
    let lines = audit_support::lines(&file, 1).await;
    assert_eq!(lines[0]["code"], "CANCELLED", "{lines:?}");
    assert_eq!(lines[0]["tool"], "demo_sleep");
    assert_eq!(lines[0]["server"], "demo");
}

#[tokio::test]
async fn streaming_calls_are_audited_like_unary_ones_refused_ones_included() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let broker = broker(
        json!({"file": file}),
        Some(json!({"caller_rate": "1000/s"})),
    )
    .await;
    let mut stream = broker
        .stream_call(ALICE, "demo_echo", r#"{"message": "streamed"}"#)
        .await
        .unwrap();
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "streamed");
    // A wrong token: refused at the gate, still audited with its tool.
    let refused = match broker.stream_call(Some("wrong"), "demo_echo", "{}").await {
        Err(status) => status,
        Ok(mut stream) => stream.result().await.unwrap_err(),
    };
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    // bob may not call demo_add.
    let denied = match broker
        .stream_call(Some("bob-token"), "demo_add", r#"{"a": 1, "b": 2}"#)
        .await
    {
        Err(status) => status,
        Ok(mut stream) => stream.result().await.unwrap_err(),
    };
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    let audited = audit_support::lines(&file, 3).await;
    let summary: Vec<(Value, Value, Value)> = audited
        .iter()
        .map(|l| (l["caller"].clone(), l["tool"].clone(), l["code"].clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (json!("alice"), json!("demo_echo"), json!("OK")),
            (Value::Null, json!("demo_echo"), json!("UNAUTHENTICATED")),
            (json!("bob"), json!("demo_add"), json!("PERMISSION_DENIED")),
        ]
    );
    assert_eq!(audited[0]["server"], "demo");
}

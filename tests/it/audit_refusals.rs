//! Refused requests against the audit log over a real broker: a request the face's gate
//! refuses is one line however many calls its body holds (with their `count`), a flood of
//! them never costs an admitted call its line, and tool names are cut at 256 bytes.

use std::{
    collections::HashSet,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};

use crate::audit_support::{ALICE, broker, echo, lines_now, post, tools_call};
use serde_json::{Value, json};
use tonic::Code;

#[tokio::test]
async fn a_refused_batch_is_one_line_and_a_flood_of_refusals_costs_no_admitted_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let (broker, url) = broker(json!({"file": file, "arguments": true})).await;
    let batch: Vec<Value> = (0..1000)
        .map(|i| tools_call(i, "demo_echo", json!({"message": format!("batch-{i}")})))
        .collect();
    let batch = Value::Array(batch);

    // No token, a thousand calls in one body: one line, with their count.
    assert_eq!(post(&url, &[], &batch).await.0, 401);
    let lines = lines_now(&file);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (&lines[0]["count"], &lines[0]["code"], &lines[0]["caller"]),
        (&json!(1000), &json!("UNAUTHENTICATED"), &Value::Null)
    );
    assert_eq!(lines[0]["arguments"]["message"], "batch-0");

    // Strangers flood the face with the largest such bodies while alice calls: each of her
    // calls has its line, and each refused request has one.
    let flood_calls: Vec<Value> = (0..9000)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": {"name": "demo_echo"}})
        })
        .collect();
    let flood_body = bytes::Bytes::from(serde_json::to_vec(&flood_calls).unwrap());
    assert!(
        flood_body.len() < 1024 * 1024,
        "read whole for its audit line"
    );
    let flooding = AtomicBool::new(true);
    let requests = AtomicUsize::new(0);
    let http = reqwest::Client::new();
    let flood = || {
        let (flooding, requests, url) = (&flooding, &requests, &url);
        let (http, body) = (&http, flood_body.clone());
        async move {
            while flooding.load(Ordering::Relaxed) {
                let refused = http
                    .post(url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(refused.status(), 401);
                requests.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let alice = async {
        let mut sent = Vec::new();
        for i in 0..20 {
            let message = format!("alice-{i}");
            broker
                .call_as(ALICE, &[], "demo_echo", &echo(&message))
                .await
                .expect("alice's call is answered");
            sent.push(message);
        }
        flooding.store(false, Ordering::Relaxed);
        sent
    };
    let (sent, ..) = tokio::join!(alice, flood(), flood());
    let lines = lines_now(&file);
    let written: HashSet<&str> = lines
        .iter()
        .filter(|line| line["caller"] == "alice")
        .filter_map(|line| line["arguments"]["message"].as_str())
        .collect();
    let missing: Vec<&String> = sent
        .iter()
        .filter(|m| !written.contains(m.as_str()))
        .collect();
    assert!(missing.is_empty(), "alice's calls not audited: {missing:?}");
    let flooded: Vec<&Value> = lines[1..]
        .iter()
        .filter(|line| line["caller"].is_null())
        .collect();
    assert_eq!(flooded.len(), requests.load(Ordering::Relaxed));
    assert!(flooded.iter().all(|line| line["count"] == 9000));
}

#[tokio::test]
async fn a_tool_name_is_cut_to_256_bytes_in_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let (broker, url) = broker(json!({"file": file})).await;
    // 10,000 bytes, with two-byte characters where the cut falls: between two of them.
    let long = format!("a{}{}", "é".repeat(200), "x".repeat(9599));
    assert_eq!(long.len(), 10_000);
    let unknown = broker.call_as(ALICE, &[], &long, "{}").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let call = tools_call(1, &long, json!({}));
    assert_eq!(post(&url, &[], &call).await.0, 401);
    let lines = lines_now(&file);
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(line["tool"], format!("a{}", "é".repeat(127)), "{line}");
    }
}

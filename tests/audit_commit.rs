//! The audit log's promise over a real broker: a call's line is in the file when its answer
//! comes (gRPC CallTool and CallToolStream, the MCP face, refusals too), so a SIGKILL loses no
//! line of an answered call; a log that cannot be written refuses calls (UNAVAILABLE, before
//! they run) until it can be written again; refused requests cost one line each, however
//! many calls they hold, and never crowd out an admitted call's line; tool names are cut at
//! 256 bytes.

mod common;

use std::{
    collections::HashSet,
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Broker, demo, servers::free_port};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;
use tonic::Code;

const ALICE: Option<&str> = Some("alice-token");

/// A broker with the demo server (`demo_*`), alice's token, the MCP face and metrics, writing
/// its audit log as `audit` says; and the face's URL.
async fn broker(audit: Value) -> (Broker, String) {
    toolbroker::upstream::install_tls_provider();
    let port = free_port();
    let broker = Broker::builder()
        .server(demo("demo").prefix("demo_"))
        .top(
            "auth",
            json!({"tokens": [{"name": "alice", "value_env": "ALICE"}]}),
        )
        .top("audit", audit)
        .top("metrics_listen", "127.0.0.1:0")
        .top("mcp_listen", format!("127.0.0.1:{port}"))
        .env("ALICE", "alice-token")
        .start()
        .await;
    broker.wait_ready().await;
    (broker, format!("http://127.0.0.1:{port}/mcp"))
}

/// The audit file's lines now: no waiting.
fn lines_now(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn echo(message: &str) -> String {
    json!({ "message": message }).to_string()
}

/// One JSON-RPC POST to the face: the HTTP status and the JSON-RPC answer.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Option<Value>) {
    let (status, answer, _) = common::face::post(url, headers, body.clone()).await;
    (status, answer)
}

/// A face session of alice's: the headers its requests carry.
async fn face_session(url: &str) -> Vec<(&'static str, String)> {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "audit-test", "version": "1"},
    }});
    let token = ("authorization", "Bearer alice-token");
    let (_, _, headers) = common::face::post(url, &[token], initialize).await;
    let headers = vec![
        (token.0, token.1.to_owned()),
        (
            "mcp-session-id",
            headers["mcp-session-id"].to_str().unwrap().to_owned(),
        ),
        ("mcp-protocol-version", "2025-11-25".to_owned()),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(url, &borrowed(&headers), &initialized).await.0, 202);
    headers
}

fn borrowed<'a>(headers: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    headers.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

fn tools_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// The sum of the samples of `name` whose labels hold every one of `labels`.
async fn metric(broker: &Broker, name: &str, labels: &[&str]) -> f64 {
    let text = reqwest::get(broker.metrics_url().await)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|line| {
            line.starts_with(&format!("{name} ")) || line.starts_with(&format!("{name}{{"))
        })
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn a_calls_line_is_in_the_file_when_its_answer_comes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let (broker, url) = broker(json!({"file": file, "arguments": true})).await;
    let last = |file: &Path| lines_now(file).pop().expect("a line");

    for i in 0..10 {
        let message = format!("unary-{i}");
        broker
            .call_as(ALICE, &[], "demo_echo", &echo(&message))
            .await
            .unwrap();
        let line = last(&file);
        assert_eq!(line["arguments"]["message"], message, "{line}");
        assert_eq!(line["code"], "OK");
    }
    let refused = broker
        .call_as(Some("wrong"), &[], "demo_echo", &echo("refused"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    let line = last(&file);
    assert_eq!(
        (&line["code"], &line["caller"]),
        (&json!("UNAUTHENTICATED"), &Value::Null)
    );
    assert_eq!(line["arguments"]["message"], "refused");

    let mut stream = broker
        .stream_call(ALICE, "demo_echo", &echo("streamed"))
        .await
        .unwrap();
    stream.result().await.unwrap();
    assert_eq!(last(&file)["arguments"]["message"], "streamed");

    let session = face_session(&url).await;
    let call = tools_call(1, "demo_echo", json!({"message": "faced"}));
    let (status, answer) = post(&url, &borrowed(&session), &call).await;
    assert_eq!(status, 200, "{answer:?}");
    assert_eq!(last(&file)["arguments"]["message"], "faced");
    // Refused at the face's gate: the line is there when the 401 comes.
    let call = tools_call(2, "demo_echo", json!({"message": "faced-refused"}));
    assert_eq!(post(&url, &[], &call).await.0, 401);
    let line = last(&file);
    assert_eq!(line["arguments"]["message"], "faced-refused");
    assert_eq!(line["code"], "UNAUTHENTICATED");
}

#[tokio::test]
async fn a_sigkill_loses_no_line_of_an_answered_call() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let (broker, _) = broker(json!({"file": file, "arguments": true})).await;
    let answered = Mutex::new(Vec::new());
    let killed = AtomicBool::new(false);
    let count = AtomicUsize::new(0);
    // Eight callers at once; the broker is killed right after the 300th answer, with calls
    // still in flight.
    let caller = |id: usize| {
        let (broker, answered, killed, count) = (&broker, &answered, &killed, &count);
        async move {
            for n in 0.. {
                let message = format!("c{id}-{n}");
                if killed.load(Ordering::SeqCst) {
                    return;
                }
                if broker
                    .call_as(ALICE, &[], "demo_echo", &echo(&message))
                    .await
                    .is_err()
                {
                    return;
                }
                answered.lock().unwrap().push(message);
                if count.fetch_add(1, Ordering::SeqCst) + 1 == 300 {
                    killed.store(true, Ordering::SeqCst);
                    broker.signal(nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
    };
    futures::future::join_all((0..8).map(caller)).await;
    assert!(killed.load(Ordering::SeqCst));
    let written: HashSet<String> = lines_now(&file)
        .iter()
        .map(|line| line["arguments"]["message"].as_str().unwrap().to_owned())
        .collect();
    let answered = answered.into_inner().unwrap();
    let missing: Vec<&String> = answered.iter().filter(|m| !written.contains(*m)).collect();
    assert!(answered.len() >= 300);
    assert!(missing.is_empty(), "answered, not audited: {missing:?}");
}

#[tokio::test]
async fn a_log_that_cannot_be_written_refuses_calls_and_they_do_not_run() {
    // Every write to /dev/full fails (ENOSPC); `on_failure` is `refuse` when not given.
    let (broker, url) = broker(json!({"file": "/dev/full"})).await;
    let session = face_session(&url).await;
    let unavailable = |status: tonic::Status| {
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert_eq!(status.message(), "the audit log cannot be written");
    };

    // The first call runs, and its line fails: no line, no answer.
    unavailable(
        broker
            .call_as(ALICE, &[], "demo_echo", &echo("1"))
            .await
            .unwrap_err(),
    );
    // Then calls are refused before they run, on every face; a refusal stays a refusal.
    unavailable(
        broker
            .call_as(ALICE, &[], "demo_echo", &echo("2"))
            .await
            .unwrap_err(),
    );
    let streamed = match broker.stream_call(ALICE, "demo_echo", &echo("3")).await {
        Err(status) => status,
        Ok(mut stream) => stream.result().await.unwrap_err(),
    };
    unavailable(streamed);
    let (_, answer) = post(
        &url,
        &borrowed(&session),
        &tools_call(4, "demo_echo", json!({"message": "4"})),
    )
    .await;
    let answer = answer.unwrap();
    assert_eq!(
        answer["error"]["message"], "the audit log cannot be written",
        "{answer}"
    );
    let wrong = broker
        .call_as(Some("wrong"), &[], "demo_echo", &echo("5"))
        .await;
    assert_eq!(wrong.unwrap_err().code(), Code::Unauthenticated);

    // Only the first reached the server.
    let upstream = metric(
        &broker,
        "mcp_client_operation_duration_seconds_count",
        &[r#"toolbroker_server="demo""#],
    )
    .await;
    assert_eq!(upstream, 1.0);
    let refused = metric(&broker, "toolbroker_audit_refused_calls_total", &[]).await;
    assert_eq!(refused, 3.0);
}

/// Reads the FIFO at `path` line by line into a channel, until the task is aborted (which
/// closes this reader).
fn read_fifo(
    path: &Path,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::UnboundedReceiver<Value>,
) {
    // Opened for writing too, so that it is open before the broker opens it and reads no
    // end of file while nobody writes.
    let fifo = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(path)
        .unwrap();
    let (lines, received) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut fifo = tokio::io::BufReader::new(fifo).lines();
        while let Ok(Some(line)) = fifo.next_line().await {
            let _ = lines.send(serde_json::from_str(&line).expect("a JSON line"));
        }
    });
    (reader, received)
}

async fn next_line(lines: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(10), lines.recv())
        .await
        .expect("a line within 10 s")
        .expect("the reader runs")
}

#[tokio::test]
async fn the_broker_serves_again_once_the_log_can_be_written() {
    // The audit log is a FIFO: with no reader, a write fails (EPIPE); with one, it succeeds.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("audit.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (reader, mut lines) = read_fifo(&fifo);
    let (broker, _) = broker(json!({"file": fifo, "arguments": true})).await;
    broker
        .call_as(ALICE, &[], "demo_echo", &echo("before"))
        .await
        .unwrap();
    assert_eq!(
        next_line(&mut lines).await["arguments"]["message"],
        "before"
    );

    // Nobody reads: the log cannot be written.
    reader.abort();
    let _ = reader.await;
    let add = |name: &str| json!({ "name": name }).to_string();
    let ran = broker
        .call_as(ALICE, &[], "demo_add_tool", &add("ran"))
        .await;
    assert_eq!(ran.unwrap_err().code(), Code::Unavailable);
    let refused = broker
        .call_as(ALICE, &[], "demo_add_tool", &add("refused"))
        .await;
    assert_eq!(refused.unwrap_err().code(), Code::Unavailable);

    // A reader again: the broker writes the line it kept (with what its caller got), and
    // serves again.
    let (_reader, mut lines) = read_fifo(&fifo);
    let kept = next_line(&mut lines).await;
    assert_eq!(
        (&kept["tool"], &kept["code"], &kept["arguments"]["name"]),
        (
            &json!("demo_add_tool"),
            &json!("UNAVAILABLE"),
            &json!("ran")
        ),
    );
    broker
        .wait_for_log("the audit log written again", |line| {
            let said = "the audit log is written again; calls are let through";
            line["message"] == said || line["fields"]["message"] == said
        })
        .await;
    // The refused call never ran: its tool can be added now; the first did run.
    let added = broker
        .call_as(ALICE, &[], "demo_add_tool", &add("refused"))
        .await;
    assert!(!added.unwrap().is_error);
    let again = broker
        .call_as(ALICE, &[], "demo_add_tool", &add("ran"))
        .await;
    assert!(
        again.unwrap().is_error,
        "the first call ran: its tool exists"
    );
    let codes: Vec<Value> = [next_line(&mut lines).await, next_line(&mut lines).await]
        .iter()
        .map(|line| json!([line["arguments"]["name"], line["code"], line["is_error"]]))
        .collect();
    assert_eq!(
        codes,
        [json!(["refused", "OK", false]), json!(["ran", "OK", true])]
    );
}

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

#[tokio::test]
async fn on_failure_applies_at_once_on_reload() {
    let (broker, _) = broker(json!({"file": "/dev/full", "on_failure": "drop"})).await;
    broker
        .call_as(ALICE, &[], "demo_echo", &echo("dropped"))
        .await
        .unwrap();

    let reload = |on_failure: &str| {
        let path = broker.config_path();
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .expect("the harness writes its config as JSON");
        config["audit"]["on_failure"] = json!(on_failure);
        broker.rewrite_config(&config.to_string());
    };
    reload("refuse");
    let reloaded = |line: &Value| line["message"] == "config reloaded";
    broker.wait_for_logs("the first reload", 1, reloaded).await;
    for message in ["ran", "refused"] {
        let refused = broker
            .call_as(ALICE, &[], "demo_echo", &echo(message))
            .await;
        assert_eq!(refused.unwrap_err().code(), Code::Unavailable);
    }
    reload("drop");
    broker.wait_for_logs("the second reload", 2, reloaded).await;
    broker
        .call_as(ALICE, &[], "demo_echo", &echo("again"))
        .await
        .unwrap();
}

//! The audit log's promise over a real broker: a call's line is in the file when its answer
//! comes (gRPC CallTool and CallToolStream, the MCP face, refusals too), so a SIGKILL loses no
//! line of an answered call; a log that cannot be written refuses calls (UNAVAILABLE, before
//! they run) until it can be written again; `on_failure` applies at once on reload.

use std::{
    collections::HashSet,
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use crate::audit_support::{
    ALICE, borrowed, broker, echo, face_session, lines_now, metric, post, tools_call,
};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;
use tonic::Code;

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
    // Over MCP, as every refusal of a tool that exists: a tool error the model reads.
    let answer = answer.unwrap();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "the audit log cannot be written",
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

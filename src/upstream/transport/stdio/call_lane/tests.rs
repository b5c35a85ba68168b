use super::*;

use crate::upstream::transport::stdio::write_queue::{Turn, WriteQueue};

/// An outbox that keeps the lines written; while `stalled`, nothing is written.
#[derive(Default)]
struct Kept {
    queue: Mutex<WriteQueue>,
    lines: Mutex<Vec<serde_json::Value>>,
    stalled: std::sync::atomic::AtomicBool,
}

impl Kept {
    fn lines(&self) -> Vec<serde_json::Value> {
        self.lines.lock().unwrap().clone()
    }
}

impl Outbox for Kept {
    fn queue(&self, message: &ClientJsonRpcMessage) -> io::Result<Ticket> {
        let mut queue = self.queue.lock().unwrap();
        queue.push(None, |bytes| Ok(serde_json::to_writer(bytes, message)?))
    }

    fn flush(
        self: Arc<Self>,
        ticket: Ticket,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>> {
        if self.stalled.load(Ordering::Relaxed) {
            return Box::pin(std::future::pending());
        }
        let mut queue = self.queue.lock().unwrap();
        if let Ok(Turn::Write(batch)) = queue.turn(ticket) {
            let mut lines = self.lines.lock().unwrap();
            for line in batch.bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                lines.push(serde_json::from_slice(line).expect("JSON"));
            }
            queue.written(batch);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn withdraw(&self, ticket: Ticket) -> bool {
        self.queue.lock().unwrap().withdraw(ticket)
    }
}

fn lane() -> (Arc<CallLane>, Arc<Kept>) {
    let kept = Arc::new(Kept::default());
    (CallLane::new(kept.clone()), kept)
}

fn params() -> CallToolRequestParams {
    let mut arguments = serde_json::Map::new();
    arguments.insert("message".into(), "hi".into());
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

#[tokio::test]
async fn a_call_goes_out_with_its_id_as_progress_token_and_gets_its_answer() {
    let (lane, kept) = lane();
    let mut meta = RequestMetaObject::default();
    meta.0.insert("traceparent".into(), "00-ab-cd-01".into());
    let mut sent = lane.send(params(), meta).await.expect("sent");
    let line = kept.lines()[0].clone();
    assert_eq!(line["method"], "tools/call");
    assert_eq!(line["id"], FIRST_ID);
    assert_eq!(line["params"]["arguments"]["message"], "hi");
    assert_eq!(line["params"]["_meta"]["progressToken"], FIRST_ID);
    assert_eq!(line["params"]["_meta"]["traceparent"], "00-ab-cd-01");
    assert_eq!(
        sent.progress,
        ProgressToken(NumberOrString::Number(FIRST_ID))
    );
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"result":{{"content":[{{"type":"text","text":"hi"}}]}}}}"#
    );
    assert!(lane.take(answer.as_bytes()));
    let Ok(ServerResult::CallToolResult(result)) = sent.answer().await else {
        panic!("a tool result");
    };
    assert_eq!(result.content[0].as_text().expect("text").text, "hi");
    assert_eq!(lane.count.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn errors_and_odd_results_come_back_as_rmcp_gives_them() {
    let (lane, _) = lane();
    let cases = [
        (r#""error":{"code":-32602,"message":"no such tool"}"#, "mcp"),
        (r#""result":{}"#, "empty"),
        (r#""result":"not an object""#, "custom"),
        (r#""neither":1"#, "unexpected"),
    ];
    for (member, kind) in cases {
        let mut sent = lane.send(params(), Default::default()).await.expect("sent");
        let Some(RequestId::Number(id)) = Some(sent.id.clone()) else {
            unreachable!()
        };
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},{member}}}"#);
        assert!(lane.take(line.as_bytes()), "{line}");
        let answer = sent.answer().await;
        match (kind, answer) {
            ("mcp", Err(ServiceError::McpError(error))) => {
                assert_eq!(error.message, "no such tool");
            }
            ("empty", Ok(ServerResult::EmptyResult(_))) => {}
            ("custom", Ok(ServerResult::CustomResult(_))) => {}
            ("unexpected", Err(ServiceError::UnexpectedResponse)) => {}
            (kind, other) => panic!("{kind}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn other_lines_are_left_to_the_transport() {
    let (lane, _) = lane();
    let first = format!(r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"result":{{"content":[]}}}}"#);
    assert!(
        !lane.take(first.as_bytes()),
        "nothing waits: not even parsed"
    );
    let _sent = lane.send(params(), Default::default()).await.expect("sent");
    for line in [
        // rmcp's own requests' answers.
        r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#.to_owned(),
        // A request of the server's with an id equal to ours.
        format!(r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"method":"ping"}}"#),
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#.to_owned(),
        format!(r#"{{"jsonrpc":"2.0","id":"{FIRST_ID}","result":{{}}}}"#),
        "not JSON".to_owned(),
    ] {
        assert!(!lane.take(line.as_bytes()), "{line}");
    }
    assert_eq!(lane.count.load(Ordering::Relaxed), 1, "still waiting");
}

#[tokio::test]
async fn a_dropped_call_is_forgotten_its_late_answer_swallowed_and_the_server_told() {
    let (lane, kept) = lane();
    let sent = lane.send(params(), Default::default()).await.expect("sent");
    let id = sent.id.clone();
    drop(sent);
    assert_eq!(lane.count.load(Ordering::Relaxed), 0);
    // The cancellation goes out from a task of its own, after the request.
    while kept.lines().len() < 2 {
        tokio::task::yield_now().await;
    }
    let cancel = &kept.lines()[1];
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], FIRST_ID);
    assert_eq!(cancel["params"]["reason"], GAVE_UP);
    let _other = lane.send(params(), Default::default()).await.expect("sent");
    let late = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#);
    assert!(lane.take(late.as_bytes()), "ours, though nobody waits");
}

#[tokio::test]
async fn a_call_given_up_before_its_write_started_is_never_sent_nor_cancelled() {
    let (lane, kept) = lane();
    kept.stalled.store(true, Ordering::Relaxed);
    let sending = lane.send(params(), Default::default());
    let given_up = tokio::time::timeout(std::time::Duration::from_millis(1), sending).await;
    assert!(given_up.is_err(), "still waiting for the pipe");
    assert_eq!(lane.count.load(Ordering::Relaxed), 0);
    assert_eq!(kept.queue.lock().unwrap().queued_bytes(), 0, "withdrawn");
    kept.stalled.store(false, Ordering::Relaxed);
    let _other = lane.send(params(), Default::default()).await.expect("sent");
    tokio::task::yield_now().await;
    let lines = kept.lines();
    assert_eq!(lines.len(), 1, "only the other call: {lines:?}");
    assert_eq!(lines[0]["id"], FIRST_ID + 1);
}

#[tokio::test]
async fn a_call_answered_but_not_read_is_not_cancelled() {
    let (lane, kept) = lane();
    let sent = lane.send(params(), Default::default()).await.expect("sent");
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, sent.id);
    assert!(lane.take(answer.as_bytes()));
    drop(sent);
    tokio::task::yield_now().await;
    assert_eq!(kept.lines().len(), 1, "no cancellation");
}

#[tokio::test]
async fn a_closed_lane_ends_its_calls_and_refuses_new_ones() {
    let (lane, _) = lane();
    let mut sent = lane.send(params(), Default::default()).await.expect("sent");
    lane.close();
    assert!(matches!(
        sent.answer().await,
        Err(ServiceError::TransportClosed)
    ));
    assert!(matches!(
        lane.send(params(), Default::default()).await,
        Err(ServiceError::TransportClosed)
    ));
}

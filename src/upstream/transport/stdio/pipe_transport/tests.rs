use proptest::strategy::Strategy as _;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, JsonRpcMessage, NumberOrString, ServerResult,
};
use serde_json::Value;
use tokio::io::{
    AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
    duplex,
};

use super::*;

fn call(id: i64, text: &str) -> TxJsonRpcMessage<RoleClient> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("message".into(), text.into());
    JsonRpcMessage::request(
        ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("echo").with_arguments(arguments),
        )),
        NumberOrString::Number(id),
    )
}

/// The ends of an in-memory pipe.
type PipeReader = ReadHalf<DuplexStream>;
type PipeWriter = WriteHalf<DuplexStream>;

/// A transport over an in-memory pipe, and the server's ends of it.
fn connected() -> (
    PipeTransport<PipeReader, PipeWriter>,
    PipeReader,
    PipeWriter,
) {
    connected_by(1 << 20)
}

/// As [`connected`], with a pipe of `capacity` bytes.
fn connected_by(
    capacity: usize,
) -> (
    PipeTransport<PipeReader, PipeWriter>,
    PipeReader,
    PipeWriter,
) {
    let (ours, theirs) = duplex(capacity);
    let (our_read, our_write) = tokio::io::split(ours);
    let (their_read, their_write) = tokio::io::split(theirs);
    (
        PipeTransport::new(our_read, our_write),
        their_read,
        their_write,
    )
}

#[tokio::test]
async fn calls_go_out_as_lines_and_their_answers_come_back_as_tool_results() {
    let (mut transport, their_read, mut their_write) = connected();
    // Two sends, flushed by one writer: both lines arrive, in order.
    let first = transport.send(call(1, "a"));
    let second = transport.send(call(2, "b"));
    first.await.expect("written");
    second.await.expect("written");
    let mut lines = BufReader::new(their_read).lines();
    for id in [1, 2] {
        let line = lines.next_line().await.expect("read").expect("a line");
        let sent: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(sent["id"], id);
        assert_eq!(sent["method"], "tools/call");
    }
    // A huge answer, then a small one after a blank line and with a CRLF, then a
    // notification, which rmcp's codec decodes.
    let big = "x".repeat(3 * KEPT_CAPACITY);
    let answer = |id: i64, text: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
        )
    };
    let notification = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    let wire = format!(
        "{}\n\n{}\r\n{notification}\n",
        answer(2, &big),
        answer(1, "a")
    );
    // Written meanwhile: it is larger than the pipe.
    let server = tokio::spawn(async move {
        their_write
            .write_all(wire.as_bytes())
            .await
            .expect("written");
        their_write
    });
    for (id, length) in [(2, big.len()), (1, 1)] {
        let Some(JsonRpcMessage::Response(response)) = transport.receive().await else {
            panic!("an answer");
        };
        assert_eq!(response.id, NumberOrString::Number(id));
        let ServerResult::CallToolResult(result) = response.result else {
            panic!("decoded as a tool result");
        };
        let text = result.content[0].as_text().expect("text");
        assert_eq!(text.text.len(), length);
    }
    assert!(
        transport.line.capacity() <= KEPT_CAPACITY,
        "the huge line's buffer is given back"
    );
    assert!(matches!(
        transport.receive().await,
        Some(JsonRpcMessage::Notification(_))
    ));
    drop((server.await.expect("wrote"), lines));
    assert!(transport.receive().await.is_none(), "the end of the stream");
}

#[tokio::test]
async fn lane_calls_are_answered_beside_rmcp_and_end_with_the_stream() {
    let (mut transport, their_read, mut their_write) = connected();
    let lane = transport.lane();
    let params = CallToolRequestParams::new("echo");
    let mut sent = lane.send(params, Default::default()).await.expect("sent");
    let mut lines = BufReader::new(their_read).lines();
    let line = lines.next_line().await.expect("read").expect("a line");
    let request: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(request["method"], "tools/call");
    let id = request["id"].as_i64().expect("a number id");
    // The answer goes to the lane's caller; rmcp's side sees only the notification.
    let wire = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n\
         {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}}\n"
    );
    their_write
        .write_all(wire.as_bytes())
        .await
        .expect("written");
    assert!(matches!(
        transport.receive().await,
        Some(JsonRpcMessage::Notification(_))
    ));
    assert!(matches!(
        sent.answer().await,
        Ok(ServerResult::CallToolResult(_))
    ));
    // A call waiting when the stream ends learns that its session closed.
    let mut waiting = lane
        .send(CallToolRequestParams::new("echo"), Default::default())
        .await
        .expect("sent");
    drop((their_write, lines));
    assert!(transport.receive().await.is_none());
    assert!(matches!(
        waiting.answer().await,
        Err(rmcp::service::ServiceError::TransportClosed)
    ));
}

#[tokio::test]
async fn a_closed_transport_refuses_to_send() {
    let (ours, _theirs) = duplex(1024);
    let (read, write) = tokio::io::split(ours);
    let mut transport = PipeTransport::new(read, write);
    transport.close().await.expect("closed");
    let refused = transport.send(call(1, "a")).await;
    assert_eq!(
        refused.expect_err("closed").kind(),
        io::ErrorKind::NotConnected
    );
}

/// Parameters of an `echo` call with a message of `size` bytes.
fn echo(size: usize) -> CallToolRequestParams {
    let mut arguments = serde_json::Map::new();
    arguments.insert("message".into(), "m".repeat(size).into());
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

/// The next `count` lines the server reads, each of which must be one JSON message.
async fn read_lines(lines: &mut Lines<BufReader<PipeReader>>, count: usize) -> Vec<Value> {
    let mut read = Vec::new();
    for _ in 0..count {
        let line = lines.next_line().await.expect("read").expect("a line");
        read.push(serde_json::from_str(&line).expect("a whole JSON line"));
    }
    read
}

/// Polls `future` once: it must be waiting (for the pipe).
async fn waits<F: Future>(future: Pin<&mut F>) {
    assert!(futures::poll!(future).is_pending(), "waiting for the pipe");
}

#[tokio::test]
async fn a_lane_call_dropped_mid_write_is_finished_then_cancelled_and_the_next_goes_out() {
    let (transport, their_read, _their_write) = connected_by(256);
    let lane = transport.lane();
    let mut first = Box::pin(lane.send(echo(10_000), Default::default()));
    waits(first.as_mut()).await;
    let mut second = Box::pin(lane.send(echo(10), Default::default()));
    waits(second.as_mut()).await;
    // Its caller gives up mid-line: the line is finished all the same.
    drop(first);
    let mut lines = BufReader::new(their_read).lines();
    let reading = tokio::spawn(async move { read_lines(&mut lines, 3).await });
    let second = second.await.expect("sent");
    let read = reading.await.expect("read");
    assert_eq!(read[0]["id"], 1_i64 << 32);
    assert_eq!(
        read[0]["params"]["arguments"]["message"]
            .as_str()
            .map(str::len),
        Some(10_000)
    );
    // The next call's line, and the cancellation, queued behind it, in one write.
    assert_eq!(read[1]["id"], serde_json::to_value(&second.id).expect("id"));
    assert_eq!(read[2]["method"], "notifications/cancelled");
    assert_eq!(read[2]["params"]["requestId"], 1_i64 << 32);
}

#[tokio::test]
async fn a_lane_call_dropped_before_its_write_started_is_never_sent_nor_cancelled() {
    let (transport, their_read, _their_write) = connected_by(256);
    let lane = transport.lane();
    let mut first = Box::pin(lane.send(echo(10_000), Default::default()));
    waits(first.as_mut()).await;
    let mut given_up = Box::pin(lane.send(echo(10_000), Default::default()));
    waits(given_up.as_mut()).await;
    drop(given_up);
    let mut lines = BufReader::new(their_read).lines();
    let reading = tokio::spawn(async move { read_lines(&mut lines, 2).await });
    let first = first.await.expect("sent");
    let third = lane.send(echo(10), Default::default()).await.expect("sent");
    let read = reading.await.expect("read");
    let ids: Vec<&Value> = read.iter().map(|line| &line["id"]).collect();
    let expected = [&first.id, &third.id].map(|id| serde_json::to_value(id).expect("id"));
    assert_eq!(ids, expected.iter().collect::<Vec<_>>(), "{read:?}");
}

#[tokio::test]
async fn rmcp_cancelling_a_request_still_queued_withdraws_both() {
    let (mut transport, their_read, _their_write) = connected_by(256);
    let mut first = Box::pin(transport.send(call(1, &"m".repeat(10_000))));
    waits(first.as_mut()).await;
    let mut queued = Box::pin(transport.send(call(2, "queued")));
    waits(queued.as_mut()).await;
    let cancel = CancelledNotificationParam::new(Some(NumberOrString::Number(2)), None);
    let cancel = JsonRpcMessage::notification(ClientNotification::CancelledNotification(
        CancelledNotification::new(cancel),
    ));
    transport.send(cancel).await.expect("nothing to send");
    let mut lines = BufReader::new(their_read).lines();
    let reading = tokio::spawn(async move {
        let read = read_lines(&mut lines, 2).await;
        (read, lines)
    });
    first.await.expect("written");
    queued.await.expect("withdrawn: nothing to write");
    transport.send(call(3, "after")).await.expect("written");
    let (read, _) = reading.await.expect("read");
    let ids: Vec<&Value> = read.iter().map(|line| &line["id"]).collect();
    assert_eq!(
        ids,
        [1, 3],
        "neither request 2 nor its cancellation: {read:?}"
    );
}

/// What the server of [`lane_and_rmcp_calls_in_any_order`] is told to do with the lines it
/// reads: answer in the order `order` gives (an index into the lines read), write its bytes
/// in pieces of `piece` bytes, and send a notification before the answers at `notify`.
#[derive(Debug, Clone)]
struct Server {
    order: Vec<usize>,
    piece: usize,
    notify: Vec<usize>,
}

/// Lines echo answers to, written as `server` says, then the pipe closed.
async fn serve(their_read: PipeReader, mut their_write: PipeWriter, count: usize, server: Server) {
    let mut lines = BufReader::new(their_read).lines();
    let read = read_lines(&mut lines, count).await;
    let mut wire = String::new();
    for (at, &i) in server.order.iter().enumerate() {
        if server.notify.contains(&at) {
            wire.push_str(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
            wire.push('\n');
        }
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": read[i]["id"],
            "result": {"content": [{"type": "text", "text": read[i]["params"]["arguments"]["message"]}]},
        });
        wire.push_str(&answer.to_string());
        wire.push('\n');
    }
    for piece in wire.as_bytes().chunks(server.piece) {
        their_write.write_all(piece).await.expect("written");
    }
}

fn server_for(count: usize) -> impl proptest::strategy::Strategy<Value = Server> {
    use proptest::prelude::*;
    (
        Just((0..count).collect::<Vec<_>>()).prop_shuffle(),
        1usize..300,
        proptest::collection::btree_set(0..count, 0..3),
    )
        .prop_map(|(order, piece, notify)| Server {
            order,
            piece,
            notify: notify.into_iter().collect(),
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// The seam beside rmcp's service loop: lane calls (ids from 2^32) and rmcp's requests
    /// (ids below) on one pipe, answered in any order and written in pieces of any size,
    /// with notifications between: every answer reaches the call that asked it, once, and
    /// rmcp's side sees its own answers and the notifications, nothing of the lane's.
    #[test]
    fn lane_and_rmcp_calls_in_any_order(
        (lane_calls, rmcp_calls, server) in (0usize..5, 0usize..5)
            .prop_filter("a call at least", |(l, r)| l + r > 0)
            .prop_flat_map(|(l, r)| (proptest::strategy::Just(l), proptest::strategy::Just(r), server_for(l + r)))
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let (mut transport, their_read, their_write) = connected();
            let lane = transport.lane();
            let notifications = server.notify.len();
            let serving = tokio::spawn(serve(their_read, their_write, lane_calls + rmcp_calls, server));
            let mut sent = Vec::new();
            for i in 0..lane_calls {
                let mut arguments = serde_json::Map::new();
                arguments.insert("message".into(), format!("lane {i}").into());
                let params = CallToolRequestParams::new("echo").with_arguments(arguments);
                sent.push(lane.send(params, Default::default()).await.expect("sent"));
            }
            for i in 0..rmcp_calls {
                transport.send(call(i as i64 + 1, &format!("rmcp {}", i + 1))).await.expect("sent");
            }
            let mut rmcp_answers = Vec::new();
            let mut notified = 0;
            while let Some(message) = transport.receive().await {
                match message {
                    JsonRpcMessage::Response(response) => {
                        let ServerResult::CallToolResult(result) = response.result else {
                            panic!("a tool result");
                        };
                        let NumberOrString::Number(id) = response.id else {
                            panic!("rmcp's ids are numbers");
                        };
                        assert!(id < 1 << 32, "a lane answer reached rmcp: {id}");
                        let text = result.content[0].as_text().expect("text").text.clone();
                        assert_eq!(text, format!("rmcp {id}"));
                        rmcp_answers.push(id);
                    }
                    JsonRpcMessage::Notification(_) => notified += 1,
                    other => panic!("unexpected {other:?}"),
                }
            }
            serving.await.expect("served");
            rmcp_answers.sort_unstable();
            assert_eq!(rmcp_answers, (1..=rmcp_calls as i64).collect::<Vec<_>>());
            assert_eq!(notified, notifications);
            for (i, mut call) in sent.into_iter().enumerate() {
                let Ok(ServerResult::CallToolResult(result)) = call.answer().await else {
                    panic!("lane call {i} answered");
                };
                assert_eq!(result.content[0].as_text().expect("text").text, format!("lane {i}"));
            }
        });
    }
}

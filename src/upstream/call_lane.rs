//! `tools/call` on a stdio session, sent and answered beside rmcp's service loop instead of
//! through it. Through rmcp a call goes from the caller's task to the loop (a channel), which
//! writes it; the loop reads its answer, decodes it through an untagged enum and hands it back
//! through its table of waiting requests: two task hand-offs and a table lock per call, on a
//! loop that serves every call of the session. Here the caller queues its line on the
//! transport's writer itself, and the transport's reader, finding the answer to one of the
//! lane's ids, decodes it as a tool result and hands it straight to the call.
//!
//! The lane's ids are numbers from 2^32 up, which rmcp's `u32` counter never reaches; a call's
//! progress token is its id, as rmcp's would be a number of its own. Everything else on the
//! session (the handshake, lists, pings, notifications, the server's requests and their
//! answers, cancellations) stays with rmcp; so do sessions on a protocol without
//! `initialize`, whose requests carry per-request metadata rmcp adds.

use std::{
    any::TypeId,
    collections::HashMap,
    io,
    pin::Pin,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
};

use rmcp::{
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage,
        ClientRequest, ErrorData, NumberOrString, ProgressToken, RequestId, RequestMetaObject,
        ServerResult,
    },
    service::ServiceError,
    transport::DynamicTransportError,
};
use tokio::sync::oneshot;

use super::call_answers::Envelope;

/// The first id of the lane: above every id rmcp's `u32` counter gives, and exact in the
/// double of a JavaScript server.
const FIRST_ID: i64 = 1 << 32;

/// What a call gets back: the server's result, or why there is none.
pub type Answer = Result<ServerResult, ServiceError>;

/// The write side of a transport: messages queued, then written by whichever sender holds the
/// pipe (see `pipe_transport`).
pub trait Outbox: Send + Sync {
    /// Appends `message` and its newline to what is to be written.
    fn queue(&self, message: &ClientJsonRpcMessage) -> io::Result<()>;

    /// Writes everything queued.
    fn flush(self: Arc<Self>) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;
}

/// The calls of one stdio session sent on the lane and not yet answered.
pub struct CallLane {
    next: AtomicU64,
    /// `None` once the transport has ended: calls waiting were told, new ones are refused.
    waiting: Mutex<Option<HashMap<i64, oneshot::Sender<Answer>>>>,
    /// How many are waiting, so the reader skips the lane when none is.
    count: AtomicUsize,
    outbox: Arc<dyn Outbox>,
}

impl std::fmt::Debug for CallLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallLane")
            .field("waiting", &self.count.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CallLane {
    /// A lane writing to `outbox`.
    pub fn new(outbox: Arc<dyn Outbox>) -> Arc<Self> {
        Arc::new(Self {
            next: AtomicU64::new(FIRST_ID as u64),
            waiting: Mutex::new(Some(HashMap::new())),
            count: AtomicUsize::new(0),
            outbox,
        })
    }

    /// Sends `params` with `meta` (and the call's progress token) as a `tools/call` request.
    pub async fn send(
        self: &Arc<Self>,
        mut params: CallToolRequestParams,
        mut meta: RequestMetaObject,
    ) -> Result<Sent, ServiceError> {
        let number = self.next.fetch_add(1, Ordering::Relaxed) as i64;
        let id = RequestId::Number(number);
        let progress = ProgressToken(NumberOrString::Number(number));
        meta.set_progress_token(progress.clone());
        params.meta = Some(meta);
        let (sender, answer) = oneshot::channel();
        // Registered before the line goes out: the answer may come at once.
        match self.lock().as_mut() {
            Some(waiting) => {
                waiting.insert(number, sender);
                self.count.fetch_add(1, Ordering::Relaxed);
            }
            None => return Err(ServiceError::TransportClosed),
        }
        let sent = Sent {
            lane: self.clone(),
            number,
            id: id.clone(),
            progress,
            answer,
            answered: false,
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let message = ClientJsonRpcMessage::request(request, id);
        self.outbox.queue(&message).map_err(write_failed)?;
        self.outbox.clone().flush().await.map_err(write_failed)?;
        Ok(sent)
    }

    /// Takes `line` if it answers a call of the lane, and hands the call its answer; `false`
    /// leaves the line to the transport. An answer to a call no longer waited for (it was
    /// cancelled or timed out) is taken and dropped.
    pub fn take(&self, line: &[u8]) -> bool {
        if self.count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope>(line) else {
            return false;
        };
        let Some(RequestId::Number(number)) = envelope.id else {
            return false;
        };
        // A request from the server has ids of its own, which may equal ours.
        if envelope.method.is_some() || number < FIRST_ID {
            return false;
        }
        let sender = self.lock().as_mut().and_then(|waiting| {
            let sender = waiting.remove(&number)?;
            self.count.fetch_sub(1, Ordering::Relaxed);
            Some(sender)
        });
        if let Some(sender) = sender {
            let _ = sender.send(decode(&envelope));
        }
        true
    }

    /// The transport has ended: every waiting call learns its session closed, and no call is
    /// taken any more.
    pub fn close(&self) {
        let waiting = self.lock().take();
        self.count.store(0, Ordering::Relaxed);
        drop(waiting);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashMap<i64, oneshot::Sender<Answer>>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An answer as rmcp's request handle gives it: an error as `McpError`, a result decoded as a
/// tool result (or, when it is none, as whatever rmcp would make of it).
fn decode(envelope: &Envelope) -> Answer {
    if let Some(error) = envelope.error {
        return match serde_json::from_str::<ErrorData>(error.get()) {
            Ok(error) => Err(ServiceError::McpError(error)),
            Err(_) => Err(ServiceError::UnexpectedResponse),
        };
    }
    let Some(result) = envelope.result else {
        return Err(ServiceError::UnexpectedResponse);
    };
    if let Ok(result) = serde_json::from_str::<CallToolResult>(result.get()) {
        return Ok(ServerResult::CallToolResult(result));
    }
    serde_json::from_str::<ServerResult>(result.get()).map_err(|_| ServiceError::UnexpectedResponse)
}

/// A failed write, as rmcp reports one.
fn write_failed(error: io::Error) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "stdio",
        TypeId::of::<CallLane>(),
        Box::new(error),
    ))
}

/// A call sent on the lane. Dropped before its answer, it is forgotten: an answer that comes
/// later is dropped.
pub struct Sent {
    lane: Arc<CallLane>,
    number: i64,
    /// The request's id.
    pub id: RequestId,
    /// The progress token the request carries.
    pub progress: ProgressToken,
    answer: oneshot::Receiver<Answer>,
    answered: bool,
}

impl Sent {
    /// The call's answer; the session's end if it closes first.
    pub async fn answer(&mut self) -> Answer {
        let answer = (&mut self.answer)
            .await
            .unwrap_or(Err(ServiceError::TransportClosed));
        self.answered = true;
        answer
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        if let Some(waiting) = self.lane.lock().as_mut()
            && waiting.remove(&self.number).is_some()
        {
            self.lane.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outbox that keeps the lines written.
    #[derive(Default)]
    struct Kept(Mutex<Vec<serde_json::Value>>);

    impl Outbox for Kept {
        fn queue(&self, message: &ClientJsonRpcMessage) -> io::Result<()> {
            let value = serde_json::to_value(message)?;
            self.0.lock().unwrap().push(value);
            Ok(())
        }

        fn flush(self: Arc<Self>) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>> {
            Box::pin(async { Ok(()) })
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
        let line = kept.0.lock().unwrap()[0].clone();
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
    async fn a_dropped_call_is_forgotten_and_its_late_answer_swallowed() {
        let (lane, _) = lane();
        let sent = lane.send(params(), Default::default()).await.expect("sent");
        let id = sent.id.clone();
        drop(sent);
        assert_eq!(lane.count.load(Ordering::Relaxed), 0);
        let _other = lane.send(params(), Default::default()).await.expect("sent");
        let late = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#);
        assert!(lane.take(late.as_bytes()), "ours, though nobody waits");
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
}

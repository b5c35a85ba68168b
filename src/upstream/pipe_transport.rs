//! The transport to a stdio server: newline-delimited JSON-RPC over its pipes, as rmcp's
//! `AsyncRwTransport`, with two differences that pay under load (docs/performance.md):
//! - `tools/call` requests of the session's [`CallLane`] are written by their callers and
//!   their answers handed straight to them, beside rmcp's service loop;
//! - answers to the `tools/call` requests rmcp sends are decoded by the method sent
//!   ([`call_answers`]); every other line goes through rmcp's own codec, so what it accepts,
//!   skips or refuses is unchanged;
//! - messages sent while a write is under way go out together in the next write, instead of
//!   one write (and one wait for the writer's lock) each.
//!
//! Line length is bounded by the [`super::stdout_guard::StdoutGuard`] the reader comes through.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex},
};

use bytes::BytesMut;
use rmcp::{
    RoleClient,
    model::{ClientJsonRpcMessage, ErrorData},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{Transport, async_rw::JsonRpcMessageCodec, async_rw::JsonRpcMessageCodecError},
};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio_util::codec::Decoder as _;

use super::{
    call_answers::{CallIds, call_answer},
    call_lane::{CallLane, Outbox},
};

/// Read buffer size: most answers fit in one read.
const READ_BUFFER: usize = 64 * 1024;

/// A line or write buffer grown past this by one large message is given back afterwards, so a
/// session that once carried a 16 MiB result does not keep 16 MiB.
const KEPT_CAPACITY: usize = 1024 * 1024;

/// A client transport over a server's stdout (`R`) and stdin (`W`).
pub struct PipeTransport<R, W> {
    read: BufReader<R>,
    /// The line being read; a partial line survives a cancelled `receive`.
    line: Vec<u8>,
    codec: JsonRpcMessageCodec<RxJsonRpcMessage<RoleClient>>,
    calls: CallIds,
    writer: Arc<Writer<W>>,
    lane: Arc<CallLane>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static> PipeTransport<R, W> {
    /// A transport reading `read` and writing `write`.
    pub fn new(read: R, write: W) -> Self {
        let writer = Arc::new(Writer {
            queue: Mutex::new(Queue::default()),
            pipe: tokio::sync::Mutex::new(Some(write)),
        });
        Self {
            read: BufReader::with_capacity(READ_BUFFER, read),
            line: Vec::new(),
            codec: JsonRpcMessageCodec::default(),
            calls: CallIds::default(),
            lane: CallLane::new(writer.clone()),
            writer,
        }
    }

    /// The lane for the session's `tools/call` requests.
    pub fn lane(&self) -> Arc<CallLane> {
        self.lane.clone()
    }
}

impl<R, W> Drop for PipeTransport<R, W> {
    fn drop(&mut self) {
        self.lane.close();
    }
}

impl<R, W> PipeTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Reads up to the end of the next line, keeping what was read if cancelled.
    async fn read_line(&mut self) -> io::Result<bool> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(false);
            }
            let (taken, ended) = match available.iter().position(|&b| b == b'\n') {
                Some(index) => (index + 1, true),
                None => (available.len(), false),
            };
            self.line.extend_from_slice(&available[..taken]);
            self.read.consume(taken);
            if ended {
                return Ok(true);
            }
        }
    }

    /// The message in the line just read, decoded by rmcp's codec; `None` when the codec skips
    /// it. A line that is JSON but no message is answered "Invalid Request", as rmcp does.
    fn general(&mut self) -> Result<Option<RxJsonRpcMessage<RoleClient>>, ()> {
        let mut line = BytesMut::from(self.line.as_slice());
        match self.codec.decode(&mut line) {
            Ok(message) => Ok(message),
            Err(JsonRpcMessageCodecError::Serde(e)) => {
                if matches!(
                    e.classify(),
                    serde_json::error::Category::Data | serde_json::error::Category::Io
                ) {
                    tracing::debug!("protocol error on an incoming message: {e}");
                    let reply = TxJsonRpcMessage::<RoleClient>::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    // Not awaited here: `receive` may be cancelled, and a write cut short
                    // would corrupt the stream.
                    if self.writer.push(&reply).is_ok() {
                        tokio::spawn(self.writer.clone().write_queued());
                    }
                } else {
                    tracing::debug!("ignoring an unparsable incoming message: {e}");
                }
                Ok(None)
            }
            Err(e) => {
                tracing::error!("error reading from the server: {e}");
                Err(())
            }
        }
    }
}

impl<R, W> Transport<RoleClient> for PipeTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.calls.sent(&item);
        let queued = self.writer.push(&item);
        let writer = self.writer.clone();
        async move {
            queued?;
            writer.write_queued().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.read_line().await {
                Ok(true) => {}
                Ok(false) => {
                    self.lane.close();
                    return None;
                }
                Err(e) => {
                    tracing::error!("error reading from the server: {e}");
                    self.lane.close();
                    return None;
                }
            }
            let line = trim_line_end(&self.line);
            if line.is_empty() || self.lane.take(line) {
                self.line.clear();
                continue;
            }
            let fast = if self.calls.is_empty() {
                None
            } else {
                call_answer(line, &mut self.calls)
            };
            let message = match fast {
                Some(message) => Ok(Some(message)),
                None => self.general(),
            };
            self.line.clear();
            if self.line.capacity() > KEPT_CAPACITY {
                self.line = Vec::new();
            }
            match message {
                Ok(Some(message)) => return Some(message),
                Ok(None) => continue,
                Err(()) => {
                    self.lane.close();
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.lane.close();
        let mut pipe = self.writer.pipe.lock().await;
        if let Some(mut pipe) = pipe.take() {
            pipe.shutdown().await.ok();
        }
        Ok(())
    }
}

/// `line` without its `\n` or `\r\n`.
fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The write side: messages queued as bytes, written by whichever sender holds the pipe.
struct Writer<W> {
    queue: Mutex<Queue>,
    /// `None` once closed.
    pipe: tokio::sync::Mutex<Option<W>>,
}

/// Bytes waiting to be written, and the first write error, which every later send reports.
#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    failed: Option<io::ErrorKind>,
}

impl<W: AsyncWrite + Unpin + Send> Writer<W> {
    /// Appends `message` and its newline to the queue.
    fn push(&self, message: &TxJsonRpcMessage<RoleClient>) -> io::Result<()> {
        let mut queue = self.queue.lock().expect("not poisoned");
        if let Some(kind) = queue.failed {
            return Err(io::Error::new(
                kind,
                "an earlier write to the server failed",
            ));
        }
        let start = queue.bytes.len();
        if let Err(e) = serde_json::to_writer(&mut queue.bytes, message) {
            queue.bytes.truncate(start);
            return Err(e.into());
        }
        queue.bytes.push(b'\n');
        Ok(())
    }

    /// Writes everything queued, including what others queued meanwhile: a sender that finds
    /// its message already written by another returns at once.
    async fn write_queued(self: Arc<Self>) -> io::Result<()> {
        let mut pipe = self.pipe.lock().await;
        let Some(pipe) = pipe.as_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        };
        let mut batch = Vec::new();
        loop {
            {
                let mut queue = self.queue.lock().expect("not poisoned");
                if let Some(kind) = queue.failed {
                    return Err(io::Error::new(
                        kind,
                        "an earlier write to the server failed",
                    ));
                }
                std::mem::swap(&mut batch, &mut queue.bytes);
            }
            if batch.is_empty() {
                return Ok(());
            }
            let written = async {
                pipe.write_all(&batch).await?;
                pipe.flush().await
            }
            .await;
            if let Err(e) = written {
                self.queue.lock().expect("not poisoned").failed = Some(e.kind());
                return Err(e);
            }
            batch.clear();
            if batch.capacity() > KEPT_CAPACITY {
                batch = Vec::new();
            }
        }
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> Outbox for Writer<W> {
    fn queue(&self, message: &ClientJsonRpcMessage) -> io::Result<()> {
        self.push(message)
    }

    fn flush(self: Arc<Self>) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>> {
        Box::pin(self.write_queued())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcMessage, NumberOrString,
        ServerResult,
    };
    use tokio::io::{
        AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, ReadHalf, WriteHalf,
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
        let (ours, theirs) = duplex(1 << 20);
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
}

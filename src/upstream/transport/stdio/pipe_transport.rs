//! The transport to a stdio server: newline-delimited JSON-RPC over its pipes, as rmcp's
//! `AsyncRwTransport`, with differences that pay under load (docs/performance.md, the call
//! path: issue 20, rounds one and three) or keep one
//! call's cancellation from touching another's (issue 36):
//! - `tools/call` requests of the session's [`CallLane`] are written by their callers and
//!   their answers handed straight to them, beside rmcp's service loop;
//! - answers to the `tools/call` requests rmcp sends are decoded by the method sent
//!   ([`call_answers`]); every other line goes through rmcp's own codec, so what it accepts,
//!   skips or refuses is unchanged;
//! - messages sent while a write is under way go out together in the next write, instead of
//!   one write (and one wait for the writer's lock) each; a write finishes or never starts,
//!   whoever stops waiting ([`crate::upstream::transport::stdio::pipe_writer`]), so the server reads whole lines only;
//! - a `notifications/cancelled` rmcp sends for a request still queued withdraws the request
//!   instead: the server sees neither.
//!
//! Line length is bounded by the [`crate::upstream::transport::stdio::stdout_guard::StdoutGuard`] the reader comes through.
//!
//! **What would let it go**: rmcp's service loop costing about what the lane costs (a call
//! written by its caller, its answer decoded by the method sent and handed straight back), or
//! rmcp letting a transport answer a request it sent itself; re-measure with `loadgen calls`
//! after each rmcp upgrade (docs/performance.md, "tool calls on stdio beside rmcp's service
//! loop"). It implements rmcp's public `Transport` trait; `pipe_transport/tests.rs` checks lane
//! and rmcp calls answered in any order, in pieces of any size, as a property.

use std::{io, pin::Pin, sync::Arc};

use bytes::BytesMut;
use rmcp::{
    RoleClient,
    model::{ClientJsonRpcMessage, ClientNotification, ErrorData, JsonRpcMessage, NumberOrString},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{Transport, async_rw::JsonRpcMessageCodec, async_rw::JsonRpcMessageCodecError},
};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, BufReader};
use tokio_util::codec::Decoder as _;

use crate::upstream::{
    transport::stdio::call_answers::{CallIds, call_answer},
    transport::stdio::call_lane::{CallLane, Outbox},
    transport::stdio::pipe_writer::Writer,
    transport::stdio::write_queue::{KEPT_CAPACITY, Ticket},
};

/// Read buffer size. Every open session holds it, zeroed and resident, so it is small (a
/// session of 1,000 held 64 KiB of it: docs/performance.md, "Many callers"); a longer line
/// collects in `line`, which gives back what it grew beyond `KEPT_CAPACITY`.
const READ_BUFFER: usize = 4 * 1024;

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
        let writer = Writer::new(write);
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
                    // Not awaited here: `receive` is cancelled at every message rmcp sends.
                    if let Ok(ticket) = self.writer.push(None, &reply) {
                        tokio::spawn(self.writer.clone().write(ticket));
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
        let queued = match cancelled_request(&item) {
            Some(id) if self.writer.withdraw_request(id) => Ok(None),
            _ => self.writer.push(request_id(&item), &item).map(Some),
        };
        let writer = self.writer.clone();
        async move {
            match queued? {
                Some(ticket) => writer.write(ticket).await,
                None => Ok(()),
            }
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
        self.writer.close().await;
        Ok(())
    }
}

/// The id of `message` if it is a request with a number for an id.
fn request_id(message: &TxJsonRpcMessage<RoleClient>) -> Option<i64> {
    match message {
        JsonRpcMessage::Request(request) => match request.id {
            NumberOrString::Number(id) => Some(id),
            NumberOrString::String(_) => None,
        },
        _ => None,
    }
}

/// The request `message` cancels, if it is a `notifications/cancelled` naming a number id.
fn cancelled_request(message: &TxJsonRpcMessage<RoleClient>) -> Option<i64> {
    let JsonRpcMessage::Notification(notification) = message else {
        return None;
    };
    let ClientNotification::CancelledNotification(cancelled) = &notification.notification else {
        return None;
    };
    match cancelled.params.request_id {
        Some(NumberOrString::Number(id)) => Some(id),
        _ => None,
    }
}

/// `line` without its `\n` or `\r\n`.
fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

impl<W: AsyncWrite + Unpin + Send + 'static> Outbox for Writer<W> {
    fn queue(&self, message: &ClientJsonRpcMessage) -> io::Result<Ticket> {
        self.push(request_id(message), message)
    }

    fn flush(
        self: Arc<Self>,
        ticket: Ticket,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>> {
        Box::pin(self.write(ticket))
    }

    fn withdraw(&self, ticket: Ticket) -> bool {
        Writer::withdraw(self, ticket)
    }
}

#[cfg(test)]
mod tests;

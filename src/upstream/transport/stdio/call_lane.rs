//! `tools/call` on a stdio session, sent and answered beside rmcp's service loop instead of
//! through it. Through rmcp a call goes from the caller's task to the loop (a channel), which
//! writes it; the loop reads its answer, decodes it through an untagged enum and hands it back
//! through its table of waiting requests: two task hand-offs and a table lock per call, on a
//! loop that serves every call of the session. Here the caller queues its line on the
//! transport's writer itself, and the transport's reader, finding the answer to one of the
//! lane's ids, decodes it as a tool result and hands it straight to the call.
//!
//! The lane's ids are numbers from 2^32 up, which rmcp's `u32` counter never reaches; a call's
//! progress token is its id, as rmcp's would be a number of its own. A call dropped before its
//! answer (a deadline, a reset stream) affects only itself: its line is withdrawn if no write
//! took it yet (the server never sees it), else the server is sent `notifications/cancelled`
//! after it. Everything else on the session (the handshake, lists, pings, notifications, the
//! server's requests and their answers, other cancellations) stays with rmcp; so do sessions
//! on a protocol without `initialize`, whose requests carry per-request metadata rmcp adds.
//!
//! **What would let it go**: as for the [`pipe_transport`](super::pipe_transport) it rides on:
//! rmcp's loop as cheap per call, or a hook for a transport to answer the requests it sent. It
//! rests on one fact of rmcp's, that its request ids are a `u32` counter (ids from 2^32 never
//! collide); the property test in `pipe_transport/tests.rs` holds the two id spaces apart.

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
        CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
        CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, ClientRequest,
        ErrorData, NumberOrString, ProgressToken, RequestId, RequestMetaObject, ServerResult,
    },
    service::ServiceError,
    transport::DynamicTransportError,
};
use tokio::sync::oneshot;

use crate::upstream::{
    transport::stdio::call_answers::Envelope, transport::stdio::write_queue::Ticket,
};

/// The first id of the lane: above every id rmcp's `u32` counter gives, and exact in the
/// double of a JavaScript server.
const FIRST_ID: i64 = 1 << 32;

/// What a call gets back: the server's result, or why there is none.
pub type ServerAnswer = Result<ServerResult, ServiceError>;

/// Why the server is told to cancel a call of the lane.
pub(in crate::upstream) const GAVE_UP: &str = "the caller gave up (deadline or cancellation)";

/// The write side of a transport: messages queued, then written by whichever sender holds the
/// pipe (see `pipe_writer`).
pub trait Outbox: Send + Sync {
    /// Appends `message` and its newline to what is to be written.
    fn queue(&self, message: &ClientJsonRpcMessage) -> io::Result<Ticket>;

    /// Writes `ticket`'s line (and what was queued before it), unless a write took it already.
    /// Dropped mid-write, the line is finished all the same.
    fn flush(
        self: Arc<Self>,
        ticket: Ticket,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    /// Takes `ticket`'s line back if no write took it yet: `true` if it will never be written.
    fn withdraw(&self, ticket: Ticket) -> bool;
}

/// The calls of one stdio session sent on the lane and not yet answered.
pub struct CallLane {
    next: AtomicU64,
    /// `None` once the transport has ended: calls waiting were told, new ones are refused.
    waiting: Mutex<Option<HashMap<i64, oneshot::Sender<ServerAnswer>>>>,
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
        // Made before the line is queued: whenever this future is dropped from here on, the
        // call's drop withdraws its line or tells the server.
        let mut sent = Sent {
            lane: self.clone(),
            number,
            id: id.clone(),
            progress,
            answer,
            answered: false,
            ticket: None,
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let message = ClientJsonRpcMessage::request(request, id);
        let ticket = self.outbox.queue(&message).map_err(write_failed)?;
        sent.ticket = Some(ticket);
        self.outbox
            .clone()
            .flush(ticket)
            .await
            .map_err(write_failed)?;
        Ok(sent)
    }

    /// Tells the server a call whose request went out is given up. Sent from a task of its own
    /// (a drop cannot wait), queued behind the request; with no runtime, it goes with the next
    /// write.
    fn cancel(&self, id: RequestId) {
        let param = CancelledNotificationParam::new(Some(id), Some(GAVE_UP.to_owned()));
        let notification =
            ClientNotification::CancelledNotification(CancelledNotification::new(param));
        let message = ClientJsonRpcMessage::notification(notification);
        if let Ok(ticket) = self.outbox.queue(&message)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(self.outbox.clone().flush(ticket));
        }
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

    /// Whether the transport has ended (set before any waiting call learns it).
    pub fn is_closed(&self) -> bool {
        self.lock().is_none()
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<HashMap<i64, oneshot::Sender<ServerAnswer>>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An answer as rmcp's request handle gives it: an error as `McpError`, a result decoded as a
/// tool result (or, when it is none, as whatever rmcp would make of it).
fn decode(envelope: &Envelope) -> ServerAnswer {
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

/// A call sent on the lane. Dropped before its answer, it is forgotten (an answer that comes
/// later is dropped) and its request withdrawn if no write took it yet, else cancelled on the
/// server.
pub struct Sent {
    lane: Arc<CallLane>,
    number: i64,
    /// The request's id.
    pub id: RequestId,
    /// The progress token the request carries.
    pub progress: ProgressToken,
    answer: oneshot::Receiver<ServerAnswer>,
    answered: bool,
    /// The request's line, once queued.
    ticket: Option<Ticket>,
}

impl Sent {
    /// The call's answer; the session's end if it closes first.
    pub async fn answer(&mut self) -> ServerAnswer {
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
        let waited = self
            .lane
            .lock()
            .as_mut()
            .is_some_and(|waiting| waiting.remove(&self.number).is_some());
        // Not waited for any more: answered meanwhile, or the session ended.
        if !waited {
            return;
        }
        self.lane.count.fetch_sub(1, Ordering::Relaxed);
        if let Some(ticket) = self.ticket
            && !self.lane.outbox.withdraw(ticket)
        {
            self.lane.cancel(self.id.clone());
        }
    }
}

#[cfg(test)]
mod tests;

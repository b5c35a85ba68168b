//! The client side of one streaming call: where what its server sends during the call goes
//! (progress, elicitation and sampling requests, with a way back for the answers), whether the
//! client still answers, and the pulse that keeps the call's timeout alive. The upstream side
//! routes into it; the gRPC side reads from it.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use tokio::{
    sync::{Notify, mpsc, oneshot},
    time::Instant,
};

use crate::domain::call::Timing;

/// How many events of one call may wait for its client; progress beyond that is dropped (the
/// call's timeout is still restarted), requests wait.
const EVENT_BUFFER: usize = 256;

/// What the server sent during an interactive call, for its client.
#[derive(Debug)]
pub enum Interaction {
    /// A progress notification of the call.
    Progress(ProgressNotificationParam),
    /// A log message the server sent during the call.
    Log(LoggingMessageNotificationParam),
    /// The server asks the user; the answer goes back by `answer`.
    Elicit {
        /// What the server asked.
        params: ElicitRequestParams,
        /// Where the user's answer goes.
        answer: oneshot::Sender<ElicitResult>,
    },
    /// The server asks the client's model; the result (or why not) goes back by `answer`.
    Sample {
        /// What the server asked.
        params: CreateMessageRequestParams,
        /// Where the result goes: a result, or an error message for the server.
        answer: oneshot::Sender<Result<CreateMessageResult, String>>,
    },
}

/// The client side of one interactive call: where its events go, whether the client still
/// answers, what it can answer, and the pulse that restarts the call's timeout.
#[derive(Clone, Debug)]
pub struct Conversation {
    events: mpsc::Sender<Interaction>,
    open: Arc<AtomicBool>,
    pulse: Arc<Pulse>,
    answers: Answers,
}

/// What kinds of question a call's client can answer (a server must not be told more: on MCP
/// 2026-07-28 each request declares it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answers {
    /// Elicitation (the user).
    pub elicit: bool,
    /// Sampling (the client's model).
    pub sample: bool,
}

impl Answers {
    /// Every kind (a `CallToolStream` client).
    pub const ALL: Answers = Answers {
        elicit: true,
        sample: true,
    };
}

/// Tells a call's timeout that the server is making progress, or that it waits on the client.
#[derive(Debug, Default)]
pub struct Pulse {
    beat: Notify,
    waiting: AtomicUsize,
}

impl Pulse {
    /// Waits for `answer` as `timing` allows: each sign of life (progress, an answer from the
    /// client) restarts the timeout, which is paused while the server waits on the client,
    /// and nothing goes past `timing.max`. `None` when the time is up.
    pub async fn within<F: Future>(&self, timing: Timing, answer: F) -> Option<F::Output> {
        let started = Instant::now();
        let hard = started + timing.max;
        let mut idle = started + timing.timeout;
        tokio::pin!(answer);
        loop {
            tokio::select! {
                biased;
                out = &mut answer => return Some(out),
                () = self.beat.notified() => idle = Instant::now() + timing.timeout,
                () = tokio::time::sleep_until(idle.min(hard)) => {
                    let now = Instant::now();
                    if now >= hard || !self.waiting_on_client() {
                        return None;
                    }
                    idle = now + timing.timeout;
                }
            }
        }
    }

    /// Whether a request of the server waits for the client (the timeout is then paused).
    fn waiting_on_client(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn signal(&self) {
        self.beat.notify_one();
    }
}

/// Counts a request waiting on the client while it lives.
pub struct Waiting<'a>(&'a Pulse);

impl<'a> Waiting<'a> {
    fn new(pulse: &'a Pulse) -> Self {
        pulse.waiting.fetch_add(1, Ordering::Relaxed);
        Self(pulse)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        self.0.signal();
    }
}

impl Conversation {
    /// A conversation and the receiver of its events.
    pub fn new() -> (Self, mpsc::Receiver<Interaction>) {
        let (events, receiver) = mpsc::channel(EVENT_BUFFER);
        let conversation = Self {
            events,
            open: Arc::new(AtomicBool::new(true)),
            pulse: Arc::default(),
            answers: Answers::ALL,
        };
        (conversation, receiver)
    }

    /// The same conversation, with a client that answers only `answers`.
    pub fn answering(mut self, answers: Answers) -> Self {
        self.answers = answers;
        self
    }

    /// What the client can answer.
    pub fn answers(&self) -> Answers {
        self.answers
    }

    /// The client will send nothing more: the server's requests are declined from now on.
    pub fn close(&self) {
        self.open.store(false, Ordering::Relaxed);
    }

    /// The call's pulse.
    pub fn pulse(&self) -> &Pulse {
        &self.pulse
    }

    /// The call's pulse, to keep.
    pub fn pulse_handle(&self) -> Arc<Pulse> {
        self.pulse.clone()
    }

    /// Whether the client still answers.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed) && !self.events.is_closed()
    }

    /// Progress for the client; dropped if the client is far behind, but the call's timeout
    /// restarts either way.
    pub fn progress(&self, params: ProgressNotificationParam) {
        let _ = self.events.try_send(Interaction::Progress(params));
        self.pulse.signal();
    }

    /// A log message for the client; dropped if the client is far behind.
    pub fn log(&self, params: LoggingMessageNotificationParam) {
        let _ = self.events.try_send(Interaction::Log(params));
    }

    /// Shows the client a request of the server; false if the client is gone.
    pub async fn ask(&self, interaction: Interaction) -> bool {
        self.events.send(interaction).await.is_ok()
    }

    /// Counts a request waiting on the client (pausing the call's timeout) while it lives.
    pub fn waiting(&self) -> Waiting<'_> {
        Waiting::new(&self.pulse)
    }

    /// Puts the server's question to the client and waits for the user's answer: declined
    /// if the client is gone, cancelled if the call ends first.
    pub async fn elicit(&self, params: ElicitRequestParams) -> ElicitResult {
        let (answer, answered) = oneshot::channel();
        let _waiting = self.waiting();
        if !self.ask(Interaction::Elicit { params, answer }).await {
            return ElicitResult::new(ElicitationAction::Decline);
        }
        answered
            .await
            .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel))
    }

    /// Puts the server's sampling request to the client's model and waits for its result, or
    /// why there is none.
    pub async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        let (answer, answered) = oneshot::channel();
        let _waiting = self.waiting();
        if !self.ask(Interaction::Sample { params, answer }).await {
            return Err("the call's client went away".into());
        }
        answered
            .await
            .unwrap_or_else(|_| Err("the call ended before its client answered".into()))
    }
}

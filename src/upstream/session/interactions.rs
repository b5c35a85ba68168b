//! What a server sends during a request, routed to the caller whose request it is: progress,
//! log messages, and the server's `elicitation/create` and `sampling/createMessage` requests.
//! Routing is a security property: every request on a session is counted (tool calls,
//! `resources/read`, `prompts/get`, `completion/complete`, subscriptions, the broker's own
//! lists), and what the server sends reaches a caller only when it can be tied to that
//! caller's call — by the answer stream it came on (streamable HTTP), by its progress token,
//! by the session's owner (a per-caller session), or because exactly one request, an
//! interactive call, is in flight on the session when it is read (another caller's requests
//! given up on count a while longer: the server may still be working on them). Anything else is declined at once
//! (questions) or dropped (logs), so nothing reaches another caller and nothing waits on a
//! caller who will never answer.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    RequestId,
};
use tokio::sync::Notify;

use self::ties::{Abandoned, Tie, Ties};
use crate::{conversation::Conversation, domain::caller::CallerKey};

mod ties;

/// Progress notifications kept for a call whose request is being sent (the answer can race
/// the registration of its id).
const MAX_ORPHANS: usize = 64;
/// How long a request tied to a call by its answer stream waits for the call to be registered.
const REGISTRATION_WAIT: Duration = Duration::from_secs(1);

/// One session's calls in flight and the routing of what its server sends during them.
#[derive(Debug, Default)]
pub struct Interactions {
    /// The session belongs to one caller (a per-caller session): every call on it is theirs.
    one_caller: bool,
    /// Requests in flight on the session, interactive calls or not.
    calls: AtomicUsize,
    /// Interactive calls in flight, for the transports' fast path.
    interactive: AtomicUsize,
    state: Mutex<State>,
    registered: Notify,
}

#[derive(Debug, Default)]
struct State {
    next_slot: u64,
    /// Interactive calls, oldest first.
    calls: Vec<Entry>,
    /// What each server request read from a shared session is tied to, until it is routed.
    ties: Ties,
    /// Requests given up on lately, which the server may still be working on.
    abandoned: Abandoned,
    /// Progress that came before its call's token was known.
    orphans: VecDeque<ProgressNotificationParam>,
}

#[derive(Debug)]
struct Entry {
    slot: u64,
    /// The call's request id and progress token, once sent.
    sent: Option<(RequestId, ProgressToken)>,
    conversation: Conversation,
    /// Whose call it is.
    caller: Option<CallerKey>,
}

/// Where a server request goes.
enum Route {
    To(Conversation),
    Nowhere(&'static str),
}

impl Interactions {
    /// Routing for a session shared by callers (`one_caller` false) or owned by one.
    pub fn new(one_caller: bool) -> Arc<Self> {
        Arc::new(Self {
            one_caller,
            ..Self::default()
        })
    }

    /// Whether the session belongs to one caller (a per-caller session).
    pub fn is_one_callers(&self) -> bool {
        self.one_caller
    }

    /// Whether an interactive call is in flight (transports look closer only then).
    pub fn any_interactive(&self) -> bool {
        self.interactive.load(Ordering::Relaxed) > 0
    }

    /// Counts a request of `caller` (`None`: the broker's own) in flight until the
    /// registration is dropped; an interactive call (`conversation`) also receives what the
    /// server sends for it.
    pub fn begin<'a>(
        self: &Arc<Self>,
        conversation: Option<Conversation>,
        caller: Option<&'a CallerKey>,
    ) -> Registration<'a> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let slot = conversation.map(|conversation| {
            self.interactive.fetch_add(1, Ordering::Relaxed);
            let mut state = self.lock();
            state.next_slot += 1;
            let slot = state.next_slot;
            state.calls.push(Entry {
                slot,
                sent: None,
                conversation,
                caller: caller.cloned(),
            });
            slot
        });
        Registration {
            interactions: self.clone(),
            slot,
            caller,
            answered: false,
        }
    }

    /// A progress notification: to its interactive call, in order.
    pub fn progress(&self, params: ProgressNotificationParam) {
        if !self.any_interactive() {
            return;
        }
        let mut state = self.lock();
        let target = state.calls.iter().find(
            |entry| matches!(&entry.sent, Some((_, token)) if *token == params.progress_token),
        );
        match target {
            Some(entry) => entry.conversation.progress(params),
            None if state.calls.iter().any(|entry| entry.sent.is_none()) => {
                if state.orphans.len() == MAX_ORPHANS {
                    state.orphans.pop_front();
                }
                state.orphans.push_back(params);
            }
            // A unary call's, or a finished call's.
            None => {}
        }
    }

    /// A log message, as it is read: to the one streaming call it can belong to (the oldest
    /// listening on a caller's own session; on a shared session only the sole request in
    /// flight), else only the broker's log has it.
    pub fn log(&self, params: LoggingMessageNotificationParam) {
        if !self.any_interactive() || (!self.one_caller && self.calls.load(Ordering::Relaxed) != 1)
        {
            return;
        }
        let mut state = self.lock();
        let target = if self.one_caller {
            state
                .calls
                .iter()
                .find(|entry| entry.conversation.is_open())
        } else {
            sole(&mut state, 1).ok()
        };
        if let Some(entry) = target.filter(|entry| entry.conversation.is_open()) {
            entry.conversation.log(params);
        }
    }

    /// Records that the server request `request` came on the answer stream of our request
    /// `call` (streamable HTTP).
    pub fn relate(&self, request: RequestId, call: RequestId) {
        self.lock().ties.record(request, Tie::Call(call));
    }

    /// The server request `request` (elicitation or sampling) was read from the session: on a
    /// shared session it is tied now, in the order of the stream, to the one request it can
    /// belong to. Decided later, when its handler runs, the request it came during may have
    /// ended and another caller's begun.
    pub fn arrived(&self, request: &RequestId) {
        if self.one_caller {
            return;
        }
        let calls = self.calls.load(Ordering::Relaxed);
        let mut state = self.lock();
        let tie = match sole(&mut state, calls) {
            Ok(entry) => Tie::Slot(entry.slot),
            Err(why) => Tie::Untied(why),
        };
        state.ties.record(request.clone(), tie);
    }

    /// The server asks the user (`elicitation/create` with id `request`): the call's client
    /// answers, or it is declined at once when no caller's call can be told.
    pub async fn elicit(&self, request: &RequestId, params: ElicitRequestParams) -> ElicitResult {
        let conversation = match self.route(request).await {
            Route::To(conversation) => conversation,
            Route::Nowhere(why) => {
                tracing::debug!(%request, why, "an elicitation is declined");
                return ElicitResult::new(ElicitationAction::Decline);
            }
        };
        conversation.elicit(params).await
    }

    /// The server asks the client's model (`sampling/createMessage` with id `request`): the
    /// call's client answers, or the server gets an error at once.
    pub async fn sample(
        &self,
        request: &RequestId,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        let conversation = match self.route(request).await {
            Route::To(conversation) => conversation,
            Route::Nowhere(why) => {
                tracing::debug!(%request, why, "a sampling request is refused");
                return Err(format!(
                    "the broker cannot relay this sampling request: {why}"
                ));
            }
        };
        conversation.sample(params).await
    }

    /// The interactive call a server request belongs to, if one can be told: on a shared
    /// session by the tie made as it was read (none: declined), on a caller's own session the
    /// oldest of its caller's calls still listening.
    async fn route(&self, request: &RequestId) -> Route {
        let tie = self.lock().ties.take(request);
        let slot = match tie {
            Some(Tie::Call(call)) => return self.route_related(&call).await,
            Some(Tie::Untied(why)) => return Route::Nowhere(why),
            Some(Tie::Slot(slot)) => Some(slot),
            None if self.one_caller => None,
            None => return Route::Nowhere("the request could not be tied to a call"),
        };
        let state = self.lock();
        let mut calls = state.calls.iter();
        let entry = match slot {
            Some(slot) => calls.find(|entry| entry.slot == slot),
            None => calls.find(|entry| entry.conversation.is_open()),
        };
        match entry {
            Some(entry) if entry.conversation.is_open() => Route::To(entry.conversation.clone()),
            Some(_) => Route::Nowhere("the call's client stopped sending"),
            None if slot.is_some() => Route::Nowhere("the call it came during has ended"),
            None if state.calls.is_empty() => {
                Route::Nowhere("no streaming call is in flight on the session")
            }
            None => Route::Nowhere("the call's client stopped sending"),
        }
    }

    /// The interactive call whose request is `call`, waiting briefly for it to be registered
    /// (its answer stream can be read before its sender recorded the id).
    async fn route_related(&self, call: &RequestId) -> Route {
        let wait = async {
            loop {
                let registered = self.registered.notified();
                {
                    let state = self.lock();
                    let found = state
                        .calls
                        .iter()
                        .find(|entry| matches!(&entry.sent, Some((id, _)) if id == call));
                    if let Some(entry) = found {
                        return Some(entry.conversation.clone());
                    }
                    if state.calls.iter().all(|entry| entry.sent.is_some()) {
                        return None;
                    }
                }
                registered.await;
            }
        };
        match tokio::time::timeout(REGISTRATION_WAIT, wait).await {
            Ok(Some(conversation)) if conversation.is_open() => Route::To(conversation),
            Ok(Some(_)) => Route::Nowhere("the call's client stopped sending"),
            // A unary request's (or a finished call's) request.
            _ => Route::Nowhere("the request belongs to a call that is not streaming"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The interactive call everything a shared session's server sends belongs to, with `calls`
/// requests in flight: it must be the only one, and no other caller's request given up on may
/// still be running on the server; else why not.
fn sole(state: &mut State, calls: usize) -> Result<&Entry, &'static str> {
    let entry = match (calls, state.calls.as_slice()) {
        (1, [entry]) => entry,
        (0, _) => return Err("no request is in flight on the session"),
        (1, []) => return Err("the request in flight is not a streaming call"),
        _ => return Err("requests of several callers may be in flight on the shared session"),
    };
    if state
        .abandoned
        .others(Instant::now(), entry.caller.as_ref())
    {
        return Err("another caller's request given up on may still be running on the session");
    }
    Ok(entry)
}

/// A request in flight on a session; dropped when it ends.
#[derive(Debug)]
pub struct Registration<'a> {
    interactions: Arc<Interactions>,
    /// The interactive call's entry.
    slot: Option<u64>,
    /// Whose request it is.
    caller: Option<&'a CallerKey>,
    /// Its answer came: the server is done with it.
    answered: bool,
}

impl Registration<'_> {
    /// The call's request went out with this id and progress token.
    pub fn sent(&self, id: &RequestId, token: &ProgressToken) {
        let Some(slot) = self.slot else {
            return;
        };
        let mut state = self.interactions.lock();
        let State { calls, orphans, .. } = &mut *state;
        if let Some(entry) = calls.iter_mut().find(|entry| entry.slot == slot) {
            entry.sent = Some((id.clone(), token.clone()));
            orphans.retain(|params| {
                let ours = params.progress_token == *token;
                if ours {
                    entry.conversation.progress(params.clone());
                }
                !ours
            });
        }
        drop(state);
        self.interactions.registered.notify_waiters();
    }

    /// The request's answer came (a result or an error): the server is done with it.
    pub fn answered(&mut self) {
        self.answered = true;
    }

    /// The call goes on with another request (a 2026-07-28 round): not answered until it is.
    pub fn resent(&mut self) {
        self.answered = false;
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let interactions = &self.interactions;
        if !self.answered && !interactions.one_caller {
            // Given up on: what the server still sends for it is no other caller's.
            let caller = self.caller.cloned();
            interactions.lock().abandoned.push(Instant::now(), caller);
        }
        interactions.calls.fetch_sub(1, Ordering::Relaxed);
        if let Some(slot) = self.slot {
            interactions.interactive.fetch_sub(1, Ordering::Relaxed);
            let mut state = interactions.lock();
            state.calls.retain(|entry| entry.slot != slot);
            if state.calls.is_empty() {
                state.orphans.clear();
                state.ties.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests;

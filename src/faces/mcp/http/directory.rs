//! The face's own record of its client sessions, beside rmcp's: each session's state (once it
//! is initialized), when the client last did anything, the calls the face is answering
//! directly, the questions those calls asked the client, and which idle one is the oldest.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
    time::{Duration, Instant},
};

use rmcp::{
    model::{ClientResult, RequestId},
    transport::streamable_http_server::SessionId,
};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::session::Session;

/// The prefix of the ids of the questions the face asks on a call's own answer stream: rmcp's
/// peer numbers its own requests, so these cannot collide with them. The rest is 128 random
/// bits: an id seen once tells nothing of another session's questions.
pub const QUESTION_PREFIX: &str = "toolbroker-question-";

/// An answer to a question: the client's result, or the error it sent.
pub type ClientAnswer = Result<ClientResult, String>;

/// Every session of one face.
#[derive(Default)]
pub struct Directory {
    entries: Mutex<HashMap<SessionId, Entry>>,
}

/// One session.
struct Entry {
    /// Its state, set when the client said it is initialized.
    session: Weak<Session>,
    /// Whether it was initialized: its state dropped then means rmcp ended the session.
    initialized: bool,
    /// When the client last sent anything.
    active: Instant,
    /// Its open streams (the client's GET stream) and the calls answered directly: while any
    /// is open, it is not idle.
    open: usize,
    /// The calls answered directly, by request id: cancelled by the client's
    /// `notifications/cancelled`.
    calls: HashMap<RequestId, CancellationToken>,
    /// The questions asked on those calls' streams, by their ids' random part.
    questions: HashMap<String, oneshot::Sender<ClientAnswer>>,
}

impl Directory {
    fn entries(&self) -> MutexGuard<'_, HashMap<SessionId, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new session `id`, not initialized yet.
    pub fn open(&self, id: &SessionId) {
        let entry = Entry {
            session: Weak::new(),
            initialized: false,
            active: Instant::now(),
            open: 0,
            calls: HashMap::new(),
            questions: HashMap::new(),
        };
        self.entries().insert(id.clone(), entry);
    }

    /// Session `id` is initialized, with `session` as its state.
    pub fn initialized(&self, id: &SessionId, session: &Arc<Session>) {
        if let Some(entry) = self.entries().get_mut(id) {
            entry.session = Arc::downgrade(session);
            entry.initialized = true;
        }
    }

    /// The client of session `id` sent something.
    pub fn touch(&self, id: &SessionId) {
        if let Some(entry) = self.entries().get_mut(id) {
            entry.active = Instant::now();
        }
    }

    /// Session `id` is gone.
    pub fn close(&self, id: &SessionId) {
        // Its questions' senders drop with it: the calls waiting read "no answer".
        self.entries().remove(id);
    }

    /// Whether session `id` is initialized and its state alive, so that the face may answer
    /// its requests itself. Counts as activity.
    pub fn in_session(&self, id: &SessionId) -> bool {
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(id) else {
            return false;
        };
        entry.active = Instant::now();
        entry.session.strong_count() > 0
    }

    /// Call `request` of session `id` starts, to be answered directly: the session's state
    /// and the token that cancels the call; `None` if the session is not initialized (rmcp
    /// runs the call then).
    pub fn start_call(
        &self,
        id: &SessionId,
        request: &RequestId,
    ) -> Option<(Arc<Session>, CancellationToken)> {
        let mut entries = self.entries();
        let entry = entries.get_mut(id)?;
        let session = entry.session.upgrade()?;
        let cancel = CancellationToken::new();
        entry.active = Instant::now();
        entry.open += 1;
        entry.calls.insert(request.clone(), cancel.clone());
        Some((session, cancel))
    }

    /// Call `request` of session `id` is over.
    pub fn end_call(&self, id: &SessionId, request: &RequestId) {
        if let Some(entry) = self.entries().get_mut(id) {
            entry.active = Instant::now();
            entry.open = entry.open.saturating_sub(1);
            entry.calls.remove(request);
        }
    }

    /// The client of session `id` cancelled `request`: true if it was a call answered
    /// directly (now cancelled).
    pub fn cancel_call(&self, id: &SessionId, request: &RequestId) -> bool {
        let entries = self.entries();
        let call = entries.get(id).and_then(|entry| entry.calls.get(request));
        call.inspect(|cancel| cancel.cancel()).is_some()
    }

    /// A stream of session `id` opened (`true`) or closed.
    pub fn stream(&self, id: &SessionId, opened: bool) {
        if let Some(entry) = self.entries().get_mut(id) {
            entry.active = Instant::now();
            entry.open = if opened {
                entry.open + 1
            } else {
                entry.open.saturating_sub(1)
            };
        }
    }

    /// A new question for the client of session `id`: its id, and where its answer comes.
    pub fn ask(&self, id: &SessionId) -> (RequestId, oneshot::Receiver<ClientAnswer>) {
        let token = unguessable();
        let request = RequestId::String(format!("{QUESTION_PREFIX}{token}").into());
        let (answer, answered) = oneshot::channel();
        if let Some(entry) = self.entries().get_mut(id) {
            entry.questions.insert(token, answer);
        }
        (request, answered)
    }

    /// The question `request` of session `id` needs no answer any more.
    pub fn forget(&self, id: &SessionId, request: &RequestId) {
        if let (Some(entry), Some(token)) = (self.entries().get_mut(id), question(request)) {
            entry.questions.remove(token);
        }
    }

    /// The client of session `id` answered `request`: true if it was one of the face's
    /// questions (now delivered).
    pub fn answer(&self, id: &SessionId, request: &RequestId, answer: ClientAnswer) -> bool {
        let Some(token) = question(request) else {
            return false;
        };
        let waiting = self
            .entries()
            .get_mut(id)
            .and_then(|entry| entry.questions.remove(token));
        match waiting {
            Some(waiting) => {
                let _ = waiting.send(answer);
                true
            }
            None => false,
        }
    }

    /// The sessions idle for `idle` at `now`: nothing from the client, no stream open and no
    /// call running, or state dropped by rmcp (its service ended).
    pub fn idle(&self, now: Instant, idle: Duration) -> Vec<SessionId> {
        self.entries()
            .iter()
            .filter(|(_, entry)| {
                let quiet = entry.open == 0 && now.saturating_duration_since(entry.active) >= idle;
                let ended = entry.initialized && entry.session.strong_count() == 0;
                quiet || ended
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

impl Directory {
    /// Of the sessions `among` picks, the one idle now (no stream open, no call answered
    /// directly) whose client has been quiet the longest: the one closed to make room.
    pub fn oldest_idle(&self, among: impl Fn(&SessionId) -> bool) -> Option<SessionId> {
        self.entries()
            .iter()
            .filter(|(id, entry)| entry.open == 0 && among(id))
            .min_by_key(|(_, entry)| entry.active)
            .map(|(id, _)| id.clone())
    }
}

/// Whether `request` is the id of one of the face's questions.
pub fn is_question(request: &RequestId) -> bool {
    question(request).is_some()
}

/// The random part of one of the face's question ids.
fn question(request: &RequestId) -> Option<&str> {
    match request {
        RequestId::String(id) => id.strip_prefix(QUESTION_PREFIX),
        RequestId::Number(_) => None,
    }
}

/// 128 bits from the operating system's random source, in decimal.
fn unguessable() -> String {
    let mut bytes = [0u8; 16];
    // The OS source fails only where nothing can run (no /dev/urandom, no getrandom(2)).
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    u128::from_be_bytes(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> SessionId {
        SessionId::from(text)
    }

    #[test]
    fn calls_are_answered_directly_only_in_initialized_sessions_and_cancel_by_id() {
        let directory = Directory::default();
        let request = RequestId::Number(7);
        directory.open(&id("a"));
        assert!(directory.start_call(&id("a"), &request).is_none());
        assert!(!directory.in_session(&id("a")));
        assert!(directory.start_call(&id("unknown"), &request).is_none());
        let session = Arc::new(Session::default());
        directory.initialized(&id("a"), &session);
        assert!(directory.in_session(&id("a")) && !directory.in_session(&id("unknown")));
        let (state, cancel) = directory.start_call(&id("a"), &request).unwrap();
        assert!(Arc::ptr_eq(&state, &session));
        assert!(!directory.cancel_call(&id("a"), &RequestId::Number(8)));
        assert!(!directory.cancel_call(&id("b"), &request));
        assert!(directory.cancel_call(&id("a"), &request));
        assert!(cancel.is_cancelled());
        directory.end_call(&id("a"), &request);
        assert!(!directory.cancel_call(&id("a"), &request));
    }

    #[test]
    fn answers_reach_the_question_of_their_session_only() {
        let directory = Directory::default();
        directory.open(&id("a"));
        directory.open(&id("b"));
        let (question, mut answered) = directory.ask(&id("a"));
        let answer = || Ok(ClientResult::empty(()));
        assert!(!directory.answer(&id("b"), &question, answer()));
        assert!(!directory.answer(&id("a"), &RequestId::Number(0), answer()));
        assert!(answered.try_recv().is_err());
        assert!(directory.answer(&id("a"), &question, answer()));
        assert!(answered.try_recv().unwrap().is_ok());
        assert!(!directory.answer(&id("a"), &question, answer()));
        let (forgotten, _answered) = directory.ask(&id("a"));
        directory.forget(&id("a"), &forgotten);
        assert!(!directory.answer(&id("a"), &forgotten, answer()));
    }

    #[test]
    fn question_ids_are_not_guessable_from_one_seen() {
        let directory = Directory::default();
        directory.open(&id("alice"));
        directory.open(&id("bob"));
        let (seen, _mine) = directory.ask(&id("bob"));
        let (hers, mut answered) = directory.ask(&id("alice"));
        let random = |q: &RequestId| question(q).unwrap().parse::<u128>().unwrap();
        // Bob, holding his own question id, tries the ones just before and after it.
        for guess in [random(&seen).wrapping_add(1), random(&seen).wrapping_sub(1)] {
            let guess = RequestId::String(format!("{QUESTION_PREFIX}{guess}").into());
            assert!(!directory.answer(&id("alice"), &guess, Ok(ClientResult::empty(()))));
        }
        assert!(answered.try_recv().is_err());
        assert_ne!(random(&hers), random(&seen));
        assert!(
            random(&hers).abs_diff(random(&seen)) > 1 << 64,
            "far apart, not a sequence"
        );
    }

    #[test]
    fn a_session_is_idle_with_nothing_open_for_long_enough_or_once_its_state_is_gone() {
        let directory = Directory::default();
        let idle = Duration::from_secs(300);
        let (quiet, streaming, calling, ended) =
            (id("quiet"), id("streaming"), id("calling"), id("ended"));
        for session in [&quiet, &streaming, &calling, &ended] {
            directory.open(session);
        }
        let kept = Arc::new(Session::default());
        directory.initialized(&calling, &kept);
        directory.stream(&streaming, true);
        directory
            .start_call(&calling, &RequestId::Number(1))
            .unwrap();
        directory.initialized(&ended, &Arc::new(Session::default()));
        let later = Instant::now() + idle;
        assert_eq!(directory.idle(Instant::now(), idle), vec![ended.clone()]);
        let mut idle_later = directory.idle(later, idle);
        idle_later.sort();
        assert_eq!(idle_later, vec![ended.clone(), quiet.clone()]);
        directory.stream(&streaming, false);
        directory.end_call(&calling, &RequestId::Number(1));
        directory.touch(&quiet);
        assert_eq!(directory.idle(Instant::now(), idle), vec![ended.clone()]);
        let mut idle_later = directory.idle(later + Duration::from_secs(1), idle);
        idle_later.sort();
        assert_eq!(idle_later, vec![calling, ended, quiet, streaming]);
    }

    #[test]
    fn only_a_session_with_nothing_open_is_idle_enough_to_close() {
        let directory = Directory::default();
        let (streaming, calling, quiet) = (id("streaming"), id("calling"), id("quiet"));
        for session in [&streaming, &calling, &quiet] {
            directory.open(session);
        }
        directory.stream(&streaming, true);
        let state = Arc::new(Session::default());
        directory.initialized(&calling, &state);
        assert!(
            directory
                .start_call(&calling, &RequestId::Number(1))
                .is_some()
        );
        assert_eq!(directory.oldest_idle(|_| true), Some(quiet.clone()));
        assert_eq!(directory.oldest_idle(|id| *id != quiet), None);
        directory.stream(&streaming, false);
        assert_eq!(directory.oldest_idle(|id| *id != quiet), Some(streaming));
    }
}

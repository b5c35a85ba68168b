//! The face's own record of its client sessions, beside rmcp's: each session's state (once it
//! is initialized), when the client last did anything, the calls the face is answering
//! directly, the questions those calls asked the client, and which idle one is the oldest.
//!
//! **What would let it go**: rmcp's session manager recording each session's activity, its
//! open streams and the calls a face answers itself, and routing a client's answers to them.
//! A model-based property test runs any sequence of opens, closes, calls, cancels, questions
//! and answers over three sessions against it.

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
use crate::core::unguessable::unguessable;

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

    /// What a client and the face do to the directory, in any order.
    #[derive(Debug, Clone)]
    enum Op {
        Open(usize),
        Close(usize),
        Initialize(usize),
        Stream(usize, bool),
        StartCall(usize, i64),
        EndCall(usize, i64),
        Cancel(usize, i64),
        Ask(usize),
        Answer(usize, usize),
        Forget(usize, usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let s = 0usize..3;
        prop_oneof![
            1 => s.clone().prop_map(Op::Open),
            1 => s.clone().prop_map(Op::Close),
            1 => s.clone().prop_map(Op::Initialize),
            1 => (s.clone(), any::<bool>()).prop_map(|(s, o)| Op::Stream(s, o)),
            1 => (s.clone(), 0i64..3).prop_map(|(s, r)| Op::StartCall(s, r)),
            1 => (s.clone(), 0i64..3).prop_map(|(s, r)| Op::EndCall(s, r)),
            1 => (s.clone(), 0i64..3).prop_map(|(s, r)| Op::Cancel(s, r)),
            2 => s.clone().prop_map(Op::Ask),
            3 => (s.clone(), 0usize..8).prop_map(|(s, q)| Op::Answer(s, q)),
            1 => (s, 0usize..8).prop_map(|(s, q)| Op::Forget(s, q)),
        ]
    }

    /// The model: what each session holds.
    #[derive(Default, Clone)]
    struct Model {
        open: usize,
        calls: std::collections::BTreeSet<i64>,
        initialized: bool,
    }

    proptest::proptest! {
        /// A model of the directory against it, over any sequence of what clients and the
        /// face do across three sessions: an answer reaches a question only from the session
        /// that was asked it, once, and never after the session closed or was opened anew; a
        /// cancel reaches only a call its session runs; a session with a stream open or a
        /// call running is never the one closed to make room.
        #[test]
        fn answers_cancels_and_idleness_follow_the_model(ops in proptest::collection::vec(op(), 1..80)) {
            let directory = Directory::default();
            let names = [id("s0"), id("s1"), id("s2")];
            let mut model: [Option<Model>; 3] = Default::default();
            let mut states: Vec<Arc<Session>> = Vec::new();
            // Every question asked: its session, its id, whether it still waits, its receiver.
            let mut questions: Vec<(usize, RequestId, bool, oneshot::Receiver<ClientAnswer>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Open(s) => {
                        directory.open(&names[s]);
                        model[s] = Some(Model::default());
                        questions.iter_mut().filter(|q| q.0 == s).for_each(|q| q.2 = false);
                    }
                    Op::Close(s) => {
                        directory.close(&names[s]);
                        model[s] = None;
                        questions.iter_mut().filter(|q| q.0 == s).for_each(|q| q.2 = false);
                    }
                    Op::Initialize(s) => {
                        let state = Arc::new(Session::default());
                        directory.initialized(&names[s], &state);
                        states.push(state);
                        if let Some(m) = &mut model[s] {
                            m.initialized = true;
                        }
                    }
                    Op::Stream(s, opened) => {
                        directory.stream(&names[s], opened);
                        if let Some(m) = &mut model[s] {
                            m.open = if opened { m.open + 1 } else { m.open.saturating_sub(1) };
                        }
                    }
                    Op::StartCall(s, r) => {
                        let started = directory.start_call(&names[s], &RequestId::Number(r)).is_some();
                        let expected = model[s].as_ref().is_some_and(|m| m.initialized);
                        proptest::prop_assert_eq!(started, expected);
                        if let Some(m) = model[s].as_mut().filter(|_| started) {
                            m.open += 1;
                            m.calls.insert(r);
                        }
                    }
                    Op::EndCall(s, r) => {
                        directory.end_call(&names[s], &RequestId::Number(r));
                        if let Some(m) = &mut model[s] {
                            m.open = m.open.saturating_sub(1);
                            m.calls.remove(&r);
                        }
                    }
                    Op::Cancel(s, r) => {
                        let cancelled = directory.cancel_call(&names[s], &RequestId::Number(r));
                        let expected = model[s].as_ref().is_some_and(|m| m.calls.contains(&r));
                        proptest::prop_assert_eq!(cancelled, expected);
                    }
                    Op::Ask(s) => {
                        let (request, answered) = directory.ask(&names[s]);
                        proptest::prop_assert!(is_question(&request));
                        questions.push((s, request, model[s].is_some(), answered));
                    }
                    Op::Answer(by, q) if !questions.is_empty() => {
                        let q = q % questions.len();
                        let (asked, request, waiting, answered) = &mut questions[q];
                        let delivered = directory.answer(&names[by], request, Ok(ClientResult::empty(())));
                        let expected = *waiting && *asked == by;
                        proptest::prop_assert_eq!(delivered, expected, "question {} of s{} answered by s{}", q, asked, by);
                        if delivered {
                            *waiting = false;
                            proptest::prop_assert!(answered.try_recv().is_ok());
                        }
                    }
                    Op::Forget(s, q) if !questions.is_empty() => {
                        let q = q % questions.len();
                        directory.forget(&names[s], &questions[q].1);
                        if questions[q].0 == s {
                            questions[q].2 = false;
                        }
                    }
                    Op::Answer(..) | Op::Forget(..) => {}
                }
                let closable = directory.oldest_idle(|_| true);
                let idle_ones: Vec<usize> = (0..3).filter(|&s| model[s].as_ref().is_some_and(|m| m.open == 0)).collect();
                match closable {
                    Some(session) => {
                        let s = names.iter().position(|n| *n == session).unwrap();
                        proptest::prop_assert!(idle_ones.contains(&s), "s{} is busy", s);
                    }
                    None => proptest::prop_assert!(idle_ones.is_empty()),
                }
            }
        }
    }
}

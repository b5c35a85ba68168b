//! What a server request read from a shared session is tied to, decided as it is read (in the
//! order of the stream, before any answer that follows it), and the requests given up on that
//! the server may still be working on, with whose they were. Both are bounded: past a bound,
//! nothing is tied, so a request is declined rather than guessed.

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

use rmcp::model::RequestId;

use crate::domain::caller::CallerKey;

/// The most server requests waiting for their handler with a tie.
const MAX_TIES: usize = 1024;
/// The most requests given up on that are remembered.
const MAX_ABANDONED: usize = 1024;
/// How long a request given up on (a deadline, a caller gone) still counts as in flight: the
/// server may not have seen its cancellation yet, and what it sends for it is no other
/// caller's. Meanwhile no other caller is asked anything on the shared session; a server that
/// goes on with a cancelled request for longer is not covered.
pub(super) const ABANDONED_GRACE: Duration = Duration::from_secs(5);

/// What a server request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tie {
    /// The request came on the answer stream of our request with this id (streamable HTTP).
    Call(RequestId),
    /// It came while the interactive call of this slot was the only request in flight.
    Slot(u64),
    /// It cannot be told whose it is, and why.
    Untied(&'static str),
}

/// The ties of server requests whose handlers have not run yet, by the server's request id.
#[derive(Debug, Default)]
pub(super) struct Ties(HashMap<RequestId, Tie>);

impl Ties {
    /// Records `tie` for `request`, unless its answer stream tied it already; when too many
    /// wait, it is left untied (and so declined).
    pub fn record(&mut self, request: RequestId, tie: Tie) {
        if matches!(self.0.get(&request), Some(Tie::Call(_))) && !matches!(tie, Tie::Call(_)) {
            return;
        }
        if self.0.len() < MAX_TIES || self.0.contains_key(&request) {
            self.0.insert(request, tie);
        }
    }

    /// The tie of `request`, forgotten.
    pub fn take(&mut self, request: &RequestId) -> Option<Tie> {
        self.0.remove(request)
    }

    /// Forgets every tie.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// The requests given up on recently: until when each counts, and whose it was (`None`: the
/// broker's own), oldest first.
#[derive(Debug, Default)]
pub(super) struct Abandoned(VecDeque<(Instant, Option<CallerKey>)>);

impl Abandoned {
    /// A request of `caller` was given up on at `now`.
    pub fn push(&mut self, now: Instant, caller: Option<CallerKey>) {
        if self.0.len() == MAX_ABANDONED {
            // Full: the newest is kept in place of the oldest, so one stays counted.
            self.0.pop_front();
        }
        self.0.push_back((now + ABANDONED_GRACE, caller));
    }

    /// Whether a request given up on, of anyone but `caller`, may still be running on the
    /// server at `now`.
    pub fn others(&mut self, now: Instant, caller: Option<&CallerKey>) -> bool {
        while self.0.front().is_some_and(|(until, _)| *until <= now) {
            self.0.pop_front();
        }
        let theirs = |whose: &Option<CallerKey>| caller.is_some() && whose.as_ref() == caller;
        self.0.iter().any(|(_, whose)| !theirs(whose))
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    fn id(n: i64) -> RequestId {
        NumberOrString::Number(n)
    }

    #[test]
    fn an_answer_streams_tie_wins_and_ties_are_bounded() {
        let mut ties = Ties::default();
        ties.record(id(1), Tie::Call(id(7)));
        ties.record(id(1), Tie::Untied("later"));
        assert_eq!(ties.take(&id(1)), Some(Tie::Call(id(7))));
        assert_eq!(ties.take(&id(1)), None, "taken once");
        for n in 0..MAX_TIES as i64 + 5 {
            ties.record(id(n), Tie::Slot(1));
        }
        assert_eq!(ties.take(&id(MAX_TIES as i64 + 1)), None, "past the bound");
        assert_eq!(ties.take(&id(0)), Some(Tie::Slot(1)));
    }

    #[test]
    fn a_request_given_up_on_counts_for_other_callers_and_its_grace_only() {
        let mut abandoned = Abandoned::default();
        let (alice, bob) = (CallerKey::anonymous(), caller("bob"));
        let start = Instant::now();
        assert!(!abandoned.others(start, Some(&bob)));
        abandoned.push(start, Some(alice.clone()));
        assert!(abandoned.others(start + ABANDONED_GRACE / 2, Some(&bob)));
        assert!(!abandoned.others(start, Some(&alice)), "her own");
        assert!(abandoned.others(start, None), "no caller: anyone's counts");
        assert!(!abandoned.others(start + ABANDONED_GRACE, Some(&bob)));
        for _ in 0..MAX_ABANDONED + 3 {
            abandoned.push(start, None);
        }
        assert!(abandoned.0.len() <= MAX_ABANDONED);
        assert!(abandoned.others(start, Some(&alice)));
    }

    fn caller(id: &str) -> CallerKey {
        let mut key = CallerKey::anonymous();
        key.id = id.into();
        key
    }
}

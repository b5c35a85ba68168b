//! Every session of a per-caller server still alive, counted from the moment it is decided to
//! open it until its process is gone: open ones, ones being retired that still finish their
//! calls (draining), and ones closing. `max_sessions` bounds them all and
//! `max_sessions_per_caller` one caller's, so a caller that changes a header value on every
//! call cannot start a process per call.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::sync::{Notify, futures::Notified};
use tokio_util::sync::CancellationToken;

use crate::domain::caller::CallerKey;

/// Which limit a new session would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `max_sessions`: the server's sessions in all.
    Total,
    /// `max_sessions_per_caller`: one caller's.
    PerCaller,
}

/// A session that may not be opened yet: which limit, and whether one that counts is on its
/// way out (then waiting for it helps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// The limit reached.
    pub limit: Limit,
    /// A session counted against it is closing.
    pub closing: bool,
}

/// The live sessions of one server.
pub struct Census {
    max_total: usize,
    max_per_caller: usize,
    members: Mutex<Members>,
    /// Signalled whenever a session is gone.
    gone: Notify,
}

#[derive(Default)]
struct Members {
    next: u64,
    all: HashMap<u64, Member>,
}

/// One live session: whose, and once open, what tells whether it is closing.
struct Member {
    caller: CallerKey,
    open: Option<Open>,
}

/// What an open session's state is read from.
struct Open {
    /// Cancelled when it is retired (its caller's values changed, it left the pool).
    retire: CancellationToken,
    /// Its calls in flight.
    calls: Arc<AtomicUsize>,
    /// Cleared when it ended by itself.
    alive: Arc<AtomicBool>,
}

impl Open {
    /// Retired or ended, with no call left: it is being closed, and will be gone soon (one
    /// still draining its calls may take up to a minute).
    fn closing(&self) -> bool {
        let ending = self.retire.is_cancelled() || !self.alive.load(Ordering::Relaxed);
        ending && self.calls.load(Ordering::Relaxed) == 0
    }
}

/// A session's place in the census, given up (and the room signalled) when dropped.
pub struct Ticket {
    census: Arc<Census>,
    id: u64,
}

impl Census {
    /// An empty census with these limits.
    pub fn new(max_total: usize, max_per_caller: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_caller,
            members: Mutex::default(),
            gone: Notify::new(),
        })
    }

    /// The limit's value.
    pub fn max(&self, limit: Limit) -> usize {
        match limit {
            Limit::Total => self.max_total,
            Limit::PerCaller => self.max_per_caller,
        }
    }

    /// How many sessions are alive.
    pub fn live(&self) -> usize {
        self.lock().all.len()
    }

    /// Counts a new session of `caller`, if both limits allow one more.
    pub fn admit(self: &Arc<Self>, caller: &CallerKey) -> Result<Ticket, Full> {
        let mut members = self.lock();
        let theirs = || members.all.values().filter(move |m| m.caller == *caller);
        let closing = |member: &Member| member.open.as_ref().is_some_and(Open::closing);
        if theirs().count() >= self.max_per_caller {
            let closing = theirs().any(closing);
            return Err(Full {
                limit: Limit::PerCaller,
                closing,
            });
        }
        if members.all.len() >= self.max_total {
            let closing = members.all.values().any(closing);
            return Err(Full {
                limit: Limit::Total,
                closing,
            });
        }
        members.next += 1;
        let id = members.next;
        let member = Member {
            caller: caller.clone(),
            open: None,
        };
        members.all.insert(id, member);
        Ok(Ticket {
            census: self.clone(),
            id,
        })
    }

    /// A wait for the next session to be gone; made before looking, so none is missed.
    pub fn gone(&self) -> Pin<Box<Notified<'_>>> {
        let mut gone = Box::pin(self.gone.notified());
        // Registered now, not at the first poll: a session gone in between still wakes it.
        gone.as_mut().enable();
        gone
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Ticket {
    /// The session opened: whether it is closing is read from its `retire` token, its
    /// `calls` in flight and its `alive` flag from now on.
    pub fn opened(
        &self,
        retire: CancellationToken,
        calls: Arc<AtomicUsize>,
        alive: Arc<AtomicBool>,
    ) {
        if let Some(member) = self.census.lock().all.get_mut(&self.id) {
            member.open = Some(Open {
                retire,
                calls,
                alive,
            });
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.census.lock().all.remove(&self.id);
        self.census.gone.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller by id (the kind does not matter to the census: the key is compared whole).
    fn caller(id: &str) -> CallerKey {
        let mut key = CallerKey::anonymous();
        key.id = id.into();
        key
    }

    /// What an open session's state is read from, for a test to change.
    #[derive(Default)]
    struct Session {
        retire: CancellationToken,
        calls: Arc<AtomicUsize>,
        alive: Arc<AtomicBool>,
    }

    fn open(ticket: &Ticket, busy: bool) -> Session {
        let session = Session::default();
        session.alive.store(true, Ordering::Relaxed);
        session.calls.store(usize::from(busy), Ordering::Relaxed);
        ticket.opened(
            session.retire.clone(),
            session.calls.clone(),
            session.alive.clone(),
        );
        session
    }

    #[test]
    fn a_callers_draining_sessions_count_until_they_are_gone() {
        let census = Census::new(10, 2);
        let mallory = caller("mallory");
        let first = census.admit(&mallory).unwrap();
        let draining = open(&first, true);
        draining.retire.cancel();
        let second = census.admit(&mallory).unwrap();
        let _current = open(&second, true);
        // A third value: both of mallory's are busy, none closing.
        let full = Full {
            limit: Limit::PerCaller,
            closing: false,
        };
        assert_eq!(census.admit(&mallory).err(), Some(full));
        // Another caller is not held by mallory's limit.
        let other = census.admit(&caller("alice")).unwrap();
        assert_eq!(census.live(), 3);
        // The draining one's call ends: it is closing, then gone.
        draining.calls.store(0, Ordering::Relaxed);
        let closing = census.admit(&mallory).err().unwrap();
        assert!(closing.closing, "{closing:?}");
        drop(first);
        assert!(census.admit(&mallory).is_ok());
        drop(other);
    }

    #[test]
    fn every_live_session_counts_in_the_total() {
        let census = Census::new(2, 5);
        let a = census.admit(&caller("a")).unwrap();
        let a_old = open(&a, true);
        a_old.retire.cancel();
        let _b = census.admit(&caller("a")).unwrap();
        let full = census.admit(&caller("c")).err().unwrap();
        assert_eq!(
            full,
            Full {
                limit: Limit::Total,
                closing: false
            }
        );
        a_old.alive.store(false, Ordering::Relaxed);
        a_old.calls.store(0, Ordering::Relaxed);
        assert!(
            census.admit(&caller("c")).err().unwrap().closing,
            "ended: closing"
        );
    }

    #[tokio::test]
    async fn a_session_gone_wakes_a_wait_made_before() {
        let census = Census::new(1, 1);
        let ticket = census.admit(&caller("a")).unwrap();
        let gone = census.gone();
        drop(ticket);
        tokio::time::timeout(std::time::Duration::from_secs(1), gone)
            .await
            .expect("woken");
        assert_eq!(census.live(), 0);
    }
}

//! How many client sessions the face keeps, and whose each is. A caller may keep
//! `mcp_sessions_per_caller` sessions open and the face `mcp_max_sessions` in all; a new
//! session beyond either closes the caller's (or, for the total, anyone's) oldest idle one to
//! make room, and when none is idle it is refused: 429 for the caller's cap, 503 for the
//! face's, each with a JSON-RPC error naming the setting. With auth off every client is the one
//! anonymous caller, so only the total applies.
//!
//! Each session's caller is recorded as rmcp creates it (the request that opens it reserved
//! its place first, see [`session_access`](super::session_access)); a request with another
//! caller's `Mcp-Session-Id` is answered 404, as for a session that does not exist.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use super::directory::Directory;
use crate::domain::caller::{CallerKey, CallerKind};
use axum::{extract::Request, middleware::Next, response::Response};
use rmcp::transport::streamable_http_server::SessionId;

tokio::task_local! {
    /// The place reserved for the session the request being served may open: rmcp creates
    /// sessions without telling whose they are, so the request carries it to the creation.
    static OPENING: Reservation;
}

/// How many sessions the face keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Per caller (`mcp_sessions_per_caller`), anonymous callers aside.
    pub per_caller: usize,
    /// In all (`mcp_max_sessions`).
    pub total: usize,
}

/// Which cap refuses a new session, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The caller's: `mcp_sessions_per_caller`.
    Caller(usize),
    /// The face's: `mcp_max_sessions`.
    Face(usize),
}

/// The caller of every session, and how many sessions each caller has (those being opened
/// included).
pub struct Owners {
    caps: Caps,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    owner: HashMap<SessionId, CallerKey>,
    per_caller: HashMap<CallerKey, usize>,
    total: usize,
}

impl Counts {
    fn of(&self, caller: &CallerKey) -> usize {
        self.per_caller.get(caller).copied().unwrap_or(0)
    }

    fn add(&mut self, caller: &CallerKey) {
        *self.per_caller.entry(caller.clone()).or_default() += 1;
        self.total += 1;
    }

    fn remove(&mut self, caller: &CallerKey) {
        if let Some(count) = self.per_caller.get_mut(caller) {
            *count -= 1;
            if *count == 0 {
                self.per_caller.remove(caller);
            }
        }
        self.total = self.total.saturating_sub(1);
    }
}

impl Owners {
    /// No sessions yet, kept within `caps`.
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self {
            caps,
            counts: Mutex::default(),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves a place for a new session of `caller`: the sessions to close to make room
    /// (already not counted), or the cap that refuses it.
    pub fn reserve(
        self: &Arc<Self>,
        caller: &CallerKey,
        directory: &Directory,
    ) -> Result<(Reservation, Vec<SessionId>), Full> {
        let mut counts = self.counts();
        let victims = self.victims(&counts, caller, directory)?;
        for victim in &victims {
            forget(&mut counts, victim);
        }
        counts.add(caller);
        let reservation = Reservation {
            owners: self.clone(),
            caller: caller.clone(),
            claimed: AtomicBool::new(false),
        };
        Ok((reservation, victims))
    }

    /// The sessions to close so that one more of `caller` fits: its oldest idle one when it
    /// is at its cap, then anyone's oldest idle ones while the face is at its cap.
    fn victims(
        &self,
        counts: &Counts,
        caller: &CallerKey,
        directory: &Directory,
    ) -> Result<Vec<SessionId>, Full> {
        let mut victims = Vec::new();
        if caller.kind != CallerKind::Anonymous {
            let mut own = counts.of(caller);
            while own >= self.caps.per_caller {
                let victim = directory
                    .oldest_idle(|id| counts.owner.get(id) == Some(caller) && !victims.contains(id))
                    .ok_or(Full::Caller(self.caps.per_caller))?;
                victims.push(victim);
                own -= 1;
            }
        }
        let mut total = counts.total.saturating_sub(victims.len());
        while total >= self.caps.total {
            let victim = directory
                .oldest_idle(|id| counts.owner.contains_key(id) && !victims.contains(id))
                .ok_or(Full::Face(self.caps.total))?;
            victims.push(victim);
            total -= 1;
        }
        Ok(victims)
    }

    /// Session `id` was just created: it is the reserved one of the request being served;
    /// one created outside such a request (none is) is counted as anonymous.
    pub fn created(&self, id: &SessionId) {
        let claimed = OPENING.try_with(|reservation| reservation.claim(id));
        if !matches!(claimed, Ok(true)) {
            let anonymous = CallerKey::anonymous();
            let mut counts = self.counts();
            counts.add(&anonymous);
            counts.owner.insert(id.clone(), anonymous);
        }
    }

    /// Session `id` is gone.
    pub fn closed(&self, id: &SessionId) {
        forget(&mut self.counts(), id);
    }

    /// Whether session `id` is known to be another caller's than `caller`.
    pub fn of_another(&self, id: &str, caller: &CallerKey) -> bool {
        self.counts()
            .owner
            .get(id)
            .is_some_and(|owner| owner != caller)
    }

    /// The caller of session `id`, if the face knows it.
    #[cfg(test)]
    fn owner(&self, id: &SessionId) -> Option<CallerKey> {
        self.counts().owner.get(id).cloned()
    }
}

fn forget(counts: &mut Counts, id: &SessionId) {
    if let Some(caller) = counts.owner.remove(id) {
        counts.remove(&caller);
    }
}

/// A place held for one new session of a caller, from the request that opens it until rmcp
/// creates the session (then the session holds it), or given back when it is dropped first.
pub struct Reservation {
    owners: Arc<Owners>,
    caller: CallerKey,
    claimed: AtomicBool,
}

impl Reservation {
    /// The session `id` takes this place; false if another already took it.
    fn claim(&self, id: &SessionId) -> bool {
        if self.claimed.swap(true, Ordering::Relaxed) {
            return false;
        }
        let mut counts = self.owners.counts();
        counts.owner.insert(id.clone(), self.caller.clone());
        true
    }

    /// Serves `request` with this place reserved for the session it may open.
    pub async fn serve(self, next: Next, request: Request) -> Response {
        OPENING.scope(self, next.run(request)).await
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.claimed.load(Ordering::Relaxed) {
            self.owners.counts().remove(&self.caller);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(id: &str) -> CallerKey {
        CallerKey::token(id)
    }

    /// Opens a session of `who` as a request would: reserved, then created.
    async fn open(owners: &Arc<Owners>, directory: &Directory, who: &CallerKey, id: &str) {
        let (reservation, victims) = owners.reserve(who, directory).expect("room");
        for victim in victims {
            directory.close(&victim);
            owners.closed(&victim);
        }
        let id = SessionId::from(id);
        OPENING
            .scope(reservation, async {
                directory.open(&id);
                owners.created(&id);
            })
            .await;
    }

    #[tokio::test]
    async fn a_caller_at_its_cap_loses_its_oldest_idle_session_and_no_one_elses() {
        let owners = Owners::new(Caps {
            per_caller: 2,
            total: 10,
        });
        let directory = Directory::default();
        let (alice, bob) = (caller("alice"), caller("bob"));
        open(&owners, &directory, &bob, "b1").await;
        open(&owners, &directory, &alice, "a1").await;
        open(&owners, &directory, &alice, "a2").await;
        directory.stream(&SessionId::from("a1"), true);
        // a1 has a stream open: a2 is the one idle.
        let (place, victims) = owners.reserve(&alice, &directory).unwrap();
        assert_eq!(victims, [SessionId::from("a2")]);
        assert_eq!(owners.owner(&SessionId::from("b1")), Some(bob.clone()));
        // Alice holds a1 and the place: nothing of hers is idle now.
        assert_eq!(
            owners.reserve(&alice, &directory).err(),
            Some(Full::Caller(2))
        );
        drop(place);
        assert!(
            owners.reserve(&alice, &directory).is_ok(),
            "the place came back"
        );
    }

    #[tokio::test]
    async fn the_face_at_its_cap_closes_anyones_oldest_idle_session_or_refuses() {
        let owners = Owners::new(Caps {
            per_caller: 5,
            total: 2,
        });
        let directory = Directory::default();
        let (alice, bob) = (caller("alice"), caller("bob"));
        open(&owners, &directory, &bob, "b1").await;
        open(&owners, &directory, &alice, "a1").await;
        directory.stream(&SessionId::from("a1"), true);
        let (place, victims) = owners.reserve(&alice, &directory).unwrap();
        assert_eq!(victims, [SessionId::from("b1")]);
        assert_eq!(owners.owner(&SessionId::from("b1")), None);
        directory.close(&SessionId::from("b1"));
        assert_eq!(owners.reserve(&bob, &directory).err(), Some(Full::Face(2)));
        drop(place);
        let anonymous = CallerKey::anonymous();
        assert!(owners.reserve(&anonymous, &directory).is_ok());
    }

    #[tokio::test]
    async fn anonymous_callers_share_only_the_total() {
        let owners = Owners::new(Caps {
            per_caller: 1,
            total: 3,
        });
        let directory = Directory::default();
        let anonymous = CallerKey::anonymous();
        for id in ["x", "y", "z"] {
            open(&owners, &directory, &anonymous, id).await;
            directory.stream(&SessionId::from(id), true);
        }
        assert_eq!(
            owners.reserve(&anonymous, &directory).err(),
            Some(Full::Face(3))
        );
        owners.closed(&SessionId::from("x"));
        assert!(owners.reserve(&anonymous, &directory).is_ok());
    }
}

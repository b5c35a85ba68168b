//! The per-caller sessions of one server (`isolation: per-caller`): each caller's calls run in
//! a session of its own — its own process, or its own HTTP session with its own headers —
//! opened on first use, closed after `idle_timeout` unused. Every session still alive counts
//! (draining and closing ones too): at most `max_sessions` in all and
//! `max_sessions_per_caller` for one caller. At a limit, room is made from idle sessions (the
//! least recently used one is closed, and the new one waits for it to be gone); when every
//! session is busy the call gets RESOURCE_EXHAUSTED naming the limit. Each caller has call
//! slots of its own (`max_concurrent_calls` and its queue). A session that dies is dropped and
//! the caller's next call opens a fresh one; opening one never holds up another caller.

pub(crate) mod balance;
mod census;
mod give_back;
pub(crate) mod slots;
mod watch;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::{balance::Replica, slots::Slots};
use self::{
    census::{Census, Limit, Ticket},
    watch::{Watch, reap_idle},
};
use super::{
    oauth::{
        Bearer, ServerAuth,
        exchange::{Exchanger, bearer},
    },
    session::connect::{self, Era, Purpose, Resolved, launch_digest},
    transport::http,
};
use crate::domain::{
    caller::{CallerKey, CallerValues},
    config::{PerCaller, ServerSpec},
    outcome::StartFailure,
    request_error::RequestError,
};

/// How long closing the pool waits for its sessions to close.
const CLOSE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a new session waits for an idle one closed to make room for it.
const ROOM_WAIT: Duration = Duration::from_secs(5);

/// Every caller's session of one server.
pub struct Pool {
    spec: ServerSpec,
    limits: PerCaller,
    exchange: Option<Arc<Exchanger>>,
    /// The server's OAuth, if it is under OAuth.
    auth: Option<ServerAuth>,
    slots: Mutex<HashMap<CallerKey, Arc<Slot>>>,
    /// Every session still alive, whoever's.
    census: Arc<Census>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    /// What the server's sessions speak, as the last start found.
    era: Arc<Era>,
}

/// One caller's place in the pool: its session (once opened), how busy it is, and its call
/// slots.
struct Slot {
    /// Calls leased on it; a slot with calls is never closed for room or idleness.
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
    /// Cancelled when the slot leaves the pool: its session closes.
    stop: CancellationToken,
    /// Held while the session is opened: the caller's concurrent first calls wait for one
    /// open, other callers for nothing.
    live: tokio::sync::Mutex<Option<Live>>,
    /// The caller's `max_concurrent_calls` and queue.
    calls: Slots,
}

/// An open session's call side.
struct Live {
    replica: Replica,
    headers: Option<http::SharedHeaders>,
    /// Where its OAuth tokens come from (a cross-app one takes each call's caller token).
    bearer: Option<Bearer>,
    digest: Option<u64>,
    /// Cleared when the session ends by itself.
    alive: Arc<AtomicBool>,
    /// Cancelled to close this session (the slot left, or its values changed).
    retire: CancellationToken,
}

/// A call's hold on its caller's slot: counted in flight, with the call slot it runs in,
/// while it lives.
pub struct Lease {
    slot: Arc<Slot>,
    _call: Option<OwnedSemaphorePermit>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self
            .slot
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.slot.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} sessions)", self.sessions())
    }
}

impl Pool {
    /// An empty pool for `spec`, closing idle sessions until [`Pool::close`].
    pub fn start(
        spec: &ServerSpec,
        limits: PerCaller,
        exchange: Option<Arc<Exchanger>>,
        auth: Option<ServerAuth>,
        era: Arc<Era>,
    ) -> Arc<Self> {
        let pool = Arc::new(Self {
            spec: spec.clone(),
            census: Census::new(limits.max_sessions, limits.max_sessions_per_caller),
            limits,
            exchange,
            auth,
            slots: Mutex::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            era,
        });
        pool.tasks
            .spawn(reap_idle(Arc::downgrade(&pool), pool.shutdown.clone()));
        pool
    }

    /// How many sessions are alive (open, draining their calls, or closing).
    pub fn sessions(&self) -> usize {
        self.census.live()
    }

    /// The session `caller`'s call goes to, opened if it has none (or its values changed),
    /// once one of the caller's call slots is free, and the lease that counts the call on it.
    pub async fn replica_for(
        &self,
        caller: &dyn CallerValues,
    ) -> Result<(Lease, Replica), RequestError> {
        let server = &self.spec.name;
        let mut resolved = Resolved::of(&self.spec, caller).map_err(|missing| {
            RequestError::MissingCallerValue {
                server: server.clone(),
                missing,
            }
        })?;
        if let Some(exchange) = &self.exchange {
            resolved.set_authorization(bearer(&exchange.token(caller).await?));
        }
        let mut lease = self.lease(caller.key())?;
        lease._call = Some(lease.slot.calls.take(server).await?);
        let replica = self.session(&lease.slot, caller, &resolved).await?;
        Ok((lease, replica))
    }

    /// Counts a call on `key`'s slot, making one (and room for it) if needed.
    fn lease(&self, key: &CallerKey) -> Result<Lease, RequestError> {
        let mut slots = self.lock();
        let slot = match slots.get(key) {
            Some(slot) => {
                slot.in_flight.fetch_add(1, Ordering::Relaxed);
                slot.clone()
            }
            None => {
                if slots.len() >= self.limits.max_sessions
                    && self.evict_idle(&mut slots, key).is_none()
                {
                    return Err(self.exhausted(Limit::Total));
                }
                let slot = Arc::new(Slot {
                    in_flight: AtomicUsize::new(1),
                    last_used: Mutex::new(Instant::now()),
                    stop: self.shutdown.child_token(),
                    live: tokio::sync::Mutex::new(None),
                    calls: Slots::new(self.spec.concurrency),
                });
                slots.insert(key.clone(), slot.clone());
                slot
            }
        };
        Ok(Lease { slot, _call: None })
    }

    /// The slot's session for `resolved`: the open one if it is alive and started with these
    /// values (an HTTP session takes new header values as they are), else a new one.
    async fn session(
        &self,
        slot: &Slot,
        caller: &dyn CallerValues,
        resolved: &Resolved,
    ) -> Result<Replica, RequestError> {
        let mut live = slot.live.lock().await;
        if let Some(open) = live.as_ref()
            && open.alive.load(Ordering::Relaxed)
            && !open.replica.is_closed()
            && open.serves(resolved)
        {
            if let (Some(shared), Resolved::Http(endpoint)) = (&open.headers, resolved) {
                let headers = http::headers(&endpoint.headers);
                shared.set(headers.map_err(|e| self.failed(e.to_string()))?);
            }
            if let Some(Bearer::Caller(bearer)) = &open.bearer {
                bearer.update(caller);
            }
            return Ok(open.replica.clone());
        }
        let ticket = self.admit(caller.key(), live.as_ref()).await?;
        if let Some(old) = live.take() {
            // Dead, or started with other values: closed once its calls are done.
            old.retire.cancel();
        }
        let open = self.open(slot, caller, resolved, ticket).await?;
        let replica = open.replica.clone();
        *live = Some(open);
        Ok(replica)
    }

    /// Opens a session for `caller` with `resolved`'s values in its census place `ticket`,
    /// followed until it ends or the slot retires it.
    async fn open(
        &self,
        slot: &Slot,
        caller: &dyn CallerValues,
        resolved: &Resolved,
        ticket: Ticket,
    ) -> Result<Live, RequestError> {
        let key = caller.key();
        let bearer = self.auth.as_ref().map(|auth| auth.bearer(caller));
        let started = connect::start(
            &self.spec,
            resolved,
            Purpose::OneCaller,
            bearer.clone(),
            &self.era,
        );
        let (session, _) = started.await.map_err(|e| match e.failure {
            StartFailure::Authorization(failure) => RequestError::Authorization {
                server: self.spec.name.clone(),
                failure,
            },
            _ => self.failed(e.to_string()),
        })?;
        tracing::info!(server = %self.spec.name, caller = %key, "per-caller session opened");
        let open = Live {
            replica: session.replica(),
            headers: session.headers.clone(),
            bearer,
            digest: session.launch_digest,
            alive: Arc::new(AtomicBool::new(true)),
            retire: slot.stop.child_token(),
        };
        ticket.opened(
            open.retire.clone(),
            open.replica.in_flight(),
            open.alive.clone(),
        );
        let watch = Watch {
            server: self.spec.name.to_string(),
            caller: key.clone(),
            replica: open.replica.clone(),
            alive: open.alive.clone(),
            retire: open.retire.clone(),
            ticket,
        };
        self.tasks.spawn(watch.run(session));
        Ok(open)
    }

    /// The caller's session could not be started, for `reason`.
    fn failed(&self, reason: String) -> RequestError {
        RequestError::CallerSessionFailed {
            server: self.spec.name.clone(),
            reason,
        }
    }

    /// A place in the census for a new session of `key`, whose current one (if any) is
    /// `current`. At a limit, room is made from an idle session (the caller's current one, or
    /// for `max_sessions` the least recently used caller's) and waited for; refused when
    /// every session that counts is busy, or no room came within `ROOM_WAIT`.
    async fn admit(&self, key: &CallerKey, current: Option<&Live>) -> Result<Ticket, RequestError> {
        let deadline = tokio::time::Instant::now() + ROOM_WAIT;
        loop {
            let gone = self.census.gone();
            let full = match self.census.admit(key) {
                Ok(ticket) => return Ok(ticket),
                Err(full) => full,
            };
            let room_coming = full.closing
                || current.is_some_and(Live::retire_if_idle)
                || (full.limit == Limit::Total && self.evict_a_session(key));
            if !room_coming || tokio::time::timeout_at(deadline, gone).await.is_err() {
                return Err(self.exhausted(full.limit));
            }
        }
    }

    /// Closes idle slots of callers other than `except`, least recently used first, until one
    /// with a session alive is closed (whose end makes room); whether one was.
    fn evict_a_session(&self, except: &CallerKey) -> bool {
        let mut slots = self.lock();
        while let Some(slot) = self.evict_idle(&mut slots, except) {
            if slot.has_session() {
                return true;
            }
        }
        false
    }

    /// Closes the least recently used idle slot of a caller other than `except`, if any.
    fn evict_idle(
        &self,
        slots: &mut HashMap<CallerKey, Arc<Slot>>,
        except: &CallerKey,
    ) -> Option<Arc<Slot>> {
        let victim = slots
            .iter()
            .filter(|(key, slot)| *key != except && slot.in_flight.load(Ordering::Relaxed) == 0)
            .min_by_key(|(_, slot)| {
                *slot
                    .last_used
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            })
            .map(|(key, _)| key.clone())?;
        tracing::debug!(server = %self.spec.name, caller = %victim,
            "closing the least recently used session to make room");
        let slot = slots.remove(&victim)?;
        slot.stop.cancel();
        Some(slot)
    }

    /// The limit `limit` reached, as the caller is told.
    fn exhausted(&self, limit: Limit) -> RequestError {
        let server = self.spec.name.clone();
        let max = self.census.max(limit);
        match limit {
            Limit::Total => RequestError::SessionsExhausted { server, max },
            Limit::PerCaller => RequestError::CallerSessionsExhausted { server, max },
        }
    }

    /// Closes every session and waits for them (at most `CLOSE_DEADLINE`).
    pub async fn close(&self) {
        self.shutdown.cancel();
        self.lock().clear();
        self.tasks.close();
        if tokio::time::timeout(CLOSE_DEADLINE, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(server = %self.spec.name, "per-caller sessions still closing");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CallerKey, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    /// Whether a session of its is alive (one being opened counts: its opener holds it).
    fn has_session(&self) -> bool {
        self.live.try_lock().map_or(true, |live| {
            live.as_ref()
                .is_some_and(|open| open.alive.load(Ordering::Relaxed))
        })
    }
}

impl Live {
    /// Whether the session was started with `resolved`'s process (an HTTP session serves any
    /// headers: they go with each request).
    fn serves(&self, resolved: &Resolved) -> bool {
        match resolved {
            Resolved::Stdio(launch) => self.digest == Some(launch_digest(launch)),
            Resolved::Http(_) => true,
        }
    }

    /// Retires the session if no call is in flight on it: then it closes at once, making room.
    fn retire_if_idle(&self) -> bool {
        let idle = self.replica.as_ref().load(Ordering::Relaxed) == 0;
        if idle {
            self.retire.cancel();
        }
        idle
    }
}

//! The per-caller sessions of one server (`isolation: per-caller`): each caller's calls run in
//! a session of its own — its own process, or its own HTTP session with its own headers —
//! opened on first use, closed after `idle_timeout` unused, at most `max_sessions` at once (the
//! least recently used idle one is closed to make room; all busy → RESOURCE_EXHAUSTED). A
//! session that dies is dropped and the caller's next call opens a fresh one; opening one never
//! holds up another caller.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    balance::Replica,
    connect::{self, Purpose, Resolved, launch_digest},
    exchange::{Exchanger, bearer},
    http,
    oauth::{Bearer, ServerAuth},
    session::Session,
};
use crate::domain::{
    caller::{CallerKey, CallerValues},
    config::{PerCaller, ServerSpec},
    outcome::StartFailure,
    request_error::RequestError,
};

/// How long closing the pool waits for its sessions to close.
const CLOSE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a session being replaced (its caller's values changed) waits for its calls.
const RETIRE_WAIT: Duration = Duration::from_secs(60);
/// How often the calls of a retired session are checked for being done.
const RETIRE_POLL: Duration = Duration::from_millis(100);

/// Every caller's session of one server.
pub struct Pool {
    spec: ServerSpec,
    limits: PerCaller,
    exchange: Option<Arc<Exchanger>>,
    /// The server's OAuth, if it is under OAuth.
    auth: Option<ServerAuth>,
    slots: Mutex<HashMap<CallerKey, Arc<Slot>>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// One caller's place in the pool: its session (once opened) and how busy it is.
struct Slot {
    /// Calls leased on it; a slot with calls is never closed for room or idleness.
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
    /// Cancelled when the slot leaves the pool: its session closes.
    stop: CancellationToken,
    /// Held while the session is opened: the caller's concurrent first calls wait for one
    /// open, other callers for nothing.
    live: tokio::sync::Mutex<Option<Live>>,
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

/// A call's hold on its caller's slot: counted in flight while it lives.
pub struct Lease(Arc<Slot>);

impl Drop for Lease {
    fn drop(&mut self) {
        *self
            .0
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
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
    ) -> Arc<Self> {
        let pool = Arc::new(Self {
            spec: spec.clone(),
            limits,
            exchange,
            auth,
            slots: Mutex::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        pool.tasks
            .spawn(reap_idle(Arc::downgrade(&pool), pool.shutdown.clone()));
        pool
    }

    /// How many callers have a session (open or opening).
    pub fn sessions(&self) -> usize {
        self.lock().len()
    }

    /// The session `caller`'s call goes to, opened if it has none (or its values changed), and
    /// the lease that counts the call on it.
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
        let lease = self.lease(caller.key())?;
        let replica = self.session(&lease.0, caller, &resolved).await?;
        Ok((lease, replica))
    }

    /// Counts a call on `key`'s slot, making one (and room for it) if needed.
    fn lease(&self, key: &CallerKey) -> Result<Lease, RequestError> {
        let mut slots = self.lock();
        if let Some(slot) = slots.get(key) {
            slot.in_flight.fetch_add(1, Ordering::Relaxed);
            return Ok(Lease(slot.clone()));
        }
        if slots.len() >= self.limits.max_sessions {
            let idle = slots
                .iter()
                .filter(|(_, slot)| slot.in_flight.load(Ordering::Relaxed) == 0)
                .min_by_key(|(_, slot)| {
                    *slot
                        .last_used
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                })
                .map(|(key, _)| key.clone());
            let Some(victim) = idle else {
                return Err(RequestError::SessionsExhausted {
                    server: self.spec.name.clone(),
                    max: self.limits.max_sessions,
                });
            };
            tracing::debug!(server = %self.spec.name, caller = %victim,
                "closing the least recently used session to make room");
            if let Some(slot) = slots.remove(&victim) {
                slot.stop.cancel();
            }
        }
        let slot = Arc::new(Slot {
            in_flight: AtomicUsize::new(1),
            last_used: Mutex::new(Instant::now()),
            stop: self.shutdown.child_token(),
            live: tokio::sync::Mutex::new(None),
        });
        slots.insert(key.clone(), slot.clone());
        Ok(Lease(slot))
    }

    /// The slot's session for `resolved`: the open one if it is alive and started with these
    /// values (an HTTP session takes new header values as they are), else a new one.
    async fn session(
        &self,
        slot: &Slot,
        caller: &dyn CallerValues,
        resolved: &Resolved,
    ) -> Result<Replica, RequestError> {
        let key = caller.key();
        let failed = |reason: String| RequestError::CallerSessionFailed {
            server: self.spec.name.clone(),
            reason,
        };
        let mut live = slot.live.lock().await;
        if let Some(open) = live.as_ref() {
            let current = open.alive.load(Ordering::Relaxed) && open.serves(resolved);
            if current {
                if let (Some(shared), Resolved::Http(endpoint)) = (&open.headers, resolved) {
                    shared
                        .set(http::headers(&endpoint.headers).map_err(|e| failed(e.to_string()))?);
                }
                if let Some(Bearer::Caller(bearer)) = &open.bearer {
                    bearer.update(caller);
                }
                return Ok(open.replica.clone());
            }
            // Dead, or started with other values: closed once its calls are done.
            open.retire.cancel();
        }
        let bearer = self.auth.as_ref().map(|auth| auth.bearer(caller));
        let (session, _) = connect::start(&self.spec, resolved, Purpose::OneCaller, bearer.clone())
            .await
            .map_err(|e| match e.failure {
                StartFailure::Authorization(failure) => RequestError::Authorization {
                    server: self.spec.name.clone(),
                    failure,
                },
                _ => failed(e.to_string()),
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
        let watch = Watch {
            server: self.spec.name.to_string(),
            caller: key.clone(),
            replica: open.replica.clone(),
            alive: open.alive.clone(),
            retire: open.retire.clone(),
        };
        self.tasks.spawn(watch.run(session));
        let replica = open.replica.clone();
        *live = Some(open);
        Ok(replica)
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

impl Live {
    /// Whether the session was started with `resolved`'s process (an HTTP session serves any
    /// headers: they go with each request).
    fn serves(&self, resolved: &Resolved) -> bool {
        match resolved {
            Resolved::Stdio(launch) => self.digest == Some(launch_digest(launch)),
            Resolved::Http(_) => true,
        }
    }
}

/// Follows one per-caller session until it ends or is retired, then closes it.
struct Watch {
    server: String,
    caller: CallerKey,
    replica: Replica,
    alive: Arc<AtomicBool>,
    retire: CancellationToken,
}

impl Watch {
    async fn run(self, mut session: Session) {
        let suspect = session.suspect.clone();
        let pings = session.headers.is_some();
        let lost = loop {
            tokio::select! {
                biased;
                _ = self.retire.cancelled() => break None,
                loss = session.ended() => break Some(loss),
                _ = suspect.notified(), if pings => {
                    if let Err(end) = session.ping(Duration::from_secs(10)).await {
                        break Some(crate::domain::outcome::SessionLoss { end, stderr: None });
                    }
                }
            }
        };
        self.alive.store(false, Ordering::Relaxed);
        match lost {
            Some(loss) => tracing::warn!(server = %self.server, caller = %self.caller,
                "per-caller session lost: {loss}"),
            None => self.calls_done().await,
        }
        session.close().await;
        tracing::debug!(server = %self.server, caller = %self.caller, "per-caller session closed");
    }

    /// Waits until the session has no call in flight (at most `RETIRE_WAIT`).
    async fn calls_done(&self) {
        let busy = || self.replica.as_ref().load(Ordering::Relaxed) > 0;
        let deadline = Instant::now() + RETIRE_WAIT;
        while busy() && Instant::now() < deadline {
            tokio::time::sleep(RETIRE_POLL).await;
        }
    }
}

/// Closes sessions unused for `idle_timeout`, checking a few times per timeout, until the pool
/// closes (or is gone).
async fn reap_idle(pool: std::sync::Weak<Pool>, shutdown: CancellationToken) {
    let every = match pool.upgrade() {
        Some(pool) => (pool.limits.idle_timeout / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(30)),
        None => return,
    };
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let Some(pool) = pool.upgrade() else { return };
        let idle_for = pool.limits.idle_timeout;
        pool.lock().retain(|caller, slot| {
            let idle = slot.in_flight.load(Ordering::Relaxed) == 0
                && slot
                    .last_used
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .elapsed()
                    >= idle_for;
            if idle {
                tracing::debug!(server = %pool.spec.name, %caller, "closing an idle session");
                slot.stop.cancel();
            }
            !idle
        });
    }
}

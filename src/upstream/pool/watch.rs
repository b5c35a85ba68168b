//! What follows a per-caller server's sessions in the background: each open session until it
//! ends or is retired (then it is closed, and its place in the census given up), and the
//! closing of sessions left unused for `idle_timeout`.

use std::{
    sync::{
        Arc, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use tokio_util::sync::CancellationToken;

use super::{Pool, census::Ticket};
use crate::{
    domain::{caller::CallerKey, outcome::SessionLoss},
    upstream::{pool::balance::Replica, session::running::Session},
};

/// How long a session being replaced (its caller's values changed) waits for its calls.
const RETIRE_WAIT: Duration = Duration::from_secs(60);
/// How often the calls of a retired session are checked for being done.
const RETIRE_POLL: Duration = Duration::from_millis(100);

/// Follows one per-caller session until it ends or is retired, then closes it.
pub(super) struct Watch {
    pub server: String,
    pub caller: CallerKey,
    pub replica: Replica,
    pub alive: Arc<AtomicBool>,
    pub retire: CancellationToken,
    /// Its place in the census, given up once it is closed.
    pub ticket: Ticket,
}

impl Watch {
    pub async fn run(self, mut session: Session) {
        let suspect = session.suspect.clone();
        let pings = session.headers.is_some();
        let lost = loop {
            tokio::select! {
                biased;
                _ = self.retire.cancelled() => break None,
                loss = session.ended() => break Some(loss),
                _ = suspect.notified(), if pings => {
                    // Boxed, as the close below: the task is held by every open session, and
                    // these two rare steps would size it.
                    if let Err(end) = Box::pin(session.ping(Duration::from_secs(10))).await {
                        break Some(SessionLoss { end, stderr: None });
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
        Box::pin(session.close()).await;
        super::give_back::session_closed();
        tracing::debug!(server = %self.server, caller = %self.caller, "per-caller session closed");
        drop(self.ticket);
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
pub(super) async fn reap_idle(pool: std::sync::Weak<Pool>, shutdown: CancellationToken) {
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

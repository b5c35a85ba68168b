//! A server's call slots: how many of its calls run at once (`max_concurrent_calls`), how many
//! may wait for a slot (`max_queued_calls`) and for how long (`queue_timeout`). A per-caller
//! server has a set for each caller, so that one caller's calls never hold another's.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::domain::{
    config::Concurrency,
    names::ServerName,
    request_error::{Overload, RequestError},
};

/// Calls running on a server (or one caller's session of it) and calls waiting for a slot.
#[derive(Debug)]
pub struct Slots {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    limits: Concurrency,
}

impl Slots {
    /// Slots as the server's `concurrency` says (its counts are bounded by the config checks).
    pub fn new(limits: Concurrency) -> Self {
        Self {
            running: Arc::new(Semaphore::new(limits.max_calls)),
            waiting: AtomicUsize::new(0),
            limits,
        }
    }

    /// A slot at once, or after waiting in the queue; refused when the queue is full or the
    /// wait too long.
    pub(in crate::upstream) async fn take(
        &self,
        server: &ServerName,
    ) -> Result<OwnedSemaphorePermit, RequestError> {
        if let Ok(permit) = self.running.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let limits = self.limits;
        let overloaded = |overload| RequestError::Overloaded {
            server: server.clone(),
            overload,
        };
        let _waiting = Waiting::join(&self.waiting);
        let waiting = self.waiting.load(Ordering::Relaxed);
        if waiting > limits.max_queued {
            return Err(overloaded(Overload::QueueFull {
                running: limits.max_calls,
                waiting: limits.max_queued,
            }));
        }
        tracing::debug!(%server, waiting, "a call waits for a slot");
        let acquire = self.running.clone().acquire_owned();
        match tokio::time::timeout(limits.queue_timeout, acquire).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => unreachable!("the semaphore is never closed"),
            Err(_) => Err(overloaded(Overload::NoSlot {
                waited: limits.queue_timeout,
                running: limits.max_calls,
            })),
        }
    }
}

/// Counts a call in the queue while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn join(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

//! What the audit log's handles, the calls that write and the writer's thread share: the
//! queue, the writer, and the log's state (failing, retrying, slow), with the counters and
//! warnings that go with them.

use std::{
    sync::{
        Arc, Condvar, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use super::queue::{Group, Kind, Queue, Queued, Receipt};

/// The least time between two warnings about dropped lines.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// How often a log that cannot be written is tried again.
pub const RETRY: Duration = Duration::from_millis(100);
/// How long writes stay with the writer's thread after a slow one.
pub const SLOW_FOR: Duration = Duration::from_secs(10);

/// The audit log's state.
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the writer's thread when it waits for lines.
    pub(super) wake: Condvar,
    pub(super) arguments: AtomicBool,
    /// `audit.on_failure: refuse`.
    pub(super) refuse: AtomicBool,
    /// The last write failed (with `refuse`): new calls are refused until one succeeds.
    pub(super) is_failing: AtomicBool,
    /// Lines a failed write kept wait to be written again.
    pub(super) retrying: AtomicBool,
    pub(super) reopen: AtomicBool,
    /// Calls may write on their own thread: the runtime has more than one.
    pub(super) inline: bool,
    /// When (since `epoch`, in ms) the last slow write ended.
    slow_at: AtomicU64,
    epoch: Instant,
    last_warning: Mutex<Option<Instant>>,
}

pub(super) struct State {
    pub(super) queue: Queue,
    /// The writer's thread waits on `wake`: the next line for it wakes it.
    pub(super) idle: bool,
    /// No line is taken any more.
    pub(super) closing: bool,
}

impl Shared {
    /// The state of a new log.
    pub(super) fn new(arguments: bool, refuse: bool) -> Self {
        let workers = tokio::runtime::Handle::try_current()
            .map_or(1, |runtime| runtime.metrics().num_workers());
        Self {
            state: Mutex::new(State {
                queue: Queue::default(),
                idle: false,
                closing: false,
            }),
            wake: Condvar::new(),
            arguments: AtomicBool::new(arguments),
            refuse: AtomicBool::new(refuse),
            is_failing: AtomicBool::new(false),
            retrying: AtomicBool::new(false),
            reopen: AtomicBool::new(false),
            inline: workers > 1,
            slow_at: AtomicU64::new(0),
            epoch: Instant::now(),
            last_warning: Mutex::new(None),
        }
    }

    /// Queues `line`; its receipt, or `None` when it is not taken (then it is counted), and
    /// whether the caller should write the group itself (`may_lead` and it may write on its
    /// own thread); otherwise the writer's thread is woken if it waits.
    pub(super) fn queue(&self, line: Queued, may_lead: bool) -> (Option<Receipt>, bool) {
        let kind = line.kind;
        // A refusal waits for no log that is failing: it is answered at once.
        if kind == Kind::Refused && self.is_failing.load(Ordering::Relaxed) {
            self.dropped(kind, 1);
            return (None, false);
        }
        let lead = may_lead && self.may_write_inline();
        let mut state = lock(&self.state);
        let receipt = if state.closing {
            None
        } else {
            state.queue.push(line)
        };
        if receipt.is_none() {
            drop(state);
            self.dropped(kind, 1);
            return (None, false);
        }
        if !lead {
            self.wake_writer(&mut state);
        }
        (receipt, lead)
    }

    /// After a call wrote what was queued: a line queued while it wrote, or kept to retry,
    /// is the writer's thread's.
    pub(super) fn after_lead(&self) {
        let mut state = lock(&self.state);
        if !state.queue.is_empty() || self.retrying.load(Ordering::Relaxed) {
            self.wake_writer(&mut state);
        }
    }

    /// Whether a call may write on its own thread: the runtime has another, and no write was
    /// slow lately.
    fn may_write_inline(&self) -> bool {
        let slow_at = self.slow_at.load(Ordering::Relaxed);
        self.inline
            && (slow_at == 0 || self.since_epoch_ms().saturating_sub(slow_at) >= slow_for_ms())
    }

    /// A write was slow: writes stay with the writer's thread for a while.
    pub(super) fn slow_write(&self) {
        self.slow_at
            .store(self.since_epoch_ms().max(1), Ordering::Relaxed);
    }

    fn since_epoch_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn wake_writer(&self, state: &mut State) {
        if std::mem::take(&mut state.idle) {
            self.wake.notify_one();
        }
    }

    /// The writer's thread waits for lines (or a reopen, or closing; or, while retrying, at
    /// most [`RETRY`]); whether the log is closing.
    pub(super) fn wait_for_work(&self) -> bool {
        let mut state = lock(&self.state);
        while state.queue.is_empty() && !state.closing && !self.reopen.load(Ordering::Relaxed) {
            state.idle = true;
            if self.retrying.load(Ordering::Relaxed) {
                let (waited, timeout) = self
                    .wake
                    .wait_timeout(state, RETRY)
                    .unwrap_or_else(PoisonError::into_inner);
                state = waited;
                if timeout.timed_out() {
                    break;
                }
            } else {
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        state.idle = false;
        state.closing
    }

    /// Moves the queued lines into `taken`: the group their callers wait on, if any.
    pub(super) fn take(&self, taken: &mut Vec<Queued>) -> Option<Arc<Group>> {
        lock(&self.state).queue.take(taken)
    }

    /// The writer's thread ended: what is queued will not be written; its callers are told so.
    pub(super) fn abandon(&self) {
        let mut taken = Vec::new();
        let group = {
            let mut state = lock(&self.state);
            state.closing = true;
            state.queue.take(&mut taken)
        };
        for kind in [Kind::Admitted, Kind::Refused] {
            self.dropped(kind, taken.iter().filter(|line| line.kind == kind).count());
        }
        if let Some(group) = group {
            group.finish(0);
        }
    }

    /// A write failed (with `refuse`): new calls are refused until one succeeds.
    pub(super) fn failing(&self, error: &std::io::Error) {
        if !self.is_failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %error,
                "the audit log cannot be written: calls are refused (audit.on_failure: refuse) \
                 until it can; trying again"
            );
        }
    }

    /// A write succeeded: calls are let through.
    pub(super) fn recovered(&self) {
        if self.is_failing.swap(false, Ordering::Relaxed) {
            tracing::info!("the audit log is written again; calls are let through");
        }
    }

    /// `count` lines of `kind` were not written: counted, and warned about at most every
    /// [`WARN_EVERY`].
    pub(super) fn dropped(&self, kind: Kind, count: usize) {
        if count == 0 {
            return;
        }
        let count = count as u64;
        match kind {
            Kind::Admitted => {
                metrics::counter!("toolbroker_audit_dropped_total").increment(count);
            }
            Kind::Refused => {
                metrics::counter!("toolbroker_audit_refusals_dropped_total").increment(count);
            }
        }
        let mut last = lock(&self.last_warning);
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(
                count,
                refused_calls = kind == Kind::Refused,
                "audit lines dropped: the audit log cannot be written or cannot keep up"
            );
        }
    }
}

fn slow_for_ms() -> u64 {
    u64::try_from(SLOW_FOR.as_millis()).unwrap_or(u64::MAX)
}

/// Locks `mutex`, whether or not a holder panicked (every section leaves it consistent).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the writer's thread however it ends (a panic included): nobody is left waiting for it.
pub(super) struct Exit(pub(super) Arc<Shared>);

impl Drop for Exit {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

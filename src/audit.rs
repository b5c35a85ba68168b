//! The audit log: a call's line is written before its answer is sent. A call queues its line
//! and waits (without holding a thread) for the write that holds it; one writer thread writes
//! everything queued since its last write in one `write(2)`, so concurrent calls share a
//! write (group commit). With `audit.on_failure: refuse` (the default), a call whose line
//! cannot be written is answered UNAVAILABLE, and while the log cannot be written new calls
//! are refused before they run ([`AuditLog::admit`]); the writer tries again until a write
//! succeeds. With `drop`, lines that cannot be written are dropped and counted. SIGHUP
//! reopens the file (log rotation); shutdown writes what is queued.

mod queue;
mod writer;

use std::{
    sync::{
        Arc, Condvar, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::Context as _;

pub use self::queue::{Kind, Receipt};
use self::{
    queue::{Queue, Queued},
    writer::{Exit, Sink},
};
use crate::domain::{
    audit::AuditEntry,
    config::{Audit, OnFailure},
    request_error::RequestError,
};

/// The least time between two warnings about dropped lines.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A handle to the audit log (cheap to clone).
#[derive(Clone)]
pub struct AuditLog(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer when it waits for lines.
    wake: Condvar,
    arguments: AtomicBool,
    /// `audit.on_failure: refuse`.
    refuse: AtomicBool,
    /// The last write failed (with `refuse`): new calls are refused until one succeeds.
    is_failing: AtomicBool,
    reopen: AtomicBool,
    last_warning: Mutex<Option<Instant>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

struct State {
    queue: Queue,
    /// The writer waits on `wake`: the next line wakes it.
    idle: bool,
    /// No line is taken any more.
    closing: bool,
}

impl AuditLog {
    /// Opens the sink (a file is created if missing) and starts the writer.
    pub fn open(audit: &Audit) -> anyhow::Result<Self> {
        let sink = Sink::open(&audit.sink)?;
        let log = AuditLog(Arc::new(Shared {
            state: Mutex::new(State {
                queue: Queue::default(),
                idle: false,
                closing: false,
            }),
            wake: Condvar::new(),
            arguments: AtomicBool::new(audit.arguments),
            refuse: AtomicBool::new(audit.on_failure == OnFailure::Refuse),
            is_failing: AtomicBool::new(false),
            reopen: AtomicBool::new(false),
            last_warning: Mutex::new(None),
            writer: Mutex::new(None),
        }));
        let shared = log.0.clone();
        let writer = std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || {
                let exit = Exit(shared);
                writer::run(&exit.0, sink);
            })
            .context("cannot start the audit log's writer")?;
        *lock(&log.0.writer) = Some(writer);
        Ok(log)
    }

    /// Whether lines hold the call's arguments.
    pub fn with_arguments(&self) -> bool {
        self.0.arguments.load(Ordering::Relaxed)
    }

    /// Whether a call whose line cannot be written is refused (`audit.on_failure: refuse`).
    pub fn refuses(&self) -> bool {
        self.0.refuse.load(Ordering::Relaxed)
    }

    /// Lets a call run, unless the log cannot be written and `on_failure` is `refuse`: then
    /// the call is refused (it has no line: it is counted instead).
    pub fn admit(&self) -> Result<(), RequestError> {
        if self.refuses() && self.0.is_failing.load(Ordering::Relaxed) {
            metrics::counter!("toolbroker_audit_refused_calls_total").increment(1);
            return Err(RequestError::AuditUnavailable);
        }
        Ok(())
    }

    /// Applies a reloaded `audit` section: `arguments` and `on_failure` at once; another
    /// `file` only at the next start (said in a warning).
    pub fn reconfigure(&self, audit: Option<&Audit>, running: &Audit) {
        match audit {
            Some(audit) => {
                self.0.arguments.store(audit.arguments, Ordering::Relaxed);
                let refuse = audit.on_failure == OnFailure::Refuse;
                self.0.refuse.store(refuse, Ordering::Relaxed);
                if audit.sink != running.sink {
                    tracing::warn!("audit.file changes take effect at the next start");
                }
            }
            None => tracing::warn!("removing audit takes effect at the next start"),
        }
    }

    /// Queues `entry` for the next write: its receipt to wait on, or `None` when its budget
    /// is full (or the log is closing, or, for a refused call's line, cannot be written):
    /// then it is dropped and counted.
    pub fn commit(&self, entry: AuditEntry, kind: Kind) -> Option<Receipt> {
        self.queue(entry, kind, true)
    }

    /// Queues `entry` for the next write, with nobody waiting for it (a cancelled call's).
    pub fn record(&self, entry: AuditEntry, kind: Kind) {
        let _ = self.queue(entry, kind, false);
    }

    fn queue(&self, entry: AuditEntry, kind: Kind, awaited: bool) -> Option<Receipt> {
        let shared = &*self.0;
        // A refusal waits for no log that is failing: it is answered at once.
        if kind == Kind::Refused && shared.is_failing.load(Ordering::Relaxed) {
            shared.dropped(kind, 1);
            return None;
        }
        let mut state = lock(&shared.state);
        let receipt = if state.closing {
            None
        } else {
            state.queue.push(Queued {
                entry,
                kind,
                awaited,
            })
        };
        let wake = receipt.is_some() && std::mem::take(&mut state.idle);
        drop(state);
        if wake {
            shared.wake.notify_one();
        }
        if receipt.is_none() {
            shared.dropped(kind, 1);
        }
        receipt
    }

    /// Reopens the file (after a rotation moved it away).
    pub fn reopen(&self) {
        let mut state = lock(&self.0.state);
        self.0.reopen.store(true, Ordering::Relaxed);
        self.0.wake_writer(&mut state);
    }

    /// Writes what is queued and stops the writer.
    pub async fn close(&self) {
        {
            let mut state = lock(&self.0.state);
            state.closing = true;
            self.0.wake_writer(&mut state);
        }
        let writer = lock(&self.0.writer).take();
        let Some(writer) = writer else { return };
        let joined = tokio::task::spawn_blocking(move || writer.join());
        if tokio::time::timeout(Duration::from_secs(10), joined)
            .await
            .is_err()
        {
            tracing::warn!("the audit log was not written out within 10 s");
        }
    }
}

impl Shared {
    fn wake_writer(&self, state: &mut State) {
        if std::mem::take(&mut state.idle) {
            self.wake.notify_one();
        }
    }

    /// The writer's next group: waits for a line (or a reopen, or closing; or, `retrying`, at
    /// most [`writer::RETRY`]), then moves the queued lines into `taken`. Also whether the log
    /// is closing (this is the last group).
    fn next_group(&self, taken: &mut Vec<Queued>, retrying: bool) -> (Arc<queue::Group>, bool) {
        let mut state = lock(&self.state);
        while state.queue.is_empty() && !state.closing && !self.reopen.load(Ordering::Relaxed) {
            state.idle = true;
            if retrying {
                let (waited, timeout) = self
                    .wake
                    .wait_timeout(state, writer::RETRY)
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
        let group = state.queue.take(taken);
        (group, state.closing)
    }

    /// The writer ended: what is queued will not be written; its callers are told so.
    fn abandon(&self) {
        let mut taken = Vec::new();
        let group = {
            let mut state = lock(&self.state);
            state.closing = true;
            state.queue.take(&mut taken)
        };
        for kind in [Kind::Admitted, Kind::Refused] {
            self.dropped(kind, taken.iter().filter(|line| line.kind == kind).count());
        }
        group.finish(0);
    }

    /// A write failed (with `refuse`): new calls are refused until one succeeds.
    fn failing(&self, error: &std::io::Error) {
        if !self.is_failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %error,
                "the audit log cannot be written: calls are refused (audit.on_failure: refuse) \
                 until it can; trying again"
            );
        }
    }

    /// A write succeeded (or lines are dropped, with `drop`): calls are let through.
    fn recovered(&self) {
        if self.is_failing.swap(false, Ordering::Relaxed) {
            tracing::info!("the audit log is written again; calls are let through");
        }
    }

    /// `count` lines of `kind` were not written: counted, and warned about at most every
    /// [`WARN_EVERY`].
    fn dropped(&self, kind: Kind, count: usize) {
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

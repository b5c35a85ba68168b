//! The audit log: a call's line is written before its answer is sent. A call queues its line
//! and waits (without holding a thread) for the write that holds it; calls that end together
//! share one `write(2)` (group commit): the first writes the group on its own thread, or the
//! writer's thread writes what was queued meanwhile. With `audit.on_failure: refuse` (the
//! default), a call whose line cannot be written is answered UNAVAILABLE, and while the log
//! cannot be written new calls are refused before they run ([`AuditLog::admit`]); the writer
//! tries again until a write succeeds. With `drop`, lines that cannot be written are dropped
//! and counted. SIGHUP reopens the file (log rotation); shutdown writes what is queued.

mod queue;
mod shared;
mod writer;

use std::{
    sync::{Arc, Mutex, atomic::Ordering},
    thread::JoinHandle,
    time::Duration,
};

use anyhow::Context as _;

pub use self::queue::{Kind, Receipt};
use self::{
    queue::Queued,
    shared::{Exit, Shared, lock},
    writer::{Sink, Writer},
};
use crate::domain::{
    audit::AuditEntry,
    config::{Audit, OnFailure},
    request_error::RequestError,
};

/// A handle to the audit log (cheap to clone).
#[derive(Clone)]
pub struct AuditLog {
    shared: Arc<Shared>,
    /// Whoever holds it writes: a call, or the writer's thread.
    writer: Arc<Mutex<Writer>>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl AuditLog {
    /// Opens the sink (a file is created if missing) and starts the writer's thread.
    pub fn open(audit: &Audit) -> anyhow::Result<Self> {
        let writer = Arc::new(Mutex::new(Writer::new(Sink::open(&audit.sink)?)));
        let refuse = audit.on_failure == OnFailure::Refuse;
        let shared = Arc::new(Shared::new(audit.arguments, refuse));
        let thread = std::thread::Builder::new()
            .name("audit-log".into())
            .spawn({
                let exit = Exit(shared.clone());
                let writer = writer.clone();
                move || writer::run(&exit.0, &writer)
            })
            .context("cannot start the audit log's writer")?;
        Ok(AuditLog {
            shared,
            writer,
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// Whether lines hold the call's arguments.
    pub fn with_arguments(&self) -> bool {
        self.shared.arguments.load(Ordering::Relaxed)
    }

    /// Whether a call whose line cannot be written is refused (`audit.on_failure: refuse`).
    pub fn refuses(&self) -> bool {
        self.shared.refuse.load(Ordering::Relaxed)
    }

    /// Lets a call run, unless the log cannot be written and `on_failure` is `refuse`: then
    /// the call is refused (it has no line: it is counted instead).
    pub fn admit(&self) -> Result<(), RequestError> {
        if self.refuses() && self.shared.is_failing.load(Ordering::Relaxed) {
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
                let shared = &self.shared;
                shared.arguments.store(audit.arguments, Ordering::Relaxed);
                let refuse = audit.on_failure == OnFailure::Refuse;
                shared.refuse.store(refuse, Ordering::Relaxed);
                if audit.sink != running.sink {
                    tracing::warn!("audit.file changes take effect at the next start");
                }
            }
            None => tracing::warn!("removing audit takes effect at the next start"),
        }
    }

    /// Queues `entry` for the next write: its receipt to wait on, or `None` when its budget
    /// is full (or the log is closing, or, for a refused call's line, cannot be written):
    /// then it is dropped and counted. With nobody writing, the write happens here.
    pub fn commit(&self, entry: AuditEntry, kind: Kind) -> Option<Receipt> {
        let line = Queued {
            entry,
            kind,
            awaited: true,
        };
        let (receipt, lead) = self.shared.queue(line, true);
        if lead {
            writer::lead(&self.shared, &self.writer);
        }
        receipt
    }

    /// Queues `entry` for the writer's thread, with nobody waiting for it (a cancelled
    /// call's).
    pub fn record(&self, entry: AuditEntry, kind: Kind) {
        let line = Queued {
            entry,
            kind,
            awaited: false,
        };
        let _ = self.shared.queue(line, false);
    }

    /// Reopens the file (after a rotation moved it away).
    pub fn reopen(&self) {
        let mut state = lock(&self.shared.state);
        self.shared.reopen.store(true, Ordering::Relaxed);
        self.shared.wake_writer(&mut state);
    }

    /// Writes what is queued and stops the writer's thread.
    pub async fn close(&self) {
        {
            let mut state = lock(&self.shared.state);
            state.closing = true;
            self.shared.wake_writer(&mut state);
        }
        let thread = lock(&self.thread).take();
        let Some(thread) = thread else { return };
        let joined = tokio::task::spawn_blocking(move || thread.join());
        if tokio::time::timeout(Duration::from_secs(10), joined)
            .await
            .is_err()
        {
            tracing::warn!("the audit log was not written out within 10 s");
        }
    }
}

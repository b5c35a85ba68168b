//! The audit log's writer: calls hand their entry to a bounded queue and go on; a thread of its
//! own wakes every few milliseconds, turns what is queued into lines and appends them in one
//! write to the file (mode 0600) or to standard output. A call never waits for the disk, nor
//! wakes the writer: when the queue is full the entry is dropped, and a write that fails drops
//! its lines; either way they are counted in `toolbroker_audit_dropped_total` and warned about
//! (at most every few seconds). SIGHUP reopens the file (log rotation); shutdown writes what is
//! queued.

use std::{
    fs::File,
    io::Write as _,
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, sync_channel},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::domain::{
    audit::AuditEntry,
    config::{Audit, AuditSink},
};

/// Entries that may wait for the disk; beyond them, entries are dropped (and counted).
const QUEUE: usize = 8192;
/// How often the writer writes what is queued: at most this late on disk.
const TICK: Duration = Duration::from_millis(10);
/// The least time between two warnings about dropped lines.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A handle to the audit log (cheap to clone).
#[derive(Clone)]
pub struct AuditLog(Arc<Inner>);

struct Inner {
    entries: SyncSender<AuditEntry>,
    arguments: AtomicBool,
    reopen: AtomicBool,
    closing: AtomicBool,
    dropped: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl AuditLog {
    /// Opens the sink (a file is created if missing) and starts the writer.
    pub fn open(audit: &Audit) -> anyhow::Result<Self> {
        let sink = Sink::open(&audit.sink)?;
        let (entries, queue) = sync_channel(QUEUE);
        let log = AuditLog(Arc::new(Inner {
            entries,
            arguments: AtomicBool::new(audit.arguments),
            reopen: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            last_warning: Mutex::new(None),
            writer: Mutex::new(None),
        }));
        let writer = std::thread::Builder::new()
            .name("audit-log".into())
            .spawn({
                let log = log.clone();
                move || write(&log, sink, &queue)
            })
            .context("cannot start the audit log's writer")?;
        *log.0.writer.lock().unwrap_or_else(PoisonError::into_inner) = Some(writer);
        Ok(log)
    }

    /// Whether lines hold the call's arguments.
    pub fn with_arguments(&self) -> bool {
        self.0.arguments.load(Ordering::Relaxed)
    }

    /// Applies a reloaded `audit` section: `arguments` at once; another `file` only at the next
    /// start (said in a warning).
    pub fn reconfigure(&self, audit: Option<&Audit>, running: &Audit) {
        match audit {
            Some(audit) => {
                self.0.arguments.store(audit.arguments, Ordering::Relaxed);
                if audit.sink != running.sink {
                    tracing::warn!("audit.file changes take effect at the next start");
                }
            }
            None => tracing::warn!("removing audit takes effect at the next start"),
        }
    }

    /// Queues one entry; never waits.
    pub fn record(&self, entry: AuditEntry) {
        if self.0.entries.try_send(entry).is_err() {
            self.dropped(1);
        }
    }

    /// Reopens the file (after a rotation moved it away).
    pub fn reopen(&self) {
        self.0.reopen.store(true, Ordering::Relaxed);
    }

    /// Writes what is queued and stops the writer.
    pub async fn close(&self) {
        self.0.closing.store(true, Ordering::Relaxed);
        let writer = self
            .0
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(writer) = writer else { return };
        let joined = tokio::task::spawn_blocking(move || writer.join());
        if tokio::time::timeout(Duration::from_secs(10), joined)
            .await
            .is_err()
        {
            tracing::warn!("the audit log was not written out within 10 s");
        }
    }

    fn dropped(&self, count: u64) {
        metrics::counter!("toolbroker_audit_dropped_total").increment(count);
        let total = self.0.dropped.fetch_add(count, Ordering::Relaxed) + count;
        let mut last = self
            .0
            .last_warning
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(
                dropped = total,
                "audit lines dropped: the audit log cannot keep up (a slow or full disk?)"
            );
        }
    }
}

/// Where the writer writes.
enum Sink {
    File { path: PathBuf, out: File },
    Stdout,
}

impl Sink {
    fn open(sink: &AuditSink) -> anyhow::Result<Sink> {
        Ok(match sink {
            AuditSink::Stdout => Sink::Stdout,
            AuditSink::File(path) => Sink::File {
                path: path.clone(),
                out: open_file(path)?,
            },
        })
    }

    /// Appends `bytes` whole.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::File { out, .. } => out.write_all(bytes),
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
        }
    }

    /// A file sink: the path opened anew.
    fn reopen(&mut self) -> anyhow::Result<()> {
        if let Sink::File { path, out } = self {
            *out = open_file(path)?;
            tracing::info!(file = %path.display(), "audit log reopened");
        }
        Ok(())
    }
}

fn open_file(path: &Path) -> anyhow::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot open the audit log {}", path.display()))
}

/// The writer thread: every [`TICK`], what is queued, in one write; at shutdown, the rest.
fn write(log: &AuditLog, mut sink: Sink, queue: &Receiver<AuditEntry>) {
    let mut batch = Vec::with_capacity(64 * 1024);
    loop {
        let closing = log.0.closing.load(Ordering::Relaxed);
        if log.0.reopen.swap(false, Ordering::Relaxed)
            && let Err(error) = sink.reopen()
        {
            tracing::warn!(
                error = format!("{error:#}"),
                "the audit log was not reopened; still writing the old file"
            );
        }
        let mut lines = 0;
        while let Ok(entry) = queue.try_recv() {
            entry.write_line(&mut batch);
            lines += 1;
        }
        if lines > 0 {
            if let Err(error) = sink.write(&batch) {
                tracing::warn!(%error, "cannot write the audit log");
                log.dropped(lines);
            }
            batch.clear();
        }
        if closing {
            return;
        }
        std::thread::sleep(TICK);
    }
}

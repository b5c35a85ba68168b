//! The audit log's writer: calls hand their line to a bounded queue and go on; one task writes
//! what is queued in one write to the file (appended, mode 0600) or to standard output. A slow
//! disk never blocks a call: when the queue is full the line is dropped, and a write that fails
//! drops its lines; either way they are counted in `toolbroker_audit_dropped_total` and warned
//! about (at most every few seconds). SIGHUP reopens the file (log rotation); shutdown writes
//! what is queued.

use std::{
    os::unix::fs::OpenOptionsExt as _,
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncWrite, AsyncWriteExt as _},
    sync::{Notify, mpsc},
    task::JoinHandle,
};

use crate::domain::{
    audit::AuditEntry,
    config::{Audit, AuditSink},
};

/// Lines that may wait for the disk; beyond them, lines are dropped (and counted).
const QUEUE: usize = 8192;
/// The most bytes one write gathers.
const BATCH: usize = 1 << 20;
/// The least time between two warnings about dropped lines.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A handle to the audit log (cheap to clone).
#[derive(Clone)]
pub struct AuditLog(Arc<Inner>);

struct Inner {
    lines: mpsc::Sender<String>,
    arguments: AtomicBool,
    reopen: Notify,
    dropped: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Set at shutdown: the writer drains the queue and stops.
    closing: Notify,
}

impl AuditLog {
    /// Opens the sink (a file is created if missing) and starts the writer.
    pub async fn open(audit: &Audit) -> anyhow::Result<Self> {
        let out = Sink::open(&audit.sink).await?;
        let (lines, queue) = mpsc::channel(QUEUE);
        let log = AuditLog(Arc::new(Inner {
            lines,
            arguments: AtomicBool::new(audit.arguments),
            reopen: Notify::new(),
            dropped: AtomicU64::new(0),
            last_warning: Mutex::new(None),
            writer: Mutex::new(None),
            closing: Notify::new(),
        }));
        let writer = tokio::spawn(write(log.clone(), out, queue));
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

    /// Queues one line; never waits.
    pub fn record(&self, entry: &AuditEntry) {
        let mut line = entry.to_line();
        line.push('\n');
        if self.0.lines.try_send(line).is_err() {
            self.dropped(1);
        }
    }

    /// Reopens the file (after a rotation moved it away).
    pub fn reopen(&self) {
        self.0.reopen.notify_one();
    }

    /// Writes what is queued, flushes and stops the writer.
    pub async fn close(&self) {
        self.0.closing.notify_one();
        let writer = self
            .0
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer
            && tokio::time::timeout(Duration::from_secs(10), writer)
                .await
                .is_err()
        {
            tracing::warn!("the audit log was not flushed within 10 s");
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
    File { path: PathBuf, out: tokio::fs::File },
    Stdout(tokio::io::Stdout),
}

impl Sink {
    async fn open(sink: &AuditSink) -> anyhow::Result<Sink> {
        Ok(match sink {
            AuditSink::Stdout => Sink::Stdout(tokio::io::stdout()),
            AuditSink::File(path) => Sink::File {
                path: path.clone(),
                out: open_file(path).await?,
            },
        })
    }

    fn out(&mut self) -> &mut (dyn AsyncWrite + Unpin + Send) {
        match self {
            Sink::File { out, .. } => out,
            Sink::Stdout(out) => out,
        }
    }

    /// Writes `bytes` whole and waits for the write to be done.
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let out = self.out();
        out.write_all(bytes).await?;
        out.flush().await
    }

    /// A file sink: the path opened anew.
    async fn reopen(&mut self) -> anyhow::Result<()> {
        if let Sink::File { path, out } = self {
            *out = open_file(path).await?;
            tracing::info!(file = %path.display(), "audit log reopened");
        }
        Ok(())
    }
}

async fn open_file(path: &PathBuf) -> anyhow::Result<tokio::fs::File> {
    use anyhow::Context as _;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot open the audit log {}", path.display()))?;
    Ok(tokio::fs::File::from_std(file))
}

/// The writer: what is queued, in one write at a time.
async fn write(log: AuditLog, mut sink: Sink, mut queue: mpsc::Receiver<String>) {
    loop {
        tokio::select! {
            biased;
            _ = log.0.closing.notified() => break,
            _ = log.0.reopen.notified() => {
                if let Err(error) = sink.reopen().await {
                    tracing::warn!(error = format!("{error:#}"), "the audit log was not reopened; still writing the old file");
                }
            }
            line = queue.recv() => {
                let Some(line) = line else { break };
                write_batch(&log, &mut sink, line, &mut queue).await;
            }
        }
    }
    // Shutdown: what was queued before.
    queue.close();
    while let Some(line) = queue.recv().await {
        write_batch(&log, &mut sink, line, &mut queue).await;
    }
}

/// Writes `first` and what else is queued (up to [`BATCH`] bytes); lines a failed write took
/// with it are counted as dropped.
async fn write_batch(
    log: &AuditLog,
    sink: &mut Sink,
    first: String,
    queue: &mut mpsc::Receiver<String>,
) {
    let mut batch = first.into_bytes();
    let mut lines = 1;
    while batch.len() < BATCH
        && let Ok(line) = queue.try_recv()
    {
        batch.extend_from_slice(line.as_bytes());
        lines += 1;
    }
    if let Err(error) = sink.write(&batch).await {
        tracing::warn!(%error, "cannot write the audit log");
        log.dropped(lines);
    }
}

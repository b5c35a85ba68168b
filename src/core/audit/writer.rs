//! The audit log's writer: takes every line queued since the last write and appends them in
//! one `write(2)` (group commit), then tells their callers which of them reached the file. A
//! call whose line finds nobody writing writes the group itself, on its own thread (no hand-off
//! to wait for: at low concurrency a call costs one `write`); lines queued meanwhile go to the
//! writer's thread, which also retries. A write that fails keeps, with `audit.on_failure:
//! refuse`, the lines it did not write (marked `UNAVAILABLE`: what their callers got) and
//! writes them again every [`RETRY`] until a write succeeds; with `drop`, it drops them.

use std::{
    fs::File,
    io::{self, Write as _},
    os::{fd::AsFd as _, unix::fs::OpenOptionsExt as _},
    path::{Path, PathBuf},
    sync::{Mutex, TryLockError, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    queue::{ADMITTED, Group, Kind, Queued, REFUSED},
    shared::{Shared, lock},
};
use crate::domain::config::AuditSink;

/// A write at least this slow hands every write to the writer's thread for [`SLOW_FOR`]: a
/// slow disk must not hold the runtime's threads.
const SLOW: Duration = Duration::from_millis(1);

/// The writer's thread: writes what is queued whenever a call did not, retries a failed
/// write, and writes the rest at shutdown.
pub(super) fn run(shared: &Shared, writer: &Mutex<Writer>) {
    loop {
        let closing = shared.wait_for_work();
        let mut writer = lock(writer);
        writer.write_queued(shared);
        if closing {
            let kept = std::mem::take(&mut writer.retained);
            for kind in [Kind::Admitted, Kind::Refused] {
                let count = kept.iter().filter(|line| line.kind == kind).count();
                shared.dropped(kind, count);
            }
            return;
        }
    }
}

/// Writes what is queued on this thread, unless someone is writing (who looks at the queue
/// once done); what is queued after (or kept to retry) is the writer's thread's.
pub(super) fn lead(shared: &Shared, writer: &Mutex<Writer>) {
    let mut writer = match writer.try_lock() {
        Ok(writer) => writer,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    writer.write_queued(shared);
    drop(writer);
    // After the writer is let go: a line queued while it was held is seen there.
    shared.after_lead();
}

/// The file and what writing it needs; whoever holds the lock on it writes.
pub(super) struct Writer {
    sink: Sink,
    /// The lines of one write.
    buffer: Vec<u8>,
    /// Where each line of `buffer` ends.
    ends: Vec<usize>,
    /// The group being written.
    taken: Vec<Queued>,
    /// Lines a failed write did not write, to write first next time (`on_failure: refuse`).
    retained: Vec<Queued>,
    /// A failed write left part of a line in the file: the next write ends it first.
    torn: bool,
}

impl Writer {
    /// A writer of `sink`.
    pub(super) fn new(sink: Sink) -> Self {
        Self {
            sink,
            buffer: Vec::with_capacity(64 * 1024),
            ends: Vec::new(),
            taken: Vec::with_capacity(64),
            retained: Vec::new(),
            torn: false,
        }
    }

    /// Writes what was retained and what is queued now, in one write.
    pub(super) fn write_queued(&mut self, shared: &Shared) {
        let group = shared.take(&mut self.taken);
        if shared.reopen.swap(false, Ordering::Relaxed) {
            self.reopen();
        }
        let started = Instant::now();
        self.write(shared, group.as_deref());
        if started.elapsed() >= SLOW {
            shared.slow_write();
        }
        let retrying = !self.retained.is_empty();
        shared.retrying.store(retrying, Ordering::Relaxed);
    }

    /// Writes what was retained and the group taken (if any), in one write.
    fn write(&mut self, shared: &Shared, group: Option<&Group>) {
        self.buffer.clear();
        self.ends.clear();
        if self.torn {
            self.buffer.push(b'\n');
        }
        for line in self.retained.iter().chain(&self.taken) {
            line.entry.write_line(&mut self.buffer);
            self.ends.push(self.buffer.len());
        }
        if self.ends.is_empty() {
            return;
        }
        let (written, error) = self.sink.write(&self.buffer);
        if written > 0 {
            self.torn = self.buffer[written - 1] != b'\n';
        }
        let lines = self.ends.partition_point(|&end| end <= written);
        let retried = self.retained.len();
        // The state first: a caller told its line failed must find new calls refused.
        match error {
            None => {
                self.retained.clear();
                shared.recovered();
            }
            Some(error) => self.failed(shared, lines, &error),
        }
        self.taken.clear();
        if let Some(group) = group {
            group.finish(lines.saturating_sub(retried));
        }
    }

    /// After a write that wrote only the first `lines` of its lines.
    fn failed(&mut self, shared: &Shared, lines: usize, error: &io::Error) {
        let refuse = shared.refuse.load(Ordering::Relaxed);
        self.retained.append(&mut self.taken);
        self.retained.drain(..lines.min(self.retained.len()));
        if !refuse {
            for kind in [Kind::Admitted, Kind::Refused] {
                let count = self.retained.iter().filter(|l| l.kind == kind).count();
                shared.dropped(kind, count);
            }
            self.retained.clear();
            // Calls are let through (and a later `refuse` finds nothing left to retry).
            shared.is_failing.store(false, Ordering::Relaxed);
            tracing::debug!(%error, "cannot write the audit log; its lines are dropped");
            return;
        }
        for line in &mut self.retained {
            if line.kind == Kind::Admitted && line.awaited {
                // What its caller is answered.
                line.entry.code = "UNAVAILABLE";
                line.awaited = false;
            }
        }
        self.keep_within(Kind::Admitted, ADMITTED, shared);
        self.keep_within(Kind::Refused, REFUSED, shared);
        shared.failing(error);
    }

    /// Drops the oldest retained lines of `kind` beyond `budget`.
    fn keep_within(&mut self, kind: Kind, budget: usize, shared: &Shared) {
        let count = self.retained.iter().filter(|l| l.kind == kind).count();
        let mut over = count.saturating_sub(budget);
        shared.dropped(kind, over);
        self.retained.retain(|line| {
            let drop = over > 0 && line.kind == kind;
            over -= usize::from(drop);
            !drop
        });
    }

    fn reopen(&mut self) {
        if let Err(error) = self.sink.reopen() {
            tracing::warn!(
                error = format!("{error:#}"),
                "the audit log was not reopened; still writing the old file"
            );
        }
    }
}

/// Where the writer writes.
pub(super) enum Sink {
    File {
        path: PathBuf,
        out: File,
    },
    /// The broker's standard output, unbuffered (a copy of its descriptor).
    Stdout(File),
}

impl Sink {
    /// The sink `sink` names, opened (a file is created, mode 0600, if missing).
    pub(super) fn open(sink: &AuditSink) -> anyhow::Result<Sink> {
        Ok(match sink {
            AuditSink::Stdout => {
                let out = io::stdout()
                    .as_fd()
                    .try_clone_to_owned()
                    .context("cannot use standard output for the audit log")?;
                Sink::Stdout(File::from(out))
            }
            AuditSink::File(path) => Sink::File {
                path: path.clone(),
                out: open_file(path)?,
            },
        })
    }

    /// Appends `bytes`: how many reached the file (the kernel took them), and why not all did.
    fn write(&mut self, bytes: &[u8]) -> (usize, Option<io::Error>) {
        let out = match self {
            Sink::File { out, .. } | Sink::Stdout(out) => out,
        };
        let mut written = 0;
        while written < bytes.len() {
            match out.write(&bytes[written..]) {
                Ok(0) => return (written, Some(io::ErrorKind::WriteZero.into())),
                Ok(count) => written += count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return (written, Some(error)),
            }
        }
        (written, None)
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

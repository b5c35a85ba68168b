//! The write side of a stdio server's pipe: messages queued as lines ([`WriteQueue`]) and
//! written by whichever sender holds the pipe, in the sender's own task (no hand-off to a
//! writer task on the way out: docs/performance.md, the call path, "Issue 20, round three").
//!
//! A write finishes or never starts, whoever stops waiting:
//! - a line whose sender gives up before a write takes it is withdrawn, never written;
//! - a write that has taken a batch owns the pipe (an owned lock guard) and the batch, with
//!   how much of it went out; if its future is dropped mid-batch (a deadline, a reset stream,
//!   rmcp aborting its send tasks at close), its `Drop` hands the rest to a task of its own,
//!   which finishes it. Without a runtime to run that task, the writer fails and the pipe is
//!   closed, so nothing follows the partial line;
//! - closing does not wait for a write a stalled server holds up: the write closes the pipe when
//!   it ends.
//!
//! So a server reads whole lines only, and a server that stops reading makes senders wait,
//! holding the lines of senders still waiting plus at most the one batch being written.

use std::{
    io,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use serde::Serialize;
use tokio::{
    io::{AsyncWrite, AsyncWriteExt as _},
    sync::OwnedMutexGuard,
};

use crate::upstream::transport::stdio::write_queue::{Batch, Ticket, Turn, WriteQueue};

/// The pipe, `None` once closed.
type Pipe<W> = tokio::sync::Mutex<Option<W>>;

/// Queued lines and the pipe they are written to.
pub struct Writer<W> {
    queue: Mutex<WriteQueue>,
    pipe: Arc<Pipe<W>>,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Writer<W> {
    /// A writer to `pipe`.
    pub fn new(pipe: W) -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(WriteQueue::default()),
            pipe: Arc::new(tokio::sync::Mutex::new(Some(pipe))),
        })
    }

    /// Queues `message` as a line; `request` is its request id, if it is a request.
    pub fn push(&self, request: Option<i64>, message: &impl Serialize) -> io::Result<Ticket> {
        self.queue().push(request, |bytes| {
            serde_json::to_writer(bytes, message).map_err(io::Error::from)
        })
    }

    /// Takes back `ticket`'s line if no write has taken it: `true` if it will never be written.
    pub fn withdraw(&self, ticket: Ticket) -> bool {
        self.queue().withdraw(ticket)
    }

    /// Takes back the queued line of request `id`, as [`Self::withdraw`].
    pub fn withdraw_request(&self, id: i64) -> bool {
        self.queue().withdraw_request(id)
    }

    /// Writes `ticket`'s line, with whatever was queued before it; returns at once if an
    /// earlier write took it. Dropped mid-write, the write is finished all the same.
    pub async fn write(self: Arc<Self>, ticket: Ticket) -> io::Result<()> {
        let guard = self.pipe.clone().lock_owned().await;
        let batch = match self.queue().turn(ticket)? {
            Turn::Write(batch) => batch,
            Turn::Done => return Ok(()),
        };
        let mut job = Job {
            writer: self,
            guard: Some(guard),
            batch,
            offset: 0,
            handed_off: false,
        };
        let result = job.run().await;
        job.end(result).await
    }

    /// Closes the pipe: now, or when the write under way ends. Nothing queued is written
    /// after this.
    pub async fn close(&self) {
        self.queue().close();
        if let Ok(mut pipe) = self.pipe.try_lock()
            && let Some(mut pipe) = pipe.take()
        {
            pipe.shutdown().await.ok();
        }
    }

    fn queue(&self) -> MutexGuard<'_, WriteQueue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A batch being written: it holds the pipe until the batch is written whole or the write
/// fails.
struct Job<W: AsyncWrite + Unpin + Send + 'static> {
    writer: Arc<Writer<W>>,
    /// The pipe, `None` once the job ended.
    guard: Option<OwnedMutexGuard<Option<W>>>,
    batch: Batch,
    /// How much of the batch went out.
    offset: usize,
    /// Run by a task of its own after its first writer gave up.
    handed_off: bool,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Job<W> {
    /// Writes the rest of the batch; `write`, not `write_all`, so `offset` is exact when this
    /// future is dropped.
    async fn run(&mut self) -> io::Result<()> {
        let Some(pipe) = self.guard.as_mut().and_then(|guard| guard.as_mut()) else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        };
        while self.offset < self.batch.bytes.len() {
            match pipe.write(&self.batch.bytes[self.offset..]).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => self.offset += n,
            }
        }
        pipe.flush().await
    }

    /// Records how the batch went and lets the pipe go (closing it if the writer was closed
    /// meanwhile).
    async fn end(mut self, result: io::Result<()>) -> io::Result<()> {
        let Some(mut guard) = self.guard.take() else {
            return result;
        };
        let closed = {
            let mut queue = self.writer.queue();
            match &result {
                Ok(()) => queue.written(std::mem::take(&mut self.batch)),
                Err(e) => queue.fail(e.kind()),
            }
            queue.is_closed()
        };
        if closed && let Some(mut pipe) = guard.take() {
            pipe.shutdown().await.ok();
        }
        result
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> Drop for Job<W> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        if !self.handed_off
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let mut rest = Job {
                writer: self.writer.clone(),
                guard: Some(guard),
                batch: std::mem::take(&mut self.batch),
                offset: self.offset,
                handed_off: true,
            };
            // Owned by nobody on purpose: it ends when the batch is written or the write
            // fails (the server exits or is killed); it holds one batch at most.
            runtime.spawn(async move {
                let result = rest.run().await;
                if let Err(error) = rest.end(result).await {
                    tracing::debug!(%error, "finishing a write to the server failed");
                }
            });
            return;
        }
        // Cut short with no way to finish: the server must not read anything after the
        // partial line, so the pipe is closed.
        self.writer.queue().fail(io::ErrorKind::BrokenPipe);
        *guard = None;
    }
}

#[cfg(test)]
mod tests;

//! The lines waiting to be written to a stdio server's stdin, each known by a [`Ticket`]:
//! pure bookkeeping for [`crate::upstream::transport::stdio::pipe_writer`] (no I/O, no clock, no runtime).
//!
//! A line is in one of three states, and moves only forward:
//! - **queued**: it is here, and may be withdrawn (then it is never written, not even in part);
//! - **taken**: a write took it in a [`Batch`], with every line queued before it, and owns it
//!   until the whole batch is written (or the writer fails);
//! - **written**: its batch was written whole.
//!
//! Lines go out in the order they were queued, so tickets below [`WriteQueue::written`]'s mark
//! were written. Only callers still waiting have lines queued: a caller that gives up withdraws
//! its line, so a server that stops reading holds no memory for callers that left.

use std::io;

/// A line's place in the queue, in the order lines were queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// A queued line: its ticket, its length with its newline, and the id of the request it
/// carries (to withdraw a request its cancellation would only follow).
#[derive(Debug)]
struct Line {
    ticket: Ticket,
    len: usize,
    request: Option<i64>,
}

/// Bytes taken to be written whole: every line queued up to `last`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// The lines, each with its newline.
    pub bytes: Vec<u8>,
    last: Option<Ticket>,
}

/// What became of a line, as seen by its writer once it holds the pipe.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// Still queued: the writer takes this batch, which holds it, and writes it.
    Write(Batch),
    /// Written by an earlier write, or withdrawn: nothing to do.
    Done,
}

/// The queue of one writer.
#[derive(Debug, Default)]
pub struct WriteQueue {
    bytes: Vec<u8>,
    lines: Vec<Line>,
    next: u64,
    /// Every ticket below this was written (or withdrawn).
    written: u64,
    /// The first failure, which every later write reports.
    failed: Option<io::ErrorKind>,
    closed: bool,
    /// A cleared buffer from the last batch, reused for the next one.
    spare: Vec<u8>,
}

/// A buffer grown past this by one large message is given back afterwards, so a session that
/// once sent 16 MiB does not keep 16 MiB.
pub const KEPT_CAPACITY: usize = 1024 * 1024;

impl WriteQueue {
    /// Queues the line `encode` appends (without its newline), carrying request `request`.
    /// Refused once the writer failed or closed; a line `encode` fails on is not queued.
    pub fn push(
        &mut self,
        request: Option<i64>,
        encode: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
    ) -> io::Result<Ticket> {
        self.check()?;
        let start = self.bytes.len();
        if let Err(e) = encode(&mut self.bytes) {
            self.bytes.truncate(start);
            return Err(e);
        }
        self.bytes.push(b'\n');
        let ticket = Ticket(self.next);
        self.next += 1;
        self.lines.push(Line {
            ticket,
            len: self.bytes.len() - start,
            request,
        });
        Ok(ticket)
    }

    /// Takes `ticket`'s line back if no write has taken it: `true` if it will never be written.
    pub fn withdraw(&mut self, ticket: Ticket) -> bool {
        self.remove(|line| line.ticket == ticket)
    }

    /// Takes back the queued line of request `id`, as [`Self::withdraw`].
    pub fn withdraw_request(&mut self, id: i64) -> bool {
        self.remove(|line| line.request == Some(id))
    }

    /// What `ticket`'s writer, now holding the pipe, is to do: write a batch with its line and
    /// every line before it, or nothing; an error once the writer failed or closed.
    pub fn turn(&mut self, ticket: Ticket) -> io::Result<Turn> {
        if ticket.0 < self.written {
            return Ok(Turn::Done);
        }
        self.check()?;
        let Some(last) = self.lines.last() else {
            return Ok(Turn::Done);
        };
        if !self.lines.iter().any(|line| line.ticket == ticket) {
            return Ok(Turn::Done);
        }
        let last = last.ticket;
        self.lines.clear();
        let mut bytes = std::mem::take(&mut self.spare);
        std::mem::swap(&mut bytes, &mut self.bytes);
        Ok(Turn::Write(Batch {
            bytes,
            last: Some(last),
        }))
    }

    /// `batch` was written whole; its buffer is kept for a later batch.
    pub fn written(&mut self, mut batch: Batch) {
        if let Some(last) = batch.last {
            self.written = self.written.max(last.0 + 1);
        }
        batch.bytes.clear();
        if batch.bytes.capacity() <= KEPT_CAPACITY && self.spare.capacity() == 0 {
            self.spare = batch.bytes;
        }
    }

    /// A write failed (or was cut short): nothing more is written, and every later push or
    /// write reports `kind`.
    pub fn fail(&mut self, kind: io::ErrorKind) {
        self.failed.get_or_insert(kind);
        self.drop_lines();
    }

    /// The writer is closing: nothing more is queued or written.
    pub fn close(&mut self) {
        self.closed = true;
        self.drop_lines();
    }

    /// Whether [`Self::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The bytes queued.
    #[cfg(test)]
    pub fn queued_bytes(&self) -> usize {
        self.bytes.len()
    }

    fn check(&self) -> io::Result<()> {
        if let Some(kind) = self.failed {
            return Err(io::Error::new(
                kind,
                "an earlier write to the server failed",
            ));
        }
        if self.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        }
        Ok(())
    }

    /// Removes the first queued line `matches` picks, if any.
    fn remove(&mut self, matches: impl Fn(&Line) -> bool) -> bool {
        let Some(index) = self.lines.iter().position(matches) else {
            return false;
        };
        let start: usize = self.lines[..index].iter().map(|line| line.len).sum();
        let line = self.lines.remove(index);
        self.bytes.drain(start..start + line.len);
        if self.lines.is_empty() && self.bytes.capacity() > KEPT_CAPACITY {
            self.bytes = Vec::new();
        }
        true
    }

    fn drop_lines(&mut self) {
        self.lines.clear();
        self.bytes = Vec::new();
        self.spare = Vec::new();
    }
}

#[cfg(test)]
mod tests;

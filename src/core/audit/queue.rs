//! The lines waiting for the audit log's next write, in the order they came, and the group
//! their callers wait on. Two budgets: one for the lines of calls that were let through, a
//! smaller one for the lines of refused calls, which anyone can cause (no credentials are
//! needed to be refused), so that refusals never take an admitted call's place.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use tokio::sync::Notify;

use crate::domain::audit::AuditEntry;

/// Lines of admitted calls that may wait for one write; beyond them, a line is not taken.
pub const ADMITTED: usize = 8192;
/// Lines of refused calls that may wait for one write.
pub const REFUSED: usize = 1024;

/// Which budget a line takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call that was let through (it ran, or failed while running).
    Admitted,
    /// A call refused before it could run (see
    /// [`RequestError::is_refusal`](crate::domain::request_error::RequestError::is_refusal)).
    Refused,
}

/// A line waiting to be written.
pub struct Queued {
    /// The line.
    pub entry: AuditEntry,
    /// Its budget.
    pub kind: Kind,
    /// Whether its caller waits for it (a cancelled call's line has nobody waiting).
    pub awaited: bool,
}

/// The lines for the next write.
pub struct Queue {
    entries: Vec<Queued>,
    refused: usize,
    group: Arc<Group>,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            entries: Vec::with_capacity(64),
            refused: 0,
            group: Arc::default(),
        }
    }
}

impl Queue {
    /// Adds `line` if its budget has room: its receipt, or `None` (then it is not written).
    pub fn push(&mut self, line: Queued) -> Option<Receipt> {
        let room = match line.kind {
            Kind::Admitted => self.entries.len() - self.refused < ADMITTED,
            Kind::Refused => self.refused < REFUSED,
        };
        if !room {
            return None;
        }
        self.refused += usize::from(line.kind == Kind::Refused);
        let index = self.entries.len();
        self.entries.push(line);
        Some(Receipt {
            group: self.group.clone(),
            index,
        })
    }

    /// Whether no line waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Moves the waiting lines into `into` (empty: its buffer is reused for the queue) and
    /// returns the group their callers wait on; later lines go in a new group. `None` when no
    /// line waits.
    pub fn take(&mut self, into: &mut Vec<Queued>) -> Option<Arc<Group>> {
        debug_assert!(into.is_empty());
        if self.entries.is_empty() {
            return None;
        }
        std::mem::swap(&mut self.entries, into);
        self.refused = 0;
        Some(std::mem::take(&mut self.group))
    }
}

/// The lines of one write: how many of them, from the first, reached the file.
#[derive(Default)]
pub struct Group {
    written: AtomicUsize,
    done: AtomicBool,
    notify: Notify,
}

impl Group {
    /// Tells its callers that its first `written` lines reached the file (the others did not).
    pub fn finish(&self, written: usize) {
        self.written.store(written, Ordering::Relaxed);
        self.done.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// A line's place in its group, to wait on.
pub struct Receipt {
    group: Arc<Group>,
    index: usize,
}

impl Receipt {
    /// Waits for the group's write: whether the line reached the file.
    pub async fn written(self) -> bool {
        loop {
            let notified = self.group.notify.notified();
            tokio::pin!(notified);
            // Registered before `done` is read: a `finish` in between still wakes it.
            notified.as_mut().enable();
            if self.group.done.load(Ordering::Acquire) {
                return self.index < self.group.written.load(Ordering::Relaxed);
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: Kind) -> Queued {
        Queued {
            entry: AuditEntry {
                ts: String::new(),
                caller: None,
                caller_kind: None,
                tool: "t".into(),
                server: None,
                code: "OK",
                is_error: false,
                duration_ms: 0.0,
                trace_id: None,
                arguments: None,
                count: None,
            },
            kind,
            awaited: true,
        }
    }

    #[test]
    fn refused_lines_never_take_an_admitted_lines_room() {
        let mut queue = Queue::default();
        let refused = (0..REFUSED * 3)
            .filter(|_| queue.push(line(Kind::Refused)).is_some())
            .count();
        assert_eq!(refused, REFUSED, "refusals stop at their budget");
        let admitted = (0..ADMITTED + 10)
            .filter(|_| queue.push(line(Kind::Admitted)).is_some())
            .count();
        assert_eq!(admitted, ADMITTED, "every admitted line had its room");
        assert!(queue.push(line(Kind::Refused)).is_none());

        // A write takes them all: both budgets are whole again.
        let mut taken = Vec::new();
        let _group = queue.take(&mut taken).unwrap();
        assert_eq!(taken.len(), REFUSED + ADMITTED);
        assert!(queue.is_empty());
        assert!(queue.push(line(Kind::Refused)).is_some());
        assert!(queue.push(line(Kind::Admitted)).is_some());
    }

    #[tokio::test]
    async fn a_groups_callers_learn_whether_their_own_line_was_written() {
        let mut queue = Queue::default();
        let receipts: Vec<Receipt> = (0..3)
            .map(|_| queue.push(line(Kind::Admitted)).unwrap())
            .collect();
        let group = queue.take(&mut Vec::new()).unwrap();
        assert!(queue.take(&mut Vec::new()).is_none(), "nothing waits");
        let waiting = tokio::spawn(async move {
            let mut written = Vec::new();
            for receipt in receipts {
                written.push(receipt.written().await);
            }
            written
        });
        // A write that stopped after two lines.
        group.finish(2);
        assert_eq!(waiting.await.unwrap(), [true, true, false]);
        // The next group is a new one: its callers wait for their own write.
        let later = queue.push(line(Kind::Admitted)).unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(20), later.written());
        assert!(waited.await.is_err(), "not written yet");
    }
}

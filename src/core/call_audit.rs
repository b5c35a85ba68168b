//! The audit line of a call (CallTool, CallToolStream, the MCP face's `tools/call`): drafted
//! before it runs, written with its outcome before the answer is sent (the answer waits for
//! the write), or as `CANCELLED` when the caller went away. A call that ran and whose line
//! cannot be written is answered UNAVAILABLE instead (`audit.on_failure: refuse`); a refusal
//! stays a refusal.

use std::time::{Instant, SystemTime};

use super::{
    audit::{AuditLog, Kind, Receipt},
    broker::Broker,
};
use crate::domain::{
    audit::{AuditEntry, audited_arguments, audited_tool, milliseconds, timestamp},
    caller::CallerKey,
    request_error::RequestError,
};

/// What an audit line knows before the call runs.
pub struct Draft {
    ts: SystemTime,
    started: Instant,
    caller: Option<CallerKey>,
    tool: String,
    trace_id: Option<String>,
    arguments: Option<serde_json::Value>,
    count: Option<u64>,
}

impl Draft {
    /// A line begun now for a call of `tool` by `caller` (none if refused at the gate), in
    /// trace `trace_id`, with `arguments` (as sent) when they are audited.
    pub fn of(
        caller: Option<CallerKey>,
        tool: String,
        trace_id: Option<String>,
        arguments: Option<serde_json::Value>,
    ) -> Self {
        Self {
            ts: SystemTime::now(),
            started: Instant::now(),
            caller,
            tool,
            trace_id,
            arguments: arguments.map(audited_arguments),
            count: None,
        }
    }

    /// The line stands for `count` calls: the `tools/call`s of one refused request.
    pub fn times(mut self, count: usize) -> Self {
        self.count = (count > 1).then(|| u64::try_from(count).unwrap_or(u64::MAX));
        self
    }

    /// The line with the call's outcome, and the budget it takes: a call refused before it
    /// could run (at the gate, or by the checks after it) takes the refusals'.
    fn finish(
        self,
        result: Option<Result<Answered<'_>, &RequestError>>,
        owner: impl FnOnce(&str) -> Option<String>,
    ) -> (AuditEntry, Kind) {
        let refused =
            self.caller.is_none() || matches!(result, Some(Err(error)) if error.is_refusal());
        let kind = if refused {
            Kind::Refused
        } else {
            Kind::Admitted
        };
        let (code, is_error, server) = match result {
            Some(Ok(answered)) => ("OK", answered.is_error, Some(answered.server.to_owned())),
            Some(Err(error)) => (error.class().code.name(), false, owner(&self.tool)),
            // The caller went away (cancelled, or its deadline passed) before the answer.
            None => ("CANCELLED", false, owner(&self.tool)),
        };
        let (caller_kind, caller) = match self.caller {
            Some(key) => (Some(key.kind.name()), Some(key.id)),
            None => (None, None),
        };
        let entry = AuditEntry {
            ts: timestamp(self.ts),
            caller,
            caller_kind,
            tool: audited_tool(self.tool),
            server,
            code,
            is_error,
            duration_ms: milliseconds(self.started.elapsed()),
            trace_id: self.trace_id,
            arguments: self.arguments,
            count: self.count,
        };
        (entry, kind)
    }
}

/// A call that was answered: whether the tool reported an error, and the server that ran it.
pub struct Answered<'a> {
    /// The tool ran and reported an error.
    pub is_error: bool,
    /// The configured name of the server that ran it.
    pub server: &'a str,
}

/// An audit line still to be written: by [`Pending::finish`], or when dropped unfinished (the
/// caller went away and tonic dropped the call), as `CANCELLED`.
pub struct Pending<'a> {
    /// The line so far.
    pub draft: Option<Draft>,
    /// Where it goes.
    pub audit: &'a AuditLog,
    /// Who tells the tool's server.
    pub broker: &'a Broker,
}

impl Pending<'_> {
    /// Queues the line with the call's outcome, however it is answered; the answer waits
    /// for [`Commit::settle`]. A call refused because the log cannot be written has no line.
    pub fn commit(mut self, result: Result<Answered<'_>, &RequestError>) -> Commit {
        let unaudited = Commit {
            receipt: None,
            refuse: false,
        };
        let Some(draft) = self.draft.take() else {
            return unaudited;
        };
        if let Err(RequestError::AuditUnavailable) = result {
            return unaudited;
        }
        let (entry, kind) = draft.finish(Some(result), |tool| self.broker.owner(tool));
        Commit {
            refuse: kind == Kind::Admitted && self.audit.refuses(),
            receipt: self.audit.commit(entry, kind),
        }
    }
}

/// A line queued for the audit log, to wait on before the call is answered.
#[must_use = "the answer waits for its audit line"]
pub struct Commit {
    /// `None`: not queued (dropped), or nothing to write.
    receipt: Option<Receipt>,
    /// A call that ran: refused if its line is not written (`audit.on_failure: refuse`).
    refuse: bool,
}

impl Commit {
    /// Waits for the line's write: `result` as it is, or UNAVAILABLE when the line of a call
    /// that ran could not be written and `audit.on_failure` is `refuse`.
    pub async fn settle<T>(self, result: Result<T, RequestError>) -> Result<T, RequestError> {
        let written = match self.receipt {
            Some(receipt) => receipt.written().await,
            None => false,
        };
        if written || !self.refuse {
            result
        } else {
            Err(RequestError::AuditUnavailable)
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(draft) = self.draft.take() {
            let (entry, kind) = draft.finish(None, |tool| self.broker.owner(tool));
            self.audit.record(entry, kind);
        }
    }
}

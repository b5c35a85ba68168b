//! The audit line of a call (CallTool, CallToolStream, the MCP face's `tools/call`): drafted
//! before it runs, written with its outcome before the answer is sent (the answer waits for
//! the write), or as `CANCELLED` when the caller went away. A call that ran and whose line
//! cannot be written is answered UNAVAILABLE instead (`audit.on_failure: refuse`); a refusal
//! stays a refusal.

use std::time::{Instant, SystemTime};

use tonic::{Extensions, metadata::MetadataMap};

use super::{authenticate::Refused, convert, status::to_status};
use crate::{
    audit::{AuditLog, Kind, Receipt},
    auth::Caller,
    broker::Broker,
    domain::{
        audit::{AuditEntry, audited_arguments, audited_tool, milliseconds, timestamp},
        caller::CallerKey,
        request_error::RequestError,
    },
    proto,
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
    /// What is known of `call` before it runs: its caller (none if refused at the gate), its
    /// tool, its trace and, `with_arguments`, its arguments.
    pub fn new(
        call: &proto::CallToolRequest,
        metadata: &MetadataMap,
        extensions: &Extensions,
        with_arguments: bool,
    ) -> Self {
        let caller = match (extensions.get::<Refused>(), extensions.get::<Caller>()) {
            (Some(_), _) => None,
            (None, Some(caller)) => Some(caller.key.clone()),
            (None, None) => Some(Caller::anyone().key),
        };
        let arguments = with_arguments.then(|| match &call.arguments {
            Some(structured) => convert::struct_to_json(structured.clone())
                .map_or_else(|e| serde_json::Value::String(e.to_string()), Into::into),
            None if call.arguments_json.trim().is_empty() => serde_json::json!({}),
            None => serde_json::from_str(&call.arguments_json)
                .unwrap_or_else(|_| serde_json::Value::String(call.arguments_json.clone())),
        });
        Self::of(
            caller,
            call.name.clone(),
            crate::telemetry::current_trace_id(metadata),
            arguments,
        )
    }

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
            Some(Err(error)) => (code_name(error), false, owner(&self.tool)),
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
    /// Writes the line of a call's outcome and waits for the write: the answer to send.
    pub async fn finish(
        self,
        result: Result<proto::CallToolResponse, RequestError>,
    ) -> Result<proto::CallToolResponse, RequestError> {
        let answered = result.as_ref().map(|response| Answered {
            is_error: response.is_error,
            server: &response.server,
        });
        self.commit(answered).settle(result).await
    }

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

/// The gRPC status name a refusal is answered with.
fn code_name(error: &RequestError) -> &'static str {
    use tonic::Code;
    match to_status(error).code() {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

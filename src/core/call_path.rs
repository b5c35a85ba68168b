//! The one path of a tool call, whichever face it came through: counted among the calls in
//! flight, refused once shutdown began, checked against its view and the caller's grants and
//! against an audit log that cannot be written, then routed by the broker (rates, schema,
//! fixed arguments, timeout, the caller's own session). Each face decodes its request into a
//! [`ToolCall`], drafts its audit line and encodes the outcome; nothing else is its own.

use tokio_util::sync::CancellationToken;

use super::{
    audit::AuditLog,
    broker::{Broker, Called},
    call_audit::{Draft, Pending},
    in_flight::InFlight,
    tasks::Tasks,
    tool_call::ToolCall,
};
use crate::{auth::Caller, domain::request_error::RequestError};

/// What every face's calls go through.
#[derive(Clone)]
pub struct CallPath {
    broker: Broker,
    /// Cancelled at shutdown: new calls are refused.
    shutdown: CancellationToken,
    /// The calls running now, whichever face they came through.
    in_flight: InFlight,
    audit: Option<AuditLog>,
    /// Long calls, whichever face started them.
    tasks: Tasks,
}

impl CallPath {
    /// The path of calls routed by `broker`, refused once `shutdown` is cancelled, counted in
    /// `in_flight` and recorded in `audit`, if on; long ones kept in `tasks`.
    pub fn new(
        broker: Broker,
        shutdown: CancellationToken,
        in_flight: InFlight,
        audit: Option<AuditLog>,
        tasks: Tasks,
    ) -> Self {
        Self {
            broker,
            shutdown,
            in_flight,
            audit,
            tasks,
        }
    }

    /// Long calls (tasks), whichever face started them.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// The broker the calls are routed by.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// Cancelled at shutdown: new calls are refused (and Watch streams end).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// The calls running now.
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// The audit log, if on.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The audit line of a call begun with `draft` (told whether arguments are audited),
    /// written however the call ends; `None` without an audit log.
    pub fn audited(&self, draft: impl FnOnce(bool) -> Draft) -> Option<Pending<'_>> {
        let audit = self.audit.as_ref()?;
        Some(Pending {
            draft: Some(draft(audit.with_arguments())),
            audit,
            broker: &self.broker,
        })
    }

    /// Whether `caller` may call `tool` through `view` now: not once shutdown began
    /// (UNAVAILABLE), not a tool outside the view (NOT_FOUND, as for an unknown tool), not one
    /// the caller is not granted (PERMISSION_DENIED), not while the audit log refuses.
    pub fn admit(
        &self,
        view: Option<&str>,
        caller: &Caller,
        tool: &str,
    ) -> Result<(), RequestError> {
        if self.shutdown.is_cancelled() {
            return Err(RequestError::ShuttingDown);
        }
        if let Some(view) = view {
            self.broker.snapshot().views.admit_call(view, tool)?;
        }
        if !caller.may_use(tool) {
            return Err(RequestError::PermissionDenied {
                caller: caller.key.id.clone(),
                tool: tool.to_owned(),
            });
        }
        if let Some(audit) = &self.audit {
            audit.admit()?;
        }
        Ok(())
    }

    /// Runs `call`: admitted, then routed by the broker, counted in flight until it ends.
    pub async fn run(&self, call: ToolCall<'_>) -> Result<Called, RequestError> {
        let _counted = self.in_flight.start();
        self.admit(call.view, call.caller, call.name)?;
        self.broker.call(call).await
    }
}

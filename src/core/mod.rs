//! The core every face shares: the broker (the catalog's single writer, through which every call
//! is routed), the calls in flight, the configured call rates, the audit log, long calls (tasks),
//! and values derived once per catalog revision. It imports no face, and `upstream` never imports it.

pub(crate) mod audit;
pub(crate) mod broker;
pub(crate) mod call_audit;
pub(crate) mod call_path;
pub(crate) mod in_flight;
pub(crate) mod latest_revision;
pub(crate) mod rate_limits;
pub(crate) mod tasks;
pub(crate) mod tool_call;
pub(crate) mod unguessable;

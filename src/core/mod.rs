//! The core every face shares: the broker (the catalog's single writer, through which every call
//! is routed), the calls in flight, the configured call rates, the audit log, and values derived
//! once per catalog revision. It imports no face, and `upstream` never imports it.

pub mod audit;
pub mod broker;
pub mod call_audit;
pub mod call_path;
pub mod in_flight;
pub mod latest_revision;
pub mod rate_limits;
pub mod tool_call;

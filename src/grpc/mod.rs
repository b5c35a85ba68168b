//! The gRPC side: the ToolBroker service, its conversions and status table, and the
//! assembled router with health and reflection.

mod authenticate;
mod call_context;
pub mod convert;
mod deadline;
mod limit;
pub mod observe;
pub mod server;
pub mod service;
pub mod status;
mod tool_cache;
mod visibility;
mod watch;

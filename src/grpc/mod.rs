//! The gRPC side: the ToolBroker service, its conversions and status table, and the
//! assembled router with health and reflection.

pub mod convert;
mod deadline;
pub mod listing;
pub mod observe;
pub mod server;
pub mod service;
pub mod status;
mod visibility;
mod watch;

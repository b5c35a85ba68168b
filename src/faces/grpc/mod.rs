//! The gRPC side: the ToolBroker service, its conversions and status table, and the
//! assembled router with health and reflection.

mod audit_draft;
mod authenticate;
pub(crate) mod broker_service;
mod call_context;
mod call_stream;
mod deadline;
mod first_message;
mod limit;
pub(crate) mod messages;
pub(crate) mod observe;
pub mod offer_messages;
mod offers;
pub(crate) mod operations;
mod pre_encoded;
mod search;
pub(crate) mod server;
pub(crate) mod service;
pub(crate) mod status;
mod tool_cache;
pub(crate) mod unix_socket;
mod visibility;
mod warm_tools;
mod watch;

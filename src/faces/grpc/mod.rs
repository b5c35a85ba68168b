//! The gRPC side: the ToolBroker service, its conversions and status table, and the
//! assembled router with health and reflection.

mod audit_draft;
mod authenticate;
pub mod broker_service;
mod call_context;
mod call_stream;
mod deadline;
mod first_message;
mod limit;
pub mod messages;
pub mod observe;
pub mod offer_messages;
mod offers;
mod pre_encoded;
mod search;
pub mod server;
pub mod service;
pub mod status;
mod tool_cache;
pub mod unix_socket;
mod visibility;
mod warm_tools;
mod watch;

//! toolbroker: serves the tools of many MCP servers to agents over one gRPC contract.
//!
//! The pure core (`domain`) knows nothing of I/O; `upstream` speaks MCP, `grpc` speaks to agents,
//! `broker` owns the catalog between them, and `app` wires it all together.

// The one exception, setting a child's parent-death signal, is allowed where it is.
#![deny(unsafe_code)]

pub mod app;
pub mod auth;
pub mod cli;
pub mod client;
pub mod config_file;
pub mod conversation;
pub mod core;
pub mod demo_server;
pub mod domain;
pub mod foreign_errors;
pub mod grpc;
pub mod health;
pub mod login;
pub mod mcp_face;
pub mod mcp_lists;
pub mod mcp_model;
pub mod mcp_stdio;
pub mod metrics;
pub mod net;
pub mod proto;
pub mod reload;
pub mod telemetry;
pub mod tls;
pub mod tls_provider;
pub mod upstream;

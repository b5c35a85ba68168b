//! toolbroker: serves the tools of many MCP servers to agents over one gRPC contract.

pub mod domain;
pub mod proto;

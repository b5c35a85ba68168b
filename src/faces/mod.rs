//! The faces a caller meets: gRPC (`grpc`) and MCP (`mcp`: over streamable HTTP and the stdio
//! bridge). Each face turns its protocol into the core's call path; no face imports another.

pub mod grpc;
pub mod mcp;

//! The MCP faces: `http` (the broker as one MCP server over streamable HTTP), `stdio` (the
//! `mcp-stdio` bridge, a gRPC client of the broker) and what both share: `model` (one projection
//! of tools, resources and prompts, one refusal table), `lists` (list answers for MCP),
//! `rounds` (a call's questions to a 2026-07-28 client).

pub(crate) mod http;
pub(crate) mod lists;
pub(crate) mod model;
pub(crate) mod rounds;
pub mod stdio;

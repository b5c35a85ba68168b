//! The MCP side: sessions with the configured servers (spawned processes over stdio, or HTTP
//! endpoints over streamable HTTP or legacy SSE), one supervisor task per server, the handle
//! calls go through, and the port supervisors report through.

pub(crate) mod oauth;
pub(crate) mod pool;
pub(crate) mod session;
pub(crate) mod supervisor;
pub mod transport;

pub use session::requests::Upstream;
pub use supervisor::reporter::Reporter;

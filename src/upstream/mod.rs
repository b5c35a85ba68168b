//! The MCP side: sessions with the configured servers (spawned processes over stdio, or HTTP
//! endpoints over streamable HTTP or legacy SSE), one supervisor task per server, the handle
//! calls go through, and the port supervisors report through.

mod balance;
mod call_answers;
mod call_lane;
mod classify;
pub mod connect;
mod detect;
mod exchange;
mod explain;
mod faults;
pub mod fleet;
mod handle;
mod handler;
pub mod http;
pub mod interactions;
mod link;
pub mod oauth;
mod offers_list;
mod pages;
mod pipe_transport;
mod pipe_writer;
mod pool;
mod process;
mod reporter;
mod session;
mod slots;
mod spawner;
pub mod sse;
mod stdout_guard;
mod supervisor;
mod tap;
mod tools_list;
mod traced_http;
mod write_queue;

pub use handle::Upstream;
pub use reporter::Reporter;

//! How messages reach a server: stdio (a spawned process's pipes), streamable HTTP and the
//! legacy HTTP+SSE transport, the wrapper that taps what a server sends, and the typed reasons
//! a transport gives its calls when an answer does not come.

pub(crate) mod explain;
pub(crate) mod faults;
pub(crate) mod http;
pub mod sse;
pub(crate) mod stdio;
pub(crate) mod tap;

//! The stdio transport: each server a child process (forked by one thread, in its own process
//! group), newline-delimited JSON-RPC over its pipes, writes queued and finished or never
//! started, and `tools/call` sent and answered on a lane beside rmcp's service loop.

pub(crate) mod call_answers;
pub(crate) mod call_lane;
pub(crate) mod pipe_transport;
pub(crate) mod pipe_writer;
pub(crate) mod process;
pub(crate) mod spawner;
pub(crate) mod stdout_guard;
pub(crate) mod write_queue;

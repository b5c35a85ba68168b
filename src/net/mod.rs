//! Client connections before any HTTP server sees them: one budget of open connections across
//! the gRPC port, the Unix socket and the MCP face (`limits.max_connections`), the open-file
//! limit that budget needs, and the deadline on an HTTP/2 connection's first request head
//! (`limits.header_timeout`). What a stranger can hold before anyone knows who it is.

pub(crate) mod budget;
pub(crate) mod guarded;
pub(crate) mod listen;
pub(crate) mod open_files;

pub use budget::{ConnectionBudget, ListenerKind};
pub use guarded::Guarded;
pub use listen::Admitted;

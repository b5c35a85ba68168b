//! Logging: human-readable or JSON lines on stderr, filtered by `RUST_LOG` (default: `info`, with
//! rmcp's per-message chatter at `warn`). Stderr, because stdout carries the MCP protocol when
//! this binary is a demo server.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt};

use crate::cli::LogFormat;

/// The filter used when `RUST_LOG` is not set.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Who is logging: a child's lines are stamped again by the broker that reads its stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The broker (or a client subcommand).
    Broker,
    /// A demo server, whose stderr a broker logs line by line.
    McpServer,
}

/// Installs the global subscriber. Call once, first thing.
pub fn init(format: LogFormat, role: Role) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match (format, role) {
        (LogFormat::Json, _) => builder.json().flatten_event(true).init(),
        (LogFormat::Text, Role::McpServer) => builder.without_time().init(),
        (LogFormat::Text, Role::Broker) => builder.init(),
    }
}

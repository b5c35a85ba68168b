//! The MCP side: sessions with the configured servers (spawned processes over stdio, or HTTP
//! endpoints over streamable HTTP or legacy SSE), one supervisor task per server, and the handle
//! calls go through.

mod balance;
mod calls;
mod connect;
mod detect;
pub mod fleet;
mod handler;
mod http;
mod listing;
pub mod process;
mod session;
pub mod sse;
pub mod stdout_guard;
pub mod supervisor;
mod traced_http;

pub use calls::Upstream;
pub use http::install_tls_provider;

use std::time::Duration;

use rmcp::service::ServiceError;

use crate::domain::{call::CallError, names::ServerName};

/// Why a session could not be set up. Shown in the server's status message.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The command could not be started.
    #[error("cannot start {command:?}: {source}{}", spawn_hint(source))]
    Spawn {
        /// The configured command.
        command: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The server ended or broke the protocol during start-up.
    #[error("{0}")]
    Startup(String),
    /// Start-up did not finish in time.
    #[error("did not finish starting within {} (init_timeout){}", humantime::format_duration(*.after), tail_note(.stderr))]
    InitTimeout {
        /// The configured init_timeout.
        after: Duration,
        /// The last stderr lines, if any.
        stderr: Option<String>,
    },
}

fn spawn_hint(source: &std::io::Error) -> &'static str {
    match source.kind() {
        std::io::ErrorKind::NotFound => " (is it installed and on PATH, or is cwd wrong?)",
        std::io::ErrorKind::PermissionDenied => " (is it executable?)",
        _ => "",
    }
}

/// " (stderr: ...)" when there is something to show.
fn tail_note(stderr: &Option<String>) -> String {
    stderr
        .as_deref()
        .map(|tail| format!("; stderr: {tail}"))
        .unwrap_or_default()
}

/// Whether an HTTP transport refused a response over `max_json_response_size`.
fn too_large(error: &rmcp::transport::DynamicTransportError) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    matches!(
        error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        Some(StreamableHttpError::ResponseBodyTooLarge { .. })
    )
}

/// Part of the message rmcp 3.11's streamable HTTP client gives calls that were in flight when it
/// had to re-initialize the session.
const REINITIALIZED_DURING_CALL: &str = "session was re-initialized before the response arrived";

/// The one place rmcp's errors become call errors; `max_result_bytes` is the server's
/// `limits.max_result_bytes`, which a result over it is reported against.
pub fn classify(server: &ServerName, max_result_bytes: usize, error: ServiceError) -> CallError {
    let server = server.clone();
    match error {
        // rmcp answers a call pending when it had to open a new session with this error: the
        // server lost the call, which is a lost session, not a server's verdict.
        ServiceError::McpError(e) if e.message.contains(REINITIALIZED_DURING_CALL) => {
            CallError::SessionLost {
                server,
                detail: "the server lost the session during the call (did it restart?); the \
                         call may or may not have run, and was not repeated"
                    .into(),
            }
        }
        ServiceError::McpError(e) if e.message.starts_with(traced_http::RESULT_TOO_LARGE) => {
            CallError::ResultTooLarge {
                server,
                limit: max_result_bytes,
                consequence: "the call failed; the session goes on",
            }
        }
        ServiceError::McpError(e) => CallError::ServerError {
            server,
            code: e.code.0,
            message: e.message.into_owned(),
        },
        ServiceError::TransportClosed => CallError::SessionLost {
            server,
            detail: "the connection closed before the answer came (the call may or may not have \
                     run; it was not repeated)"
                .into(),
        },
        ServiceError::TransportSend(error) if too_large(&error) => CallError::ResultTooLarge {
            server,
            limit: max_result_bytes,
            consequence: "the call failed; the session goes on",
        },
        ServiceError::TransportSend(error) => CallError::SessionLost {
            server,
            detail: http::explain(&error),
        },
        ServiceError::Cancelled { reason } => CallError::SessionLost {
            server,
            detail: format!(
                "the request was cancelled ({})",
                reason.as_deref().unwrap_or("no reason given")
            ),
        },
        ServiceError::Timeout { timeout } => CallError::Timeout {
            server,
            after: timeout,
        },
        ServiceError::UnexpectedResponse => CallError::BadResult {
            server,
            reason: "it answered tools/call with something other than a tool result".into(),
        },
        other => CallError::BadResult {
            server,
            reason: other.to_string(),
        },
    }
}

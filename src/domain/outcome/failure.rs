//! The small facts start-up failures and session ends are made of: how a process exited, why a
//! transport cut a server's stream, and why a request to a server failed. Pure.

use std::fmt;

use http::StatusCode;

/// How a server process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessExit {
    /// It exited with this status.
    Status(i32),
    /// A signal killed it.
    Signal(i32),
    /// It ended in a way the platform describes so.
    Other(String),
    /// Waiting for it failed (the OS said why).
    Unwaitable(String),
}

impl fmt::Display for ProcessExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessExit::Status(code) => write!(f, "exited with status {code}"),
            ProcessExit::Signal(signal) => write!(f, "was killed by signal {signal}"),
            ProcessExit::Other(how) => write!(f, "ended ({how})"),
            ProcessExit::Unwaitable(why) => write!(f, "could not be waited for: {why}"),
        }
    }
}

/// Why a transport cut a server's message stream: it can no longer be trusted, or it carried a
/// message over the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamFault {
    /// A stdout line that cannot be JSON-RPC (quoted, shortened).
    NotJsonRpc(String),
    /// A message (stdout line, SSE event) longer than the limit in bytes:
    /// `limits.max_result_bytes`.
    TooLong(usize),
}

impl fmt::Display for StreamFault {
    /// Worded to follow "the server".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamFault::NotJsonRpc(quoted) => write!(
                f,
                "wrote text that is not JSON-RPC to stdout ({quoted:?}); MCP servers must log to stderr"
            ),
            StreamFault::TooLong(limit) => write!(
                f,
                "wrote a message longer than {limit} bytes (limits.max_result_bytes); the session was dropped"
            ),
        }
    }
}

/// Why a request to a server failed, as far as a user can act on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportFailure {
    /// The TLS handshake failed (rustls said why).
    Tls(String),
    /// Nothing listens at the address.
    Refused,
    /// The host name did not resolve (the chain of causes).
    Dns(String),
    /// The request timed out (the chain of causes).
    TimedOut(String),
    /// The server answered with this (unsuccessful) status.
    Status(StatusCode),
    /// Anything else: the chain of causes.
    Other(String),
}

impl fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportFailure::Tls(why) => write!(f, "TLS handshake failed: {why}"),
            TransportFailure::Refused => f.write_str(
                "connection refused: nothing listens at that address (is the server running?)",
            ),
            TransportFailure::Dns(chain) => {
                write!(f, "cannot resolve the host name (DNS): {chain}")
            }
            TransportFailure::TimedOut(chain) => write!(f, "the request timed out: {chain}"),
            TransportFailure::Status(status) => write!(f, "{}", StatusText(*status)),
            TransportFailure::Other(chain) => f.write_str(chain),
        }
    }
}

/// An HTTP status as a refusal, with a hint for the statuses users can fix.
pub(super) struct StatusText(pub StatusCode);

impl fmt::Display for StatusText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.0;
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => write!(
                f,
                "HTTP {status}: the server refused the credentials; a header or token is probably \
                 missing or wrong (set it under `headers`, e.g. Authorization: \"Bearer ${{TOKEN}}\")"
            ),
            _ => write!(f, "HTTP {status}"),
        }
    }
}

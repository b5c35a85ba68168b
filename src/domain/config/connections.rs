//! Connection limits under `limits`: how many client connections are open at once, how many
//! HTTP/2 streams one may have, and how long a new one may take to send a request head. Pure.

use std::time::Duration;

use serde_json::Value;

use super::validate::Checker;

/// Client connections open at once, when `limits` gives no number.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// The most connections `limits.max_connections` may allow: each holds a file descriptor.
pub const MAX_CONNECTIONS: u64 = 1_000_000;
/// HTTP/2 streams per connection, when `limits` gives no number.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 256;
/// The most streams per connection `limits.max_concurrent_streams` may allow.
pub const MAX_CONCURRENT_STREAMS: u64 = 65_536;
/// How long a connection may take to send its first request head, when `limits` gives none.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `limits.header_timeout`: longer is no longer a bound on a stranger.
pub const MAX_HEADER_TIMEOUT: Duration = Duration::from_secs(3600);

/// What a client connection may hold before anyone knows who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once over the gRPC port, the Unix socket and the MCP face
    /// together; the next is closed at once.
    pub max_connections: usize,
    /// HTTP/2 streams one gRPC connection may have open; more are refused (REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// A connection closed if it has not sent a complete request head by then; a
    /// `CallToolStream` whose first message has not come by then ends (DEADLINE_EXCEEDED).
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

impl Checker<'_, '_> {
    /// `limits.max_connections`, `limits.max_concurrent_streams` and `limits.header_timeout`,
    /// each within its bounds.
    pub(super) fn connection_limits(
        &mut self,
        max_connections: Option<u64>,
        max_concurrent_streams: Option<u64>,
        header_timeout: Option<Value>,
    ) -> ConnectionLimits {
        let defaults = ConnectionLimits::default();
        let max_concurrent_streams = self.count(
            max_concurrent_streams,
            defaults.max_concurrent_streams as usize,
            1..=MAX_CONCURRENT_STREAMS,
            "limits.max_concurrent_streams",
        );
        let header_timeout = self.duration_at_most(
            header_timeout,
            defaults.header_timeout,
            MAX_HEADER_TIMEOUT,
            "limits.header_timeout",
        );
        ConnectionLimits {
            max_connections: self.count(
                max_connections,
                defaults.max_connections,
                1..=MAX_CONNECTIONS,
                "limits.max_connections",
            ),
            max_concurrent_streams: u32::try_from(max_concurrent_streams)
                .unwrap_or(defaults.max_concurrent_streams),
            header_timeout,
        }
    }
}

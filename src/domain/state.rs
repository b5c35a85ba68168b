//! Server connection states, the transports sessions speak, and the readiness policy. Pure.

use std::time::SystemTime;

use super::icon::Icons;

/// The connection state of one configured MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// First connection attempt under way.
    Connecting,
    /// Connected; its tools are served.
    Ready,
    /// The session was lost and is being set up again.
    Reconnecting,
    /// Could not connect, or gave up; see the message.
    Failed,
    /// Stopped on purpose.
    Stopped,
}

impl ServerState {
    /// The state's name as callers read it in messages and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Ready => "ready",
            ServerState::Reconnecting => "reconnecting",
            ServerState::Failed => "failed",
            ServerState::Stopped => "stopped",
        }
    }
}

/// The MCP transport a server is reached over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC over its stdin and stdout.
    Stdio,
    /// Streamable HTTP, the current MCP HTTP transport.
    StreamableHttp,
    /// Legacy HTTP+SSE (MCP 2024-11-05).
    Sse,
    /// An HTTP URL whose transport is detected on connect (and reported then).
    Auto,
}

impl Transport {
    /// The name shown in `ServerStatus.transport` and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamable-http",
            Transport::Sse => "sse",
            Transport::Auto => "auto",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When the broker as a whole reports itself ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Readiness {
    /// Once every server has finished its first connection attempt, whatever its outcome.
    #[default]
    FirstAttempt,
    /// Only while every server is READY.
    All,
}

/// What the broker knows about one server's session (the supervisor's side of a status).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerCondition {
    /// The state.
    pub state: ServerState,
    /// A human explanation, e.g. why it failed.
    pub message: String,
    /// The transport in use (`Auto` until an HTTP server's transport is detected).
    pub transport: Transport,
    /// How many times the session was restarted.
    pub restarts: u32,
    /// When the server entered `state`.
    pub since: SystemTime,
    /// The MCP protocol version spoken with it, while READY.
    pub protocol: Option<String>,
    /// The icons it gave for itself, while READY.
    pub icons: Icons,
}

/// Whether the broker is ready under `policy`, given every configured server's state.
pub fn is_ready(policy: Readiness, states: impl IntoIterator<Item = ServerState>) -> bool {
    let mut states = states.into_iter();
    match policy {
        Readiness::FirstAttempt => states.all(|s| s != ServerState::Connecting),
        Readiness::All => states.all(|s| s == ServerState::Ready),
    }
}

#[cfg(test)]
mod tests {
    use super::{Readiness, ServerState::*, is_ready};

    #[test]
    fn readiness_follows_policy() {
        let cases = [
            (Readiness::FirstAttempt, vec![], true),
            (Readiness::FirstAttempt, vec![Ready, Failed], true),
            (Readiness::FirstAttempt, vec![Ready, Connecting], false),
            (Readiness::FirstAttempt, vec![Reconnecting], true),
            (Readiness::All, vec![Ready, Ready], true),
            (Readiness::All, vec![Ready, Failed], false),
            (Readiness::All, vec![], true),
        ];
        for (policy, states, want) in cases {
            assert_eq!(
                is_ready(policy, states.clone()),
                want,
                "{policy:?} {states:?}"
            );
        }
    }
}

//! What happened to a server's sessions, typed: why one did not start ([`StartError`]), why one
//! ended ([`SessionLoss`]), and the phase a server is in ([`Phase`]). The MCP side reports
//! these values; this module is the one place that words them, where a [`ServerCondition`]'s
//! message is made. Pure.

mod failure;
mod oauth;
mod start;

pub use failure::{ProcessExit, StreamFault, TransportFailure};
pub use oauth::{LoginHint, NoStepUp, OAuthFailure, TokenStep};
pub use start::{ListingFailure, StartError, StartFailure};

use std::{fmt, time::Duration, time::SystemTime};

use super::{
    icon::Icons,
    state::{ServerCondition, ServerState, Transport},
};

/// Why a running session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The server process exited.
    Exited(ProcessExit),
    /// The transport cut the server's stream (garbage on stdout, an over-long message).
    Stream(StreamFault),
    /// The server closed the connection (a pipe or the event stream).
    Closed,
    /// The MCP session loop ended for another reason (rmcp's `QuitReason`).
    Ended(String),
    /// The MCP session loop's task failed (a panic or an abort).
    TaskFailed(String),
    /// An HTTP server failed a liveness ping.
    PingFailed(TransportFailure),
    /// An HTTP server did not answer a liveness ping in time.
    PingUnanswered(Duration),
    /// The broker has no OAuth token the server accepts.
    Authorization(OAuthFailure),
}

impl fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionEnd::Exited(exit) => write!(f, "the server {exit}"),
            SessionEnd::Stream(fault) => write!(f, "the server {fault}"),
            SessionEnd::Closed => f.write_str("the server closed the connection"),
            SessionEnd::Ended(reason) => write!(f, "the session ended ({reason})"),
            SessionEnd::TaskFailed(why) => write!(f, "the session task failed: {why}"),
            SessionEnd::PingFailed(failure) => {
                write!(f, "the server did not answer a ping: {failure}")
            }
            SessionEnd::Authorization(failure) => write!(f, "{failure}"),
            SessionEnd::PingUnanswered(after) => write!(
                f,
                "the server did not answer a ping within {}",
                humantime::format_duration(*after)
            ),
        }
    }
}

/// A session that ended, and the last lines its server wrote to stderr, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLoss {
    /// Why it ended.
    pub end: SessionEnd,
    /// The server's last stderr lines (stdio), joined.
    pub stderr: Option<String>,
}

impl fmt::Display for SessionLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.end)?;
        stderr_note(f, self.stderr.as_deref())
    }
}

/// "; stderr: ..." when the server wrote something.
fn stderr_note(f: &mut fmt::Formatter<'_>, stderr: Option<&str>) -> fmt::Result {
    match stderr {
        Some(tail) => write!(f, "; stderr: {tail}"),
        None => Ok(()),
    }
}

/// Who the server said it is at initialize.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerInfo {
    /// Its `serverInfo` name and version, if it gave them.
    pub server: Option<(String, String)>,
    /// The protocol version negotiated, if known.
    pub protocol: Option<String>,
    /// The icons it gave for itself.
    pub icons: Icons,
}

impl fmt::Display for PeerInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.server, &self.protocol) {
            (Some((name, version)), Some(protocol)) => {
                write!(f, "connected to {name} {version} (MCP {protocol})")
            }
            (Some((name, version)), None) => write!(f, "connected to {name} {version}"),
            (None, Some(protocol)) => write!(f, "connected (MCP {protocol})"),
            (None, None) => f.write_str("connected"),
        }
    }
}

/// What set a server back: it failed to start, or its session was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setback {
    /// Start-up failed.
    StartFailed(StartError),
    /// A running session ended.
    Lost(SessionLoss),
}

impl fmt::Display for Setback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setback::StartFailed(error) => write!(f, "{error}"),
            Setback::Lost(loss) => write!(f, "session lost: {loss}"),
        }
    }
}

/// What a server (or one of its replicas) is doing, as its supervisor reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The first attempt to start it is under way.
    Starting,
    /// Attempt `attempt` after a setback is under way.
    Reconnecting {
        /// How many restarts so far.
        attempt: u32,
    },
    /// Connected, serving its tools.
    Ready(PeerInfo),
    /// Its session was just lost; calls are no longer routed to it.
    Lost(SessionLoss),
    /// Set back, and waiting `delay` before the next attempt.
    Retrying {
        /// What happened.
        setback: Setback,
        /// The wait before the next attempt.
        delay: Duration,
    },
    /// Stopped on purpose.
    Stopped,
}

impl Phase {
    /// The state a server in this phase is in.
    pub fn state(&self) -> ServerState {
        match self {
            Phase::Starting => ServerState::Connecting,
            Phase::Reconnecting { .. } | Phase::Lost(_) => ServerState::Reconnecting,
            Phase::Ready(_) => ServerState::Ready,
            Phase::Retrying {
                setback: Setback::StartFailed(_),
                ..
            } => ServerState::Failed,
            Phase::Retrying {
                setback: Setback::Lost(_),
                ..
            } => ServerState::Reconnecting,
            Phase::Stopped => ServerState::Stopped,
        }
    }

    /// The condition a server in this phase is in, its message worded here.
    pub fn condition(
        &self,
        transport: Transport,
        restarts: u32,
        since: SystemTime,
    ) -> ServerCondition {
        ServerCondition {
            state: self.state(),
            message: self.to_string(),
            transport,
            restarts,
            since,
            protocol: self.peer().and_then(|peer| peer.protocol.clone()),
            icons: self
                .peer()
                .map(|peer| peer.icons.clone())
                .unwrap_or_default(),
        }
    }

    /// Who the server said it is, while it is ready.
    fn peer(&self) -> Option<&PeerInfo> {
        match self {
            Phase::Ready(peer) => Some(peer),
            _ => None,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Starting => f.write_str("starting"),
            Phase::Reconnecting { attempt } => write!(f, "reconnecting (attempt {attempt})"),
            Phase::Ready(peer) => write!(f, "{peer}"),
            Phase::Lost(loss) => write!(f, "session lost: {loss}"),
            Phase::Retrying { setback, delay } => {
                // Whole milliseconds: jitter makes finer digits noise.
                let delay = Duration::from_millis(delay.as_millis().try_into().unwrap_or(u64::MAX));
                write!(
                    f,
                    "{setback}; next attempt in {}",
                    humantime::format_duration(delay)
                )
            }
            Phase::Stopped => f.write_str("stopped"),
        }
    }
}

#[cfg(test)]
mod tests;

//! One replica of a server: start its session, report it ready, follow `tools/list_changed`,
//! notice when the session dies, and start it again with backoff, until told to stop. What it
//! sees goes to the server's [`Board`].

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{board::Board, initial_condition};
use crate::{
    domain::{
        backoff,
        config::ServerSpec,
        state::{ServerCondition, ServerState},
        tool::ToolSpec,
    },
    upstream::session::Session,
};

/// A session that stayed up this long was healthy: the next failure starts backoff afresh.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// How often an idle HTTP session is pinged: unlike a child process, a remote server can go
/// away without anything on our side noticing.
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a ping may take before the session counts as dead.
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Owns one replica's session for as long as the server runs.
pub(super) struct ReplicaLoop<'a> {
    index: usize,
    spec: &'a ServerSpec,
    board: &'a Board,
    stop: &'a CancellationToken,
    restarts: u32,
}

impl<'a> ReplicaLoop<'a> {
    /// Replica `index` (from 0) of the server `spec` describes.
    pub(super) fn new(
        index: usize,
        spec: &'a ServerSpec,
        board: &'a Board,
        stop: &'a CancellationToken,
    ) -> Self {
        Self {
            index,
            spec,
            board,
            stop,
            restarts: 0,
        }
    }

    /// Runs until `stop` is cancelled: connect, serve, and after every failure wait (backoff
    /// with jitter) and connect again. The session and its process are closed before return.
    pub(super) async fn run(mut self) {
        let mut attempt = 0;
        let mut state = ServerState::Connecting;
        loop {
            let message = match state {
                ServerState::Connecting => "starting".to_owned(),
                _ => format!("reconnecting (attempt {})", self.restarts),
            };
            self.report(state, message);
            let started = tokio::select! {
                biased;
                _ = self.stop.cancelled() => return,
                started = Session::start(self.spec) => started,
            };
            let failure = match started {
                Ok((session, tools)) => {
                    let up = Instant::now();
                    let Some(why) = self.serve(session, tools).await else {
                        return;
                    };
                    if up.elapsed() >= STABLE_AFTER {
                        attempt = 0;
                    }
                    state = ServerState::Reconnecting;
                    format!("session lost: the server {why}")
                }
                Err(error) => {
                    tracing::warn!(server = %self.spec.name, replica = self.index + 1, %error,
                        "server failed to start");
                    state = ServerState::Failed;
                    error.to_string()
                }
            };
            if !self.wait_before_restart(state, &failure, attempt).await {
                return;
            }
            attempt = attempt.saturating_add(1);
            self.restarts += 1;
            state = ServerState::Reconnecting;
        }
    }

    /// Shows why the replica is down and when it is tried again, then waits; false if told to
    /// stop meanwhile.
    async fn wait_before_restart(&self, state: ServerState, failure: &str, attempt: u32) -> bool {
        let backoff = self.spec.backoff;
        let delay = backoff::delay(attempt, backoff.initial, backoff.max, fastrand::f64());
        let retry = humantime::format_duration(Duration::from_millis(delay.as_millis() as u64));
        self.report(state, format!("{failure}; next attempt in {retry}"));
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }

    /// Reports a READY session and follows it until it dies (`Some(why)`) or the replica is
    /// told to stop (`None`, after closing the session).
    async fn serve(&self, mut session: Session, tools: Vec<ToolSpec>) -> Option<String> {
        let name = &self.spec.name;
        let replica = self.index + 1;
        tracing::info!(server = %name, replica, tools = tools.len(), transport = session.transport,
            "{}", session.description);
        let mut ready = self.condition(ServerState::Ready, session.description.clone());
        ready.transport = session.transport.into();
        let link = session.link(self.spec);
        self.board
            .ready(self.index, ready, session.replica(), link, tools);
        let tools_changed = session.tools_changed.clone();
        let suspect = session.suspect.clone();
        let pings = session.transport != "stdio";
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => {
                    let how = session.close().await;
                    tracing::info!(server = %name, replica, "stopped; the server {how}");
                    return None;
                }
                why = session.ended() => return Some(self.lost(session, why).await),
                _ = tools_changed.notified() => self.refresh(&session).await,
                _ = suspect.notified(), if pings => {
                    if let Err(why) = session.ping(PING_TIMEOUT).await {
                        return Some(self.lost(session, why).await);
                    }
                }
                _ = tokio::time::sleep(PING_EVERY), if pings => {
                    if let Err(why) = session.ping(PING_TIMEOUT).await {
                        return Some(self.lost(session, why).await);
                    }
                }
            }
        }
    }

    /// A dead session: withdraw it at once (calls stop being routed to it, and the server's
    /// tools go if no other replica is ready), then close what is left of it.
    async fn lost(&self, session: Session, why: String) -> String {
        let name = &self.spec.name;
        tracing::warn!(server = %name, replica = self.index + 1, "session lost: the server {why}");
        let message = format!("session lost: the server {why}");
        self.report(ServerState::Reconnecting, message);
        session.close().await;
        why
    }

    /// Lists the tools again after `tools/list_changed`; on failure the old list stays.
    async fn refresh(&self, session: &Session) {
        let name = &self.spec.name;
        match tokio::time::timeout(self.spec.timeout, session.list_tools()).await {
            Ok(Ok(tools)) => {
                tracing::info!(server = %name, tools = tools.len(), "tool list changed");
                self.board.tools(tools);
            }
            Ok(Err(error)) => tracing::warn!(server = %name, %error, "re-listing tools failed"),
            Err(_) => tracing::warn!(server = %name, "re-listing tools timed out"),
        }
    }

    fn condition(&self, state: ServerState, message: String) -> ServerCondition {
        ServerCondition {
            state,
            message,
            restarts: self.restarts,
            ..initial_condition(self.spec)
        }
    }

    fn report(&self, state: ServerState, message: String) {
        self.board
            .report(self.index, self.condition(state, message));
    }
}

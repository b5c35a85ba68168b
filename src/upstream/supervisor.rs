//! One task per configured server: start its session, publish its tools and state, follow
//! `tools/list_changed`, notice when the session dies, and start it again with backoff, until
//! told to stop.

use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use super::session::Session;
use crate::{
    broker::Broker,
    domain::{
        backoff,
        config::ServerSpec,
        state::{ServerCondition, ServerState},
    },
};

/// A session that stayed up this long was healthy: the next failure starts backoff afresh.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// How often an idle HTTP session is pinged: unlike a child process, a remote server can go
/// away without anything on our side noticing.
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a ping may take before the session counts as dead.
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Owns one server's session for as long as the server is configured.
pub struct Supervisor {
    spec: ServerSpec,
    broker: Broker,
    stop: CancellationToken,
    restarts: u32,
}

/// The condition a server is in before its supervisor has done anything.
pub fn initial_condition(spec: &ServerSpec) -> ServerCondition {
    ServerCondition {
        state: ServerState::Connecting,
        message: "starting".into(),
        transport: spec.transport.name().into(),
        restarts: 0,
        since: SystemTime::now(),
    }
}

impl Supervisor {
    /// A supervisor that reports to `broker` and stops when `stop` is cancelled.
    pub fn new(spec: ServerSpec, broker: Broker, stop: CancellationToken) -> Self {
        Self {
            spec,
            broker,
            stop,
            restarts: 0,
        }
    }

    /// Runs until `stop` is cancelled: connect, serve, and after every failure wait (backoff
    /// with jitter) and connect again. The session and its process are closed before return.
    pub async fn run(mut self) {
        let mut attempt = 0;
        let mut state = ServerState::Connecting;
        loop {
            let message = match state {
                ServerState::Connecting => "starting".to_owned(),
                _ => format!("reconnecting (attempt {})", self.restarts),
            };
            self.report(state, message, None);
            let started = tokio::select! {
                biased;
                _ = self.stop.cancelled() => break,
                started = Session::start(&self.spec) => started,
            };
            let failure = match started {
                Ok((session, tools)) => {
                    let up = Instant::now();
                    let Some(why) = self.serve(session, tools).await else {
                        return self.report(ServerState::Stopped, "stopped".into(), None);
                    };
                    if up.elapsed() >= STABLE_AFTER {
                        attempt = 0;
                    }
                    state = ServerState::Reconnecting;
                    format!("session lost: the server {why}")
                }
                Err(error) => {
                    tracing::warn!(server = %self.spec.name, %error, "server failed to start");
                    state = ServerState::Failed;
                    error.to_string()
                }
            };
            if !self.wait_before_restart(state, &failure, attempt).await {
                break;
            }
            attempt = attempt.saturating_add(1);
            self.restarts += 1;
            state = ServerState::Reconnecting;
        }
        self.report(ServerState::Stopped, "stopped".into(), None);
    }

    /// Shows why the server is down and when it is tried again, then waits; false if told to
    /// stop meanwhile.
    async fn wait_before_restart(&self, state: ServerState, failure: &str, attempt: u32) -> bool {
        let backoff = self.spec.backoff;
        let delay = backoff::delay(attempt, backoff.initial, backoff.max, fastrand::f64());
        let retry = humantime::format_duration(Duration::from_millis(delay.as_millis() as u64));
        self.report(state, format!("{failure}; next attempt in {retry}"), None);
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }

    /// Publishes a READY session and follows it until it dies (`Some(why)`) or the supervisor
    /// is told to stop (`None`, after closing the session).
    async fn serve(
        &self,
        mut session: Session,
        tools: Vec<crate::domain::tool::ToolSpec>,
    ) -> Option<String> {
        let name = &self.spec.name;
        tracing::info!(server = %name, tools = tools.len(), transport = session.transport, "{}", session.description);
        self.broker.set_tools(name, tools);
        let upstream = session.upstream(&self.spec);
        let mut ready = self.condition(ServerState::Ready, session.description.clone());
        ready.transport = session.transport.into();
        self.broker.set_condition(name, ready, Some(upstream));
        let tools_changed = session.tools_changed.clone();
        let suspect = session.suspect.clone();
        let pings = session.transport != "stdio";
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => {
                    let how = session.close().await;
                    tracing::info!(server = %name, "stopped; the server {how}");
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

    /// A dead session: withdraw it from the broker at once (its tools go, calls stop being
    /// routed to it), then close what is left of it.
    async fn lost(&self, session: Session, why: String) -> String {
        let name = &self.spec.name;
        tracing::warn!(server = %name, "session lost: the server {why}");
        let message = format!("session lost: the server {why}");
        self.report(ServerState::Reconnecting, message, None);
        session.close().await;
        why
    }

    /// Lists the tools again after `tools/list_changed`; on failure the old list stays.
    async fn refresh(&self, session: &Session) {
        let name = &self.spec.name;
        match tokio::time::timeout(self.spec.timeout, session.list_tools()).await {
            Ok(Ok(tools)) => {
                tracing::info!(server = %name, tools = tools.len(), "tool list changed");
                self.broker.set_tools(name, tools);
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
            ..initial_condition(&self.spec)
        }
    }

    fn report(&self, state: ServerState, message: String, upstream: Option<super::Upstream>) {
        let condition = self.condition(state, message);
        self.broker
            .set_condition(&self.spec.name, condition, upstream);
    }
}

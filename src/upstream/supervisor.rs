//! One task per configured server: start its session, publish its tools and state, follow
//! `tools/list_changed`, notice when the session ends, and close it on shutdown.

use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use super::session::Session;
use crate::{
    broker::Broker,
    domain::{
        config::ServerSpec,
        state::{ServerCondition, ServerState},
    },
};

/// Owns one server's session for the life of the broker.
pub struct Supervisor {
    spec: ServerSpec,
    broker: Broker,
    stop: CancellationToken,
}

/// The condition a server is in before its supervisor has done anything.
pub fn initial_condition(spec: &ServerSpec) -> ServerCondition {
    condition(spec, ServerState::Connecting, "starting".into())
}

fn condition(spec: &ServerSpec, state: ServerState, message: String) -> ServerCondition {
    ServerCondition {
        state,
        message,
        transport: spec.transport.name().into(),
        restarts: 0,
        since: SystemTime::now(),
    }
}

impl Supervisor {
    /// A supervisor that reports to `broker` and stops when `stop` is cancelled.
    pub fn new(spec: ServerSpec, broker: Broker, stop: CancellationToken) -> Self {
        Self { spec, broker, stop }
    }

    /// Runs until `stop` is cancelled; the session (and its process) is closed before return.
    pub async fn run(self) {
        let name = &self.spec.name;
        let started = tokio::select! {
            biased;
            _ = self.stop.cancelled() => return self.report(ServerState::Stopped, "stopped while starting".into()),
            started = Session::start(&self.spec) => started,
        };
        match started {
            Ok((session, tools)) => {
                tracing::info!(server = %name, tools = tools.len(), "{}", session.description);
                self.broker.set_tools(name, tools);
                let mut ready =
                    condition(&self.spec, ServerState::Ready, session.description.clone());
                ready.transport = session.transport.into();
                self.broker
                    .set_condition(name, ready, Some(session.upstream(&self.spec)));
                self.serve(session).await;
            }
            Err(error) => {
                tracing::warn!(server = %name, %error, "server failed to start");
                self.report(ServerState::Failed, error.to_string());
                self.stop.cancelled().await;
            }
        }
    }

    /// Follows a READY session until it ends or the broker stops.
    async fn serve(&self, mut session: Session) {
        let name = &self.spec.name;
        let tools_changed = session.tools_changed.clone();
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => {
                    let how = session.close().await;
                    tracing::info!(server = %name, "stopped; the server {how}");
                    return self.report(ServerState::Stopped, "stopped".into());
                }
                why = session.ended() => {
                    tracing::warn!(server = %name, "session lost: the server {why}");
                    self.report(ServerState::Failed, format!("session lost: the server {why}"));
                    session.close().await;
                    return self.stop.cancelled().await;
                }
                _ = tools_changed.notified() => self.refresh(&session).await,
            }
        }
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

    fn report(&self, state: ServerState, message: String) {
        let condition = condition(&self.spec, state, message);
        self.broker.set_condition(&self.spec.name, condition, None);
    }
}

//! One replica of a server: start its session, report it ready, follow `tools/list_changed`,
//! notice when the session dies, and start it again with backoff, until told to stop. What it
//! sees goes to the server's [`Board`], as a [`Phase`].

use std::time::{Duration, Instant, SystemTime};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::board::Board;
use crate::{
    domain::{
        backoff,
        config::ServerSpec,
        offer::Listing,
        outcome::{Phase, SessionLoss, Setback, StartError, StartFailure},
        state::Transport,
    },
    upstream::{
        oauth::ServerAuth,
        oauth::exchange::{Exchanger, bearer},
        session::connect::{self, Era, Purpose, Resolved},
        session::running::Session,
    },
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
    /// Which replica (from 0) of the server `spec` describes.
    pub(super) index: usize,
    pub(super) spec: &'a ServerSpec,
    pub(super) board: &'a Board,
    pub(super) stop: &'a CancellationToken,
    /// The server's token exchange, for a discovery session with a token.
    pub(super) exchange: Option<&'a Exchanger>,
    /// The server's OAuth tokens, if it is under OAuth.
    pub(super) auth: Option<&'a ServerAuth>,
    /// Ends a wait to restart early (new tokens after a login).
    pub(super) retry: &'a Notify,
    /// What the server's sessions speak, as the last start found.
    pub(super) era: &'a Era,
    /// How many times the session was started again.
    pub(super) restarts: u32,
}

impl ReplicaLoop<'_> {
    /// Runs until `stop` is cancelled: connect, serve, and after every setback wait (backoff
    /// with jitter) and connect again. The session and its process are closed before return.
    pub(super) async fn run(mut self) {
        let mut attempt = 0;
        let mut phase = Phase::Starting;
        loop {
            self.report(&phase, self.spec.transport.kind());
            let started = tokio::select! {
                biased;
                _ = self.stop.cancelled() => return,
                started = self.start() => started,
            };
            let setback = match started {
                Ok((session, listing)) => {
                    let up = Instant::now();
                    let Some(loss) = self.serve(session, listing).await else {
                        return;
                    };
                    if up.elapsed() >= STABLE_AFTER {
                        attempt = 0;
                    }
                    Setback::Lost(loss)
                }
                Err(error) => {
                    tracing::warn!(server = %self.spec.name, replica = self.index + 1, %error,
                        "server failed to start");
                    Setback::StartFailed(error)
                }
            };
            if !self.wait_before_restart(setback, attempt).await {
                return;
            }
            attempt = attempt.saturating_add(1);
            self.restarts += 1;
            phase = Phase::Reconnecting {
                attempt: self.restarts,
            };
        }
    }

    /// Starts a session with the discovery caller's values (for a shared server, there are
    /// none to fill in) and lists the tools.
    async fn start(&self) -> Result<connect::Started, StartError> {
        let discovery = self.spec.discovery_caller();
        let mut resolved = Resolved::of(self.spec, &discovery)
            .map_err(|missing| StartFailure::DiscoveryValue(missing.0.to_string()))?;
        if let Some(exchange) = self.exchange
            && discovery.token.is_some()
        {
            let token = exchange
                .token(&discovery)
                .await
                .map_err(|e| StartFailure::DiscoveryExchange(e.to_string()))?;
            resolved.set_authorization(bearer(&token));
        }
        let bearer = self.auth.map(|auth| auth.bearer(&discovery));
        connect::start(self.spec, &resolved, Purpose::Shared, bearer, self.era).await
    }

    /// Shows why the replica is down and when it is tried again, then waits; false if told to
    /// stop meanwhile.
    async fn wait_before_restart(&self, setback: Setback, attempt: u32) -> bool {
        let backoff = self.spec.backoff;
        let delay = backoff::delay(attempt, backoff.initial, backoff.max, fastrand::f64());
        self.report(
            &Phase::Retrying { setback, delay },
            self.spec.transport.kind(),
        );
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
            _ = self.retry.notified() => true,
        }
    }

    /// Reports a READY session and follows it until it dies (`Some(why)`) or the replica is
    /// told to stop (`None`, after closing the session).
    async fn serve(&self, mut session: Session, listing: Listing) -> Option<SessionLoss> {
        let name = &self.spec.name;
        let replica = self.index + 1;
        let ready = Phase::Ready(session.peer_info.clone());
        tracing::info!(server = %name, replica, tools = listing.tools.len(),
            resources = listing.resources.resources.len(), prompts = listing.prompts.len(),
            transport = %session.transport, "{ready}");
        let link = session.link(self.spec);
        let condition = ready.condition(session.transport, self.restarts, SystemTime::now());
        self.board
            .ready(self.index, condition, session.replica(), link, listing);
        let changes = session.changes.clone();
        let suspect = session.suspect.clone();
        let pings = session.transport != Transport::Stdio;
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => {
                    match session.close().await {
                        Some(exit) => tracing::info!(server = %name, replica, "stopped; the server {exit}"),
                        None => tracing::info!(server = %name, replica, "stopped"),
                    }
                    return None;
                }
                loss = session.ended() => return Some(self.lost(session, loss).await),
                _ = changes.tools.notified() => self.refresh(&session).await,
                _ = changes.resources.notified() => self.refresh_resources(&session).await,
                _ = changes.prompts.notified() => self.refresh_prompts(&session).await,
                _ = changes.updated.signal.notified() => {
                    for uri in changes.updated.take() {
                        self.board.resource_updated(uri);
                    }
                }
                _ = suspect.notified(), if pings => {
                    if let Some(loss) = self.ping(&session).await {
                        return Some(self.lost(session, loss).await);
                    }
                }
                _ = tokio::time::sleep(PING_EVERY), if pings => {
                    if let Some(loss) = self.ping(&session).await {
                        return Some(self.lost(session, loss).await);
                    }
                }
            }
        }
    }

    /// Pings the server; why the session counts as lost if it does not answer.
    async fn ping(&self, session: &Session) -> Option<SessionLoss> {
        let end = session.ping(PING_TIMEOUT).await.err()?;
        Some(SessionLoss { end, stderr: None })
    }

    /// A dead session: withdraw it at once (calls stop being routed to it, and the server's
    /// tools go if no other replica is ready), then close what is left of it.
    async fn lost(&self, session: Session, loss: SessionLoss) -> SessionLoss {
        tracing::warn!(server = %self.spec.name, replica = self.index + 1, "session lost: {loss}");
        self.report(&Phase::Lost(loss.clone()), session.transport);
        session.close().await;
        loss
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

    /// Lists the resources again after `resources/list_changed`; on failure the old list stays.
    async fn refresh_resources(&self, session: &Session) {
        let name = &self.spec.name;
        match tokio::time::timeout(self.spec.timeout, session.list_resources()).await {
            Ok(Ok(resources)) => {
                tracing::info!(server = %name, resources = resources.resources.len(),
                    templates = resources.templates.len(), "resource list changed");
                self.board.resources(resources);
            }
            Ok(Err(error)) => tracing::warn!(server = %name, %error, "re-listing resources failed"),
            Err(_) => tracing::warn!(server = %name, "re-listing resources timed out"),
        }
    }

    /// Lists the prompts again after `prompts/list_changed`; on failure the old list stays.
    async fn refresh_prompts(&self, session: &Session) {
        let name = &self.spec.name;
        match tokio::time::timeout(self.spec.timeout, session.list_prompts()).await {
            Ok(Ok(prompts)) => {
                tracing::info!(server = %name, prompts = prompts.len(), "prompt list changed");
                self.board.prompts(prompts);
            }
            Ok(Err(error)) => tracing::warn!(server = %name, %error, "re-listing prompts failed"),
            Err(_) => tracing::warn!(server = %name, "re-listing prompts timed out"),
        }
    }

    /// Tells the board this replica's phase, over `transport`.
    fn report(&self, phase: &Phase, transport: Transport) {
        let condition = phase.condition(transport, self.restarts, SystemTime::now());
        self.board.report(self.index, condition);
    }
}

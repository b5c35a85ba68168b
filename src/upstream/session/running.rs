//! One MCP session with one server, once started (see `connect`): watching for its end, pinging
//! it, listing its tools, resources and prompts again, and an orderly close.

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleClient,
    model::ClientRequest,
    service::{Peer, QuitReason, RunningService, RunningServiceCancellationToken, ServiceError},
};
use tokio::{sync::Notify, task::JoinHandle};

use crate::upstream::{
    session::changes::Changes, session::icons::icons, session::interactions::Interactions,
    session::offers_list,
};

use crate::domain::{
    config::{ServerSpec, TransportSpec},
    offer::{PromptSpec, Resources},
    outcome::{ListingFailure, PeerInfo, ProcessExit, SessionEnd, SessionLoss},
    state::Transport,
    tool::ToolSpec,
};
use crate::upstream::{
    pool::balance::Replica,
    session::classify::lacked_token,
    session::client_handler::Handler,
    session::link::Link,
    session::listen,
    session::rounds::Stateless,
    session::tools_list,
    transport::explain::explain,
    transport::faults::Faults,
    transport::http::SharedHeaders,
    transport::stdio::call_lane::CallLane,
    transport::stdio::process::{ChildProcess, EXIT_REPORT_WAIT, STOP_GRACE},
};

/// A connected server.
pub struct Session {
    peer: Peer<RoleClient>,
    service: Option<(RunningServiceCancellationToken, JoinHandle<ServiceEnd>)>,
    child: Option<ChildProcess>,
    /// Signalled on the server's list-changed notifications.
    pub changes: Changes,
    /// Where what the server sends during calls is routed.
    interactions: Arc<Interactions>,
    /// Signalled when a call lost its connection: the supervisor checks the session is alive.
    pub suspect: Arc<Notify>,
    /// Who the server said it is.
    pub peer_info: PeerInfo,
    /// The transport in use (never `Auto`: detection is done).
    pub transport: Transport,
    /// What the transport tells calls about answers that did not come.
    faults: Faults,
    /// The headers every request sends (HTTP).
    pub headers: Option<SharedHeaders>,
    /// The fingerprint of the process's launch (stdio).
    pub launch_digest: Option<u64>,
    /// Where its tool calls go, when not through rmcp (stdio).
    lane: Option<Arc<CallLane>>,
    /// On 2026-07-28: what each request declares and how its rounds are answered.
    stateless: Option<Arc<Stateless>>,
    /// On 2026-07-28: the task that listens for the server's changes.
    listening: Option<tokio::task::AbortHandle>,
}

/// How rmcp's session loop ended.
type ServiceEnd = Result<QuitReason, tokio::task::JoinError>;

impl Session {
    /// A session over a running rmcp service; `child` is the server process for stdio.
    pub(in crate::upstream) fn new(
        service: RunningService<RoleClient, Handler>,
        child: Option<ChildProcess>,
        (changes, interactions): (Changes, Arc<Interactions>),
        transport: Transport,
        faults: Faults,
    ) -> Self {
        let peer = service.peer().clone();
        let peer_info = peer_info(&peer);
        let stateless = peer
            .peer_info()
            .map(|info| info.protocol_version.clone())
            .filter(|version| !version.has_initialize())
            .map(|version| Arc::new(service.service().stateless(version)));
        let listening = stateless.clone().map(|stateless| {
            let (peer, changes) = (peer.clone(), changes.clone());
            let server = service.service().server().clone();
            // One caller's session lists nothing, so only its caller's subscriptions matter.
            let when = if interactions.is_one_callers() {
                listen::Opened::AtFirstSubscription
            } else {
                listen::Opened::AtOnce
            };
            tokio::spawn(async move {
                listen::listen(peer, changes, &stateless.watched, server, when).await;
            })
            .abort_handle()
        });
        let cancel = service.cancellation_token();
        Session {
            peer,
            service: Some((cancel, tokio::spawn(service.waiting()))),
            child,
            changes,
            interactions,
            suspect: Arc::new(Notify::new()),
            peer_info,
            transport,
            faults,
            headers: None,
            launch_digest: None,
            lane: None,
            stateless,
            listening,
        }
    }

    /// Whether it speaks a protocol without the handshake (2026-07-28): stateless requests.
    pub(in crate::upstream) fn is_stateless(&self) -> bool {
        self.stateless.is_some()
    }

    /// The session's request headers, for a caller whose values change to replace.
    pub(in crate::upstream) fn with_headers(mut self, headers: SharedHeaders) -> Self {
        self.headers = Some(headers);
        self
    }

    /// Tool calls sent on `lane` (on 2026-07-28 with the per-request metadata rmcp would add,
    /// see [`Stateless::stamp`]).
    pub(in crate::upstream) fn with_lane(mut self, lane: Arc<CallLane>) -> Self {
        self.lane = Some(lane);
        self
    }

    /// The fingerprint of the launch the process was started with.
    pub(in crate::upstream) fn with_launch_digest(mut self, digest: u64) -> Self {
        self.launch_digest = Some(digest);
        self
    }

    /// The call side of this session, for the server's [`Upstream`](crate::upstream::Upstream).
    pub fn replica(&self) -> Replica {
        Replica::new(
            self.peer.clone(),
            self.suspect.clone(),
            self.faults.clone(),
            self.interactions.clone(),
            self.lane.clone(),
            self.stateless.clone(),
        )
    }

    /// What client spans say about this session's connection.
    pub fn link(&self, spec: &ServerSpec) -> Link {
        let address = match &spec.transport {
            TransportSpec::Http(http) => url::Url::parse(&http.url).ok().and_then(|url| {
                let host = url.host_str()?.to_owned();
                Some((host, url.port_or_known_default()?))
            }),
            TransportSpec::Stdio(_) => None,
        };
        Link {
            network: if address.is_some() { "tcp" } else { "pipe" },
            address,
            protocol: self.peer_info.protocol.clone().unwrap_or_default(),
        }
    }

    /// Checks the server still answers; a JSON-RPC error is an answer too. The error says why
    /// the session counts as ended.
    pub async fn ping(&self, timeout: Duration) -> Result<(), SessionEnd> {
        let ping = ClientRequest::PingRequest(Default::default());
        match tokio::time::timeout(timeout, self.peer.send_request(ping)).await {
            Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => Ok(()),
            Ok(Err(error)) => Err(match self.faults.auth.get() {
                // The server is there; the broker has no token it accepts.
                Some(failure) if lacked_token(&error) => SessionEnd::Authorization(failure),
                _ => SessionEnd::PingFailed(explain(&error)),
            }),
            Err(_) => Err(SessionEnd::PingUnanswered(timeout)),
        }
    }

    /// Lists the tools again (after `tools/list_changed`).
    pub async fn list_tools(&self) -> Result<Vec<ToolSpec>, ListingFailure> {
        self.counted(tools_list::list_tools(&self.peer)).await
    }

    /// Lists the resources and templates again (after `resources/list_changed`).
    pub async fn list_resources(&self) -> Result<Resources, ListingFailure> {
        let offers = offers_list::Offers::of(&self.peer);
        self.counted(offers_list::list_resources(&self.peer, offers))
            .await
    }

    /// Lists the prompts again (after `prompts/list_changed`).
    pub async fn list_prompts(&self) -> Result<Vec<PromptSpec>, ListingFailure> {
        let offers = offers_list::Offers::of(&self.peer);
        self.counted(offers_list::list_prompts(&self.peer, offers))
            .await
    }

    /// Runs the broker's own `requests` counted in flight on the session, as callers' are: what
    /// the server sends meanwhile may be for them, so it is no caller's alone.
    async fn counted<T>(&self, requests: impl Future<Output = T>) -> T {
        let mut registration = self.interactions.begin(None, None);
        let out = requests.await;
        registration.answered();
        out
    }

    /// Waits until the session ends by itself (the process exits, a pipe or stream closes) and
    /// says why. Cancel-safe.
    pub async fn ended(&mut self) -> SessionLoss {
        let service_end = async {
            match &mut self.service {
                Some((_, task)) => match task.await {
                    Ok(Ok(QuitReason::Closed)) => SessionEnd::Closed,
                    Ok(Ok(reason)) => SessionEnd::Ended(format!("{reason:?}")),
                    Ok(Err(e)) | Err(e) => SessionEnd::TaskFailed(e.to_string()),
                },
                None => std::future::pending().await,
            }
        };
        let child_exit = async {
            match &mut self.child {
                Some(child) => SessionEnd::Exited(child.wait().await),
                None => std::future::pending().await,
            }
        };
        let end = tokio::select! {
            end = child_exit => end,
            end = service_end => end,
        };
        self.service = None;
        let Some(child) = &mut self.child else {
            return SessionLoss { end, stderr: None };
        };
        let end = match child.stdout_fault() {
            // A server that wrote garbage to stdout had its stream cut: that is the reason.
            Some(fault) => SessionEnd::Stream(fault),
            // A pipe usually closes because the process exited: say how, if it does so promptly.
            None => match child.exit_within(EXIT_REPORT_WAIT).await {
                Some(exit) => SessionEnd::Exited(exit),
                None => end,
            },
        };
        SessionLoss {
            end,
            stderr: child.last_words().await,
        }
    }

    /// Closes the session: ends the MCP loop (which closes the server's stdin), then stops the
    /// process. Returns how the process ended (stdio).
    pub async fn close(mut self) -> Option<ProcessExit> {
        if let Some(listening) = self.listening.take() {
            listening.abort();
        }
        if let Some((cancel, task)) = self.service.take() {
            cancel.cancel();
            let _ = task.await;
        }
        Some(self.child.take()?.stop(STOP_GRACE).await)
    }
}

/// Who the server said it is at initialize.
fn peer_info(peer: &Peer<RoleClient>) -> PeerInfo {
    let Some(info) = peer.peer_info() else {
        return PeerInfo::default();
    };
    PeerInfo {
        server: info
            .server_info
            .as_ref()
            .map(|server| (server.name.clone(), server.version.clone())),
        protocol: Some(info.protocol_version.to_string()),
        icons: icons(
            info.server_info
                .as_ref()
                .and_then(|server| server.icons.clone()),
        ),
    }
}

//! One MCP session with one server: start-up (spawn, initialize, first tools/list) under the
//! init timeout, watching for its end, and an orderly close.

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleClient,
    model::ClientRequest,
    service::{Peer, QuitReason, RunningService, RunningServiceCancellationToken, ServiceError},
};
use tokio::{sync::Notify, task::JoinHandle};

use super::{
    UpstreamError,
    balance::Replica,
    calls::Link,
    connect,
    handler::Handler,
    http, listing,
    process::{ChildProcess, StderrTail},
    stdout_guard::Verdict,
};
use crate::domain::{
    config::{ServerSpec, TransportSpec},
    tool::ToolSpec,
};

/// How long a server gets to exit by itself once its stdin is closed, and again after SIGTERM.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for an exit status to explain a failure.
pub(super) const EXIT_REPORT_WAIT: Duration = Duration::from_millis(500);

/// A connected server.
pub struct Session {
    peer: Peer<RoleClient>,
    service: Option<(RunningServiceCancellationToken, JoinHandle<ServiceEnd>)>,
    child: Option<ChildProcess>,
    /// Signalled on `notifications/tools/list_changed`.
    pub tools_changed: Arc<Notify>,
    /// Signalled when a call lost its connection: the supervisor checks the session is alive.
    pub suspect: Arc<Notify>,
    /// Who the server said it is, e.g. `demo 0.1.0, MCP 2025-11-25`.
    pub description: String,
    /// The transport in use: "stdio", "streamable-http" or "sse".
    pub transport: &'static str,
    /// Why the transport cut its stream, if it did (stdout garbage, an over-long result).
    fault: Option<Verdict>,
}

/// How rmcp's session loop ended.
type ServiceEnd = Result<QuitReason, tokio::task::JoinError>;

/// A session, and the tools its server offered at start-up.
pub type Started = (Session, Vec<ToolSpec>);

impl Session {
    /// Starts the server and initializes a session, then lists its tools; all within the
    /// server's `init_timeout`. A failure stops whatever was started.
    pub async fn start(spec: &ServerSpec) -> Result<Started, UpstreamError> {
        connect::start(spec).await
    }

    /// A session over a running rmcp service; `child` is the server process for stdio.
    pub(super) fn new(
        service: RunningService<RoleClient, Handler>,
        child: Option<ChildProcess>,
        tools_changed: Arc<Notify>,
        transport: &'static str,
        fault: Option<Verdict>,
    ) -> Self {
        let peer = service.peer().clone();
        let description = describe_peer(&peer);
        let cancel = service.cancellation_token();
        Session {
            peer,
            service: Some((cancel, tokio::spawn(service.waiting()))),
            child,
            tools_changed,
            suspect: Arc::new(Notify::new()),
            description,
            transport,
            fault,
        }
    }

    /// The call side of this session, for the server's [`Upstream`](super::Upstream).
    pub fn replica(&self) -> Replica {
        Replica::new(self.peer.clone(), self.suspect.clone(), self.fault.clone())
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
        let protocol = self
            .peer
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default();
        Link {
            network: if address.is_some() { "tcp" } else { "pipe" },
            address,
            protocol,
        }
    }

    /// Checks the server still answers. A JSON-RPC error is an answer too.
    pub async fn ping(&self, timeout: Duration) -> Result<(), String> {
        let ping = ClientRequest::PingRequest(Default::default());
        match tokio::time::timeout(timeout, self.peer.send_request(ping)).await {
            Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => Ok(()),
            Ok(Err(error)) => Err(format!("did not answer a ping: {}", http::explain(&error))),
            Err(_) => Err(format!(
                "did not answer a ping within {}",
                humantime::format_duration(timeout)
            )),
        }
    }

    /// Lists the tools again (after `tools/list_changed`).
    pub async fn list_tools(&self) -> Result<Vec<ToolSpec>, String> {
        listing::list_tools(&self.peer).await
    }

    /// Waits until the session ends by itself (the process exits, a pipe closes) and says
    /// why. Cancel-safe.
    pub async fn ended(&mut self) -> String {
        let service_end = async {
            match &mut self.service {
                Some((_, task)) => match task.await {
                    Ok(Ok(QuitReason::Closed)) => "closed the connection".to_owned(),
                    Ok(Ok(reason)) => format!("the session ended ({reason:?})"),
                    Ok(Err(e)) | Err(e) => format!("the session task failed: {e}"),
                },
                None => std::future::pending().await,
            }
        };
        let child_exit = async {
            match &mut self.child {
                Some(child) => child.wait().await,
                None => std::future::pending().await,
            }
        };
        let why = tokio::select! {
            why = child_exit => why,
            why = service_end => why,
        };
        self.service = None;
        // A server that wrote garbage to stdout had its stream cut: that is the reason.
        if let Some(fault) = self.child.as_ref().and_then(ChildProcess::stdout_fault) {
            return fault;
        }
        // A pipe usually closes because the process exited: say how, if it does so promptly.
        let why = match &mut self.child {
            Some(child) => match tokio::time::timeout(EXIT_REPORT_WAIT, child.wait()).await {
                Ok(exit) => exit,
                Err(_) => why,
            },
            None => why,
        };
        let tail = self.child.as_ref().map(ChildProcess::stderr_tail);
        with_tail(why, tail.as_ref())
    }

    /// Closes the session: ends the MCP loop (which closes the server's stdin), then stops the
    /// process. Returns how the process ended.
    pub async fn close(mut self) -> String {
        if let Some((cancel, task)) = self.service.take() {
            cancel.cancel();
            let _ = task.await;
        }
        match self.child.take() {
            Some(child) => child.stop(STOP_GRACE).await,
            None => String::new(),
        }
    }
}

pub(super) fn with_tail(reason: String, tail: Option<&StderrTail>) -> String {
    match tail.and_then(StderrTail::summary) {
        Some(tail) => format!("{reason}; stderr: {tail}"),
        None => reason,
    }
}

fn describe_peer(peer: &Peer<RoleClient>) -> String {
    let Some(info) = peer.peer_info() else {
        return "connected".into();
    };
    let version = &info.protocol_version;
    match &info.server_info {
        Some(server) => format!(
            "connected to {} {} (MCP {version})",
            server.name, server.version
        ),
        None => format!("connected (MCP {version})"),
    }
}

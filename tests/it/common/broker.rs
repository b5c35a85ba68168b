//! The broker under test: one builder that starts a real `toolbroker` process on 127.0.0.1:0
//! (config, arguments, environment, TLS), waits for it to listen and connects a client.

use std::{net::SocketAddr, path::PathBuf, process::Stdio};

use serde_json::Value;
use tokio::{
    process::{Child, Command},
    sync::watch,
};
use tonic::transport::{Channel, ClientTlsConfig};
use toolbroker::proto::tool_broker_client::ToolBrokerClient;

use super::{
    WAIT,
    config::{Config, Server},
    logs::collect_logs,
    toolbroker_bin,
};

/// A running broker process.
pub struct Broker {
    pub(super) child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// A connected client.
    pub client: ToolBrokerClient<Channel>,
    /// A channel to the broker, for other services (health, reflection).
    pub channel: Channel,
    pub(super) logs: watch::Receiver<Vec<Value>>,
    dir: tempfile::TempDir,
}

/// What the broker reads as its config.
enum Source {
    /// Built as data.
    Data(Config),
    /// Text as given (README recipes, files broken on purpose).
    Text(String),
    /// None: the command line is the test's own.
    CommandLine(Vec<String>),
}

/// How to start a broker: `Broker::builder().server(demo("demo")).start().await`.
pub struct Builder {
    source: Source,
    env: Vec<(String, String)>,
    tls: Option<ClientTlsConfig>,
    open_files: Option<u64>,
}

impl Broker {
    /// A builder for a broker with an empty config, no extra arguments or environment, and a
    /// plaintext client.
    pub fn builder() -> Builder {
        Builder {
            source: Source::Data(Config::new()),
            env: Vec::new(),
            tls: None,
            open_files: None,
        }
    }

    /// The config file the broker was started with.
    pub fn config_path(&self) -> PathBuf {
        config_path(self.dir.path())
    }

    /// Replaces the config file at once (written aside, then renamed), as editors save.
    pub fn rewrite_config(&self, text: &str) {
        let path = self.config_path();
        let staged = path.with_extension("new");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &path).unwrap();
    }
}

impl Builder {
    /// Adds a server entry to the config.
    pub fn server(self, server: Server) -> Self {
        self.edit(|config| config.server(server))
    }

    /// Adds server entries to the config, in order.
    pub fn servers(self, servers: impl IntoIterator<Item = Server>) -> Self {
        servers.into_iter().fold(self, Self::server)
    }

    /// Sets a top-level config field (e.g. `shutdown_grace`, `auth`, `limits`).
    pub fn top(self, key: &str, value: impl Into<Value>) -> Self {
        self.edit(|config| config.top(key, value))
    }

    /// Uses this config, built elsewhere (to be rewritten later, say).
    pub fn config(mut self, config: Config) -> Self {
        self.source = Source::Data(config);
        self
    }

    /// Uses this config text as it is, for configs that are documents of their own (the
    /// README's).
    pub fn config_text(mut self, text: &str) -> Self {
        self.source = Source::Text(text.to_owned());
        self
    }

    /// Runs `toolbroker ARGS` instead of `toolbroker serve ... --config FILE`: no config file is
    /// written. `args` must make it listen on a free port and log JSON.
    pub fn command_line<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.source = Source::CommandLine(args.into_iter().map(Into::into).collect());
        self
    }

    /// Runs the bare command (no subcommand, no config): the built-in demo.
    pub fn without_config(self) -> Self {
        self.command_line(["--listen", "127.0.0.1:0", "--log-format", "json"])
    }

    /// Sets an environment variable for the broker.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Starts the broker with this open-file limit, soft and hard (`ulimit -n`).
    pub fn open_files(mut self, limit: u64) -> Self {
        self.open_files = Some(limit);
        self
    }

    /// Connects over TLS with this client config, to `localhost`.
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Changes the config built as data (a text or a command line of the test's own has none).
    fn edit(mut self, change: impl FnOnce(Config) -> Config) -> Self {
        let Source::Data(config) = self.source else {
            panic!("servers and settings go into a config built as data");
        };
        self.source = Source::Data(change(config));
        self
    }

    /// Starts the broker, waits until it listens, and connects.
    pub async fn start(self) -> Broker {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut command = self.command(dir.path());
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn toolbroker");
        let logs = collect_logs(child.stderr.take().expect("stderr is piped"));
        let addr = wait_for_listen(logs.clone(), &mut child).await;
        let channel = connect(addr, self.tls).await;
        Broker {
            child,
            addr,
            client: ToolBrokerClient::new(channel.clone()),
            channel,
            logs,
            dir,
        }
    }

    /// The command line, with the config written into `dir` when there is one.
    fn command(&self, dir: &std::path::Path) -> Command {
        let mut command = match self.open_files {
            None => Command::new(toolbroker_bin()),
            // The shell sets the limit and becomes the broker: the child is the broker.
            Some(limit) => {
                let mut shell = Command::new("sh");
                shell
                    .arg("-c")
                    .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                    .arg(toolbroker_bin());
                shell
            }
        };
        let text = match &self.source {
            Source::Data(config) => Some(config.text()),
            Source::Text(text) => Some(text.clone()),
            Source::CommandLine(args) => {
                command.args(args);
                None
            }
        };
        if let Some(text) = text {
            let path = config_path(dir);
            std::fs::write(&path, text).expect("write config");
            command
                .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
                .arg("--config")
                .arg(path);
        }
        // A test may ask for more (every crate at debug, say); else ours at debug.
        if !self.env.iter().any(|(key, _)| key == "RUST_LOG") {
            command.env("RUST_LOG", "info,toolbroker=debug");
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }
}

fn config_path(dir: &std::path::Path) -> PathBuf {
    dir.join("config.yaml")
}

/// Waits for the `listening` log line and returns the address it names.
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

/// A channel to `addr`: plaintext, or TLS to `localhost` when `tls` is given.
async fn connect(addr: SocketAddr, tls: Option<ClientTlsConfig>) -> Channel {
    match tls {
        None => Channel::from_shared(format!("http://{addr}")).expect("valid uri"),
        Some(tls) => Channel::from_shared(format!("https://localhost:{}", addr.port()))
            .expect("valid uri")
            .tls_config(tls)
            .expect("client TLS config"),
    }
    .connect()
    .await
    .expect("connect to the broker")
}

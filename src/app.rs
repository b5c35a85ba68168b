//! The composition root, in two steps. [`App::build`] turns a config into everything serving
//! needs that can fail — every file it names read and checked — before anything is bound or
//! spawned; `check` runs it too. [`App::run`] then serves on a bound listener until a shutdown
//! signal, reloading the config on request, and shuts down in order.

use std::{
    future::Future,
    net::SocketAddr,
    path::Path,
    sync::Arc,
    time::{Duration, SystemTime},
};

use anyhow::Context as _;
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
    sync::{mpsc, watch},
    task::JoinHandle,
};
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic_health::pb::health_server::{Health, HealthServer};

use crate::{
    auth::{Credentials, Gate},
    config_file::{LoadError, Loaded},
    core::audit::AuditLog,
    core::broker::Broker,
    core::tasks::{Tasks, redis_store::RedisStore},
    core::unguessable::unguessable,
    domain::{
        config::{Audit, AuditSink, Config, ConfigError, ConfigErrors},
        state::Readiness,
        views::Views,
    },
    faces::grpc::{broker_service::BrokerService, server, unix_socket},
    health::HealthStatuses,
    net::{ConnectionBudget, open_files},
    reload::{self, FileWatch, LiveConfig, Renewable, Trigger},
    shared_state::Shared,
    tls::{self, CertReloader},
    upstream::{oauth, supervisor::fleet::Fleet},
};

/// How long the server gets to close its connections once the calls are done.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// Where the broker listens when neither `--listen` nor the config says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";

/// A configuration made ready to serve: its files read, its address chosen.
pub struct App {
    loaded: Loaded,
    addr: SocketAddr,
    credentials: Credentials,
    tls: Option<(TlsAcceptor, Arc<CertReloader>)>,
}

impl App {
    /// Reads and checks every file the config names (token files, the TLS certificate and
    /// key, the client CA, OAuth private keys); each problem is an error at the field that names the file. Binds
    /// and spawns nothing.
    pub fn build(loaded: Loaded, listen: Option<SocketAddr>) -> Result<App, LoadError> {
        let config = &loaded.config;
        let credentials = Credentials::load(&config.auth, &Views::new(&config.views));
        let tls = config
            .tls
            .as_ref()
            .map(|files| tls::acceptor(files, config.auth.client_ca.as_deref()))
            .transpose();
        let mut keys = oauth::key::check_all(&config.servers);
        keys.extend(audit_file_problem(config.audit.as_ref()));
        keys.extend(config.unix_listen.as_deref().and_then(|path| {
            unix_socket::problem(path).map(|reason| ConfigError::new("unix_listen", reason))
        }));
        let (credentials, tls) = match (credentials, tls) {
            (Ok(credentials), Ok(tls)) if keys.is_empty() => (credentials, tls),
            (credentials, tls) => {
                let errors = [credentials.err(), tls.err(), Some(keys)]
                    .into_iter()
                    .flatten()
                    .flatten();
                return Err(LoadError::Invalid {
                    path: loaded.shown(),
                    errors: ConfigErrors(errors.collect()),
                });
            }
        };
        let default: SocketAddr = DEFAULT_LISTEN.parse().expect("the default address parses");
        let addr = listen.or(config.listen).unwrap_or(default);
        Ok(App {
            loaded,
            addr,
            credentials,
            tls,
        })
    }

    /// The address to listen on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.loaded.config
    }

    /// Serves on `listener` until `shutdown` resolves (with the name of what asked), reloading
    /// the config on SIGHUP or when its file changes. Then shuts down in order: health
    /// NOT_SERVING, new calls refused and Watch streams ended, calls in flight given
    /// `shutdown_grace`, then every server stopped.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = &'static str>,
    ) -> anyhow::Result<()> {
        let serving = self.start(listener).await?;
        serving.until(shutdown).await
    }

    /// Starts the servers' supervisors, health, metrics, the gRPC server and the watch for
    /// reloads.
    async fn start(self, listener: TcpListener) -> anyhow::Result<Serving> {
        let config = &self.loaded.config;
        let local = listener.local_addr()?;
        // Bound first, like the TCP port: a socket in use stops the start before anything runs.
        let (unix, socket_file) = match config.unix_listen.as_deref() {
            Some(path) => {
                let (listener, file) = unix_socket::bind(path)?;
                (Some(listener), Some(file))
            }
            None => (None, None),
        };
        crate::telemetry::record_arguments(config.record_arguments);
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let now = SystemTime::now();
        let shared = match &config.state {
            Some(spec) => {
                let shared = Shared::connect(spec, unguessable())
                    .map_err(|reason| anyhow::anyhow!(reason))?;
                tracing::info!(redis = %shared.shown(), prefix = shared.prefix(),
                    replica = shared.replica(), "rates, tokens and tasks are kept in Redis");
                Some(shared)
            }
            None => None,
        };
        let broker = Broker::new(
            config
                .servers
                .iter()
                .map(|spec| (spec.policy(), spec.initial_condition(now)))
                .collect(),
            shared.clone(),
        );
        if let Some(addr) = config.metrics_listen {
            crate::metrics::start(addr, broker.clone(), shutdown.clone()).await?;
        }
        let fleet = Fleet::start(
            Arc::new(broker.clone()),
            config.servers.clone(),
            shared.clone(),
        );
        let (readiness, health) = follow_health(&broker, config, &tasks, &shutdown).await;
        let gate = Gate::new(self.credentials);
        tasks.spawn({
            let gate = gate.clone();
            async move { gate.prefetch().await }
        });
        let (acceptor, certs) = self.tls.unzip();
        broker.set_rules(config);
        let audit = match &config.audit {
            Some(audit) => Some((AuditLog::open(audit)?, audit.clone())),
            None => None,
        };
        let connections = config.limits.connections;
        let service = Arc::new(
            BrokerService::new(
                broker.clone(),
                shutdown.clone(),
                config.limits.max_response_bytes,
                audit.as_ref().map(|(log, _)| log.clone()),
                match &shared {
                    Some(shared) => Tasks::new(
                        config.tasks.clone(),
                        Arc::new(RedisStore::new(shared.clone(), config.tasks.ttl)),
                    ),
                    None => Tasks::in_memory(config.tasks.clone()),
                },
            )
            .first_message_within(connections.header_timeout),
        );
        tasks.spawn(service.keep_tools_warm());
        tasks.spawn(service.calls().tasks().keep_swept(shutdown.clone()));
        let closing = CancellationToken::new();
        // One budget for the gRPC port, the socket and the face.
        let budget =
            ConnectionBudget::new(open_files::connection_budget(connections.max_connections));
        if let Some(addr) = config.mcp_listen {
            let parts = crate::faces::mcp::http::Parts {
                calls: service.calls(),
                gate: gate.clone(),
                shutdown: shutdown.clone(),
                closing: closing.clone(),
                settings: config.mcp_face.clone(),
                auth: config.auth.enabled(),
                budget: budget.clone(),
                header_timeout: connections.header_timeout,
            };
            crate::faces::mcp::http::start(addr, parts).await?;
        }
        let parts = server::Parts {
            service: service.clone(),
            health,
            gate: gate.clone(),
            reflection: config.reflection,
            limits: config.limits,
            budget,
            tls: acceptor,
            max_connection_age: config.max_connection_age,
            max_connection_age_grace: config.max_connection_age_grace,
        };
        let server = tokio::spawn(server::serve(parts, listener, unix, closing.clone()));
        let shown_socket = config
            .unix_listen
            .as_ref()
            .map(|path| path.display().to_string());
        let scheme = if certs.is_some() { "https" } else { "http" };
        let auth = config.auth.enabled();
        let started_state = config.state.clone();
        let (live, reloads, file_watch) = follow_reloads(self.loaded, &tasks, &shutdown);
        // Last: whoever reads this line may signal the broker at once (the SIGTERM and SIGINT
        // handlers were installed before `run`, SIGHUP's just now).
        tracing::info!(addr = %local, scheme, auth, unix = shown_socket, "listening");
        Ok(Serving {
            fleet,
            service,
            server,
            shutdown,
            closing,
            tasks,
            live,
            reloads,
            readiness,
            renewable: Renewable {
                gate,
                certs,
                broker,
                audit,
                state: started_state,
            },
            _file_watch: file_watch,
            _socket_file: socket_file,
        })
    }
}

/// Health statuses that follow the broker (and the readiness policy, which a reload may
/// change), until shutdown; the health service serving them.
async fn follow_health(
    broker: &Broker,
    config: &Config,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) -> (watch::Sender<Readiness>, HealthServer<impl Health>) {
    let (readiness, readiness_rx) = watch::channel(config.readiness);
    let (reporter, service) = tonic_health::server::health_reporter();
    let mut health = HealthStatuses::new(reporter);
    // Before serving, so that probes never see an unknown service.
    health.update(&broker.snapshot(), config.readiness).await;
    tasks.spawn(health.follow(broker.clone(), readiness_rx, shutdown.clone()));
    (readiness, service)
}

/// The config in force, and what asks to reload it: SIGHUP, and changes of its file (kept
/// watched for as long as the watch lives; one that cannot start leaves SIGHUP working).
fn follow_reloads(
    loaded: Loaded,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) -> (
    LiveConfig,
    mpsc::UnboundedReceiver<Trigger>,
    Option<FileWatch>,
) {
    let (triggers, reloads) = mpsc::unbounded_channel();
    tasks.spawn(reload::forward_sighup(triggers.clone(), shutdown.clone()));
    let live = match loaded.file {
        Some((path, text)) => LiveConfig::new(loaded.config, path, text),
        None => LiveConfig::fixed(loaded.config),
    };
    let file_watch = live.path().and_then(|path| watch_config(path, triggers));
    (live, reloads, file_watch)
}

/// Binds the address `app` chose, serves until SIGTERM or SIGINT, then shuts down in order.
pub async fn serve(app: App) -> anyhow::Result<()> {
    let addr = app.addr();
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        }
    };
    app.run(listener, shutdown).await
}

/// A broker that serves, and what it takes to stop it in order.
struct Serving {
    fleet: Fleet,
    service: Arc<BrokerService>,
    server: JoinHandle<anyhow::Result<()>>,
    /// Cancelled first at shutdown: health, new calls, Watch streams, metrics.
    shutdown: CancellationToken,
    /// Cancelled once calls are drained: the gRPC server closes its connections.
    closing: CancellationToken,
    tasks: TaskTracker,
    live: LiveConfig,
    reloads: mpsc::UnboundedReceiver<Trigger>,
    readiness: watch::Sender<Readiness>,
    renewable: Renewable,
    _file_watch: Option<FileWatch>,
    /// The Unix socket's file, removed when the broker has stopped.
    _socket_file: Option<unix_socket::SocketFile>,
}

impl Serving {
    /// Serves, reloading on request, until `shutdown` (or the gRPC server failing); then
    /// shuts down in order.
    async fn until(mut self, shutdown: impl Future<Output = &'static str>) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                signal = &mut shutdown => {
                    // New calls are refused from before the line that says so.
                    self.shutdown.cancel();
                    tracing::info!(signal, "shutting down");
                    break;
                }
                served = &mut self.server => {
                    served.context("the gRPC server task failed")??;
                    anyhow::bail!("the gRPC server stopped by itself");
                }
                Some(trigger) = self.reloads.recv() => self.reload(trigger).await,
            }
        }
        self.stop().await;
        Ok(())
    }

    async fn reload(&mut self, trigger: Trigger) {
        let (live, fleet) = (&mut self.live, &mut self.fleet);
        live.reload(trigger, fleet, &self.readiness, &self.renewable)
            .await;
    }

    /// Ends Watch streams and health, refuses new calls (UNAVAILABLE), gives calls in flight
    /// `shutdown_grace` to finish, closes the connections, then stops every server.
    async fn stop(mut self) {
        let grace = self.live.config.shutdown_grace;
        self.shutdown.cancel();
        if tokio::time::timeout(grace, self.service.idle())
            .await
            .is_err()
        {
            tracing::warn!("calls still running after {grace:?}; stopping anyway");
        }
        // Long calls still running end failed, saying why, before the connections close.
        let long_calls = self.service.calls().tasks().clone();
        long_calls.abandon();
        if tokio::time::timeout(CLOSE_DEADLINE, long_calls.idle())
            .await
            .is_err()
        {
            tracing::warn!("long calls did not record their end in time");
        }
        self.closing.cancel();
        if tokio::time::timeout(CLOSE_DEADLINE, &mut self.server)
            .await
            .is_err()
        {
            self.server.abort();
        }
        self.fleet.stop().await;
        if let Some((audit, _)) = &self.renewable.audit {
            audit.close().await;
        }
        self.tasks.close();
        self.tasks.wait().await;
        tracing::info!("stopped");
    }
}

fn watch_config(path: &Path, triggers: mpsc::UnboundedSender<Trigger>) -> Option<FileWatch> {
    match reload::watch_file(path, triggers) {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            tracing::warn!(%error, "cannot watch the config file; reload with SIGHUP");
            None
        }
    }
}

/// Why the audit file cannot be written, as an error at `audit.file` (without creating it: an
/// existing file must open for appending, a new one needs its directory).
fn audit_file_problem(audit: Option<&Audit>) -> Option<ConfigError> {
    let Some(Audit {
        sink: AuditSink::File(path),
        ..
    }) = audit
    else {
        return None;
    };
    let problem = if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .err()
            .map(|e| format!("cannot open {} for appending: {e}", path.display()))
    } else {
        crate::config_file::missing_directory(path)
    };
    problem.map(|reason| ConfigError::new("audit.file", reason))
}

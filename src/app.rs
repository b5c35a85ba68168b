//! The composition root: config → bind → start supervisors → serve → shutdown.

use std::{net::SocketAddr, path::Path, time::Duration};

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::transport::{Server, server::TcpIncoming};

use crate::{
    broker::Broker,
    domain::{
        catalog::ServerPolicy,
        config::{self, Config, ConfigErrors, ServerSpec},
    },
    grpc::service::BrokerService,
    health,
    proto::{self, tool_broker_server::ToolBrokerServer},
    upstream::supervisor::{Supervisor, initial_condition},
};

/// Where the broker listens when neither `--listen` nor the config says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";
/// How long in-flight calls may run on after a shutdown signal.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// How long the servers get to stop after that.
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("{}", prefixed(.path, .errors))]
    Invalid {
        /// The file.
        path: String,
        /// Every problem found.
        errors: ConfigErrors,
    },
}

fn prefixed(path: &str, errors: &ConfigErrors) -> String {
    let lines: Vec<String> = errors.0.iter().map(|e| format!("{path}: {e}")).collect();
    lines.join("\n")
}

/// Reads and validates a config file, expanding `${VAR}` from the environment.
pub fn load_config(path: &Path) -> Result<Config, LoadError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: shown.clone(),
        source,
    })?;
    config::parse(&text, &|name| std::env::var(name).ok()).map_err(|errors| LoadError::Invalid {
        path: shown,
        errors,
    })
}

/// The config used without `--config`: this executable's own demo server over stdio.
pub fn demo_config() -> anyhow::Result<Config> {
    let exe = std::env::current_exe().context("cannot find the toolbroker executable")?;
    let command = serde_json::to_string(&exe.to_string_lossy())?.replace('$', "$$");
    let yaml =
        format!("servers:\n  - name: demo\n    command: {command}\n    args: [demo-server]\n");
    config::parse(&yaml, &|_| None).map_err(|errors| anyhow::anyhow!("{errors}"))
}

/// Serves until SIGINT or SIGTERM, then shuts down in order: health NOT_SERVING and Watch
/// streams end, in-flight calls get `DRAIN_GRACE`, then every server is stopped.
pub async fn serve(config: Config, listen: Option<SocketAddr>) -> anyhow::Result<()> {
    let default: SocketAddr = DEFAULT_LISTEN.parse().expect("the default address parses");
    let addr = listen.or(config.listen).unwrap_or(default);
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    if config.metrics_listen.is_some() {
        tracing::warn!("metrics_listen is not served yet by this version; ignoring it");
    }

    let draining = CancellationToken::new();
    let stopping = CancellationToken::new();
    let tasks = TaskTracker::new();
    let broker = Broker::new(
        config
            .servers
            .iter()
            .map(|spec| (policy(spec), initial_condition(spec)))
            .collect(),
    );
    for spec in config.servers {
        let supervisor = Supervisor::new(spec, broker.clone(), stopping.clone());
        tasks.spawn(supervisor.run());
    }
    let (reporter, health_service) = tonic_health::server::health_reporter();
    tasks.spawn(health::follow(
        broker.clone(),
        reporter,
        config.readiness,
        draining.clone(),
    ));

    let service = std::sync::Arc::new(BrokerService::new(broker, draining.clone()));
    let router = Server::builder()
        .add_service(ToolBrokerServer::new(service))
        .add_service(health_service)
        .add_service(reflection_v1()?)
        .add_service(reflection_v1alpha()?);
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tracing::info!(addr = %local, "listening");
    let server = router.serve_with_incoming_shutdown(incoming, draining.clone().cancelled_owned());
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => result.context("the gRPC server failed")?,
        signal = shutdown_signal() => {
            tracing::info!(signal, "shutting down");
            draining.cancel();
            if tokio::time::timeout(DRAIN_GRACE, &mut server).await.is_err() {
                tracing::warn!("calls still running after {DRAIN_GRACE:?}; stopping anyway");
            }
        }
    }
    stopping.cancel();
    tasks.close();
    if tokio::time::timeout(STOP_DEADLINE, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("some servers did not stop within {STOP_DEADLINE:?}");
    }
    tracing::info!("stopped");
    Ok(())
}

fn policy(spec: &ServerSpec) -> ServerPolicy {
    ServerPolicy {
        name: spec.name.clone(),
        prefix: spec.prefix.clone(),
        allow: spec.tools.clone(),
    }
}

fn reflection_v1() -> anyhow::Result<
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
> {
    Ok(reflection().build_v1()?)
}

fn reflection_v1alpha() -> anyhow::Result<
    tonic_reflection::server::v1alpha::ServerReflectionServer<
        impl tonic_reflection::server::v1alpha::ServerReflection,
    >,
> {
    Ok(reflection().build_v1alpha()?)
}

/// Reflection describes our service and health (grpcurl needs both to be describable).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// Resolves on SIGINT or SIGTERM, naming which.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler installs");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

//! The composition root: config → bind → start supervisors → serve, reloading on request →
//! shut down in order.

use std::{net::SocketAddr, path::Path, time::Duration};

use anyhow::Context as _;
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
    sync::{mpsc, watch},
    task::JoinHandle,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::transport::{Server, server::TcpIncoming};

use crate::{
    broker::Broker,
    config_file::Loaded,
    domain::config::Config,
    grpc::{observe, service::BrokerService},
    health::Health,
    proto,
    proto::tool_broker_server::ToolBrokerServer,
    reload::{self, FileWatch, LiveConfig, Trigger},
    upstream::{
        fleet::{Fleet, policy},
        supervisor::initial_condition,
    },
};

/// Where the broker listens when neither `--listen` nor the config says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";

/// Serves until SIGINT or SIGTERM, reloading the config on SIGHUP or when its file changes.
/// Then shuts down in order: health NOT_SERVING, new calls refused and Watch streams ended,
/// in-flight calls given `shutdown_grace`, then every server stopped.
pub async fn serve(loaded: Loaded, listen: Option<SocketAddr>) -> anyhow::Result<()> {
    let config = &loaded.config;
    let default: SocketAddr = DEFAULT_LISTEN.parse().expect("the default address parses");
    let addr = listen.or(config.listen).unwrap_or(default);
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;

    crate::telemetry::record_arguments(config.record_arguments);
    let draining = CancellationToken::new();
    let tasks = TaskTracker::new();
    let broker = Broker::new(
        config
            .servers
            .iter()
            .map(|spec| (policy(spec), initial_condition(spec)))
            .collect(),
    );
    if let Some(addr) = config.metrics_listen {
        crate::metrics::start(addr, broker.clone(), draining.clone()).await?;
    }
    let mut fleet = Fleet::start(broker.clone(), config.servers.clone());
    let (readiness, readiness_rx) = watch::channel(config.readiness);
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut health = Health::new(reporter);
    health.update(&broker.snapshot(), config.readiness).await;
    tasks.spawn(health.follow(broker.clone(), readiness_rx, draining.clone()));

    let service = std::sync::Arc::new(BrokerService::new(broker, draining.clone()));
    let mut server = tokio::spawn(grpc_server(
        service,
        health_service,
        listener,
        draining.clone(),
    ));
    tracing::info!(addr = %local, "listening");

    let (triggers, mut reloads) = mpsc::unbounded_channel();
    tasks.spawn(reload::forward_sighup(triggers.clone(), draining.clone()));
    let mut live = loaded
        .file
        .map(|(path, text)| LiveConfig::new(loaded.config.clone(), path, text));
    // Kept alive for as long as we serve; a watcher that cannot start leaves SIGHUP working.
    let _file_watch = live
        .as_ref()
        .and_then(|live| watch_config(live.path(), triggers));

    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let grace = loop {
        tokio::select! {
            biased;
            _ = term.recv() => break shutdown_grace(&live, &loaded.config, "SIGTERM"),
            _ = interrupt.recv() => break shutdown_grace(&live, &loaded.config, "SIGINT"),
            served = &mut server => {
                served.context("the gRPC server task failed")??;
                anyhow::bail!("the gRPC server stopped by itself");
            }
            Some(trigger) = reloads.recv() => match live.as_mut() {
                Some(live) => live.reload(trigger, &mut fleet, &readiness).await,
                None => tracing::info!("no config file to reload: serving the built-in demo"),
            },
        }
    };
    drain(&draining, &mut server, grace).await;
    fleet.stop().await;
    tasks.close();
    tasks.wait().await;
    tracing::info!("stopped");
    Ok(())
}

/// Logs the shutdown and says how long calls in flight may take (per the config in force).
fn shutdown_grace(live: &Option<LiveConfig>, initial: &Config, signal: &str) -> Duration {
    tracing::info!(signal, "shutting down");
    live.as_ref().map_or(initial, |l| &l.config).shutdown_grace
}

/// Ends Watch streams and health, refuses new calls, and gives calls in flight `grace`.
async fn drain(
    draining: &CancellationToken,
    server: &mut JoinHandle<anyhow::Result<()>>,
    grace: Duration,
) {
    draining.cancel();
    match tokio::time::timeout(grace, &mut *server).await {
        Ok(_) => {}
        Err(_) => {
            tracing::warn!("calls still running after {grace:?}; stopping anyway");
            server.abort();
        }
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

/// Reflection describes our service and health (grpcurl needs both to be describable).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// The gRPC server (ToolBroker, health, reflection) until `draining`, then until its calls end.
async fn grpc_server(
    service: std::sync::Arc<BrokerService>,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
    listener: TcpListener,
    draining: CancellationToken,
) -> anyhow::Result<()> {
    let v1alpha = reflection().build_v1alpha()?;
    let v1 = reflection().build_v1()?;
    Server::builder()
        .trace_fn(observe::server_span)
        .add_service(ToolBrokerServer::new(service))
        .add_service(health)
        .add_service(v1)
        .add_service(v1alpha)
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            draining.cancelled_owned(),
        )
        .await
        .context("the gRPC server failed")
}

//! The composition root: config → bind → start supervisors → serve, reloading on request →
//! shut down in order.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
    sync::{mpsc, watch},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    auth::{Credentials, Gate},
    broker::Broker,
    config_file::Loaded,
    domain::config::Config,
    grpc::{server, service::BrokerService},
    health::Health,
    reload::Renewable,
    reload::{self, FileWatch, LiveConfig, Trigger},
    tls,
    upstream::{
        fleet::{Fleet, policy},
        supervisor::initial_condition,
    },
};

/// How long the server gets to close its connections once the calls are done.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

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

    let gate = Gate::new(Credentials::load(&config.auth).map_err(anyhow::Error::msg)?);
    let (tls, certs) = match &config.tls {
        Some(files) => {
            let (acceptor, certs) = tls::acceptor(files, config.auth.client_ca.as_deref())
                .map_err(anyhow::Error::msg)?;
            (Some(acceptor), Some(certs))
        }
        None => (None, None),
    };
    let service = Arc::new(BrokerService::new(
        broker,
        draining.clone(),
        config.limits.max_response_bytes,
    ));
    let closing = CancellationToken::new();
    let parts = server::Parts {
        service: service.clone(),
        health: health_service,
        gate: gate.clone(),
        reflection: config.reflection,
        limits: config.limits,
        tls,
        max_connection_age: config.max_connection_age,
        max_connection_age_grace: config.max_connection_age_grace,
    };
    let mut server = tokio::spawn(server::serve(parts, listener, closing.clone()));
    let scheme = if certs.is_some() { "https" } else { "http" };
    tracing::info!(addr = %local, scheme, auth = config.auth.enabled(), "listening");
    let secrets = Renewable { gate, certs };

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
                Some(live) => live.reload(trigger, &mut fleet, &readiness, &secrets).await,
                None => tracing::info!("no config file to reload: serving the built-in demo"),
            },
        }
    };
    drain(&draining, &service, grace).await;
    closing.cancel();
    if tokio::time::timeout(CLOSE_DEADLINE, &mut server)
        .await
        .is_err()
    {
        server.abort();
    }
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

/// Ends Watch streams and health, refuses new calls (UNAVAILABLE), and gives calls in flight
/// `grace` to finish.
async fn drain(draining: &CancellationToken, service: &BrokerService, grace: Duration) {
    draining.cancel();
    if tokio::time::timeout(grace, service.idle()).await.is_err() {
        tracing::warn!("calls still running after {grace:?}; stopping anyway");
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

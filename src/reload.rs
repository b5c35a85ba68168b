//! Hot reload: SIGHUP, or the config file changing on disk (debounced), reads the file again. A
//! valid new configuration is applied as a difference; an invalid one changes nothing and is
//! logged with the messages `check` prints.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer, notify};
use tokio::sync::{mpsc, watch};

use std::sync::Arc;

use crate::{
    auth::{Credentials, Gate},
    config_file::{self, LoadError},
    core::audit::AuditLog,
    core::broker::Broker,
    domain::{
        config::{Audit, Config, ConfigErrors, SharedState},
        names::ServerName,
        state::Readiness,
        views::Views,
    },
    tls::CertReloader,
    upstream::supervisor::fleet::Fleet,
};

/// Editors save in bursts (write, rename, chmod): wait for quiet before reading.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// SIGHUP: reload even if the file looks the same (the environment may differ).
    Signal,
    /// The file or its directory changed.
    FileChanged,
}

/// What a reload renews besides the servers: the accepted tokens (files are read again), the
/// listener's certificate, the call rates and the audit log's settings.
pub struct Renewable {
    /// The auth gate.
    pub gate: Gate,
    /// The TLS certificate, when the listener speaks TLS.
    pub certs: Option<Arc<CertReloader>>,
    /// The broker, whose call rates follow the config.
    pub broker: Broker,
    /// The audit log and the settings it was opened with, when it is on.
    pub audit: Option<(AuditLog, Audit)>,
    /// The `state` section the broker started with (a reload does not move it elsewhere).
    pub state: Option<SharedState>,
}

impl Renewable {
    fn renew(&self, config: &Config) {
        if config.state != self.state {
            // Moving rates, tokens and tasks between stores while calls run would lose them.
            tracing::warn!("a changed state section takes effect at the next start");
        }
        self.broker.set_rules(config);
        match &self.audit {
            Some((log, running)) => log.reconfigure(config.audit.as_ref(), running),
            None if config.audit.is_some() => {
                tracing::warn!("adding audit takes effect at the next start");
            }
            None => {}
        }
        match Credentials::load(&config.auth, &Views::new(&config.views)) {
            Ok(credentials) => {
                self.gate.replace(credentials);
                let gate = self.gate.clone();
                tokio::spawn(async move { gate.prefetch().await });
            }
            Err(errors) => {
                let error = ConfigErrors(errors);
                tracing::warn!(%error, "tokens not reloaded; the old ones stay valid")
            }
        }
        if let Some(certs) = &self.certs {
            match certs.reload() {
                Ok(()) => tracing::info!("TLS certificate reloaded"),
                Err(errors) => {
                    let error = ConfigErrors(errors);
                    tracing::warn!(%error, "TLS certificate not reloaded; the old one stays")
                }
            }
        }
    }
}

/// The configuration in force and the file it came from, with the text last applied.
pub struct LiveConfig {
    /// The configuration being served.
    pub config: Config,
    file: Option<(PathBuf, String)>,
}

impl LiveConfig {
    /// The configuration loaded at start from `path` (whose text was `text`).
    pub fn new(config: Config, path: PathBuf, text: String) -> Self {
        Self {
            config,
            file: Some((path, text)),
        }
    }

    /// A configuration that has no file (the built-in demo): reloads change nothing.
    pub fn fixed(config: Config) -> Self {
        Self { config, file: None }
    }

    /// The config file, if there is one.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(path, _)| path.as_path())
    }

    /// Reads the file again and applies what changed; the readiness policy goes to `readiness`.
    pub async fn reload(
        &mut self,
        trigger: Trigger,
        fleet: &mut Fleet,
        readiness: &watch::Sender<Readiness>,
        renewable: &Renewable,
    ) {
        if trigger == Trigger::Signal {
            // `toolbroker login` wrote new tokens: the servers take them now.
            fleet.reload_token_stores();
            // Log rotation moved the audit file away.
            if let Some((log, _)) = &renewable.audit {
                log.reopen();
            }
        }
        let Some((path, last_text)) = &self.file else {
            tracing::info!("no config file to reload: serving the built-in demo");
            return;
        };
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(file = %shown, %error, "config reload failed: cannot read the file; keeping the running configuration");
                return;
            }
        };
        if trigger == Trigger::FileChanged && text == *last_text {
            return;
        }
        match config_file::parse(&shown, &text) {
            Ok(config) => {
                renewable.renew(&config);
                readiness.send_replace(config.readiness);
                crate::telemetry::record_arguments(config.record_arguments);
                self.apply(config, text, fleet, &shown).await;
            }
            Err(LoadError::Invalid { errors, .. }) => {
                tracing::warn!(file = %shown, problems = errors.0.len(), "config reload rejected; keeping the running configuration");
                for problem in &errors.0 {
                    tracing::warn!("{shown}: {problem}");
                }
            }
            Err(error) => tracing::warn!(%error, "config reload failed"),
        }
    }

    async fn apply(&mut self, config: Config, text: String, fleet: &mut Fleet, shown: &str) {
        if config.listen != self.config.listen
            || config.metrics_listen != self.config.metrics_listen
            || config.unix_listen != self.config.unix_listen
        {
            tracing::warn!(
                "listen, metrics_listen and unix_listen changes take effect at the next start"
            );
        }
        if config.max_connection_age != self.config.max_connection_age
            || config.max_connection_age_grace != self.config.max_connection_age_grace
        {
            tracing::warn!("max_connection_age changes take effect at the next start");
        }
        if config.mcp_face != self.config.mcp_face {
            tracing::warn!(
                "mcp_allowed_origins and the MCP session caps take effect at the next start"
            );
        }
        if config.limits.connections != self.config.limits.connections {
            tracing::warn!(
                "limits.max_connections, max_concurrent_streams and header_timeout changes take effect at the next start"
            );
        }
        let plan = fleet.reconfigure(config.servers.clone()).await;
        let names = |list: &[ServerName]| {
            list.iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        tracing::info!(
            file = shown,
            started = names(&plan.start),
            stopped = names(&plan.stop),
            restarted = names(&plan.restart),
            unchanged = plan.keep.len(),
            "config reloaded"
        );
        self.config = config;
        if let Some((_, last_text)) = &mut self.file {
            *last_text = text;
        }
    }
}

/// Sends a trigger on every SIGHUP until `shutdown`. The handler is installed here, at once
/// (not in the task that follows it), so that a SIGHUP sent as soon as the broker says it
/// listens reloads rather than kills it.
pub fn forward_sighup(
    triggers: mpsc::UnboundedSender<Trigger>,
    shutdown: tokio_util::sync::CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let hangup = signal(SignalKind::hangup());
    async move {
        let Ok(mut hangup) = hangup else {
            tracing::warn!("cannot listen for SIGHUP; reload by editing the config file instead");
            return;
        };
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                received = hangup.recv() => match received {
                    Some(()) => {
                        tracing::info!("SIGHUP: reloading the config");
                        if triggers.send(Trigger::Signal).is_err() {
                            return;
                        }
                    }
                    None => return,
                },
            }
        }
    }
}

/// A running file watcher; dropping it stops watching.
pub type FileWatch = Debouncer<notify::RecommendedWatcher>;

/// Watches the directory of `path` (editors and Kubernetes replace files rather than write
/// them) and sends a trigger after each burst of changes. Keep the returned watcher alive.
pub fn watch_file(
    path: &Path,
    triggers: mpsc::UnboundedSender<Trigger>,
) -> Result<FileWatch, notify::Error> {
    let directory = crate::domain::paths::directory_of(path).to_owned();
    let mut debouncer = new_debouncer(DEBOUNCE, move |result: DebounceEventResult| {
        if result.is_ok_and(|events| !events.is_empty()) {
            let _ = triggers.send(Trigger::FileChanged);
        }
    })?;
    debouncer
        .watcher()
        .watch(&directory, notify::RecursiveMode::NonRecursive)?;
    Ok(debouncer)
}

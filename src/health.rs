//! `grpc.health.v1` statuses, following the broker: `""` while the process serves,
//! `toolbroker.v1.ToolBroker` while the broker is ready (per the readiness policy), and
//! `toolbroker.server.<name>` while that server is READY.

use std::collections::HashMap;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic_health::{ServingStatus, server::HealthReporter};

use crate::{
    core::broker::{Broker, Snapshot},
    domain::state::{Readiness, ServerState, is_ready},
    proto::tool_broker_server::ToolBrokerServer,
};

/// The health service name of the broker as a whole.
pub const BROKER: &str = <ToolBrokerServer<()> as NamedService>::NAME;

/// The health service name of one server.
pub fn server_service(name: &str) -> String {
    format!("toolbroker.server.{name}")
}

/// The health statuses reported so far, kept in step with the broker (tonic-health's
/// reporter serves them).
pub struct HealthStatuses {
    reporter: HealthReporter,
    reported: HashMap<String, ServingStatus>,
}

impl HealthStatuses {
    /// Reports through `reporter`; call [`Self::update`] once before serving so that probes
    /// never see an unknown service.
    pub fn new(reporter: HealthReporter) -> Self {
        Self {
            reporter,
            reported: HashMap::new(),
        }
    }

    /// Sets every status this snapshot calls for; servers no longer configured are removed.
    pub async fn update(&mut self, snapshot: &Snapshot, policy: Readiness) {
        let wanted = statuses(snapshot, policy);
        for (service, status) in &wanted {
            if self.reported.get(service) != Some(status) {
                self.reporter.set_service_status(service, *status).await;
                self.reported.insert(service.clone(), *status);
            }
        }
        let gone: Vec<String> = self
            .reported
            .keys()
            .filter(|service| !wanted.iter().any(|(w, _)| w == *service))
            .cloned()
            .collect();
        for service in gone {
            self.reporter.clear_service_status(&service).await;
            self.reported.remove(&service);
        }
    }

    /// Follows the broker until `shutdown`; then reports every service as NOT_SERVING, so
    /// probes see the shutdown before the port closes.
    pub async fn follow(
        mut self,
        broker: Broker,
        mut readiness: watch::Receiver<Readiness>,
        shutdown: CancellationToken,
    ) {
        let mut snapshots = broker.snapshots();
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            let policy = *readiness.borrow_and_update();
            self.update(&snapshot, policy).await;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                changed = snapshots.changed() => if changed.is_err() { break },
                changed = readiness.changed() => if changed.is_err() { break },
            }
        }
        let services: Vec<String> = self.reported.keys().cloned().collect();
        for service in services.iter().map(String::as_str).chain([""]) {
            self.reporter
                .set_service_status(service, ServingStatus::NotServing)
                .await;
        }
    }
}

/// What every health service should say for this snapshot.
fn statuses(snapshot: &Snapshot, readiness: Readiness) -> Vec<(String, ServingStatus)> {
    let serving = |yes: bool| {
        if yes {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    };
    let servers = snapshot.catalog.servers();
    let ready = is_ready(readiness, servers.map(|view| view.condition.state));
    let mut statuses = vec![(BROKER.to_owned(), serving(ready))];
    statuses.extend(snapshot.catalog.servers().map(|view| {
        let status = serving(view.condition.state == ServerState::Ready);
        (server_service(view.name.as_str()), status)
    }));
    statuses
}

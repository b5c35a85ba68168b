//! `grpc.health.v1` statuses, following the broker: `""` while the process serves,
//! `toolbroker.v1.ToolBroker` while the broker is ready (per the readiness policy), and
//! `toolbroker.server.<name>` while that server is READY.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic_health::{ServingStatus, server::HealthReporter};

use crate::{
    broker::{Broker, Snapshot},
    domain::state::{Readiness, ServerState, is_ready},
    proto::tool_broker_server::ToolBrokerServer,
};

/// The health service name of the broker as a whole.
pub const BROKER: &str = <ToolBrokerServer<()> as NamedService>::NAME;

/// The health service name of one server.
pub fn server_service(name: &str) -> String {
    format!("toolbroker.server.{name}")
}

/// Keeps the health statuses in step with the broker until `stop`; then reports every service
/// as NOT_SERVING, so probes see the shutdown before the port closes.
pub async fn follow(
    broker: Broker,
    reporter: HealthReporter,
    readiness: Readiness,
    stop: CancellationToken,
) {
    let mut snapshots = broker.snapshots();
    let mut reported: HashMap<String, ServingStatus> = HashMap::new();
    loop {
        let snapshot = snapshots.borrow_and_update().clone();
        for (service, status) in statuses(&snapshot, readiness) {
            if reported.get(&service) != Some(&status) {
                reporter.set_service_status(&service, status).await;
                reported.insert(service, status);
            }
        }
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            changed = snapshots.changed() => if changed.is_err() { break },
        }
    }
    for service in reported.keys().map(String::as_str).chain([""]) {
        reporter
            .set_service_status(service, ServingStatus::NotServing)
            .await;
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

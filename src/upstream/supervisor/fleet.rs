//! The running supervisors, one per configured server, and how a reloaded configuration changes
//! them: new servers start, removed ones stop, changed ones restart, the rest are left alone
//! with their sessions and in-flight calls.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use tokio::{sync::Notify, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::domain::{
    config::ServerSpec,
    reload::{Plan, plan},
};
use crate::shared_state::Shared;
use crate::upstream::{Reporter, oauth::ServerAuth, supervisor::Supervisor};

/// How long a supervisor gets to close its session before it is abandoned (its process group
/// is killed by the process guard anyway).
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Every configured server's supervisor.
pub struct Fleet {
    reporter: Arc<dyn Reporter>,
    running: Vec<Supervised>,
    /// The Redis replicas share (`state.redis`), where server-wide OAuth tokens are kept.
    shared: Option<Shared>,
}

/// A server and the supervisor task that runs it.
struct Supervised {
    spec: ServerSpec,
    stop: CancellationToken,
    task: JoinHandle<()>,
    /// Its OAuth tokens, if it is under OAuth.
    auth: Option<ServerAuth>,
    /// Wakes replicas waiting to restart.
    retry: Arc<Notify>,
}

impl Fleet {
    /// Starts a supervisor for every server (already known to `reporter`); with `shared`,
    /// OAuth tokens are kept in Redis.
    pub fn start(
        reporter: Arc<dyn Reporter>,
        specs: Vec<ServerSpec>,
        shared: Option<Shared>,
    ) -> Self {
        let mut fleet = Fleet {
            reporter,
            running: Vec::new(),
            shared,
        };
        for spec in specs {
            fleet.launch(spec);
        }
        fleet
    }

    fn launch(&mut self, spec: ServerSpec) {
        let stop = CancellationToken::new();
        let auth = ServerAuth::of(&spec, self.shared.as_ref());
        let retry = Arc::new(Notify::new());
        let supervisor = Supervisor::new(
            spec.clone(),
            self.reporter.clone(),
            stop.clone(),
            auth.clone(),
            retry.clone(),
        );
        let task = tokio::spawn(supervisor.run());
        self.running.push(Supervised {
            spec,
            stop,
            task,
            auth,
            retry,
        });
    }

    /// Reads every token store again (SIGHUP, after `toolbroker login`), and has the servers
    /// under OAuth that wait to restart try again at once with what they now hold.
    pub fn reload_token_stores(&self) {
        for server in &self.running {
            if let Some(auth) = &server.auth {
                auth.reload();
                server.retry.notify_waiters();
            }
        }
    }

    /// Applies a new list of servers and says what changed.
    pub async fn reconfigure(&mut self, specs: Vec<ServerSpec>) -> Plan {
        let current: Vec<ServerSpec> = self.running.iter().map(|r| r.spec.clone()).collect();
        let plan = plan(&current, &specs);
        let leaving: Vec<Supervised> = {
            let (leaving, staying) = std::mem::take(&mut self.running)
                .into_iter()
                .partition(|r| {
                    plan.stop.contains(&r.spec.name) || plan.restart.contains(&r.spec.name)
                });
            self.running = staying;
            leaving
        };
        stop_all(leaving).await;
        let now = SystemTime::now();
        self.reporter.configure(
            specs
                .iter()
                .map(|spec| (spec.policy(), spec.initial_condition(now)))
                .collect(),
        );
        let mut staying = std::mem::take(&mut self.running);
        for spec in specs {
            match staying.iter().position(|r| r.spec.name == spec.name) {
                Some(index) => {
                    // Kept: at most its `tools` changed, which only the catalog uses.
                    let mut kept = staying.swap_remove(index);
                    kept.spec = spec;
                    self.running.push(kept);
                }
                None => self.launch(spec),
            }
        }
        plan
    }

    /// Stops every server and waits for their sessions to close.
    pub async fn stop(self) {
        stop_all(self.running).await;
    }
}

/// Tells supervisors to stop and waits for them together, each at most `STOP_DEADLINE`.
async fn stop_all(running: Vec<Supervised>) {
    for server in &running {
        server.stop.cancel();
    }
    let waits = running.into_iter().map(|server| async move {
        let name = server.spec.name;
        match tokio::time::timeout(STOP_DEADLINE, server.task).await {
            Ok(_) => {}
            Err(_) => tracing::warn!(server = %name, "did not stop within {STOP_DEADLINE:?}"),
        }
    });
    futures::future::join_all(waits).await;
}

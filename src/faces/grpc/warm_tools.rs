//! Encodes each new catalog revision's tools in the background once the catalog settles, so
//! that the first ListTools or Watch of a revision finds them ready (with 10,000 tools the
//! encoding takes a few hundred milliseconds, which a caller would otherwise wait for).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::tool_cache::ToolCache;
use crate::core::broker::Snapshot;

/// How long the catalog must stay unchanged before its tools are encoded: servers coming up
/// one after another make one revision each, and only the last is worth encoding.
const SETTLE: Duration = Duration::from_millis(200);

/// Keeps `tools` holding the latest revision of `snapshots`, until `shutdown` or until the
/// cache or the broker is gone.
pub(super) async fn keep_warm(
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    tools: Weak<ToolCache>,
    shutdown: CancellationToken,
) {
    let settled = async {
        while snapshots.changed().await.is_ok() {
            while let Ok(changed) = tokio::time::timeout(SETTLE, snapshots.changed()).await {
                if changed.is_err() {
                    return;
                }
            }
            let snapshot = snapshots.borrow_and_update().clone();
            let Some(tools) = tools.upgrade() else { return };
            if tools.revision() == Some(snapshot.catalog.revision()) {
                continue; // a caller was first
            }
            let encode = tokio::task::spawn_blocking(move || {
                tools.tools(&snapshot);
            });
            if encode.await.is_err() {
                tracing::warn!("encoding the catalog's tools in the background failed");
            }
        }
    };
    tokio::select! {
        () = settled => {}
        () = shutdown.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Instant, SystemTime};

    use serde_json::json;

    use super::*;
    use crate::{
        core::broker::Broker,
        domain::{
            catalog::ServerPolicy,
            names::{ServerName, ToolName},
            state::{ServerCondition, ServerState, Transport},
            tool::{Annotations, ToolSpec},
        },
        upstream::Reporter,
    };

    fn condition(state: ServerState) -> ServerCondition {
        ServerCondition {
            state,
            message: String::new(),
            transport: Transport::Stdio,
            restarts: 0,
            since: SystemTime::UNIX_EPOCH,
            protocol: None,
            icons: Default::default(),
        }
    }

    fn spec(name: &str) -> ToolSpec {
        let schema = json!({"type": "object"}).as_object().cloned().unwrap();
        ToolSpec::new(
            ToolName::new(name),
            String::new(),
            schema,
            None,
            Annotations::default(),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_settled_catalog_is_encoded_before_anyone_asks_and_shutdown_ends_it() {
        let demo = ServerName::parse("demo").unwrap();
        let policy = ServerPolicy {
            name: demo.clone(),
            prefix: String::new(),
            tools: Vec::new(),
        };
        let broker = Broker::new(vec![(policy, condition(ServerState::Connecting))], None);
        let tools = Arc::new(ToolCache::default());
        let shutdown = CancellationToken::new();
        let warm = tokio::spawn(keep_warm(
            broker.snapshots(),
            Arc::downgrade(&tools),
            shutdown.clone(),
        ));
        broker.tools(&demo, vec![spec("a"), spec("b")]);
        broker.condition(&demo, condition(ServerState::Ready), None);
        let revision = broker.snapshot().catalog.revision();
        let until = Instant::now() + Duration::from_secs(10);
        while tools.revision() != Some(revision) {
            assert!(
                Instant::now() < until,
                "revision {revision} was not encoded"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(tools.tools(&broker.snapshot()).exposed.len(), 2);
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), warm)
            .await
            .expect("shutdown ends it")
            .unwrap();
    }
}

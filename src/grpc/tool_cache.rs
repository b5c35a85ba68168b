//! The proto form of every tool, converted and encoded once per catalog revision and shared by
//! ListTools and Watch, so that no request converts or encodes a tool again; and the search
//! index of that revision, built on the first SearchTools.

use std::sync::Arc;

use tokio::sync::OnceCell;

use super::convert;
use crate::{
    broker::Snapshot,
    domain::{search::SearchIndex, tool::ExposedTool},
    latest_revision::LatestRevision,
    proto::EncodedTools,
};

/// Every tool of one catalog revision, in proto form.
#[derive(Clone)]
pub struct CachedTools {
    /// The revision they belong to.
    pub revision: u64,
    /// The catalog's tools, sorted by name: the positions of `encoded` and of the index.
    pub exposed: Arc<[Arc<ExposedTool>]>,
    /// The same tools in proto form, encoded (only so: decoded trees would take several
    /// times the room, and ListTools sends the encoding as it is).
    pub encoded: Arc<EncodedTools>,
    /// The search index of the same tools (same positions), once a search asked for it.
    index: Arc<OnceCell<Arc<SearchIndex>>>,
}

impl CachedTools {
    /// The search index of these tools (`snapshot` is theirs), built by the first search of
    /// this revision on a blocking thread (tens of milliseconds for 10,000 tools); searches
    /// that come meanwhile wait for it.
    pub async fn index(&self, snapshot: Arc<Snapshot>) -> Arc<SearchIndex> {
        debug_assert_eq!(snapshot.catalog.revision(), self.revision);
        let build = || async move {
            let started = std::time::Instant::now();
            let built = tokio::task::spawn_blocking(move || {
                SearchIndex::build(snapshot.catalog.tools().values().map(|t| &**t))
            })
            .await
            .expect("building the search index does not panic");
            tracing::debug!(tools = built.len(), took = ?started.elapsed(), "search index built");
            Arc::new(built)
        };
        self.index.get_or_init(build).await.clone()
    }
}

/// The tools of the latest revision asked for.
#[derive(Default)]
pub struct ToolCache(LatestRevision<CachedTools>);

impl ToolCache {
    /// The tools of `snapshot`'s revision, converted and encoded at most once.
    pub fn tools(&self, snapshot: &Snapshot) -> CachedTools {
        let revision = snapshot.catalog.revision();
        self.0.get(revision, || {
            let exposed: Arc<[_]> = snapshot.catalog.tools().values().cloned().collect();
            let encoded = EncodedTools::new(exposed.iter().map(|t| convert::tool(t)), revision);
            CachedTools {
                revision,
                exposed,
                encoded: Arc::new(encoded),
                index: Arc::default(),
            }
        })
    }
}

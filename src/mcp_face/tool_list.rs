//! The face's `tools/list`: every catalog tool in MCP form, converted once per catalog revision
//! and shared by all sessions, so that a request only copies the entries its caller may use
//! (names and descriptions; the schemas are shared). Converting per request took ~20 ms of CPU
//! for 1,000 tools.

use std::sync::Arc;

use rmcp::model::Tool;

use super::convert;
use crate::{broker::Snapshot, latest_revision::LatestRevision};

/// The tools of the latest revision asked for.
#[derive(Default)]
pub struct ToolList(LatestRevision<Arc<[Tool]>>);

impl ToolList {
    /// Every tool of `snapshot`'s revision in MCP form (exposed names, sorted), converted at
    /// most once.
    pub fn tools(&self, snapshot: &Snapshot) -> Arc<[Tool]> {
        self.0.get(snapshot.catalog.revision(), |_| {
            snapshot
                .catalog
                .tools()
                .values()
                .map(|t| convert::tool(t))
                .collect()
        })
    }
}

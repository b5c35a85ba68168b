//! The face's `tools/list`: every catalog tool in MCP form, converted once per catalog revision
//! and shared by all sessions, so that a request only copies the entries its caller may use
//! (names and descriptions; the schemas are shared). Converting per request took ~20 ms of CPU
//! for 1,000 tools.

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;

use super::convert;
use crate::broker::Snapshot;

/// The tools of the latest revision asked for.
#[derive(Default)]
pub struct ToolList {
    current: Mutex<Option<(u64, Arc<[Tool]>)>>,
}

impl ToolList {
    /// Every tool of `snapshot`'s revision in MCP form (exposed names, sorted), converted at
    /// most once.
    pub fn tools(&self, snapshot: &Snapshot) -> Arc<[Tool]> {
        let revision = snapshot.catalog.revision();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((cached, tools)) = &*current
            && *cached == revision
        {
            return tools.clone();
        }
        let tools: Arc<[Tool]> = snapshot
            .catalog
            .tools()
            .values()
            .map(|t| convert::tool(t))
            .collect();
        *current = Some((revision, tools.clone()));
        tools
    }
}

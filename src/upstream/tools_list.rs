//! Listing a server's tools: every page of `tools/list`, turned into the catalog's specs.

use std::collections::HashSet;

use rmcp::{
    RoleClient,
    model::{ClientRequest, ListToolsRequest, PaginatedRequestParams, ServerResult, Tool},
    service::Peer,
};

use crate::domain::{
    names::ToolName,
    outcome::ListingFailure,
    tool::{Annotations, ToolSpec},
};

/// More pages than any real server sends; a server past it is looping.
const MAX_PAGES: usize = 10_000;

/// Every tool the server offers, following `nextCursor` to the last page. Bypasses rmcp's
/// response cache: after `tools/list_changed` the fresh list is what matters.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<ToolSpec>, ListingFailure> {
    let mut specs = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let page = match peer.send_request(request).await {
            Ok(ServerResult::ListToolsResult(page)) => page,
            Ok(_) => return Err(ListingFailure::NotAList),
            Err(e) => return Err(ListingFailure::Failed(e.to_string())),
        };
        specs.extend(page.tools.into_iter().map(tool_spec));
        match page.next_cursor {
            None => return Ok(specs),
            Some(next) if !seen.insert(next.clone()) => {
                return Err(ListingFailure::RepeatedCursor(next));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(ListingFailure::TooManyPages(MAX_PAGES))
}

/// The catalog's view of one MCP tool declaration.
fn tool_spec(tool: Tool) -> ToolSpec {
    let annotations = tool.annotations.as_ref();
    let annotations = Annotations {
        title: annotations
            .and_then(|a| a.title.clone())
            .or_else(|| tool.title.clone()),
        read_only: annotations.and_then(|a| a.read_only_hint),
        destructive: annotations.and_then(|a| a.destructive_hint),
        idempotent: annotations.and_then(|a| a.idempotent_hint),
        open_world: annotations.and_then(|a| a.open_world_hint),
    };
    let input_schema = std::sync::Arc::unwrap_or_clone(tool.input_schema);
    ToolSpec::new(
        ToolName::new(&tool.name),
        tool.description.map(|d| d.into_owned()).unwrap_or_default(),
        input_schema,
        tool.output_schema.as_deref(),
        annotations,
    )
}

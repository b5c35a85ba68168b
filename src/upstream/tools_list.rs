//! Listing a server's tools: every page of `tools/list`, turned into the catalog's specs.

use rmcp::{
    RoleClient,
    model::{ClientRequest, ListToolsRequest, ServerResult, Tool},
    service::Peer,
};

use super::pages::all_pages;
use crate::domain::{
    names::ToolName,
    outcome::ListingFailure,
    tool::{Annotations, ToolSpec},
};

/// Every tool the server offers, following `nextCursor` to the last page. Bypasses rmcp's
/// response cache: after `tools/list_changed` the fresh list is what matters.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<ToolSpec>, ListingFailure> {
    all_pages(|params| async move {
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        match peer.send_request(request).await {
            Ok(ServerResult::ListToolsResult(page)) => Ok((
                page.tools.into_iter().map(tool_spec).collect(),
                page.next_cursor,
            )),
            Ok(_) => Err(ListingFailure::NotAList),
            Err(e) => Err(ListingFailure::Failed(e.to_string())),
        }
    })
    .await
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

//! Listing a server's tools: every page of `tools/list`, turned into the catalog's specs.

use bytestring::ByteString;
use rmcp::{
    RoleClient,
    model::{ClientRequest, ListToolsRequest, ServerResult, Tool},
    service::Peer,
};

use crate::domain::{
    names::ToolName,
    outcome::ListingFailure,
    tool::{Annotations, ToolSpec},
};
use crate::upstream::session::{icons::icons, pages::all_pages};

/// Every tool the server offers, following `nextCursor` to the last page. Bypasses rmcp's
/// response cache: after `tools/list_changed` the fresh list is what matters.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<ToolSpec>, ListingFailure> {
    all_pages(|params| async move {
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        match peer.send_request(request).await {
            Ok(ServerResult::ListToolsResult(page)) => {
                Ok((tool_specs(page.tools), page.next_cursor))
            }
            Ok(_) => Err(ListingFailure::NotAList),
            Err(e) => Err(ListingFailure::Failed(e.to_string())),
        }
    })
    .await
}

/// The catalog's view of one page of tool declarations. Their input schemas are written into
/// one buffer: once a revision's encoding holds them (`ToolSpec::move_input_schema_to`), it is
/// freed whole, where one allocation per schema would leave holes between live data.
fn tool_specs(tools: Vec<Tool>) -> Vec<ToolSpec> {
    let mut texts = Vec::new();
    let ends: Vec<usize> = (tools.iter())
        .map(|tool| {
            serde_json::to_writer(&mut texts, &*tool.input_schema)
                .expect("a map with string keys always serializes");
            texts.len()
        })
        .collect();
    texts.shrink_to_fit();
    let texts = ByteString::try_from(texts).expect("serde_json writes UTF-8");
    let mut start = 0;
    (tools.into_iter().zip(ends))
        .map(|(tool, end)| {
            let text = texts.slice_ref(&texts[start..end]);
            start = end;
            tool_spec(tool, text)
        })
        .collect()
}

/// The catalog's view of one MCP tool declaration, its input schema already `input_schema_json`.
fn tool_spec(tool: Tool, input_schema_json: ByteString) -> ToolSpec {
    let annotations = tool.annotations.as_ref();
    let annotations = Annotations {
        title: annotations.and_then(|a| a.title.clone()),
        read_only: annotations.and_then(|a| a.read_only_hint),
        destructive: annotations.and_then(|a| a.destructive_hint),
        idempotent: annotations.and_then(|a| a.idempotent_hint),
        open_world: annotations.and_then(|a| a.open_world_hint),
    };
    ToolSpec::from_text(
        ToolName::new(&tool.name),
        tool.description.map(|d| d.into_owned()).unwrap_or_default(),
        input_schema_json,
        tool.output_schema.as_deref(),
        annotations,
    )
    .shown_as(tool.title, icons(tool.icons))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    #[test]
    fn the_schemas_of_a_page_are_written_side_by_side_in_one_buffer() {
        let schemas = [
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            json!({"type": "object"}),
            json!({"type": "object", "required": ["é"]}),
        ];
        let tools = (schemas.iter().enumerate())
            .map(|(i, schema)| {
                let schema = Arc::new(schema.as_object().cloned().unwrap());
                Tool::new(format!("t{i}"), "d", schema)
            })
            .collect();
        let specs = tool_specs(tools);
        let texts: Vec<_> = specs.iter().map(ToolSpec::input_schema_json).collect();
        for (text, schema) in texts.iter().zip(&schemas) {
            assert_eq!(**text, serde_json::to_string(schema).unwrap());
        }
        let next = |i: usize| texts[i].as_ptr().wrapping_add(texts[i].len());
        assert_eq!((next(0), next(1)), (texts[1].as_ptr(), texts[2].as_ptr()));
        assert_eq!(specs[2].original.as_str(), "t2");
    }
}
